//! What the lifecycle tests share: an engine simulator, a workload cluster, the CAPI objects a machine needs, and
//! the CAPOV runtime under test, all scoped to one test namespace (used as the watch filter too) so tests that
//! share the control plane stay independent.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine as _;
use capov_actors::feature_gates::FeatureGates;
use capov_actors::runtime::{self, RuntimeSettings, SupervisorMsg};
use capov_crds::{OVirtMachine, OVirtProvider};
use capov_harness::{ControlPlane, Options, shared};
use capov_ovirt_sim::{SimulatorHandle, Timings};
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use ractor::ActorRef;
use serde_json::{Value, json};

pub struct World {
    pub client: kube::Client,
    pub namespace: String,
    pub sim: SimulatorHandle,
    pub workload: ControlPlane,
    pub provider: String,
    pub cluster: String,
    pub operator: Option<ActorRef<SupervisorMsg>>,
}

pub fn capi(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", kind), plural)
}

impl World {
    /// A namespace with a provider (its Secret, trusting the simulator's CA), a provisioned CAPI Cluster with its
    /// OVirtCluster, and a workload cluster whose kubeconfig Secret is in place. The runtime is not started yet.
    pub async fn new(prefix: &str) -> World {
        let plane = shared().await;
        let client = plane.client().await.expect("client");
        let namespace = plane.create_namespace(&client, prefix).await.expect("namespace");
        let sim = capov_ovirt_sim::Simulator::builder()
            .timings(Timings {
                boot_ms: 1500,
                ..Timings::fast()
            })
            .start()
            .await
            .expect("simulator");
        let workload = ControlPlane::start(Options::default()).await.expect("workload cluster");
        let world = World {
            client,
            provider: format!("{namespace}-engine"),
            cluster: "workload".into(),
            namespace,
            sim,
            workload,
            operator: None,
        };
        world
            .create_secret(
                "engine-credentials",
                &[("username", "admin@internal"), ("password", "admin")],
            )
            .await;
        let ca = base64::engine::general_purpose::STANDARD.encode(world.sim.ca_pem().expect("https simulator"));
        world
            .apply_provider(json!({"engine": world.sim.api_url(), "credentialsSecretName": "engine-credentials", "tls": {"certs": ca}}))
            .await;
        let kubeconfig = world.workload.kubeconfig_yaml().expect("kubeconfig");
        world
            .create_secret(&format!("{}-kubeconfig", world.cluster), &[("value", &kubeconfig)])
            .await;
        world.create_capi_cluster().await;
        world
    }

    pub fn settings(&self) -> RuntimeSettings {
        RuntimeSettings {
            credentials_namespace: self.namespace.clone(),
            watch_namespace: Some(self.namespace.clone()),
            watch_filter: Some(self.namespace.clone()),
            poll_interval: Duration::from_millis(200),
            ..RuntimeSettings::default()
        }
    }

    pub async fn start_operator(&mut self) {
        self.start_operator_with_gates(FeatureGates::default()).await;
    }

    pub async fn start_operator_with_gates(&mut self, gates: FeatureGates) {
        let settings = RuntimeSettings {
            gates,
            ..self.settings()
        };
        self.operator = Some(runtime::start(self.client.clone(), settings).await.expect("runtime"));
    }

    pub async fn stop_operator(&mut self) {
        if let Some(operator) = self.operator.take() {
            operator
                .stop_and_wait(None, Some(Duration::from_secs(10)))
                .await
                .expect("stop");
        }
    }

    fn labels(&self) -> Value {
        json!({"cluster.x-k8s.io/watch-filter": self.namespace, "cluster.x-k8s.io/cluster-name": self.cluster})
    }

    pub async fn create_secret(&self, name: &str, pairs: &[(&str, &str)]) {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let data: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let secret: Secret =
            serde_json::from_value(json!({"metadata": {"name": name}, "stringData": data})).expect("secret");
        secrets
            .patch(name, &PatchParams::apply("test").force(), &Patch::Apply(&secret))
            .await
            .expect("secret");
    }

