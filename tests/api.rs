//! CAPOV's API on a real kube-apiserver: the CRDs install, the documents' examples are accepted, invalid objects are
//! rejected with messages that say what to fix, kubectl prints the columns, and status round-trips.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use capov_crds::{OVirtCluster, OVirtClusterTemplate, OVirtMachine, OVirtMachineTemplate, OVirtProvider};
use capov_harness::{ControlPlane, shared};
use capov_testkit::eventually;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/docs")
        .join(name)
}

fn kubectl(plane: &ControlPlane, args: &[&str]) -> Output {
    plane
        .kubectl()
        .expect("kubectl")
        .args(args)
        .output()
        .expect("run kubectl")
}

fn stdout_of(output: &Output) -> String {
    assert!(
        output.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The header row of `kubectl get` output, split into column names.
fn header(table: &str) -> Vec<String> {
    let first = table.lines().next().unwrap_or_default();
    first
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(String::from)
        .collect()
}

fn resource<K: kube::Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

fn dynamic(api_resource: &ApiResource, value: Value) -> DynamicObject {
    let mut object: DynamicObject = serde_json::from_value(value).expect("object");
    object.types = Some(kube::core::TypeMeta {
        api_version: api_resource.api_version.clone(),
        kind: api_resource.kind.clone(),
    });
    object
}

#[tokio::test]
async fn all_five_crds_are_established_with_capi_labels_and_categories() {
    let plane = shared().await;
    let client = plane.client().await.expect("client");
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    for (name, short_name) in [
        ("ovirtproviders.infrastructure.cluster.x-k8s.io", Some("capovp")),
        ("ovirtclusters.infrastructure.cluster.x-k8s.io", Some("capovc")),
        ("ovirtmachines.infrastructure.cluster.x-k8s.io", Some("capovm")),
        ("ovirtmachinetemplates.infrastructure.cluster.x-k8s.io", None),
        ("ovirtclustertemplates.infrastructure.cluster.x-k8s.io", None),
    ] {
        let crd = crds.get(name).await.expect(name);
        let established = crd
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        assert!(established, "{name} is not Established");
        let labels = crd.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("cluster.x-k8s.io/v1beta2").map(String::as_str),
            Some("v1beta1"),
            "{name}"
        );
        assert_eq!(
            labels.get("cluster.x-k8s.io/v1beta1").map(String::as_str),
            Some("v1beta1"),
            "{name}"
        );
        assert_eq!(
            labels.get("cluster.x-k8s.io/provider").map(String::as_str),
            Some("infrastructure-ovirt")
        );
        assert!(labels.contains_key("clusterctl.cluster.x-k8s.io"), "{name}");
        assert_eq!(
            labels.contains_key("clusterctl.cluster.x-k8s.io/move-hierarchy"),
            name.starts_with("ovirtproviders"),
            "{name}"
        );
        assert_eq!(
            crd.spec.names.categories.as_deref(),
            Some(&["cluster-api".to_string()][..]),
            "{name}"
        );
        assert_eq!(
            crd.spec
                .names
                .short_names
                .as_ref()
                .and_then(|s| s.first())
                .map(String::as_str),
            short_name
        );
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1beta1");
        assert!(version.subresources.as_ref().is_some_and(|s| s.status.is_some()) || short_name.is_none());
    }
    let provider = crds
        .get("ovirtproviders.infrastructure.cluster.x-k8s.io")
        .await
        .expect("provider crd");
    assert_eq!(provider.spec.scope, "Cluster");
}

#[tokio::test]
async fn every_example_of_the_product_documents_is_accepted_as_written() {
    let plane = shared().await;
    let _ = kubectl(plane, &["create", "namespace", "capov-system"]);
    for file in [
        "provider-insecure.yaml",
        "provider-system-ca.yaml",
        "provider-own-ca.yaml",
        "cluster.yaml",
        "machine.yaml",
        "machine-template.yaml",
        "machine-template-with-metadata.yaml",
    ] {
        let path = fixture(file);
        let output = kubectl(plane, &["apply", "-f", path.to_str().expect("path")]);
        assert!(
            output.status.success(),
            "{file} rejected: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let client = plane.client().await.expect("client");
    let machine = Api::<OVirtMachine>::namespaced(client.clone(), "default")
        .get("worker-abc123")
        .await
        .expect("get");
    let settings = &machine.spec.settings;
    assert_eq!(settings.template, "ubuntu-22.04");
    assert_eq!(settings.cpu.as_ref().and_then(|c| c.cores), Some(4));
    assert_eq!(settings.memory.as_ref().and_then(|m| m.guaranteedmb), Some(4096));
    assert_eq!(settings.nics[0].vnicprofile, "ovirtmgmt");
    let provider = Api::<OVirtProvider>::all(client.clone())
        .get("ovirt-internal")
        .await
        .expect("provider");
    assert_eq!(
        provider.spec.tls.and_then(|t| t.certs).as_deref(),
        Some("LS0tLS1CRUdJTi...")
    );
    let template = Api::<OVirtMachineTemplate>::namespaced(client, "default")
        .get("worker-template-labelled")
        .await
        .expect("template");
    let labels = template.spec.template.metadata.map(|m| m.labels).unwrap_or_default();
    assert_eq!(
        labels.get("node.kubernetes.io/instance-type").map(String::as_str),
        Some("standard")
    );
}

#[tokio::test]
async fn kubectl_get_prints_the_documented_columns() {
    let plane = shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "columns").await.expect("namespace");
    let provider_name = format!("{namespace}-engine");
    create_dynamic(
        &client,
        resource::<OVirtProvider>(),
        json!({"metadata": {"name": provider_name},
               "spec": {"engine": "https://engine.example/ovirt-engine/api", "credentialsSecretName": "creds"}}),
        None,
    )
    .await;
    create_dynamic(
        &client,
        resource::<OVirtCluster>(),
        json!({"metadata": {"name": "c1", "labels": {"cluster.x-k8s.io/cluster-name": "workload"}},
               "spec": {"controlPlaneEndpoint": {"host": "10.0.1.100", "port": 6443}}}),
        Some(&namespace),
    )
    .await;
    create_dynamic(
        &client,
        resource::<OVirtMachine>(),
        json!({"metadata": {"name": "m1", "labels": {"cluster.x-k8s.io/cluster-name": "workload"}},
               "spec": {"provider": provider_name, "ovirtcluster": "Default", "template": "ubuntu-22.04",
                        "providerID": "ovirt://11111111-2222-4333-8444-555555555555"}}),
        Some(&namespace),
    )
    .await;

    let providers = stdout_of(&kubectl(plane, &["get", "capovp", &provider_name]));
    assert_eq!(header(&providers), ["NAME", "READY"]);
    let providers_wide = stdout_of(&kubectl(plane, &["get", "capovp", &provider_name, "-o", "wide"]));
    assert_eq!(header(&providers_wide), ["NAME", "READY", "ENGINE", "VERSION"]);
    assert!(providers_wide.contains("https://engine.example/ovirt-engine/api"));

    let clusters = stdout_of(&kubectl(plane, &["get", "capovc", "-n", &namespace]));
    assert_eq!(header(&clusters), ["NAME", "CONTROLPLANE ENDPOINT", "READY"]);
    assert!(clusters.contains("10.0.1.100"));
    let clusters_wide = stdout_of(&kubectl(plane, &["get", "capovc", "-n", &namespace, "-o", "wide"]));
    assert_eq!(
        header(&clusters_wide),
        ["NAME", "CONTROLPLANE ENDPOINT", "READY", "CLUSTER", "AGE"]
    );
    assert!(clusters_wide.contains("workload"));

    let machines = stdout_of(&kubectl(plane, &["get", "capovm", "-n", &namespace]));
    assert_eq!(header(&machines), ["NAME", "READY"]);
    let machines_wide = stdout_of(&kubectl(plane, &["get", "capovm", "-n", &namespace, "-o", "wide"]));
    assert_eq!(
        header(&machines_wide),
        ["NAME", "READY", "CLUSTER", "STATE", "HOST", "PROVIDERID", "AGE"]
    );
    assert!(machines_wide.contains("ovirt://11111111-2222-4333-8444-555555555555"));

    let category = stdout_of(&kubectl(plane, &["get", "cluster-api", "-n", &namespace, "-o", "name"]));
    assert!(
        category.contains("ovirtmachine.infrastructure.cluster.x-k8s.io/m1"),
        "{category}"
    );
    assert!(
        category.contains("ovirtcluster.infrastructure.cluster.x-k8s.io/c1"),
        "{category}"
    );
}

async fn create_dynamic(client: &kube::Client, kind: ApiResource, value: Value, namespace: Option<&str>) {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &kind),
        None => Api::all_with(client.clone(), &kind),
    };
    api.create(&PostParams::default(), &dynamic(&kind, value))
        .await
        .expect("create");
}

