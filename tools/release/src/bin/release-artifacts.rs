//! Writes CAPOV's clusterctl release artifacts: `release-artifacts [OUT]` (default: `release/` in the
//! repository) creates `OUT/infrastructure-ovirt/v<version>/` with metadata.yaml, infrastructure-components.yaml,
//! the cluster templates and ovirt-provider.yaml. `release-artifacts OUT --next VERSION` adds, beside what OUT
//! holds, the release VERSION this source would be if only its version changed (charts bumped, metadata.yaml with
//! VERSION's series): a repository to try `clusterctl upgrade` with. Needs helm: `CAPOV_HELM_DIR`, else
//! `tools/build-go-tools.sh --helm` builds it once.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = capov_release::repo_root();
    let mut out = None;
    let mut next = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--next" => match args.next() {
                Some(version) => next = Some(version),
                None => return usage("--next needs a VERSION"),
            },
            _ if out.is_none() && !arg.starts_with('-') => out = Some(PathBuf::from(arg)),
            _ => return usage(&format!("unexpected argument {arg:?}")),
        }
    }
    let out = out.unwrap_or_else(|| root.join("release"));
    if next.is_some() && out == root.join("release") {
        return usage("--next writes into a directory of your choice, never the committed release/");
    }
    let result = capov_release::helm_dir(&root).and_then(|dir| {
        let helm = dir.join("helm");
        let artifacts = match &next {
            Some(version) => capov_release::next_release(&root, &helm, version)?,
            None => capov_release::artifacts(&root, &helm)?,
        };
        let dir = match &next {
            Some(version) => capov_release::write_version(&out, version, &artifacts)?,
            None => capov_release::write(&out, &artifacts)?,
        };
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

fn usage(problem: &str) -> ExitCode {
    eprintln!("release-artifacts: {problem}\nusage: release-artifacts [OUT] [--next VERSION]");
    ExitCode::FAILURE
}
