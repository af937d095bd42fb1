//! What the lifecycle tests share: an engine simulator, a workload cluster, the CAPI objects a machine needs, and
//! the CAPOV runtime under test, all scoped to one test namespace (used as the watch filter too) so tests that
//! share the control plane stay independent.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use capov_actors::metrics::Metrics;
use capov_actors::runtime::{self, RuntimeSettings, SupervisorMsg};
use capov_core::policy::feature_gates::FeatureGates;
use capov_crds::OVirtMachine;
use capov_harness::{ADMIN_PASSWORD, ADMIN_USER, ControlPlane, Engine, Options, objects, shared};
use capov_ovirt_sim::{Simulator, SimulatorHandle, Timings};
use capov_testkit::eventually;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use ractor::ActorRef;
use serde_json::{Value, json};

/// The engine user of [`World::new_non_admin`].
pub const NON_ADMIN_USER: &str = "capov@internal";

pub struct World {
    pub client: kube::Client,
    pub namespace: String,
    pub sim: SimulatorHandle,
    pub workload: ControlPlane,
    pub provider: String,
    pub cluster: String,
    pub operator: Option<ActorRef<SupervisorMsg>>,
    /// What the runtime under test reports (fresh for each World).
    pub metrics: Metrics,
}

impl World {
    /// A namespace with a provider (its Secret, trusting the simulator's CA), a provisioned CAPI Cluster with its
    /// OVirtCluster, and a workload cluster whose kubeconfig Secret is in place. The runtime is not started yet.
    pub async fn new(prefix: &str) -> World {
        Self::with_transport(prefix, Transport::Https).await
    }

    /// Like [`World::new`], with CAPOV connecting as `capov@internal`, an engine user without an administrative role
    /// (every request filtered, admin-only queries refused; docs/engine-permissions.md). `admin@internal`/`admin`
    /// exists beside it.
    pub async fn new_non_admin(prefix: &str) -> World {
        Self::with_options(prefix, Transport::Https, true).await
    }

    /// Like [`World::new`], with a simulator serving plain http and a provider whose engine URL is http://.
    pub async fn new_plain_http(prefix: &str) -> World {
        Self::with_transport(prefix, Transport::PlainHttp).await
    }

    async fn with_transport(prefix: &str, transport: Transport) -> World {
        Self::with_options(prefix, transport, false).await
    }

    async fn with_options(prefix: &str, transport: Transport, non_admin: bool) -> World {
        let plane = shared().await;
        let client = plane.client().await.expect("client");
        let namespace = plane.create_namespace(&client, prefix).await.expect("namespace");
        let mut sim = Simulator::builder()
            // Intermediate states last several poll intervals, so that tests can see them reported.
            .timings(Timings {
                image_locked_ms: 1500,
                boot_ms: 3000,
                ..Timings::fast()
            });
        if transport == Transport::PlainHttp {
            sim = sim.plain_http();
        }
        let (user, password) = if non_admin {
            sim = sim
                .user(ADMIN_USER, ADMIN_PASSWORD)
                .non_admin_user(NON_ADMIN_USER, "capov");
            (NON_ADMIN_USER, "capov")
        } else {
            (ADMIN_USER, ADMIN_PASSWORD)
        };
        let engine = Engine::start_as(&client, &namespace, sim, user, password)
            .await
            .expect("engine");
        let workload = ControlPlane::start(Options::default()).await.expect("workload cluster");
        let world = World {
            client,
            provider: engine.provider,
            cluster: "workload".into(),
            namespace,
            sim: engine.sim,
            workload,
            operator: None,
            metrics: Metrics::new(),
        };
        let kubeconfig = world.workload.kubeconfig_yaml().expect("kubeconfig");
        objects::create_workload_cluster(
            &world.client,
            &world.namespace,
            &world.cluster,
            world.labels(),
            &kubeconfig,
        )
        .await
        .expect("cluster");
        world
    }

