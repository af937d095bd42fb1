//! The objects a CAPI management cluster holds around an OVirtMachine, created the way CAPI core and a user would:
//! credential and bootstrap Secrets, an OVirtProvider, a provisioned Cluster with its OVirtCluster, Machines owning
//! their OVirtMachines, and the workload cluster's Nodes as kubelets register them. Shared by the end-to-end tests
//! and the demo.

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use crate::HarnessError;

const MANAGER: &str = "capov-harness";

fn kube_error(err: kube::Error) -> HarnessError {
    HarnessError::Kube(err.to_string())
}

/// A CAPI core kind at its storage version, e.g. `capi("Machine", "machines")`.
pub fn capi(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", kind), plural)
}

/// A CAPOV kind, e.g. `capov("OVirtMachine", "ovirtmachines")`.
pub fn capov(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("infrastructure.cluster.x-k8s.io", "v1beta1", kind),
        plural,
    )
}

/// Secrets (core v1), for [`apply`] and dynamic APIs.
pub fn secrets() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Secret"), "secrets")
}

/// Server-side applies `body` (which names apiVersion, kind and metadata.name).
pub async fn apply(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    body: Value,
) -> Result<(), HarnessError> {
    let api: Api<DynamicObject> = match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let name = body["metadata"]["name"].as_str().unwrap_or_default().to_string();
    api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&body))
        .await
        .map_err(kube_error)?;
    Ok(())
}

/// A Secret with these string data pairs.
pub async fn apply_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    pairs: &[(&str, &str)],
) -> Result<(), HarnessError> {
    let data: serde_json::Map<String, Value> = pairs.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data});
    apply(client, &secrets(), Some(namespace), body).await
}

/// An OVirtProvider (cluster-scoped) with these labels and spec.
pub async fn apply_provider(client: &kube::Client, name: &str, labels: Value, spec: Value) -> Result<(), HarnessError> {
    let body = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtProvider",
        "metadata": {"name": name, "labels": labels}, "spec": spec
    });
    apply(client, &capov("OVirtProvider", "ovirtproviders"), None, body).await
}

/// A CAPI Cluster whose infrastructure is provisioned, and its OVirtCluster, both with `labels` and the endpoint.
pub async fn create_provisioned_cluster(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    labels: Value,
) -> Result<(), HarnessError> {
    let endpoint = json!({"host": "10.0.1.100", "port": 6443});
    let cluster = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": name, "labels": labels}, "spec": {"controlPlaneEndpoint": endpoint}
    });
    apply(client, &capi("Cluster", "clusters"), Some(namespace), cluster).await?;
    let clusters: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &capi("Cluster", "clusters"));
    let provisioned = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": name},
        "status": {"initialization": {"infrastructureProvisioned": true}}
    });
    clusters
        .patch_status(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&provisioned))
        .await
        .map_err(kube_error)?;
    let ovirt_cluster = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtCluster",
        "metadata": {"name": name, "labels": labels}, "spec": {"controlPlaneEndpoint": endpoint}
    });
    apply(
        client,
        &capov("OVirtCluster", "ovirtclusters"),
        Some(namespace),
        ovirt_cluster,
    )
    .await
}

/// The labels of a test's cluster objects: the watch filter its operator runs with, and the cluster's name.
pub fn cluster_labels(watch_filter: &str, cluster: &str) -> Value {
    json!({"cluster.x-k8s.io/watch-filter": watch_filter, "cluster.x-k8s.io/cluster-name": cluster})
}

/// [`create_provisioned_cluster`], and the Secret `<name>-kubeconfig` holding the `kubeconfig` of its workload
/// cluster, as CAPI writes it: what CAPOV needs to link a machine to its Node.
pub async fn create_workload_cluster(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    labels: Value,
    kubeconfig: &str,
) -> Result<(), HarnessError> {
    apply_secret(
        client,
        namespace,
        &format!("{name}-kubeconfig"),
        &[("value", kubeconfig)],
    )
    .await?;
    create_provisioned_cluster(client, namespace, name, labels).await
}

