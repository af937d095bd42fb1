//! Names of the objects the runtime tracks, used as actor names and map keys.

use std::fmt;
use std::sync::Arc;

use capov_crds::{OVirtCluster, OVirtMachine, OVirtMachineTemplate, OVirtProvider};
use kube::api::ApiResource;

/// The CAPOV kinds whose status the runtime writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Provider,
    Cluster,
    Machine,
    MachineTemplate,
}

impl Kind {
    pub fn api_resource(self) -> ApiResource {
        match self {
            Kind::Provider => ApiResource::erase::<OVirtProvider>(&()),
            Kind::Cluster => ApiResource::erase::<OVirtCluster>(&()),
            Kind::Machine => ApiResource::erase::<OVirtMachine>(&()),
            Kind::MachineTemplate => ApiResource::erase::<OVirtMachineTemplate>(&()),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Kind::Provider => "provider",
            Kind::Cluster => "cluster",
            Kind::Machine => "machine",
            Kind::MachineTemplate => "machinetemplate",
        }
    }
}

/// One object: kind, namespace (none for the cluster-scoped OVirtProvider) and name.
///
/// The names are shared (`Arc<str>`): a machine's key is held by its actor, the supervisor, the provider's
/// subscriptions and watches, the placements, the status writer and the timer wheel, and a clone costs a count,
/// not two more heap strings (about 0.5 KB per machine, docs/benchmarks.md).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub kind: Kind,
    pub namespace: Option<Arc<str>>,
    pub name: Arc<str>,
}

impl ObjectKey {
    pub fn provider(name: &str) -> Self {
        ObjectKey {
            kind: Kind::Provider,
            namespace: None,
            name: name.into(),
        }
    }

    pub fn cluster(namespace: &str, name: &str) -> Self {
        ObjectKey {
            kind: Kind::Cluster,
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    pub fn machine(namespace: &str, name: &str) -> Self {
        ObjectKey {
            kind: Kind::Machine,
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    pub fn machine_template(namespace: &str, name: &str) -> Self {
        ObjectKey {
            kind: Kind::MachineTemplate,
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// The namespace; empty for the cluster-scoped OVirtProvider.
    pub fn namespace_str(&self) -> &str {
        self.namespace.as_deref().unwrap_or_default()
    }

    /// The process-wide actor name of this object's actor.
    pub fn actor_name(&self) -> String {
        format!("capov/{self}")
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{}/{}/{}", self.kind.label(), namespace, self.name),
            None => write!(f, "{}/{}", self.kind.label(), self.name),
        }
    }
}
