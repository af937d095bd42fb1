//! Writes CAPOV's clusterctl release artifacts: `release-artifacts [OUT]` (default: `release/` in the
//! repository) creates `OUT/infrastructure-ovirt/v<version>/` with metadata.yaml, infrastructure-components.yaml,
//! the cluster templates and ovirt-provider.yaml. Needs helm: `CAPOV_HELM_DIR`, else `tools/build-go-tools.sh
//! --helm` builds it once.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = capov_release::repo_root();
    let out = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("release"));
    let result = capov_release::helm_dir(&root)
        .and_then(|dir| capov_release::artifacts(&root, &dir.join("helm")))
        .and_then(|artifacts| {
            let dir = capov_release::write(&out, &artifacts)?;
            Ok((dir, artifacts))
        });
    match result {
        Ok((dir, artifacts)) => {
            for artifact in artifacts {
                println!("wrote {}", dir.join(artifact.file_name).display());
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("release-artifacts: {err}");
            ExitCode::FAILURE
        }
    }
}
