//! Whose turn a machine's work takes: at the reconcile permits (`runtime/permits.rs`) and at its provider's engine
//! rate limit (`capov_ovirt::Lane`). Work is shared fairly between CAPI Clusters (tenants), and within that order
//! deletions and control-plane machines go first: a tenant's control plane or a remediation must not wait behind
//! another tenant's batch of workers. Among workers a machine that has a VM, or whose provisioning began, goes
//! before one not begun, so that a batch finishes machines as it goes: also when failing or hung management-cluster
//! requests cut passes short (each cut pass queues again, and behind thousands of untouched machines a batch would
//! go breadth-first, one step per machine per round).

use std::sync::Arc;

use capov_ovirt::{Lane, Tenant};

/// How urgent a machine's work is; the queues serve a more urgent class first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Being deleted, or a control-plane machine; or a worker holding a place at the Node step (few at a time).
    Urgent = 0,
    /// A worker that has a VM (spec.providerID is set, or its actor created one) or whose provisioning began (it
    /// carries CAPOV's finalizer, added by its first step).
    Begun = 1,
    /// A worker without a VM yet.
    New = 2,
}

/// What the fair queues need to know of a machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    /// `namespace/cluster`; `namespace/` when the machine names no cluster.
    pub tenant: Tenant,
    pub class: Class,
}

/// What a machine's share is decided from.
pub struct MachineFacts<'a> {
    pub namespace: &'a str,
    /// The CAPI Cluster: the OVirtMachine's `cluster.x-k8s.io/cluster-name` label, else its Machine's
    /// `spec.clusterName`.
    pub cluster: Option<&'a str>,
    /// The `cluster.x-k8s.io/control-plane` label on the OVirtMachine or its Machine.
    pub control_plane: bool,
    pub deleting: bool,
    pub has_vm: bool,
    /// CAPOV's finalizer is on the OVirtMachine: a pass began to provision it.
    pub begun: bool,
    /// The machine waited for and holds a place at the Node step (`runtime/workload_clients.rs`): its pass needs the
    /// permit only to go on from what it saw, and the place, one of a few, must not sit idle in the queue.
    pub holds_node_place: bool,
}

pub fn share(facts: &MachineFacts<'_>) -> Share {
    let class = if facts.deleting || facts.control_plane || facts.holds_node_place {
        Class::Urgent
    } else if facts.has_vm || facts.begun {
        Class::Begun
    } else {
        Class::New
    };
    Share {
        tenant: Arc::from(format!("{}/{}", facts.namespace, facts.cluster.unwrap_or_default())),
        class,
    }
}

impl Share {
    /// The machine's turn at its provider's engine rate limit: urgent, or the tenant's turn among the workers.
    pub fn lane(&self) -> Lane {
        Lane {
            tenant: self.tenant.clone(),
            urgent: self.class == Class::Urgent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(control_plane: bool, deleting: bool, has_vm: bool) -> MachineFacts<'static> {
        MachineFacts {
            namespace: "tenant-a",
            cluster: Some("prod"),
            control_plane,
            deleting,
            has_vm,
            begun: has_vm,
            holds_node_place: false,
        }
    }

    #[test]
    fn deletions_and_control_planes_are_urgent_then_workers_with_a_vm() {
        assert_eq!(share(&facts(true, false, false)).class, Class::Urgent);
        assert_eq!(share(&facts(false, true, true)).class, Class::Urgent);
        assert_eq!(share(&facts(false, false, true)).class, Class::Begun);
        assert_eq!(share(&facts(false, false, false)).class, Class::New);
        assert!(Class::Urgent < Class::Begun && Class::Begun < Class::New);
    }

    #[test]
    fn a_worker_whose_provisioning_began_goes_before_untouched_ones() {
        let begun = MachineFacts {
            begun: true,
            ..facts(false, false, false)
        };
        assert_eq!(share(&begun).class, Class::Begun);
    }

    #[test]
    fn a_worker_holding_a_place_at_the_node_step_goes_first() {
        let waited = MachineFacts {
            holds_node_place: true,
            ..facts(false, false, true)
        };
        assert_eq!(share(&waited).class, Class::Urgent);
    }

    #[test]
    fn the_tenant_is_the_cluster_within_its_namespace() {
        assert_eq!(&*share(&facts(false, false, false)).tenant, "tenant-a/prod");
        let unnamed = MachineFacts {
            cluster: None,
            ..facts(false, false, false)
        };
        assert_eq!(&*share(&unnamed).tenant, "tenant-a/");
    }

    #[test]
    fn only_urgent_machines_take_the_urgent_engine_lane() {
        let lane = share(&facts(true, false, false)).lane();
        assert!(lane.urgent);
        assert_eq!(&*lane.tenant, "tenant-a/prod");
        assert!(!share(&facts(false, false, true)).lane().urgent);
    }
}
