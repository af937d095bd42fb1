//! The CRD chart must carry exactly what the Rust types generate.

use std::path::Path;

#[test]
fn committed_crd_yaml_matches_the_generated_crds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../chart/capov-crds/templates");
    let crds = capov_crds::generate::all_crds();
    let mut expected_files: Vec<String> = crds.iter().map(capov_crds::generate::file_name).collect();
    for crd in &crds {
        let path = dir.join(capov_crds::generate::file_name(crd));
        let committed = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        let generated = capov_crds::generate::render(crd).expect("render");
        assert!(
            committed == generated,
            "{} differs from the generated CRD; run `cargo run -p capov-crds --bin crdgen` and commit the result",
            path.display()
        );
    }
    let mut committed_files: Vec<String> = std::fs::read_dir(&dir)
        .expect("CRD chart templates")
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".yaml"))
        .collect();
    committed_files.sort();
    expected_files.sort();
    assert_eq!(
        committed_files,
        expected_files,
        "stale or missing CRD files in {}",
        dir.display()
    );
}
