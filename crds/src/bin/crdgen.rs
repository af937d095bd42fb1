//! Writes CAPOV's CRD manifests into the CRD chart: `crdgen [DIR]` (default `chart/capov-crds/templates`).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "chart/capov-crds/templates".into()),
    );
    if let Err(err) = std::fs::create_dir_all(&dir) {
        eprintln!("crdgen: cannot create {}: {err}", dir.display());
        return ExitCode::FAILURE;
    }
    for crd in capov_crds::generate::all_crds() {
        let path = dir.join(capov_crds::generate::file_name(&crd));
        let written = capov_crds::generate::render(&crd)
            .map_err(|err| err.to_string())
            .and_then(|yaml| std::fs::write(&path, yaml).map_err(|err| err.to_string()));
        if let Err(err) = written {
            eprintln!("crdgen: cannot write {}: {err}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
