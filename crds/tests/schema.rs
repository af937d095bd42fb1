//! Shapes of the API types that users and the operator rely on, checked without an API server.

use capov_crds::{OVirtMachine, OVirtMachineTemplate, VmType};
use serde_json::json;

#[test]
fn field_names_are_the_documented_spellings() {
    let machine: OVirtMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachine",
        "metadata": {"name": "worker-abc123"},
        "spec": {"provider": "ovirt-prod", "ovirtcluster": "Default", "template": "rhcos-4.14",
                 "storagedomainname": "data2", "diskclone": true, "vmtype": "high_performance",
                 "cpu": {"sockets": 1, "cores": 4, "threads": 1}, "memory": {"sizemb": 8192, "guaranteedmb": 4096},
                 "osdisksizegb": 80, "nics": [{"vnicprofile": "ovirtmgmt"}], "providerID": "ovirt://42"}
    }))
    .expect("machine");
    let settings = &machine.spec.settings;
    assert_eq!(settings.vmtype, VmType::HighPerformance);
    assert_eq!(settings.vmtype.as_ovirt(), "high_performance");
    assert_eq!(settings.storagedomainname.as_deref(), Some("data2"));
    assert_eq!(machine.spec.provider_id.as_deref(), Some("ovirt://42"));
    let back = serde_json::to_value(&machine.spec).expect("json");
    assert_eq!(back["providerID"], "ovirt://42");
    assert_eq!(back["cpu"]["cores"], 4);
    assert_eq!(back["memory"]["guaranteedmb"], 4096);
}

#[test]
fn vmtype_defaults_to_server_and_templates_have_no_provider_id() {
    let template: OVirtMachineTemplate = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachineTemplate",
        "metadata": {"name": "t"},
        "spec": {"template": {"spec": {"provider": "p", "ovirtcluster": "Default", "template": "rhcos-4.14"}}}
    }))
    .expect("template");
    assert_eq!(template.spec.template.spec.vmtype, VmType::Server);
    let schema = serde_json::to_value(OVirtMachineTemplate::crd_schema()).expect("schema");
    let spec = &schema["properties"]["spec"]["properties"]["template"]["properties"]["spec"]["properties"];
    assert!(spec.get("providerID").is_none(), "templates must not carry providerID");
    assert_eq!(spec["vmtype"]["default"], "server");
}

trait CrdSchema {
    fn crd_schema() -> serde_json::Value;
}

impl<K: kube::CustomResourceExt> CrdSchema for K {
    fn crd_schema() -> serde_json::Value {
        let crd = K::crd();
        let version = crd.spec.versions.into_iter().next().expect("one version");
        serde_json::to_value(version.schema.and_then(|s| s.open_api_v3_schema)).expect("schema")
    }
}
