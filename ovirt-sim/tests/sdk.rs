//! The official oVirt Python SDK (ovirtsdk4, the engine project's own client) against the simulator: the workload
//! scenario of `tests/sdk/workloads.py` (host devices, vGPUs, NUMA, HA with a lease and its restart, instance types,
//! template versions). A real client's writers must pass the simulator's model check, its readers must parse what
//! the simulator answers. The Python running the SDK is `CAPOV_OVIRT_SDK_PYTHON` (default `python3`); without the
//! SDK the test fails and says how to install it.

use std::process::Command;

use capov_ovirt_sim::{
    EngineVersion, HostDeviceSeed, HostSeed, MdevTypeSeed, Simulator, TemplateDiskSeed, TemplateSeed, default_inventory,
};

fn python() -> String {
    std::env::var("CAPOV_OVIRT_SDK_PYTHON").unwrap_or_else(|_| "python3".into())
}

#[tokio::test]
async fn the_python_sdk_runs_the_workload_scenario() {
    let python = python();
    let probe = Command::new(&python)
        .args(["-c", "import ovirtsdk4"])
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    assert!(
        probe.status.success(),
        "the oVirt Python SDK is missing for {python}: `{python} -m pip install ovirt-engine-sdk-python==4.6.3` \
         (builds against libxml2 and libcurl): {}",
        String::from_utf8_lossy(&probe.stderr)
    );

    let mut inventory = default_inventory();
    inventory.hosts.push(HostSeed {
        name: "gpu-1".into(),
        devices: vec![
            HostDeviceSeed::gpu("3b", 30, vec![MdevTypeSeed::new("nvidia-222", "GRID T4-1B", 4)]),
            HostDeviceSeed::gpu("af", 40, vec![MdevTypeSeed::new("nvidia-222", "GRID T4-1B", 4)]),
        ],
        ..Default::default()
    });
    for (number, name) in [(1, "base"), (2, "hardened")] {
        inventory.templates.push(TemplateSeed {
            name: "gpu-os".into(),
            cluster: Some("Default".into()),
            version_number: number,
            version_name: Some(name.into()),
            disks: vec![TemplateDiskSeed {
                alias: "gpu-os_Disk1".into(),
                storage_domains: vec!["data1".into()],
                ..Default::default()
            }],
            ..Default::default()
        });
    }
    let sim = Simulator::builder()
        .plain_http()
        .inventory(inventory)
        .engine_version(EngineVersion::new(4, 5, 4))
        .start()
        .await
        .expect("simulator starts");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/workloads.py");
    let output = tokio::process::Command::new(&python)
        .arg(script)
        .env("OVIRT_URL", sim.api_url())
        .env("SIM_URL", sim.base_url())
        .output()
        .await
        .expect("the SDK scenario runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("SDK scenario passed"), "{stdout}\n{stderr}");
    let refused = sim.control().rejected_bodies();
    assert!(refused.is_empty(), "bodies the SDK sent were refused: {refused:?}");
}
