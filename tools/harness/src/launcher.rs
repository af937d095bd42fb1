//! Spawns the control-plane processes from one thread that lives as long as the test process. Children get
//! SIGKILL when that thread dies (PR_SET_PDEATHSIG), i.e. when the test process exits, even if nothing dropped
//! them (a shared control plane in a static, a test binary killed by a timeout).

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Mutex, OnceLock};

type Request = (Command, Sender<std::io::Result<Child>>);

/// Spawns `command` with a parent-death signal.
pub fn spawn(command: Command) -> std::io::Result<Child> {
    static LAUNCHER: OnceLock<Mutex<Sender<Request>>> = OnceLock::new();
    let launcher = LAUNCHER.get_or_init(|| {
        let (requests, incoming) = channel::<Request>();
        std::thread::Builder::new()
            .name("harness-launcher".into())
            .spawn(move || {
                for (mut command, reply) in incoming {
                    // SAFETY: prctl and getppid are async-signal-safe; nothing else runs between fork and exec.
                    unsafe {
                        command.pre_exec(|| {
                            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                                return Err(std::io::Error::last_os_error());
                            }
                            Ok(())
                        });
                    }
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("cannot start the harness launcher thread");
        Mutex::new(requests)
    });
    let (reply, answer) = channel();
    launcher
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .send((command, reply))
        .map_err(|_| std::io::Error::other("harness launcher thread is gone"))?;
    answer
        .recv()
        .map_err(|_| std::io::Error::other("harness launcher thread is gone"))?
}