    pub fn settings(&self) -> RuntimeSettings {
        RuntimeSettings {
            credentials_namespace: self.namespace.clone(),
            watch_namespace: Some(self.namespace.clone()),
            watch_filter: Some(self.namespace.clone()),
            poll_interval: Duration::from_millis(200),
            // Every step's status written as it happens, so that tests can see the steps; the spacing has its own
            // test (`lifecycle.rs`).
            status_spacing: Duration::ZERO,
            // The workload clusters of the tests run on loopback.
            allow_internal_workload_servers: true,
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
        self.start_operator_with(settings).await;
    }

    pub async fn start_operator_with(&mut self, settings: RuntimeSettings) {
        self.start_operator_with_clients(operator_clients().await, settings)
            .await;
    }

    pub async fn start_operator_with_clients(&mut self, clients: runtime::KubeClients, settings: RuntimeSettings) {
        let operator = runtime::start(clients, settings, self.metrics.clone()).await;
        self.operator = Some(operator.expect("runtime"));
    }

    pub async fn stop_operator(&mut self) {
        if let Some(operator) = self.operator.take() {
            operator
                .stop_and_wait(None, Some(Duration::from_secs(10)))
                .await
                .expect("stop");
        }
    }

    /// The labels of the test's objects: the cluster name and the watch filter the runtime under test honours.
    pub fn labels(&self) -> Value {
        objects::cluster_labels(&self.namespace, &self.cluster)
    }

    pub async fn create_secret(&self, name: &str, pairs: &[(&str, &str)]) {
        objects::apply_secret(&self.client, &self.namespace, name, pairs)
            .await
            .expect("secret");
    }

    pub async fn apply_provider(&self, spec: Value) {
        let labels = json!({"cluster.x-k8s.io/watch-filter": self.namespace});
        objects::apply_provider(&self.client, &self.provider, labels, spec)
            .await
            .expect("provider");
    }

    /// A CAPI Machine with its bootstrap Secret and the OVirtMachine it owns, as CAPI core would create them.
    pub async fn create_machine(&self, name: &str, spec: Value) {
        let mut spec = spec;
        spec["provider"] = json!(self.provider);
        objects::create_machine(&self.client, &self.namespace, &self.cluster, name, self.labels(), spec)
            .await
            .expect("machine");
    }

    /// Machines `names`, each of the default template in cluster Default, created ten at a time as CAPI core does
    /// when scaling up.
    pub async fn create_machines(&self, names: &[String]) {
        futures::stream::iter(names)
            .for_each_concurrent(10, |name| {
                self.create_machine(name, json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}))
            })
            .await;
    }

    /// [`World::create_machine`] with this bootstrap data and `format` (`cloud-config` or `ignition`).
    pub async fn create_machine_with_bootstrap(&self, name: &str, spec: Value, data: &str, format: &str) {
        let mut spec = spec;
        spec["provider"] = json!(self.provider);
        let machine = objects::MachineSpec {
            name,
            labels: self.labels(),
            spec,
        };
        objects::create_machine_with_bootstrap_format(
            &self.client,
            &self.namespace,
            &self.cluster,
            machine,
            data,
            format,
        )
        .await
        .expect("machine");
    }

    pub async fn machine(&self, name: &str) -> OVirtMachine {
        Api::<OVirtMachine>::namespaced(self.client.clone(), &self.namespace)
            .get(name)
            .await
            .expect("get machine")
    }

    /// The id of the machine's VM, waiting up to a minute for CAPOV to record it in spec.providerID.
    pub async fn vm_id(&self, name: &str) -> String {
        eventually(Duration::from_secs(60), format!("{name}: providerID"), || async {
            self.machine(name)
                .await
                .spec
                .provider_id
                .and_then(|p| p.strip_prefix("ovirt://").map(String::from))
        })
        .await
    }

    /// Waits up to `timeout` until condition `type_` of machine `name` has `reason`; returns the machine.
    pub async fn wait_reason(&self, timeout: Duration, name: &str, type_: &str, reason: &str) -> OVirtMachine {
        eventually(timeout, format!("{name}: {type_} {reason}"), || async {
            let machine = self.machine(name).await;
            match condition(&machine, type_) {
                Some(c) if c.reason == reason => {}
                Some(c) => return Err(format!("{type_} {}: {}", c.reason, c.message)),
                None => return Err(format!("no {type_} condition")),
            }
            Ok(machine)
        })
        .await
    }

    /// Creates machine `name`, registers its Node and waits until it is Ready with an InternalIP; returns the VM id.
    pub async fn bring_to_ready(&self, name: &str) -> String {
        self.create_machine(name, json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}))
            .await;
        let vm_id = self.vm_id(name).await;
        self.register_node(&format!("{name}-node"), &vm_id).await;
        eventually(
            Duration::from_secs(60),
            format!("{name}: Ready with an InternalIP"),
            || async {
                let machine = self.machine(name).await;
                let ready = condition(&machine, "Ready").is_some_and(|c| c.status == capov_crds::ConditionStatus::True);
                let has_ip = machine
                    .status
                    .as_ref()
                    .is_some_and(|s| s.addresses.iter().any(|a| a.type_ == "InternalIP"));
                if ready && has_ip {
                    Ok(())
                } else {
                    Err(format!("{:?}", machine.status))
                }
            },
        )
        .await;
        vm_id
    }

    /// Deletes OVirtMachine `name` and waits up to a minute until it is gone (its finalizer released).
    pub async fn delete_machine_and_wait(&self, name: &str) {
        let machines = Api::<OVirtMachine>::namespaced(self.client.clone(), &self.namespace);
        machines
            .delete(name, &Default::default())
            .await
            .expect("delete machine");
        eventually(Duration::from_secs(60), format!("{name}: deleted"), || async {
            match machines.get_opt(name).await.expect("get machine") {
                None => Ok(()),
                // What holds it, for the failure message.
                Some(machine) => Err(format!("{:?}", machine.status.map(|s| s.conditions))),
            }
        })
        .await;
    }

    /// Plays the kubelets: registers the Node `<machine>-node` of every machine whose VM is up, once (`registered`
    /// remembers which, over the looks of a wait). Returns the machines as listed.
    pub async fn register_up_nodes(
        &self,
        workload: &kube::Client,
        registered: &Mutex<BTreeSet<String>>,
    ) -> Vec<OVirtMachine> {
        let machines = Api::<OVirtMachine>::namespaced(self.client.clone(), &self.namespace);
        let list = machines.list(&Default::default()).await.expect("machines");
        let control = self.sim.control();
        for machine in &list.items {
            let name = machine.metadata.name.clone().unwrap_or_default();
            let vm_id = machine
                .spec
                .provider_id
                .as_deref()
                .and_then(|id| id.strip_prefix("ovirt://"));
            let up = vm_id.and_then(|id| control.vm(id)).is_some_and(|vm| vm.status == "up");
            let known = registered.lock().expect("registered Nodes").contains(&name);
            if let (Some(vm_id), true, false) = (vm_id, up, known) {
                objects::register_node(workload, &format!("{name}-node"), vm_id)
                    .await
                    .expect("node");
                registered.lock().expect("registered Nodes").insert(name);
            }
        }
        list.items
    }

    /// Registers a Node in the workload cluster the way a kubelet of that VM would.
    pub async fn register_node(&self, name: &str, system_uuid: &str) {
        let client = self.workload.client().await.expect("workload client");
        objects::register_node(&client, name, system_uuid).await.expect("node");
    }

    pub async fn node_provider_id(&self, name: &str) -> Option<String> {
        let client = self.workload.client().await.expect("workload client");
        let node = Api::<Node>::all(client).get(name).await.expect("node");
        node.spec.and_then(|spec| spec.provider_id)
    }
}

