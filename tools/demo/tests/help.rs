//! `tools/demo.sh --help` answers without building anything, so it cannot ask the demo binary for its options: it
//! lists them itself. This test keeps the two lists together: every option a user gives the demo binary (all but
//! `--manager` and `--image`, which the script sets) is in the script's help.

use std::process::Command;

fn long_options(help: &str) -> Vec<String> {
    help.split_whitespace()
        .filter(|word| word.starts_with("--") && word.len() > 2)
        .map(|word| word.trim_end_matches([',', ')', '.']).to_string())
        .map(|word| word.split(['=', '[']).next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_scripts_help_lists_every_option_of_the_demo() {
    let binary = Command::new(env!("CARGO_BIN_EXE_capov-demo"))
        .arg("--help")
        .output()
        .expect("capov-demo --help");
    assert!(binary.status.success());
    let script = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../demo.sh"))
        .arg("--help")
        .output()
        .expect("demo.sh --help");
    assert!(script.status.success());
    let script_options = long_options(&String::from_utf8_lossy(&script.stdout));
    let binary_options = long_options(&String::from_utf8_lossy(&binary.stdout));
    assert!(binary_options.len() >= 6, "{binary_options:?}");
    for option in binary_options {
        if ["--manager", "--image"].contains(&option.as_str()) {
            continue;
        }
        assert!(
            script_options.contains(&option),
            "demo.sh --help lacks {option}: {script_options:?}"
        );
    }
    assert!(script_options.contains(&"--mode".to_string()));
}