fn valid_machine_spec() -> Value {
    json!({"provider": "p", "ovirtcluster": "Default", "template": "ubuntu-22.04"})
}

/// Merges `patch` into `base` (objects recursively; `null` removes a key).
fn merged(mut base: Value, patch: Value) -> Value {
    fn merge(base: &mut Value, patch: Value) {
        match (base, patch) {
            (Value::Object(base), Value::Object(patch)) => {
                for (key, value) in patch {
                    if value.is_null() {
                        base.remove(&key);
                    } else {
                        merge(base.entry(key).or_insert(Value::Null), value);
                    }
                }
            }
            (slot, value) => *slot = value,
        }
    }
    merge(&mut base, patch);
    base
}

async fn expect_rejected(api: &Api<DynamicObject>, kind: &ApiResource, object: Value, expected: &str) {
    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
    match api.create(&PostParams::default(), &dynamic(kind, object)).await {
        Ok(_) => panic!("{name}: accepted, expected a rejection containing {expected:?}"),
        Err(err) => {
            let message = err.to_string();
            assert!(message.contains(expected), "{name}: expected {expected:?} in {message}");
        }
    }
}

#[tokio::test]
async fn invalid_objects_are_rejected_with_messages_that_say_what_to_fix() {
    let plane = shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "invalid").await.expect("namespace");
    let machine_kind = resource::<OVirtMachine>();
    let machines: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &machine_kind);
    let machine = |name: &str, spec_patch: Value| json!({"metadata": {"name": name}, "spec": merged(valid_machine_spec(), spec_patch)});
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "no-template",
            json!({"template": null}),
            "spec.template: Required value",
        ),
        (
            "empty-template",
            json!({"template": ""}),
            "spec.template must name a template in oVirt",
        ),
        (
            "zero-sockets",
            json!({"cpu": {"sockets": 0}}),
            "spec.cpu.sockets must be between 1 and 16",
        ),
        (
            "zero-cores",
            json!({"cpu": {"cores": 0}}),
            "spec.cpu.cores must be between 1 and 254",
        ),
        (
            "zero-threads",
            json!({"cpu": {"threads": 0}}),
            "spec.cpu.threads must be between 1 and 8",
        ),
        (
            "guaranteed-above-size",
            json!({"memory": {"sizemb": 4096, "guaranteedmb": 8192}}),
            "spec.memory.guaranteedmb must not be larger than spec.memory.sizemb",
        ),
        (
            "zero-memory",
            json!({"memory": {"sizemb": 0}}),
            "spec.memory.sizemb must be between 1 and 6291456",
        ),
        (
            "bad-vmtype",
            json!({"vmtype": "gaming"}),
            "Unsupported value: \"gaming\"",
        ),
        (
            "zero-disk",
            json!({"osdisksizegb": 0}),
            "spec.osdisksizegb must be between 1 and 8192",
        ),
        (
            "too-many-sockets",
            json!({"cpu": {"sockets": 17}}),
            "spec.cpu.sockets must be between 1 and 16 (the engine's default MaxNumOfVmSockets)",
        ),
        (
            "too-many-cores",
            json!({"cpu": {"cores": 255}}),
            "spec.cpu.cores must be between 1 and 254",
        ),
        (
            "too-many-threads",
            json!({"cpu": {"threads": 9}}),
            "spec.cpu.threads must be between 1 and 8",
        ),
        (
            "too-much-memory",
            json!({"memory": {"sizemb": 6_291_457}}),
            "spec.memory.sizemb must be between 1 and 6291456 (MiB, 6 TiB",
        ),
        (
            "overflowing-memory",
            json!({"memory": {"sizemb": 9_223_372_036_854_775_807_i64}}),
            "spec.memory.sizemb must be between 1 and 6291456",
        ),
        (
            "too-much-guaranteed",
            json!({"memory": {"guaranteedmb": 6_291_457}}),
            "spec.memory.guaranteedmb must be between 0 and 6291456",
        ),
        (
            "too-big-disk",
            json!({"osdisksizegb": 8193}),
            "spec.osdisksizegb must be between 1 and 8192 (GiB",
        ),
        (
            "nic-without-profile",
            json!({"nics": [{"name": "nic1"}]}),
            "spec.nics[0].vnicprofile: Required value",
        ),
        (
            "nic-empty-profile",
            json!({"nics": [{"vnicprofile": ""}]}),
            "spec.nics[].vnicprofile must name a vNIC",
        ),
    ];
    for (name, patch, expected) in cases {
        expect_rejected(&machines, &machine_kind, machine(name, patch), expected).await;
    }

    let template_kind = resource::<OVirtMachineTemplate>();
    let templates: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &template_kind);
    let template_spec = merged(valid_machine_spec(), json!({"cpu": {"sockets": 0}}));
    expect_rejected(
        &templates,
        &template_kind,
        json!({"metadata": {"name": "t-zero-sockets"}, "spec": {"template": {"spec": template_spec}}}),
        "spec.cpu.sockets must be between 1 and 16",
    )
    .await;

    let cluster_kind = resource::<OVirtCluster>();
    let clusters: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &cluster_kind);
    for (name, port) in [("port-zero", 0), ("port-too-high", 65536)] {
        expect_rejected(
            &clusters,
            &cluster_kind,
            json!({"metadata": {"name": name}, "spec": {"controlPlaneEndpoint": {"host": "10.0.0.1", "port": port}}}),
            "spec.controlPlaneEndpoint.port must be between 1 and 65535",
        )
        .await;
    }
    // An OVirtClusterTemplate's spec is an OVirtCluster's, with the same rules.
    let cluster_template_kind = resource::<OVirtClusterTemplate>();
    let cluster_templates: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &cluster_template_kind);
    expect_rejected(
        &cluster_templates,
        &cluster_template_kind,
        json!({"metadata": {"name": "ct-port-zero"},
               "spec": {"template": {"spec": {"controlPlaneEndpoint": {"host": "10.0.0.1", "port": 0}}}}}),
        "spec.controlPlaneEndpoint.port must be between 1 and 65535",
    )
    .await;

    let provider_kind = resource::<OVirtProvider>();
    let providers: Api<DynamicObject> = Api::all_with(client.clone(), &provider_kind);
    let provider_name = |suffix: &str| format!("{namespace}-{suffix}");
    let engine = "https://engine.example/ovirt-engine/api";
    expect_rejected(
        &providers,
        &provider_kind,
        json!({"metadata": {"name": provider_name("no-engine")}, "spec": {"credentialsSecretName": "s"}}),
        "spec.engine: Required value",
    )
    .await;
    for (suffix, url) in [
        ("ftp", "ftp://engine.example/ovirt-engine/api"),
        ("no-scheme", "engine.example"),
    ] {
        expect_rejected(
            &providers,
            &provider_kind,
            json!({"metadata": {"name": provider_name(suffix)}, "spec": {"engine": url, "credentialsSecretName": "s"}}),
            "spec.engine must be an http(s) URL",
        )
        .await;
    }
    expect_rejected(
        &providers,
        &provider_kind,
        json!({"metadata": {"name": provider_name("no-credentials")}, "spec": {"engine": engine}}),
        "no credentials: set spec.credentialsSecretName",
    )
    .await;
    expect_rejected(
        &providers,
        &provider_kind,
        json!({"metadata": {"name": provider_name("user-only")}, "spec": {"engine": engine, "user": "admin@internal"}}),
        "no credentials: set spec.credentialsSecretName",
    )
    .await;
}