/// The Secret `<cluster>-kubeconfig` holding the workload cluster's `kubeconfig`, as a control-plane provider writes
/// it: how CAPI core and CAPOV reach the workload cluster.
pub async fn apply_kubeconfig_secret(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    kubeconfig: &str,
) -> Result<(), HarnessError> {
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{cluster}-kubeconfig"), "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "type": "cluster.x-k8s.io/secret",
        "stringData": {"value": kubeconfig}
    });
    apply(client, &secrets(), Some(namespace), secret).await
}

/// A Cluster left to CAPI core (no status written here) whose infrastructure is the OVirtCluster of the same
/// name, the control plane at `endpoint` (host, port), and its `<name>-kubeconfig` Secret holding `kubeconfig`, so
/// that CAPI reaches the workload cluster. Without a controlPlaneRef: the machines are workers only.
pub async fn create_capi_managed_cluster(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    endpoint: (&str, u16),
    kubeconfig: &str,
) -> Result<(), HarnessError> {
    let endpoint = json!({"host": endpoint.0, "port": endpoint.1});
    apply_kubeconfig_secret(client, namespace, name, kubeconfig).await?;
    let ovirt_cluster = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtCluster",
        "metadata": {"name": name}, "spec": {"controlPlaneEndpoint": endpoint}
    });
    apply(
        client,
        &capov("OVirtCluster", "ovirtclusters"),
        Some(namespace),
        ovirt_cluster,
    )
    .await?;
    let cluster = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {
            "controlPlaneEndpoint": endpoint,
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "OVirtCluster", "name": name}
        }
    });
    apply(client, &capi("Cluster", "clusters"), Some(namespace), cluster).await
}

/// An OVirtMachineTemplate whose machines get `spec`.
pub async fn apply_machine_template(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    spec: Value,
) -> Result<(), HarnessError> {
    let body = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachineTemplate",
        "metadata": {"name": name}, "spec": {"template": {"spec": spec}}
    });
    apply(
        client,
        &capov("OVirtMachineTemplate", "ovirtmachinetemplates"),
        Some(namespace),
        body,
    )
    .await
}

/// A MachineDeployment of `cluster` with `replicas` machines made from the OVirtMachineTemplate `template`, their
/// bootstrap data taken from the prepared Secret `bootstrap_secret` (no bootstrap provider involved).
pub async fn apply_machine_deployment(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    cluster: &str,
    replicas: u32,
    template: &str,
    bootstrap_secret: &str,
) -> Result<(), HarnessError> {
    let body = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "spec": {
            "clusterName": cluster,
            "replicas": replicas,
            "selector": {"matchLabels": {"capov.test/pool": name}},
            "template": {
                "metadata": {"labels": {"capov.test/pool": name}},
                "spec": {
                    "clusterName": cluster,
                    "version": "v1.36.3",
                    "bootstrap": {"dataSecretName": bootstrap_secret},
                    "infrastructureRef": {
                        "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "OVirtMachineTemplate", "name": template
                    }
                }
            }
        }
    });
    apply(
        client,
        &capi("MachineDeployment", "machinedeployments"),
        Some(namespace),
        body,
    )
    .await
}

/// A MachineHealthCheck of `cluster` over the Machines carrying `selector` (a `matchLabels` map): a Machine whose
/// Node reports `Ready=False` for longer than `not_ready_seconds` is unhealthy, and CAPI remediates it (its owner,
/// a MachineSet, deletes it and makes a new one).
pub async fn apply_machine_health_check(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    cluster: &str,
    selector: Value,
    not_ready_seconds: u32,
) -> Result<(), HarnessError> {
    let body = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck",
        "metadata": {"name": name},
        "spec": {
            "clusterName": cluster,
            "selector": {"matchLabels": selector},
            "checks": {
                "nodeStartupTimeoutSeconds": 600,
                "unhealthyNodeConditions": [{"type": "Ready", "status": "False", "timeoutSeconds": not_ready_seconds}]
            }
        }
    });
    apply(
        client,
        &capi("MachineHealthCheck", "machinehealthchecks"),
        Some(namespace),
        body,
    )
    .await
}

