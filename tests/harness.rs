//! The test control plane itself: it starts, serves, runs the controller manager, and leaves nothing behind.

use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

use capov_harness::{ControlPlane, Options, shared};
use capov_testkit::eventually;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Resource;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn port_is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

#[tokio::test]
async fn starts_and_stops_twenty_times_without_leaking_processes_or_ports() {
    for round in 0..20 {
        let plane = ControlPlane::start(Options::default())
            .await
            .unwrap_or_else(|err| panic!("round {round}: {err}"));
        let client = plane.client().await.expect("client");
        let namespaces = Api::<Namespace>::all(client)
            .list(&Default::default())
            .await
            .expect("list namespaces");
        assert!(
            namespaces
                .items
                .iter()
                .any(|ns| ns.metadata.name.as_deref() == Some("default"))
        );
        let pids = plane.pids();
        let ports = plane.ports().to_vec();
        assert_eq!(pids.len(), 2, "etcd and kube-apiserver");
        assert!(pids.iter().all(|pid| process_exists(*pid)));
        drop(plane);
        for pid in pids {
            assert!(
                !process_exists(pid),
                "round {round}: process {pid} outlived its control plane"
            );
        }
        for port in ports {
            assert!(port_is_free(port), "round {round}: port {port} still taken");
        }
    }
}

#[test]
fn a_panicking_test_still_stops_its_processes() {
    let (sender, receiver) = std::sync::mpsc::channel();
    let outcome = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async move {
            let plane = ControlPlane::start(Options::default()).await.expect("start");
            sender.send(plane.pids()).expect("send pids");
            panic!("the test fails while its control plane runs");
        })
    })
    .join();
    assert!(outcome.is_err(), "the thread panicked");
    let pids = receiver.recv().expect("pids");
    assert!(!pids.is_empty());
    for pid in pids {
        assert!(!process_exists(pid), "process {pid} survived the panic");
    }
}

#[tokio::test]
async fn the_controller_manager_collects_garbage_and_namespaces_are_separate() {
    let plane = shared().await;
    let client = plane.client().await.expect("client");
    let first = plane.create_namespace(&client, "harness").await.expect("namespace");
    let second = plane.create_namespace(&client, "harness").await.expect("namespace");
    assert_ne!(first, second);

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &first);
    let owner = config_maps
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: named("owner"),
                ..Default::default()
            },
        )
        .await
        .expect("owner");
    let mut dependent_meta = named("dependent");
    dependent_meta.owner_references = Some(vec![owner.controller_owner_ref(&()).expect("owner ref")]);
    config_maps
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: dependent_meta,
                ..Default::default()
            },
        )
        .await
        .expect("dependent");
    assert!(
        Api::<ConfigMap>::namespaced(client.clone(), &second)
            .get_opt("dependent")
            .await
            .expect("get")
            .is_none()
    );

    config_maps
        .delete("owner", &DeleteParams::default())
        .await
        .expect("delete owner");
    eventually(
        Duration::from_secs(60),
        "the garbage collector to delete the dependent",
        || async {
            config_maps
                .get_opt("dependent")
                .await
                .expect("get")
                .is_none()
                .then_some(())
        },
    )
    .await;
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}
