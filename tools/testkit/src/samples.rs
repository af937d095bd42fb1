//! The engine documents the client and the simulator are checked against: the project's fixtures, modelled on
//! engine answers (`ovirt/tests/fixtures`), and the answers captured from a real engine, which are reference data
//! kept outside the project (`shared/reference/ovirt-samples` beside the clone). Both must be there: a missing
//! sample fails the test that reads it rather than letting it pass unchecked.

use std::path::{Path, PathBuf};

const REFERENCE_SAMPLES: &str = "shared/reference/ovirt-samples";

/// The workspace's root: this crate is `tools/testkit` in it.
fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tools/testkit sits two levels below the workspace root")
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The project's fixture `name` (`ovirt/tests/fixtures/<name>`).
pub fn fixture(name: &str) -> Vec<u8> {
    read(&repo_root().join("ovirt/tests/fixtures").join(name))
}

/// The captured engine samples' directory: `shared/reference/ovirt-samples` beside the clone, or beside a folder
/// holding it (a git worktree under the clone's parent). Fails the test when it is nowhere.
pub fn reference_samples_dir() -> PathBuf {
    let root = repo_root();
    root.ancestors()
        .skip(1)
        .map(|dir| dir.join(REFERENCE_SAMPLES))
        .find(|dir| dir.is_dir())
        .unwrap_or_else(|| {
            panic!(
                "the captured engine samples are missing: no {REFERENCE_SAMPLES} beside {} or a folder above it; put \
                 the steering repo's shared/ beside the clone",
                root.display()
            )
        })
}

/// The captured engine sample `name`.
pub fn reference_sample(name: &str) -> Vec<u8> {
    read(&reference_samples_dir().join(name))
}