/// A CAPI Machine of `cluster` with cloud-config bootstrap data, and the OVirtMachine it owns with `spec`.
pub async fn create_machine(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    name: &str,
    labels: Value,
    spec: Value,
) -> Result<(), HarnessError> {
    let bootstrap = "#cloud-config\nhostname: test\n";
    create_machine_with_bootstrap(client, namespace, cluster, name, labels, spec, bootstrap).await
}

/// [`create_machine`] with `bootstrap_data` as the bootstrap Secret's `value`. The Secret is written before the
/// Machine and the OVirtMachine, so CAPOV never reads other bootstrap data for this machine.
pub async fn create_machine_with_bootstrap(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    name: &str,
    labels: Value,
    spec: Value,
    bootstrap_data: &str,
) -> Result<(), HarnessError> {
    let machine = MachineSpec { name, labels, spec };
    create_machine_with_bootstrap_format(client, namespace, cluster, machine, bootstrap_data, "cloud-config").await
}

/// A machine to create: its name, labels and OVirtMachine spec.
pub struct MachineSpec<'a> {
    pub name: &'a str,
    pub labels: Value,
    pub spec: Value,
}

/// [`create_machine_with_bootstrap`] with the bootstrap Secret's `format` (`cloud-config` or `ignition`).
pub async fn create_machine_with_bootstrap_format(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    machine: MachineSpec<'_>,
    bootstrap_data: &str,
    format: &str,
) -> Result<(), HarnessError> {
    create_machine_placed(client, namespace, cluster, machine, (bootstrap_data, format), None).await
}

/// [`create_machine`] with the Machine placed in `failure_domain`, as KubeadmControlPlane and MachineDeployments
/// place theirs (`Machine.spec.failureDomain`).
pub async fn create_machine_in_failure_domain(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    machine: MachineSpec<'_>,
    failure_domain: &str,
) -> Result<(), HarnessError> {
    let bootstrap = ("#cloud-config\nhostname: test\n", "cloud-config");
    create_machine_placed(client, namespace, cluster, machine, bootstrap, Some(failure_domain)).await
}

async fn create_machine_placed(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    machine: MachineSpec<'_>,
    (bootstrap_data, format): (&str, &str),
    failure_domain: Option<&str>,
) -> Result<(), HarnessError> {
    let MachineSpec { name, labels, spec } = machine;
    let bootstrap = format!("{name}-bootstrap");
    apply_secret(
        client,
        namespace,
        &bootstrap,
        &[("value", bootstrap_data), ("format", format)],
    )
    .await?;
    let machines: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &capi("Machine", "machines"));
    let mut body = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "clusterName": cluster,
            "bootstrap": {"dataSecretName": bootstrap},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "OVirtMachine", "name": name}
        }
    });
    if let Some(domain) = failure_domain {
        body["spec"]["failureDomain"] = json!(domain);
    }
    let machine: DynamicObject = serde_json::from_value(body).map_err(|err| HarnessError::Kube(err.to_string()))?;
    let created = machines
        .create(&PostParams::default(), &machine)
        .await
        .map_err(kube_error)?;
    let uid = created.metadata.uid.unwrap_or_default();
    let body = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachine",
        "metadata": {
            "name": name, "labels": labels,
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": name, "uid": uid,
                                 "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": spec
    });
    apply(client, &capov("OVirtMachine", "ovirtmachines"), Some(namespace), body).await
}

