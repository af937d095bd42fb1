//! An engine simulator and the OVirtProvider that points CAPOV at it, set up as a user does: the Secret with the
//! engine credentials, and the provider reading it and trusting the simulator's CA.

use std::collections::BTreeSet;
use std::time::Duration;

use base64::Engine as _;
use capov_ovirt_sim::{Control, SimulatorBuilder, SimulatorHandle};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::HarnessError;
use crate::objects;

/// The Secret a provider of [`ProviderSpec::for_simulator`] reads its credentials from.
pub const CREDENTIALS_SECRET: &str = "engine-credentials";

/// A simulator's user with the administrative role, there unless the simulator is given users of its own.
pub const ADMIN_USER: &str = "admin@internal";
pub const ADMIN_PASSWORD: &str = "admin";

/// An OVirtProvider and the Secret holding its engine credentials.
pub struct ProviderSpec<'a> {
    pub name: String,
    /// Where the Secret is; also the provider's `cluster.x-k8s.io/watch-filter` label.
    pub namespace: &'a str,
    pub secret: String,
    /// The engine's API URL (`spec.engine`).
    pub engine: String,
    pub user: &'a str,
    pub password: &'a str,
    /// `spec.tls`, when there is one.
    pub tls: Option<Value>,
}

impl<'a> ProviderSpec<'a> {
    /// The provider `<namespace>-engine` of `sim`, logging in as its admin with the credentials of the Secret
    /// [`CREDENTIALS_SECRET`], and trusting its CA when it serves HTTPS.
    pub fn for_simulator(namespace: &'a str, sim: &SimulatorHandle) -> ProviderSpec<'a> {
        ProviderSpec {
            name: format!("{namespace}-engine"),
            namespace,
            secret: CREDENTIALS_SECRET.to_string(),
            engine: sim.api_url(),
            user: ADMIN_USER,
            password: ADMIN_PASSWORD,
            tls: sim.ca_pem().map(trusting),
        }
    }

    /// Writes the Secret, then the provider.
    pub async fn apply(&self, client: &kube::Client) -> Result<(), HarnessError> {
        let credentials = [("username", self.user), ("password", self.password)];
        objects::apply_secret(client, self.namespace, &self.secret, &credentials).await?;
        let mut spec = json!({"engine": self.engine, "credentialsSecretName": self.secret});
        if let Some(tls) = &self.tls {
            spec["tls"] = tls.clone();
        }
        let labels = json!({"cluster.x-k8s.io/watch-filter": self.namespace});
        objects::apply_provider(client, &self.name, labels, spec).await
    }
}

/// `spec.tls` trusting exactly the CA certificate `ca_pem`.
pub fn trusting(ca_pem: &str) -> Value {
    json!({"certs": base64::engine::general_purpose::STANDARD.encode(ca_pem)})
}

/// A running simulator and the provider of [`ProviderSpec::for_simulator`] pointing at it.
pub struct Engine {
    pub sim: SimulatorHandle,
    pub provider: String,
}

impl Engine {
    /// Starts `simulator` and sets up its provider in `namespace`, logging in as the simulator's default admin.
    pub async fn start(
        client: &kube::Client,
        namespace: &str,
        simulator: SimulatorBuilder,
    ) -> Result<Engine, HarnessError> {
        Engine::start_as(client, namespace, simulator, ADMIN_USER, ADMIN_PASSWORD).await
    }

    /// [`Engine::start`] with `user` and `password` in the Secret (whether the simulator knows them is the test's
    /// business).
    pub async fn start_as(
        client: &kube::Client,
        namespace: &str,
        simulator: SimulatorBuilder,
        user: &str,
        password: &str,
    ) -> Result<Engine, HarnessError> {
        let sim = simulator
            .start()
            .await
            .map_err(|err| HarnessError::Simulator(err.to_string()))?;
        let provider = ProviderSpec {
            user,
            password,
            ..ProviderSpec::for_simulator(namespace, &sim)
        };
        provider.apply(client).await?;
        Ok(Engine {
            provider: provider.name,
            sim,
        })
    }
}

/// Plays the kubelet of every VM of the engine `control` drives, until aborted: once a VM is up, registers its Node
/// in the `workload` cluster, named like the VM, its systemUUID the VM id. Each VM's Node is written once: a later
/// change of its conditions (e.g. [`objects::mark_node_not_ready`]) stays, as when a kubelet stops reporting.
pub fn play_kubelets(control: Control, workload: kube::Client) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut registered = BTreeSet::new();
        loop {
            for vm in control.vms() {
                if vm.status == "up"
                    && !registered.contains(&vm.id)
                    && objects::register_node(&workload, &vm.name, &vm.id).await.is_ok()
                {
                    registered.insert(vm.id);
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
}