/// Failure domains on the OVirtCluster and anti-affinity on machines and templates (issue #25).
#[tokio::test]
async fn placement_fields_are_rejected_with_messages_that_say_what_to_fix() {
    let plane = shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "placement").await.expect("namespace");
    let cluster_kind = resource::<OVirtCluster>();
    let clusters: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &cluster_kind);
    let cluster = |name: &str, domains: Value| json!({"metadata": {"name": name}, "spec": {"failureDomains": domains}});
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "fd-nowhere",
            json!([{"name": "rack-a"}]),
            "spec.failureDomains[] needs ovirtcluster (an oVirt cluster), hostlabel",
        ),
        (
            "fd-overrides-only",
            json!([{"name": "rack-a", "overrides": {"template": "t"}}]),
            "provider (an OVirtProvider, i.e. another engine), or several of them",
        ),
        (
            "fd-empty-provider",
            json!([{"name": "site-a", "provider": ""}]),
            "spec.failureDomains[].provider must name an OVirtProvider",
        ),
        (
            "fd-bad-provider",
            json!([{"name": "site-a", "provider": "Engine_A"}]),
            "spec.failureDomains[].provider must name an OVirtProvider",
        ),
        (
            "fd-empty-overrides",
            json!([{"name": "site-a", "provider": "engine-a", "overrides": {}}]),
            "spec.failureDomains[].overrides needs template, storagedomainname or vnicprofiles",
        ),
        (
            "fd-no-vnic-profiles",
            json!([{"name": "site-a", "provider": "engine-a", "overrides": {"vnicprofiles": []}}]),
            "spec.failureDomains[].overrides needs template, storagedomainname or vnicprofiles",
        ),
        (
            "fd-empty-vnic-profile",
            json!([{"name": "site-a", "provider": "engine-a",
                    "overrides": {"vnicprofiles": [{"from": "ovirtmgmt", "to": ""}]}}]),
            "spec.failureDomains[].overrides.vnicprofiles[].to must name a vNIC profile",
        ),
        (
            "fd-empty-vnic-profile-from",
            json!([{"name": "site-a", "provider": "engine-a",
                    "overrides": {"vnicprofiles": [{"from": "", "to": "vm-net-a"}]}}]),
            "spec.failureDomains[].overrides.vnicprofiles[].from must be a spec.nics[].vnicprofile name",
        ),
        (
            "fd-empty-override-template",
            json!([{"name": "site-a", "provider": "engine-a", "overrides": {"template": ""}}]),
            "spec.failureDomains[].overrides.template must name a template on the domain's engine",
        ),
        (
            "fd-empty-override-storage",
            json!([{"name": "site-a", "provider": "engine-a", "overrides": {"storagedomainname": ""}}]),
            "spec.failureDomains[].overrides.storagedomainname must name a storage domain",
        ),
        (
            "fd-bad-name",
            json!([{"name": "Rack_A", "ovirtcluster": "A"}]),
            "spec.failureDomains[].name must be a DNS label",
        ),
        (
            "fd-long-name",
            json!([{"name": "a".repeat(64), "ovirtcluster": "A"}]),
            "Too long: may not be more than 63",
        ),
        (
            "fd-twice",
            json!([{"name": "rack-a", "ovirtcluster": "A"}, {"name": "rack-a", "hostlabel": "rack-a"}]),
            "spec.failureDomains[].name must be unique",
        ),
        (
            "fd-empty-cluster",
            json!([{"name": "rack-a", "ovirtcluster": ""}]),
            "spec.failureDomains[].ovirtcluster must name a cluster in oVirt",
        ),
        (
            "fd-empty-label",
            json!([{"name": "rack-a", "hostlabel": ""}]),
            "spec.failureDomains[].hostlabel must name an affinity label in oVirt",
        ),
        (
            "fd-too-many",
            Value::Array(
                (0..101)
                    .map(|n| json!({"name": format!("d{n}"), "ovirtcluster": "A"}))
                    .collect(),
            ),
            "must have at most 100 items",
        ),
    ];
    for (name, domains, expected) in cases {
        expect_rejected(&clusters, &cluster_kind, cluster(name, domains), expected).await;
    }
    let good = json!([{"name": "rack-a", "ovirtcluster": "A", "controlPlane": true},
                      {"name": "rack-b", "hostlabel": "rack-b", "controlPlane": false}]);
    create_dynamic(
        &client,
        cluster_kind.clone(),
        cluster("fd-good", good),
        Some(&namespace),
    )
    .await;
    // A domain may be a whole engine, with the names that differ there.
    let engines = json!([{"name": "site-a", "provider": "engine-a"},
                         {"name": "site-b", "provider": "engine-b.example", "ovirtcluster": "B",
                          "overrides": {"template": "ubuntu-b", "storagedomainname": "data-b",
                                        "vnicprofiles": [{"from": "ovirtmgmt", "to": "vm-net-b"}]}}]);
    create_dynamic(&client, cluster_kind, cluster("fd-engines", engines), Some(&namespace)).await;

    let machine_kind = resource::<OVirtMachine>();
    let machines: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &machine_kind);
    let machine = json!({"metadata": {"name": "strict"}, "spec": merged(valid_machine_spec(), json!({"antiaffinity": "strict"}))});
    expect_rejected(&machines, &machine_kind, machine, "Unsupported value: \"strict\"").await;
    let template_kind = resource::<OVirtMachineTemplate>();
    let templates: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &template_kind);
    let spec = merged(valid_machine_spec(), json!({"antiaffinity": "always"}));
    expect_rejected(
        &templates,
        &template_kind,
        json!({"metadata": {"name": "t-always"}, "spec": {"template": {"spec": spec}}}),
        "supported values: \"soft\", \"hard\", \"none\"",
    )
    .await;
    // spec.provider may be left out (the failure domain's decides), but not set empty.
    let machine =
        json!({"metadata": {"name": "empty-provider"}, "spec": merged(valid_machine_spec(), json!({"provider": ""}))});
    expect_rejected(
        &machines,
        &machine_kind,
        machine,
        "spec.provider must name an OVirtProvider, or be left out",
    )
    .await;
    let machine = json!({"metadata": {"name": "id-without-provider"}, "spec": merged(valid_machine_spec(),
        json!({"provider": null, "providerID": "ovirt://0a5c3c43-4b4e-4a31-9d0e-1b2f5a7e8c90"}))});
    expect_rejected(
        &machines,
        &machine_kind,
        machine,
        "spec.provider must be set with spec.providerID",
    )
    .await;
    let spec = merged(valid_machine_spec(), json!({"provider": null}));
    create_dynamic(
        &client,
        machine_kind.clone(),
        json!({"metadata": {"name": "from-domain"}, "spec": spec.clone()}),
        Some(&namespace),
    )
    .await;
    create_dynamic(
        &client,
        template_kind.clone(),
        json!({"metadata": {"name": "t-from-domain"}, "spec": {"template": {"spec": spec}}}),
        Some(&namespace),
    )
    .await;
    // Until the VM exists the controller sets spec.provider from the domain; with spec.providerID it is frozen.
    let pin = json!({"spec": {"provider": "engine-b"}});
    machines
        .patch("from-domain", &PatchParams::default(), &Patch::Merge(&pin))
        .await
        .expect("setting spec.provider before the VM exists");
    let set_id = json!({"spec": {"providerID": "ovirt://0a5c3c43-4b4e-4a31-9d0e-1b2f5a7e8c90"}});
    machines
        .patch("from-domain", &PatchParams::default(), &Patch::Merge(&set_id))
        .await
        .expect("providerID");
    for change in [
        json!({"spec": {"provider": "engine-a"}}),
        json!({"spec": {"provider": null}}),
    ] {
        let err = machines
            .patch("from-domain", &PatchParams::default(), &Patch::Merge(&change))
            .await
            .expect_err("provider change");
        assert!(
            err.to_string()
                .contains("spec.provider cannot change once the VM exists"),
            "{change}: {err}"
        );
    }
    for value in ["soft", "hard", "none"] {
        let spec = merged(valid_machine_spec(), json!({"antiaffinity": value}));
        create_dynamic(
            &client,
            machine_kind.clone(),
            json!({"metadata": {"name": format!("aa-{value}")}, "spec": spec}),
            Some(&namespace),
        )
        .await;
    }
}

