//! A control plane with a real node joined to it, for trying things by hand (root only; see `tools/node/up.sh`):
//!
//!   cargo run -p capov-harness --example node
//!
//! Prints the admin kubeconfig and the node's state directory (logs), then keeps both running until Enter or
//! end of input; the node is stopped with `tools/node/down.sh` and the control plane killed on the way out.

use std::io::BufRead;
use std::time::Instant;

use capov_harness::{ControlPlane, Node, Options, routable_address};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let address = routable_address()?;
    let began = Instant::now();
    let plane = ControlPlane::start_for_node(
        Options {
            crds: true,
            ..Options::default()
        },
        address,
    )
    .await?;
    println!(
        "control plane on {} in {:.1}s",
        plane.url(),
        began.elapsed().as_secs_f64()
    );
    let began = Instant::now();
    let node = Node::start(&plane, "capov-node").await?;
    println!("node {} Ready in {:.1}s", node.name(), began.elapsed().as_secs_f64());
    println!("export KUBECONFIG={}", plane.kubeconfig_path().display());
    println!("node state and logs: {}", node.state_dir().display());
    println!("press Enter to stop");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(())
}