/// Registers a Node in a workload cluster the way the VM's kubelet would: `systemUUID` is the VM id.
pub async fn register_node(workload: &kube::Client, name: &str, system_uuid: &str) -> Result<(), HarnessError> {
    let nodes = node_api(workload);
    if nodes.get_opt(name).await.map_err(kube_error)?.is_none() {
        let node: DynamicObject =
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}))
                .map_err(|err| HarnessError::Kube(err.to_string()))?;
        nodes.create(&PostParams::default(), &node).await.map_err(kube_error)?;
    }
    let now = rfc3339_now();
    let status = json!({"status": {
        "nodeInfo": {
            "systemUUID": system_uuid, "machineID": system_uuid, "bootID": "boot", "kernelVersion": "6.6",
            "osImage": "rhcos", "containerRuntimeVersion": "cri-o", "kubeletVersion": "v1.36.3", "kubeProxyVersion": "",
            "operatingSystem": "linux", "architecture": "amd64"},
        // What a healthy kubelet reports; CAPI counts a Machine available only then.
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
             "lastHeartbeatTime": now, "lastTransitionTime": now},
            {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
             "lastHeartbeatTime": now, "lastTransitionTime": now},
            {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure",
             "lastHeartbeatTime": now, "lastTransitionTime": now},
            {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID",
             "lastHeartbeatTime": now, "lastTransitionTime": now}
        ]
    }});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(kube_error)?;
    Ok(())
}

/// Sets the Node's `Ready` condition to `False` as a kubelet that lost its container runtime reports it (the
/// transition time now): what a MachineHealthCheck's `Ready=False` check looks for. [`crate::play_kubelets`]
/// registers each Node once and never writes its conditions again, so the Node stays so until it is deleted.
pub async fn mark_node_not_ready(workload: &kube::Client, name: &str) -> Result<(), HarnessError> {
    let now = rfc3339_now();
    let status = json!({"status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "KubeletNotReady",
         "message": "container runtime is down", "lastHeartbeatTime": now, "lastTransitionTime": now}
    ]}});
    node_api(workload)
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&status))
        .await
        .map_err(kube_error)?;
    Ok(())
}

fn node_api(client: &kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Node"), "nodes");
    Api::all_with(client.clone(), &resource)
}

/// Now as RFC 3339 (UTC, second precision), as the apiserver stores times.
fn rfc3339_now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Whether the kubelet reports `pod` Ready (its readiness probe passed).
pub fn pod_ready(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A CAPI-managed cluster as the clusterctl e2e tests build it: the Cluster (its API at `workload_port` on loopback,
/// `workload_kubeconfig` as its kubeconfig Secret), a control-plane Machine `control_plane` and a MachineDeployment
/// `deployment` of `workers` machines from the OVirtMachineTemplate `workers`, both of `machine_spec`; the workers
/// boot the cloud-config in the Secret `bootstrap_secret`.
pub struct TestCluster<'a> {
    pub name: &'a str,
    pub control_plane: &'a str,
    pub deployment: &'a str,
    pub bootstrap_secret: &'a str,
    pub workers: u32,
    pub machine_spec: Value,
}

pub async fn create_test_cluster(
    client: &kube::Client,
    namespace: &str,
    (workload_port, workload_kubeconfig): (u16, &str),
    cluster: &TestCluster<'_>,
) -> Result<(), HarnessError> {
    let name = cluster.name;
    create_capi_managed_cluster(
        client,
        namespace,
        name,
        ("127.0.0.1", workload_port),
        workload_kubeconfig,
    )
    .await?;
    let data = [
        ("value", "#cloud-config\nhostname: worker\n"),
        ("format", "cloud-config"),
    ];
    apply_secret(client, namespace, cluster.bootstrap_secret, &data).await?;
    let labels = json!({"cluster.x-k8s.io/cluster-name": name, "cluster.x-k8s.io/control-plane": ""});
    create_machine(
        client,
        namespace,
        name,
        cluster.control_plane,
        labels,
        cluster.machine_spec.clone(),
    )
    .await?;
    apply_machine_template(client, namespace, "workers", cluster.machine_spec.clone()).await?;
    apply_machine_deployment(
        client,
        namespace,
        cluster.deployment,
        name,
        cluster.workers,
        "workers",
        cluster.bootstrap_secret,
    )
    .await?;
    Ok(())
}