#[tokio::test]
async fn updates_keep_provider_ids_and_require_a_credentials_secret_but_templates_stay_editable() {
    let plane = shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "updates").await.expect("namespace");

    // A provider still on the deprecated user/pass: any spec change must set credentialsSecretName.
    let providers: Api<OVirtProvider> = Api::all(client.clone());
    let name = format!("{namespace}-legacy");
    let legacy: OVirtProvider = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtProvider",
        "metadata": {"name": name},
        "spec": {"engine": "https://engine.example/ovirt-engine/api", "user": "admin@internal", "pass": "secret"}
    }))
    .expect("provider");
    providers
        .create(&PostParams::default(), &legacy)
        .await
        .expect("legacy provider is still accepted on create");
    let change_engine = json!({"spec": {"engine": "https://other.example/ovirt-engine/api"}});
    let err = providers
        .patch(&name, &PatchParams::default(), &Patch::Merge(&change_engine))
        .await
        .expect_err("an update without credentialsSecretName");
    assert!(
        err.to_string().contains("spec.credentialsSecretName must be set"),
        "{err}"
    );
    let set_secret = json!({"spec": {"credentialsSecretName": "engine-credentials", "user": null, "pass": null}});
    let updated = providers
        .patch(&name, &PatchParams::default(), &Patch::Merge(&set_secret))
        .await
        .expect("setting credentialsSecretName is accepted");
    assert_eq!(
        updated.spec.credentials_secret_name.as_deref(),
        Some("engine-credentials")
    );
    let metadata_only = json!({"metadata": {"labels": {"team": "platform"}}});
    providers
        .patch(&name, &PatchParams::default(), &Patch::Merge(&metadata_only))
        .await
        .expect("labels");

    // providerID is write-once.
    let machines: Api<OVirtMachine> = Api::namespaced(client.clone(), &namespace);
    let machine: OVirtMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachine",
        "metadata": {"name": "m"}, "spec": valid_machine_spec()
    }))
    .expect("machine");
    machines
        .create(&PostParams::default(), &machine)
        .await
        .expect("create machine");
    // Only an engine VM id (a UUID): `ovirt://..` once became a listing of every VM (issue 23).
    for bad in [
        "ovirt://..",
        "ovirt://.",
        "ovirt://1234",
        "ovirt://0a5c3c43-4b4e-4a31-9d0e-1b2f5a7e8c90/..",
    ] {
        let err = machines
            .patch(
                "m",
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"providerID": bad}})),
            )
            .await
            .expect_err(bad);
        assert!(
            err.to_string().contains("spec.providerID must be ovirt://<VM id>"),
            "{bad}: {err}"
        );
    }
    let set_id = json!({"spec": {"providerID": "ovirt://0a5c3c43-4b4e-4a31-9d0e-1b2f5a7e8c90"}});
    machines
        .patch("m", &PatchParams::default(), &Patch::Merge(&set_id))
        .await
        .expect("first providerID");
    for change in [
        json!({"spec": {"providerID": "ovirt://7d2e9f10-5c6b-4d3a-8e1f-2a3b4c5d6e7f"}}),
        json!({"spec": {"providerID": null}}),
    ] {
        let err = machines
            .patch("m", &PatchParams::default(), &Patch::Merge(&change))
            .await
            .expect_err("providerID change");
        assert!(
            err.to_string().contains("spec.providerID is set by the controller"),
            "{err}"
        );
    }
    assert_eq!(
        machines.get("m").await.expect("get").spec.provider_id.as_deref(),
        Some("ovirt://0a5c3c43-4b4e-4a31-9d0e-1b2f5a7e8c90")
    );

    // Templates stay editable: the platform changes live templates (e.g. disk cloning per node group).
    let templates: Api<OVirtMachineTemplate> = Api::namespaced(client, &namespace);
    let template: OVirtMachineTemplate = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachineTemplate",
        "metadata": {"name": "t"}, "spec": {"template": {"spec": valid_machine_spec()}}
    }))
    .expect("template");
    templates
        .create(&PostParams::default(), &template)
        .await
        .expect("create template");
    let edit = json!({"spec": {"template": {"spec": {"diskclone": true, "template": "rhcos-4.15"}}}});
    let edited = templates
        .patch("t", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .expect("edit template");
    assert_eq!(edited.spec.template.spec.diskclone, Some(true));
    assert_eq!(edited.spec.template.spec.template, "rhcos-4.15");
}

