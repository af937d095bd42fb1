//! Whose turn a machine's work takes: at the reconcile permits (`runtime/permits.rs`) and at its provider's engine
//! rate limit (`capov_ovirt::Lane`). Work is shared fairly between namespaces (the tenants), within a namespace's
//! share between its CAPI Clusters, and within a cluster's share deletions and control-plane machines go first (a
//! cluster's control plane or a remediation must not wait behind its own batch of workers). Among a cluster's
//! workers a machine that has a VM, or whose provisioning began, goes before one not begun, so that a batch finishes
//! machines as it goes: also when failing or hung management-cluster requests cut passes short (each cut pass queues
//! again, and behind thousands of untouched machines a batch would go breadth-first, one step per machine per round).
//!
//! Everything the class is decided from can be written by the tenant (its finalizers, its Machines' owner references,
//! the clusters it names), so the class orders only the tenant's own work: a namespace gets one turn in each round
//! whatever it labels, however many clusters it names (docs/decisions.md, "A fair share no tenant can game").

use capov_ovirt::{Lane, Tenant};

/// How urgent a machine's work is within its cluster's share; the queues serve a more urgent class first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Being deleted, or a control-plane machine (its CAPI Machine is controlled by a control-plane object); or a
    /// worker holding a place at the Node step (few at a time).
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
    /// Its namespace and cluster (the cluster empty when the machine names none).
    pub tenant: Tenant,
    pub class: Class,
}

/// What a machine's share is decided from.
pub struct MachineFacts<'a> {
    pub namespace: &'a str,
    /// The CAPI Cluster: the OVirtMachine's `cluster.x-k8s.io/cluster-name` label, else its Machine's
    /// `spec.clusterName`.
    pub cluster: Option<&'a str>,
    /// Its CAPI Machine's controller is a control-plane object (`capi::machine_controlled_by_control_plane`), as a
    /// control-plane provider such as KubeadmControlPlane sets it.
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
        tenant: Tenant::cluster(facts.namespace, facts.cluster.unwrap_or_default()),
        class,
    }
}

impl Share {
    /// The machine's turn at its provider's engine rate limit: its cluster's, urgent within it or not.
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
    use capov_ovirt::FairQueue;

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
    fn the_tenant_is_the_namespace_and_its_cluster() {
        let tenant = share(&facts(false, false, false)).tenant;
        assert_eq!((tenant.namespace(), tenant.name()), (Some("tenant-a"), "tenant-a/prod"));
        let unnamed = MachineFacts {
            cluster: None,
            ..facts(false, false, false)
        };
        assert_eq!(share(&unnamed).tenant.name(), "tenant-a/");
    }

    #[test]
    fn only_urgent_machines_take_the_urgent_engine_lane() {
        let lane = share(&facts(true, false, false)).lane();
        assert!(lane.urgent);
        assert_eq!(lane.tenant, Tenant::cluster("tenant-a", "prod"));
        assert!(!share(&facts(false, false, true)).lane().urgent);
    }

    /// Issue #35, item 2: a namespace whose 100 clusters' machines all count as urgent (control planes, begun) gets
    /// as many turns at the permits as another namespace's one cluster of new workers, and that one's first waits one
    /// turn.
    #[test]
    fn urgent_machines_over_a_hundred_clusters_get_one_namespaces_share() {
        let mut queue = FairQueue::new(3);
        for cluster in 0..100 {
            let name = format!("c-{cluster}");
            for begun in [false, true] {
                let gamer = share(&MachineFacts {
                    namespace: "gamer",
                    cluster: Some(&name),
                    control_plane: true,
                    deleting: false,
                    has_vm: false,
                    begun,
                    holds_node_place: false,
                });
                queue.push(gamer.class as usize, &gamer.tenant, "gamer");
            }
        }
        for _ in 0..20 {
            let honest = share(&MachineFacts {
                namespace: "honest",
                ..facts(false, false, false)
            });
            assert_eq!(honest.class, Class::New);
            queue.push(honest.class as usize, &honest.tenant, "honest");
        }
        let served: Vec<&str> = (0..40).filter_map(|_| queue.pop().map(|(_, waiter)| waiter)).collect();
        assert_eq!(served[..2], ["gamer", "honest"]);
        assert_eq!(
            served.iter().filter(|waiter| **waiter == "honest").count(),
            20,
            "{served:?}"
        );
    }
}
