//! Writes CAPOV's CRD chart manifests: `crdgen [DIR]` (default `chart/capov-crds/templates`).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "chart/capov-crds/templates".into()),
    );
    let manifests = match capov_crds::generate::manifests() {
        Ok(manifests) => manifests,
        Err(err) => {
            eprintln!("crdgen: cannot render the manifests: {err}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(err) = std::fs::create_dir_all(&dir) {
        eprintln!("crdgen: cannot create {}: {err}", dir.display());
        return ExitCode::FAILURE;
    }
    for manifest in manifests {
        let path = dir.join(&manifest.file_name);
        if let Err(err) = std::fs::write(&path, manifest.yaml) {
            eprintln!("crdgen: cannot write {}: {err}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