#[tokio::test]
async fn status_round_trips_through_the_subresource_without_touching_spec() {
    let plane = shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "status").await.expect("namespace");
    let machines: Api<OVirtMachine> = Api::namespaced(client.clone(), &namespace);
    let machine: OVirtMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachine",
        "metadata": {"name": "worker-1"}, "spec": valid_machine_spec()
    }))
    .expect("machine");
    let created = machines.create(&PostParams::default(), &machine).await.expect("create");

    let status = json!({
        "ready": true,
        "initialization": {"provisioned": true},
        "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}, {"type": "InternalDNS", "address": "worker-1"}],
        "conditions": [
            {"type": "CanConnectToOVirt", "status": "True", "reason": "Connected",
             "lastTransitionTime": "2026-12-01T10:00:00Z", "observedGeneration": 1},
            {"type": "MachineOn", "status": "False", "severity": "Info", "reason": "VMPoweringUp",
             "message": "powering up", "lastTransitionTime": "2026-12-01T10:01:00Z", "observedGeneration": 1}
        ],
        "failureReason": "OVirtEngineConnectionCritical",
        "failureMessage": "authentication failed",
        "vmStatus": "powering_up"
    });
    // A status write that also carries a spec change: the status subresource must ignore the spec part.
    let apply = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachine",
        "metadata": {"name": "worker-1"},
        "spec": {"template": "something-else"},
        "status": status
    });
    machines
        .patch_status("worker-1", &PatchParams::apply("capov").force(), &Patch::Apply(&apply))
        .await
        .expect("status apply");

    let read = machines.get("worker-1").await.expect("get");
    assert_eq!(read.spec, created.spec, "a status write changed spec");
    assert_eq!(read.metadata.generation, created.metadata.generation);
    let read_status = serde_json::to_value(read.status.expect("status")).expect("json");
    assert_eq!(read_status, status);

    // Conditions are a map keyed by type: applying one condition keeps the others of the same manager's set
    // only when they are sent again, and a second manager's condition survives.
    let other = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachine",
        "metadata": {"name": "worker-1"},
        "status": {"conditions": [{"type": "Paused", "status": "False", "reason": "NotPaused",
                                   "lastTransitionTime": "2026-12-01T10:02:00Z"}]}
    });
    machines
        .patch_status(
            "worker-1",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(&other),
        )
        .await
        .expect("second manager");
    let conditions = machines
        .get("worker-1")
        .await
        .expect("get")
        .status
        .expect("status")
        .conditions;
    let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_ref()).collect();
    assert_eq!(types, ["CanConnectToOVirt", "MachineOn", "Paused"]);
}

#[tokio::test]
async fn deprecated_user_and_pass_draw_a_warning_but_a_credentials_secret_does_not() {
    let plane = shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "deprecation").await.expect("namespace");
    let dir = tempfile_dir(&namespace);
    let legacy = dir.join("legacy.yaml");
    std::fs::write(
        &legacy,
        format!(
            "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: OVirtProvider\nmetadata:\n  name: \
             {namespace}-legacy\nspec:\n  engine: https://engine.example/ovirt-engine/api\n  user: admin@internal\n  \
             pass: secret\n"
        ),
    )
    .expect("write");
    let modern = dir.join("modern.yaml");
    std::fs::write(
        &modern,
        format!(
            "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: OVirtProvider\nmetadata:\n  name: \
             {namespace}-modern\nspec:\n  engine: https://engine.example/ovirt-engine/api\n  credentialsSecretName: \
             engine-credentials\n"
        ),
    )
    .expect("write");

    // The policy binding takes a moment to be picked up by the admission plugin: wait for the first warning.
    let warning = eventually(Duration::from_secs(30), "a deprecation warning", || async {
        let output = kubectl(plane, &["apply", "-f", legacy.to_str().expect("path")]);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "deprecated fields must still be accepted: {stderr}"
        );
        stderr.contains("Warning").then_some(stderr)
    })
    .await;
    assert!(warning.contains("spec.user and spec.pass are deprecated"), "{warning}");
    assert!(warning.contains("set spec.credentialsSecretName"), "{warning}");

    let output = kubectl(plane, &["apply", "-f", modern.to_str().expect("path")]);
    assert!(output.status.success());
    assert!(
        !String::from_utf8_lossy(&output.stderr).contains("Warning"),
        "a provider with a Secret is not deprecated"
    );
    let _ = std::fs::remove_dir_all(dir);
}

fn tempfile_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("capov-api-test-{name}"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[tokio::test]
async fn engine_urls_with_userinfo_are_rejected_with_a_message_that_names_the_secret() {
    let plane = shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "userinfo").await.expect("namespace");
    let kind = resource::<OVirtProvider>();
    let providers: Api<DynamicObject> = Api::all_with(client.clone(), &kind);
    let provider = |suffix: &str, engine: &str| {
        json!({"metadata": {"name": format!("{namespace}-{suffix}")},
               "spec": {"engine": engine, "credentialsSecretName": "engine-credentials"}})
    };
    for (suffix, engine) in [
        ("user-pass", "https://admin:secret@engine/ovirt-engine/api"),
        ("user-only", "http://admin@engine:8080/ovirt-engine/api"),
        ("wrong-scheme-too", "ftp://admin:secret@engine/ovirt-engine/api"),
    ] {
        let rejected = providers
            .create(&PostParams::default(), &dynamic(&kind, provider(suffix, engine)))
            .await
            .expect_err(engine);
        let message = rejected.to_string();
        assert!(
            message.contains("spec.engine must not contain a username or password"),
            "{message}"
        );
        assert!(
            message.contains("put the credentials into a Secret") && message.contains("spec.credentialsSecretName"),
            "{message}"
        );
        assert!(
            !message.contains("admin:secret@") && !message.contains("admin@engine"),
            "the apiserver must not echo the URL: {message}"
        );
    }
    providers
        .create(
            &PostParams::default(),
            &dynamic(&kind, provider("plain", "https://engine/ovirt-engine/api")),
        )
        .await
        .expect("a URL without userinfo is accepted");
    providers
        .create(
            &PostParams::default(),
            &dynamic(&kind, provider("at-in-path", "https://engine/ovirt-engine/api?x=a@b")),
        )
        .await
        .expect("an @ after the authority is not userinfo");
}