/// The operator's clients for the shared control plane, built as the manager builds them (with its deadlines).
/// The harness's apiserver proxy in front of the shared control plane, passing everything through until told
/// otherwise (`ApiserverProxy::set`).
pub async fn apiserver_proxy() -> capov_harness::ApiserverProxy {
    let plane = shared().await;
    let kubeconfig = plane.kubeconfig_yaml().expect("kubeconfig");
    capov_harness::ApiserverProxy::start(plane.url(), plane.ca_pem(), &kubeconfig, &std::env::temp_dir())
        .await
        .expect("apiserver proxy")
}

pub async fn operator_clients() -> runtime::KubeClients {
    runtime::KubeClients::new(admin_config().await).expect("operator clients")
}

/// [`operator_clients`] whose request client gives up on an answer silent for `read_timeout` (30 s in the
/// manager): a watch run on it by mistake is cut as often, so a short quiet period stands for a long one.
pub async fn operator_clients_with_request_read_timeout(read_timeout: Duration) -> runtime::KubeClients {
    let mut config = runtime::kube::clients::with_timeouts(admin_config().await);
    config.read_timeout = Some(read_timeout);
    let mut clients = operator_clients().await;
    clients.requests = kube::Client::try_from(config).expect("request client");
    clients
}

/// [`operator_clients`] acting as `user` (impersonated, as `kubectl --as`): the API server authorizes every
/// request against that user's RBAC bindings.
pub async fn operator_clients_as(user: &str) -> runtime::KubeClients {
    let mut config = admin_config().await;
    config.auth_info.impersonate = Some(user.to_string());
    runtime::KubeClients::new(config).expect("operator clients")
}

async fn admin_config() -> kube::Config {
    let kubeconfig = kube::config::Kubeconfig::read_from(shared().await.kubeconfig_path()).expect("kubeconfig");
    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("kube config")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Transport {
    Https,
    PlainHttp,
}

/// The Events (events.k8s.io) in `namespace` about the object named `name`; None while the list fails, as
/// [`eventually`] expects. Events of cluster-scoped objects live in the default namespace.
pub async fn events_about(client: &kube::Client, namespace: &str, name: &str) -> Option<Vec<Event>> {
    let listed = Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .ok()?;
    let about = |e: &Event| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name);
    Some(listed.items.into_iter().filter(about).collect())
}

pub fn condition<'a>(machine: &'a OVirtMachine, type_: &str) -> Option<&'a capov_crds::Condition> {
    machine.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)
}

/// The sum of every sample of a metric family whose labels include `labels` (for a histogram, the sample count).
pub fn metric_sum(metrics: &Metrics, name: &str, labels: &[(&str, &str)]) -> f64 {
    use prometheus::proto::MetricType;
    let mut sum = 0.0;
    for family in metrics
        .registry()
        .gather()
        .iter()
        .filter(|family| family.name() == name)
    {
        let kind = family.get_field_type();
        for metric in family.get_metric() {
            let matches = labels.iter().all(|(key, value)| {
                metric
                    .get_label()
                    .iter()
                    .any(|label| label.name() == *key && label.value() == *value)
            });
            if !matches {
                continue;
            }
            sum += match kind {
                MetricType::COUNTER => metric.get_counter().get_value(),
                MetricType::GAUGE => metric.get_gauge().get_value(),
                MetricType::HISTOGRAM => metric.get_histogram().get_sample_count() as f64,
                _ => 0.0,
            };
        }
    }
    sum
}