    pub async fn apply_provider(&self, spec: Value) {
        let providers: Api<OVirtProvider> = Api::all(self.client.clone());
        let body = json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtProvider",
            "metadata": {"name": self.provider, "labels": {"cluster.x-k8s.io/watch-filter": self.namespace}},
            "spec": spec
        });
        providers
            .patch(
                &self.provider,
                &PatchParams::apply("test").force(),
                &Patch::Apply(&body),
            )
            .await
            .expect("provider");
    }

    async fn create_capi_cluster(&self) {
        let clusters: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &self.namespace, &capi("Cluster", "clusters"));
        let body = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": self.cluster, "labels": self.labels()},
            "spec": {"controlPlaneEndpoint": {"host": "10.0.1.100", "port": 6443}}
        });
        clusters
            .patch(&self.cluster, &PatchParams::apply("test").force(), &Patch::Apply(&body))
            .await
            .expect("cluster");
        let status = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": self.cluster},
            "status": {"initialization": {"infrastructureProvisioned": true}}
        });
        clusters
            .patch_status(
                &self.cluster,
                &PatchParams::apply("test").force(),
                &Patch::Apply(&status),
            )
            .await
            .expect("cluster status");
        let ovirt_clusters: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &ApiResource::erase::<capov_crds::OVirtCluster>(&()),
        );
        let body = json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtCluster",
            "metadata": {"name": self.cluster, "labels": self.labels()},
            "spec": {"controlPlaneEndpoint": {"host": "10.0.1.100", "port": 6443}}
        });
        ovirt_clusters
            .patch(&self.cluster, &PatchParams::apply("test").force(), &Patch::Apply(&body))
            .await
            .expect("ovirtcluster");
    }

    /// A CAPI Machine with its bootstrap Secret and the OVirtMachine it owns, as CAPI core would create them.
    pub async fn create_machine(&self, name: &str, spec: Value) {
        self.create_secret(
            &format!("{name}-bootstrap"),
            &[("value", "#cloud-config\nhostname: test\n"), ("format", "cloud-config")],
        )
        .await;
        let machines: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &self.namespace, &capi("Machine", "machines"));
        let body = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name, "labels": self.labels()},
            "spec": {
                "clusterName": self.cluster,
                "bootstrap": {"dataSecretName": format!("{name}-bootstrap")},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "OVirtMachine", "name": name}
            }
        });
        let machine = machines
            .create(&PostParams::default(), &serde_json::from_value(body).expect("machine"))
            .await
            .expect("machine");
        let uid = machine.metadata.uid.expect("uid");
        let mut spec = spec;
        spec["provider"] = json!(self.provider);
        let ovirt_machines: Api<OVirtMachine> = Api::namespaced(self.client.clone(), &self.namespace);
        let body = json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachine",
            "metadata": {
                "name": name, "labels": self.labels(),
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": name, "uid": uid,
                                     "controller": true, "blockOwnerDeletion": true}]
            },
            "spec": spec
        });
        ovirt_machines
            .create(
                &PostParams::default(),
                &serde_json::from_value(body).expect("ovirtmachine"),
            )
            .await
            .expect("ovirtmachine");
    }

    pub async fn machine(&self, name: &str) -> OVirtMachine {
        Api::<OVirtMachine>::namespaced(self.client.clone(), &self.namespace)
            .get(name)
            .await
            .expect("get machine")
    }

    /// Registers a Node in the workload cluster the way a kubelet of that VM would.
    pub async fn register_node(&self, name: &str, system_uuid: &str) {
        let client = self.workload.client().await.expect("workload client");
        let nodes: Api<Node> = Api::all(client.clone());
        let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).expect("node");
        nodes.create(&PostParams::default(), &node).await.expect("node");
        let status = json!({"status": {"nodeInfo": {
            "systemUUID": system_uuid, "machineID": "m", "bootID": "b", "kernelVersion": "6", "osImage": "rhcos",
            "containerRuntimeVersion": "cri-o", "kubeletVersion": "v1.36.3", "kubeProxyVersion": "",
            "operatingSystem": "linux", "architecture": "amd64"}}});
        nodes
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("node status");
    }

    pub async fn node_provider_id(&self, name: &str) -> Option<String> {
        let client = self.workload.client().await.expect("workload client");
        let node = Api::<Node>::all(client).get(name).await.expect("node");
        node.spec.and_then(|spec| spec.provider_id)
    }
}

/// Polls `check` until it returns Some, failing with `what` after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn condition<'a>(machine: &'a OVirtMachine, type_: &str) -> Option<&'a capov_crds::Condition> {
    machine.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)
}