/// Issue #35 §4: `spec.tenantPlacement` of an OVirtProvider names engine objects; each rejection says which field
/// and what an entry must look like.
#[tokio::test]
async fn tenant_placement_is_validated_with_messages_that_say_what_to_fix() {
    let plane = shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane
        .create_namespace(&client, "tenant-placement")
        .await
        .expect("namespace");
    let kind = resource::<OVirtProvider>();
    let providers: Api<DynamicObject> = Api::all_with(client.clone(), &kind);
    let provider = |suffix: &str, placement: Value| {
        json!({"metadata": {"name": format!("{namespace}-{suffix}")},
               "spec": {"engine": "https://engine/ovirt-engine/api", "credentialsSecretName": "engine-credentials",
                        "tenantPlacement": placement}})
    };
    let labels = "spec.tenantPlacement.hostLabels must name oVirt affinity labels: letters, digits, '.', '_' and '-'";
    let clusters = "spec.tenantPlacement.ovirtClusters must name oVirt clusters: letters, digits, '.', '_' and '-'";
    let many: Vec<String> = (0..257).map(|n| format!("c{n}")).collect();
    let cases: Vec<(&str, Value, &str)> = vec![
        ("empty-label", json!({"hostLabels": [""]}), labels),
        ("spaced-label", json!({"hostLabels": ["rack a"]}), labels),
        ("slashed-label", json!({"hostLabels": ["rack/a"]}), labels),
        (
            "long-label",
            json!({"hostLabels": ["a".repeat(51)]}),
            "Too long: may not be more than 50",
        ),
        (
            "twice-label",
            json!({"hostLabels": ["rack-a", "rack-a"]}),
            "Duplicate value: \"rack-a\"",
        ),
        ("empty-cluster", json!({"ovirtClusters": [""]}), clusters),
        ("colon-cluster", json!({"ovirtClusters": ["site:2"]}), clusters),
        (
            "long-cluster",
            json!({"ovirtClusters": ["c".repeat(41)]}),
            "Too long: may not be more than 40",
        ),
        (
            "many-clusters",
            json!({"ovirtClusters": many}),
            "must have at most 256 items",
        ),
    ];
    for (suffix, placement, expected) in cases {
        expect_rejected(&providers, &kind, provider(suffix, placement), expected).await;
    }
    for (suffix, placement) in [
        (
            "good",
            json!({"hostLabels": ["rack-a", "Stelaž_1.b"], "ovirtClusters": ["Default", "Site-2"]}),
        ),
        ("none-allowed", json!({"hostLabels": [], "ovirtClusters": []})),
        ("labels-only", json!({"hostLabels": ["rack-a"]})),
    ] {
        providers
            .create(&PostParams::default(), &dynamic(&kind, provider(suffix, placement)))
            .await
            .unwrap_or_else(|err| panic!("{suffix}: {err}"));
    }
}

/// An IPAM pool reference as the examples and templates write it.
fn pool(name: &str) -> Value {
    json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": name})
}

