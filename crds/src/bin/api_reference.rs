//! Writes the user book's API reference from the CRDs: `api-reference [FILE]` (default
//! `docs/book/src/reference/api.md`, run from the workspace root).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let path = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| capov_crds::reference::PAGE.into()),
    );
    let page = match capov_crds::reference::markdown() {
        Ok(page) => page,
        Err(err) => {
            eprintln!("api-reference: cannot render the reference: {err}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty())
        && let Err(err) = std::fs::create_dir_all(dir)
    {
        eprintln!("api-reference: cannot create {}: {err}", dir.display());
        return ExitCode::FAILURE;
    }
    if let Err(err) = std::fs::write(&path, page) {
        eprintln!("api-reference: cannot write {}: {err}", path.display());
        return ExitCode::FAILURE;
    }
    println!("wrote {}", path.display());
    ExitCode::SUCCESS
}
