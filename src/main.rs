//! `manager`: the CAPOV operator process (shipped as `/manager` in the image).

use std::process::ExitCode;

fn main() -> ExitCode {
    let arg = std::env::args().nth(1);
    match arg.as_deref() {
        Some("--version") | Some("version") => {
            println!("capov manager {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!(
                "capov manager {}: the controllers are not part of this build yet; the CRDs can be installed from \
                 chart/capov-crds",
                env!("CARGO_PKG_VERSION")
            );
            ExitCode::FAILURE
        }
    }
}