#[tokio::test]
async fn addressing_fields_are_validated_with_messages_that_say_what_to_fix() {
    let plane = shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "addressing").await.expect("namespace");
    let machine_kind = resource::<OVirtMachine>();
    let machines: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &machine_kind);
    let machine = |name: &str, spec_patch: Value| json!({"metadata": {"name": name}, "spec": merged(valid_machine_spec(), spec_patch)});
    let nic = |extra: Value| json!({"nics": [merged(json!({"vnicprofile": "ovirtmgmt"}), extra)]});
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "three-pools",
            nic(json!({"addressesFromPools": [pool("a"), pool("b"), pool("c")]})),
            "addressesFromPools takes at most two pools, one IPv4 and one IPv6",
        ),
        (
            "pool-bad-group",
            nic(json!({"addressesFromPools": [merged(pool("a"), json!({"apiGroup": "IPAM"}))]})),
            "apiGroup must be the API group of an IPAM pool kind",
        ),
        (
            "pool-bad-kind",
            nic(json!({"addressesFromPools": [merged(pool("a"), json!({"kind": "1pool"}))]})),
            "kind must be the kind of an IPAM pool",
        ),
        (
            "pool-bad-name",
            nic(json!({"addressesFromPools": [pool("Pool_A")]})),
            "name must name the IPAM pool",
        ),
        (
            "pool-without-name",
            nic(json!({"addressesFromPools": [{"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool"}]})),
            "spec.nics[0].addressesFromPools[0].name: Required value",
        ),
        (
            "long-guest-name",
            nic(json!({"guestInterfaceName": "a-very-long-name0"})),
            "guestInterfaceName must be a Linux interface name as the guest sees it",
        ),
        (
            "slash-guest-name",
            nic(json!({"guestInterfaceName": "eth/0"})),
            "guestInterfaceName must be a Linux interface name as the guest sees it",
        ),
        (
            "dns-not-an-ip",
            json!({"dns": {"servers": ["dns.example.com"]}}),
            "spec.dns.servers takes at most 3 name servers, each an IPv4 or IPv6 address",
        ),
        (
            "dns-four-servers",
            json!({"dns": {"servers": ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]}}),
            "spec.dns.servers takes at most 3 name servers",
        ),
        (
            "dns-bad-domain",
            json!({"dns": {"searchDomains": ["Example.COM"]}}),
            "spec.dns.searchDomains takes at most 6 domains, each a lower-case DNS name",
        ),
    ];
    for (name, patch, expected) in cases {
        expect_rejected(&machines, &machine_kind, machine(name, patch), expected).await;
    }
    // Both families on one NIC, a guest name, DNS over IPv4 and IPv6: accepted as written.
    let valid = machine(
        "static",
        json!({
            "nics": [{"vnicprofile": "ovirtmgmt", "guestInterfaceName": "enp1s0",
                      "addressesFromPools": [pool("nodes-v4"), pool("nodes-v6")]}],
            "dns": {"servers": ["10.0.0.2", "fd00::2"], "searchDomains": ["example.com", "lab.example.com"]}
        }),
    );
    create_dynamic(&client, machine_kind.clone(), valid, Some(&namespace)).await;

    let template_kind = resource::<OVirtMachineTemplate>();
    let templates: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &template_kind);
    let template_spec = merged(
        valid_machine_spec(),
        nic(json!({"addressesFromPools": [pool("Bad_Pool")]})),
    );
    expect_rejected(
        &templates,
        &template_kind,
        json!({"metadata": {"name": "t-bad-pool"}, "spec": {"template": {"spec": template_spec}}}),
        "name must name the IPAM pool",
    )
    .await;

    let cluster_kind = resource::<OVirtCluster>();
    let clusters: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &cluster_kind);
    let from_pool = |name: &str, extra: Value| json!({"metadata": {"name": name}, "spec": {"controlPlaneEndpointFromPool": merged(pool("vips"), extra)}});
    expect_rejected(
        &clusters,
        &cluster_kind,
        from_pool("vip-port-zero", json!({"port": 0})),
        "spec.controlPlaneEndpointFromPool.port must be between 1 and 65535",
    )
    .await;
    expect_rejected(
        &clusters,
        &cluster_kind,
        from_pool("vip-bad-kind", json!({"kind": "-pool"})),
        "kind must be the kind of an IPAM pool",
    )
    .await;
    // A cluster with a VIP pool needs no endpoint; the port defaults to kube-apiserver's.
    create_dynamic(
        &client,
        cluster_kind.clone(),
        from_pool("vip", json!({})),
        Some(&namespace),
    )
    .await;
    let created = clusters.get("vip").await.expect("get");
    assert_eq!(created.data["spec"]["controlPlaneEndpointFromPool"]["port"], 6443);
    for (patch, expected) in [
        (
            json!({"spec": {"controlPlaneEndpointFromPool": {"name": "other-vips"}}}),
            "spec.controlPlaneEndpointFromPool cannot change",
        ),
        (
            json!({"spec": {"controlPlaneEndpointFromPool": null}}),
            "spec.controlPlaneEndpointFromPool can only be set when the OVirtCluster is created, and cannot be removed",
        ),
    ] {
        let err = clusters
            .patch("vip", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect_err(expected);
        assert!(err.to_string().contains(expected), "{expected}: {err}");
    }
    // Writing the endpoint the pool gave is what CAPOV does: accepted.
    let endpoint = json!({"spec": {"controlPlaneEndpoint": {"host": "10.0.1.50", "port": 6443}}});
    clusters
        .patch("vip", &PatchParams::default(), &Patch::Merge(&endpoint))
        .await
        .expect("the endpoint CAPOV writes");
    // A cluster created with a fixed endpoint cannot take a pool later.
    let plain =
        json!({"metadata": {"name": "plain"}, "spec": {"controlPlaneEndpoint": {"host": "10.0.1.9", "port": 6443}}});
    create_dynamic(&client, cluster_kind.clone(), plain, Some(&namespace)).await;
    let err = clusters
        .patch(
            "plain",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"controlPlaneEndpointFromPool": pool("vips")}})),
        )
        .await
        .expect_err("a pool added later");
    assert!(
        err.to_string()
            .contains("spec.controlPlaneEndpointFromPool can only be set when the OVirtCluster is created"),
        "{err}"
    );
}
#[tokio::test]
async fn data_disks_name_templates_and_graceful_shutdown_are_validated_with_messages_that_say_what_to_fix() {
    let plane = shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "vmshape").await.expect("namespace");
    let machine_kind = resource::<OVirtMachine>();
    let machines: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &machine_kind);
    let machine = |name: &str, spec_patch: Value| json!({"metadata": {"name": name}, "spec": merged(valid_machine_spec(), spec_patch)});
    let disk = |patch: Value| {
        merged(
            json!({"name": "data", "sizegb": 10, "storagedomainname": "data1"}),
            patch,
        )
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "disk-zero-size",
            json!({"datadisks": [disk(json!({"sizegb": 0}))]}),
            "spec.datadisks[].sizegb must be between 1 and 8192",
        ),
        (
            "disk-no-domain",
            json!({"datadisks": [disk(json!({"storagedomainname": ""}))]}),
            "spec.datadisks[].storagedomainname must name a storage domain in oVirt",
        ),
        (
            "disk-bad-name",
            json!({"datadisks": [disk(json!({"name": "Data Disk"}))]}),
            "spec.datadisks[].name must be 1 to 32 lower-case letters",
        ),
        (
            "disk-twice",
            json!({"datadisks": [disk(json!({})), disk(json!({"sizegb": 5}))]}),
            "spec.datadisks[].name must be unique",
        ),
        (
            "disk-preallocated-cow",
            json!({"datadisks": [disk(json!({"sparse": false}))]}),
            "a preallocated disk (sparse: false) needs format: raw",
        ),
        (
            "disk-bad-interface",
            json!({"datadisks": [disk(json!({"interface": "ide"}))]}),
            "spec.datadisks[0].interface: Unsupported value",
        ),
        (
            "disk-empty-profile",
            json!({"datadisks": [disk(json!({"diskprofile": ""}))]}),
            "spec.datadisks[].diskprofile must name a disk profile",
        ),
        (
            "name-without-name",
            json!({"vmnametemplate": "{namespace}-worker"}),
            "spec.vmnametemplate must contain {name}",
        ),
        (
            "name-unknown-placeholder",
            json!({"vmnametemplate": "{region}-{name}"}),
            "spec.vmnametemplate may hold only letters, digits",
        ),
        (
            "name-space",
            json!({"vmnametemplate": "{namespace} {name}"}),
            "spec.vmnametemplate may hold only letters, digits",
        ),
        (
            "shutdown-too-long",
            json!({"gracefulshutdowntimeoutseconds": 7200}),
            "spec.gracefulshutdowntimeoutseconds must be between 0",
        ),
    ];
    for (name, patch, expected) in cases {
        expect_rejected(&machines, &machine_kind, machine(name, patch), expected).await;
    }

    // Everything at once, as documented, is accepted; the name template is fixed once the VM exists.
    let full = json!({
        "vmnametemplate": "{namespace}-{name}",
        "gracefulshutdowntimeoutseconds": 120,
        "datadisks": [
            disk(json!({})),
            disk(json!({"name": "etcd", "sizegb": 8, "interface": "virtio", "format": "raw", "sparse": false,
                "diskprofile": "data1"}))
        ]
    });
    machines
        .create(&PostParams::default(), &dynamic(&machine_kind, machine("full", full)))
        .await
        .expect("a machine with every new field");
    let rename = json!({"spec": {"vmnametemplate": "{cluster}-{name}"}});
    machines
        .patch("full", &PatchParams::default(), &Patch::Merge(&rename))
        .await
        .expect("the template may change before the VM exists");
    let set_id = json!({"spec": {"providerID": "ovirt://0a5c3c43-4b4e-4a31-9d0e-1b2f5a7e8c90"}});
    machines
        .patch("full", &PatchParams::default(), &Patch::Merge(&set_id))
        .await
        .expect("providerID");
    for change in [
        json!({"spec": {"vmnametemplate": "{namespace}-{name}"}}),
        json!({"spec": {"vmnametemplate": null}}),
    ] {
        let err = machines
            .patch("full", &PatchParams::default(), &Patch::Merge(&change))
            .await
            .expect_err("a name template change once the VM exists");
        assert!(
            err.to_string()
                .contains("spec.vmnametemplate cannot change once the VM exists"),
            "{err}"
        );
    }
}

