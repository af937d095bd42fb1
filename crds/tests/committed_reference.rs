//! The book's API reference must say exactly what the CRDs define (as `committed_yaml.rs` checks the chart).

use std::path::Path;

#[test]
fn committed_api_reference_matches_the_crds() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(capov_crds::reference::PAGE);
    let committed = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    let generated = capov_crds::reference::markdown().expect("render");
    if committed != generated {
        let first = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
        panic!(
            "{} differs from the CRDs from line {}:\n  committed: {}\n  generated: {}\n\
             run `cargo run -p capov-crds --bin api-reference` and commit the result",
            path.display(),
            first + 1,
            committed.lines().nth(first).unwrap_or("<end>"),
            generated.lines().nth(first).unwrap_or("<end>"),
        );
    }
}
