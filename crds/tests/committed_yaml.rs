//! The CRD chart must carry exactly what the Rust types generate.

use std::path::Path;

#[test]
fn committed_chart_manifests_match_the_generated_ones() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../chart/capov-crds/templates");
    let manifests = capov_crds::generate::manifests().expect("render");
    for manifest in &manifests {
        let path = dir.join(&manifest.file_name);
        let committed = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        assert!(
            committed == manifest.yaml,
            "{} differs from the generated manifest; run `cargo run -p capov-crds --bin crdgen` and commit the result",
            path.display()
        );
    }
    let mut expected: Vec<&str> = manifests.iter().map(|m| m.file_name.as_str()).collect();
    let mut committed: Vec<String> = std::fs::read_dir(&dir)
        .expect("CRD chart templates")
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".yaml"))
        .collect();
    committed.sort();
    expected.sort();
    assert_eq!(committed, expected, "stale or missing files in {}", dir.display());
}