#[tokio::test]
async fn workload_tuning_fields_are_validated_with_messages_that_say_what_to_fix() {
    let plane = shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "tuning").await.expect("namespace");
    let machine_kind = resource::<OVirtMachine>();
    let machines: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &machine_kind);
    let machine = |name: &str, spec_patch: Value| json!({"metadata": {"name": name}, "spec": merged(valid_machine_spec(), spec_patch)});
    let cases = [
        (
            "ha-priority",
            json!({"highavailability": {"enabled": true, "priority": 101}}),
            "spec.highavailability.priority must be between 0 and 100",
        ),
        (
            "ha-lease-without-ha",
            json!({"highavailability": {"enabled": false, "leasestoragedomain": "data1"}}),
            "spec.highavailability.leasestoragedomain needs spec.highavailability.enabled: true",
        ),
        (
            "ha-empty-lease",
            json!({"highavailability": {"enabled": true, "leasestoragedomain": ""}}),
            "spec.highavailability.leasestoragedomain must name a data storage domain",
        ),
        (
            "ha-without-enabled",
            json!({"highavailability": {"priority": 50}}),
            "spec.highavailability.enabled: Required value",
        ),
        (
            "cpu-model-with-passthrough",
            json!({"cputuning": {"mode": "host_passthrough", "custommodel": "Skylake-Server"}}),
            "spec.cputuning.custommodel is used only with spec.cputuning.mode: custom",
        ),
        (
            "cpu-unknown-mode",
            json!({"cputuning": {"mode": "fast"}}),
            "spec.cputuning.mode: Unsupported value",
        ),
        (
            "cpu-empty-model",
            json!({"cputuning": {"custommodel": ""}}),
            "spec.cputuning.custommodel must be 1 to 255 characters",
        ),
        (
            "hostdevice-bad-name",
            json!({"hostdevices": ["PCI 0000:3b:00.0"]}),
            "spec.hostdevices[] must be host device names as oVirt shows them under a host's Host Devices",
        ),
        (
            "hostdevice-too-many",
            json!({"hostdevices": (0..9).map(|i| format!("pci_0000_3b_00_{i}")).collect::<Vec<_>>()}),
            "spec.hostdevices: Too many: 9: must have at most 8 items",
        ),
        (
            "numa-without-sizes",
            json!({"numa": {"nodes": 2}}),
            "spec.numa needs spec.cpu (sockets, cores and threads) and spec.memory.sizemb",
        ),
        (
            "numa-more-nodes-than-vcpus",
            json!({"numa": {"nodes": 3}, "cpu": {"sockets": 1, "cores": 2, "threads": 1}, "memory": {"sizemb": 4096}}),
            "spec.numa.nodes must not exceed the VM's vCPUs",
        ),
        (
            "numa-with-resize-and-pin",
            json!({"numa": {"nodes": 1}, "cpu": {"sockets": 1, "cores": 2, "threads": 1}, "memory": {"sizemb": 4096},
                   "cputuning": {"pinningpolicy": "resize_and_pin_numa"}}),
            "spec.numa and spec.cputuning.pinningpolicy resize_and_pin_numa exclude each other",
        ),
        (
            "numa-zero-nodes",
            json!({"numa": {"nodes": 0}, "cpu": {"sockets": 1, "cores": 2, "threads": 1}, "memory": {"sizemb": 4096}}),
            "spec.numa.nodes must be between 1 and 16",
        ),
        (
            "numa-unknown-tune-mode",
            json!({"numa": {"nodes": 1, "tunemode": "loose"}, "cpu": {"sockets": 1, "cores": 2, "threads": 1},
                   "memory": {"sizemb": 4096}}),
            "spec.numa.tunemode: Unsupported value",
        ),
        (
            "cpu-pinning-by-hand",
            json!({"cputuning": {"pinningpolicy": "manual"}}),
            "spec.cputuning.pinningpolicy: Unsupported value: \"manual\"",
        ),
        (
            "hugepages-odd",
            json!({"hugepageskib": 4096}),
            "spec.hugepageskib must be 2048 (2 MiB pages) or 1048576 (1 GiB pages)",
        ),
        (
            "vgpu-none",
            json!({"vgpu": {"types": []}}),
            "spec.vgpu.types: Invalid value: 0",
        ),
        (
            "vgpu-bad-type",
            json!({"vgpu": {"types": ["nvidia 22"]}}),
            "spec.vgpu.types[] must be mediated device type names such as nvidia-22",
        ),
        (
            "vgpu-too-many",
            json!({"vgpu": {"types": ["a", "b", "c", "d", "e"]}}),
            "spec.vgpu.types: Too many: 5: must have at most 4 items",
        ),
        (
            "instancetype-with-cpu",
            json!({"instancetype": "Large", "cpu": {"sockets": 1, "cores": 2, "threads": 1}}),
            "spec.instancetype sets the VM's CPUs, memory and high availability",
        ),
        (
            "instancetype-with-ha",
            json!({"instancetype": "Large", "highavailability": {"enabled": true}}),
            "leave spec.cpu, spec.memory and spec.highavailability unset with it",
        ),
        (
            "instancetype-empty",
            json!({"instancetype": ""}),
            "spec.instancetype must name an instance type of the engine",
        ),
        (
            "version-both",
            json!({"templateversion": {"number": 2, "name": "v2"}}),
            "set exactly one of number and name",
        ),
        (
            "version-neither",
            json!({"templateversion": {}}),
            "set exactly one of number and name",
        ),
        (
            "version-zero",
            json!({"templateversion": {"number": 0}}),
            "spec.templateversion.number must be 1 (the base template) or more",
        ),
        (
            "version-empty-name",
            json!({"templateversion": {"name": ""}}),
            "spec.templateversion.name must not be empty",
        ),
    ];
    for (name, patch, expected) in cases {
        expect_rejected(&machines, &machine_kind, machine(name, patch), expected).await;
    }
    let full = json!({
        "highavailability": {"enabled": true, "priority": 100, "leasestoragedomain": "data1"},
        "cputuning": {"mode": "custom", "custommodel": "Skylake-Server,+spec-ctrl", "pinningpolicy": "resize_and_pin_numa"},
        "hugepageskib": 1048576,
        "vgpu": {"types": ["nvidia-22", "i915-GVTg_V5_4"], "display": true},
        "hostdevices": ["pci_0000_3b_00_0", "usb_1_1"],
        "templateversion": {"name": "2026-12"},
    });
    machines
        .create(&PostParams::default(), &dynamic(&machine_kind, machine("tuned", full)))
        .await
        .expect("a machine with every tuning field");
    machines
        .create(
            &PostParams::default(),
            &dynamic(&machine_kind, machine("sized", json!({"instancetype": "Large"}))),
        )
        .await
        .expect("a machine sized by an instance type");
    let template_kind = resource::<capov_crds::OVirtMachineTemplate>();
    let templates: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &template_kind);
    let template = json!({"metadata": {"name": "tuned"}, "spec": {"template": {"spec": merged(valid_machine_spec(),
        json!({"hugepageskib": 512}))}}});
    expect_rejected(&templates, &template_kind, template, "spec.hugepageskib must be 2048").await;
}
