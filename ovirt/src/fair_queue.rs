//! A queue that is fair between tenants, and a tenant is a namespace: `pop` gives the namespaces with waiters a turn
//! each in order, within a namespace's turn its clusters take turns, and within a cluster's turn its most urgent class
//! (0 the most urgent) goes first, each class first come, first served. One namespace's thousand waiters therefore
//! delay another namespace's single waiter by at most one turn, however many clusters they name and whatever their
//! class: what a tenant writes (labels, clusters, finalizers) only orders its own waiters within its own share. The
//! provider's own waiters ([`Tenant::provider`]: connection checks, the batched searches that serve every tenant)
//! go before every namespace's.
//!
//! Used for the engine's rate limit (`limiter.rs`: one queue per engine connection) and the operator's reconcile
//! permits.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// The name of [`Tenant::provider`] (in metrics, and in [`crate::RequestEvent::tenant`]).
pub const PROVIDER_TENANT: &str = "";

/// Whose a waiter is: a CAPI Cluster within its namespace, or the provider itself.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Tenant {
    /// The namespace whose turn the waiter takes; None for the provider's own work.
    namespace: Option<Arc<str>>,
    /// `namespace/cluster`, or [`PROVIDER_TENANT`].
    name: Arc<str>,
}

impl Tenant {
    /// Cluster `cluster` of namespace `namespace` (the cluster may be empty: the machine names none).
    pub fn cluster(namespace: &str, cluster: &str) -> Tenant {
        Tenant {
            namespace: Some(Arc::from(namespace)),
            name: Arc::from(format!("{namespace}/{cluster}")),
        }
    }

    /// The provider's own work, served before every namespace's.
    pub fn provider() -> Tenant {
        Tenant {
            namespace: None,
            name: Arc::from(PROVIDER_TENANT),
        }
    }

    /// `namespace/cluster`, or [`PROVIDER_TENANT`] for the provider's own work.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace, None for the provider's own work.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }
}

impl std::fmt::Display for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

pub struct FairQueue<W> {
    classes: usize,
    /// The provider's own waiters: before every namespace's.
    provider: Classes<W>,
    /// The namespaces with waiters, in the order they get their next turn.
    turns: VecDeque<Arc<str>>,
    namespaces: HashMap<Arc<str>, Namespace<W>>,
}

/// A namespace's waiters: its clusters take turns within the namespace's turns.
struct Namespace<W> {
    /// The clusters with waiters, in the order they get their next turn.
    turns: VecDeque<Tenant>,
    clusters: HashMap<Tenant, Classes<W>>,
}

impl<W> Default for Namespace<W> {
    fn default() -> Self {
        Namespace {
            turns: VecDeque::new(),
            clusters: HashMap::new(),
        }
    }
}

/// One tenant's waiters by class, each first come, first served.
struct Classes<W>(Vec<VecDeque<W>>);

/// Which end of its class a waiter joins.
#[derive(Clone, Copy)]
enum End {
    Back,
    Front,
}

impl<W> Classes<W> {
    fn new(classes: usize) -> Classes<W> {
        Classes((0..classes).map(|_| VecDeque::new()).collect())
    }

    /// Queues `waiter` in `class` (or in the last class when past it), last or first of it.
    fn push(&mut self, class: usize, waiter: W, end: End) {
        let last = self.0.len().saturating_sub(1);
        if let Some(queue) = self.0.get_mut(class.min(last)) {
            match end {
                End::Back => queue.push_back(waiter),
                End::Front => queue.push_front(waiter),
            }
        }
    }

    /// The first waiter of the most urgent class that has one.
    fn pop(&mut self) -> Option<W> {
        self.0.iter_mut().find_map(VecDeque::pop_front)
    }

    fn retain(&mut self, keep: &mut impl FnMut(&W) -> bool) {
        for queue in &mut self.0 {
            queue.retain(&mut *keep);
        }
    }

    fn len(&self) -> usize {
        self.0.iter().map(VecDeque::len).sum()
    }

    fn is_empty(&self) -> bool {
        self.0.iter().all(VecDeque::is_empty)
    }
}

impl<W> FairQueue<W> {
    /// A queue with `classes` classes (at least one).
    pub fn new(classes: usize) -> FairQueue<W> {
        let classes = classes.max(1);
        FairQueue {
            classes,
            provider: Classes::new(classes),
            turns: VecDeque::new(),
            namespaces: HashMap::new(),
        }
    }

    /// Queues `waiter` of `tenant` in `class` (a class past the last counts as the last), behind the waiters there.
    pub fn push(&mut self, class: usize, tenant: &Tenant, waiter: W) {
        self.push_at(class, tenant, waiter, End::Back);
    }

    /// Queues `waiter` of `tenant` ahead of the other waiters of `class` in `tenant`'s own queue: a waiter served
    /// once that has to come back (a retry) keeps its place. Only `tenant`'s own waiters are passed; when the
    /// namespaces and clusters take their turns is unchanged.
    pub fn push_first(&mut self, class: usize, tenant: &Tenant, waiter: W) {
        self.push_at(class, tenant, waiter, End::Front);
    }

    fn push_at(&mut self, class: usize, tenant: &Tenant, waiter: W, end: End) {
        let class = class.min(self.classes - 1);
        let Some(name) = &tenant.namespace else {
            self.provider.push(class, waiter, end);
            return;
        };
        let namespace = match self.namespaces.get_mut(name) {
            Some(namespace) => namespace,
            None => {
                self.turns.push_back(name.clone());
                self.namespaces.entry(name.clone()).or_default()
            }
        };
        match namespace.clusters.get_mut(tenant) {
            Some(classes) => classes.push(class, waiter, end),
            None => {
                let mut classes = Classes::new(self.classes);
                classes.push(class, waiter, end);
                namespace.clusters.insert(tenant.clone(), classes);
                namespace.turns.push_back(tenant.clone());
            }
        }
    }

    /// The next waiter: the provider's own first; else the namespace whose turn it is, in it the cluster whose turn
    /// it is, and of that cluster's waiters the first of its most urgent class.
    pub fn pop(&mut self) -> Option<(Tenant, W)> {
        if let Some(waiter) = self.provider.pop() {
            return Some((Tenant::provider(), waiter));
        }
        // Every namespace and cluster in a turn has waiters; the loop only skips what would break that.
        while let Some(name) = self.turns.pop_front() {
            let Some(namespace) = self.namespaces.get_mut(&name) else {
                continue;
            };
            let mut served = None;
            while let Some(tenant) = namespace.turns.pop_front() {
                let Some(classes) = namespace.clusters.get_mut(&tenant) else {
                    continue;
                };
                let waiter = classes.pop();
                if classes.is_empty() {
                    namespace.clusters.remove(&tenant);
                } else {
                    namespace.turns.push_back(tenant.clone());
                }
                if let Some(waiter) = waiter {
                    served = Some((tenant, waiter));
                    break;
                }
            }
            if namespace.turns.is_empty() {
                self.namespaces.remove(&name);
            } else {
                self.turns.push_back(name);
            }
            if served.is_some() {
                return served;
            }
        }
        None
    }

    /// Drops the waiters `keep` says no to (e.g. whose callers went away), keeping everyone's place.
    pub fn retain(&mut self, mut keep: impl FnMut(&W) -> bool) {
        self.provider.retain(&mut keep);
        self.namespaces.retain(|_, namespace| {
            namespace.clusters.retain(|_, classes| {
                classes.retain(&mut keep);
                !classes.is_empty()
            });
            let clusters = &namespace.clusters;
            namespace.turns.retain(|tenant| clusters.contains_key(tenant));
            !namespace.turns.is_empty()
        });
        let namespaces = &self.namespaces;
        self.turns.retain(|name| namespaces.contains_key(name));
    }

    pub fn is_empty(&self) -> bool {
        self.provider.is_empty() && self.turns.is_empty()
    }

    pub fn len(&self) -> usize {
        self.provider.len()
            + self
                .namespaces
                .values()
                .flat_map(|namespace| namespace.clusters.values())
                .map(Classes::len)
                .sum::<usize>()
    }

    /// Waiters of one tenant, all classes together.
    pub fn depth(&self, tenant: &Tenant) -> usize {
        match &tenant.namespace {
            None => self.provider.len(),
            Some(name) => self
                .namespaces
                .get(name)
                .and_then(|namespace| namespace.clusters.get(tenant))
                .map_or(0, Classes::len),
        }
    }

    /// Waiters per tenant (a namespace's clusters apart), all classes together.
    pub fn depths(&self) -> HashMap<Tenant, usize> {
        let mut depths: HashMap<Tenant, usize> = self
            .namespaces
            .values()
            .flat_map(|namespace| &namespace.clusters)
            .map(|(tenant, classes)| (tenant.clone(), classes.len()))
            .collect();
        if !self.provider.is_empty() {
            depths.insert(Tenant::provider(), self.provider.len());
        }
        depths
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(queue: &mut FairQueue<&'static str>) -> Vec<&'static str> {
        std::iter::from_fn(|| queue.pop().map(|(_, waiter)| waiter)).collect()
    }

    #[test]
    fn namespaces_take_turns_whatever_their_queue_length() {
        let mut queue = FairQueue::new(1);
        let (big, small) = (Tenant::cluster("big", "c"), Tenant::cluster("small", "c"));
        for waiter in ["b1", "b2", "b3", "b4"] {
            queue.push(0, &big, waiter);
        }
        queue.push(0, &small, "s1");
        queue.push(0, &small, "s2");
        assert_eq!(queue.len(), 6);
        assert_eq!(queue.depths()[&big], 4);
        assert_eq!(queue.depth(&small), 2);
        assert_eq!(drain(&mut queue), ["b1", "s1", "b2", "s2", "b3", "b4"]);
        assert!(queue.is_empty());
    }

    #[test]
    fn a_namespaces_clusters_take_turns_within_its_turns() {
        let mut queue = FairQueue::new(1);
        let (a1, a2, b) = (
            Tenant::cluster("a", "one"),
            Tenant::cluster("a", "two"),
            Tenant::cluster("b", "only"),
        );
        for waiter in ["a1-1", "a1-2"] {
            queue.push(0, &a1, waiter);
        }
        for waiter in ["a2-1", "a2-2"] {
            queue.push(0, &a2, waiter);
        }
        for waiter in ["b-1", "b-2", "b-3", "b-4"] {
            queue.push(0, &b, waiter);
        }
        assert_eq!(queue.depth(&a2), 2);
        assert_eq!(
            drain(&mut queue),
            ["a1-1", "b-1", "a2-1", "b-2", "a1-2", "b-3", "a2-2", "b-4"]
        );
    }

    #[test]
    fn a_waiter_queued_first_passes_only_its_own_clusters_waiters_of_its_class() {
        let mut queue = FairQueue::new(2);
        let (batch, other) = (Tenant::cluster("a", "batch"), Tenant::cluster("b", "other"));
        for waiter in ["a-1", "a-2"] {
            queue.push(1, &batch, waiter);
        }
        queue.push(0, &batch, "a-urgent");
        for waiter in ["b-1", "b-2"] {
            queue.push(1, &other, waiter);
        }
        queue.push_first(1, &batch, "a-retry");
        assert_eq!(queue.depth(&batch), 4);
        assert_eq!(
            drain(&mut queue),
            ["a-urgent", "b-1", "a-retry", "b-2", "a-1", "a-2"],
            "ahead of its cluster's own waiters of its class, behind its more urgent ones; the turns unchanged"
        );
        let lone = Tenant::cluster("c", "lone");
        queue.push_first(1, &lone, "c-retry");
        assert_eq!(
            drain(&mut queue),
            ["c-retry"],
            "a tenant with no waiters gets its turn as with push"
        );
    }

    #[test]
    fn a_class_orders_a_clusters_own_waiters_and_no_one_elses() {
        let mut queue = FairQueue::new(3);
        let (batch, other) = (Tenant::cluster("a", "batch"), Tenant::cluster("b", "other"));
        queue.push(2, &batch, "a new worker");
        queue.push(2, &other, "b new worker");
        queue.push(1, &batch, "a worker with a VM");
        queue.push(0, &batch, "a control plane");
        queue.push(9, &batch, "a past the last class");
        assert_eq!(
            drain(&mut queue),
            [
                "a control plane",
                "b new worker",
                "a worker with a VM",
                "a new worker",
                "a past the last class"
            ]
        );
    }

    #[test]
    fn a_namespace_with_a_hundred_urgent_clusters_gets_no_more_turns_than_one_with_one_cluster() {
        let mut queue = FairQueue::new(3);
        for cluster in 0..100 {
            let tenant = Tenant::cluster("gamer", &format!("c-{cluster}"));
            for _ in 0..3 {
                queue.push(0, &tenant, "gamer");
            }
        }
        let honest = Tenant::cluster("honest", "workers");
        for _ in 0..50 {
            queue.push(2, &honest, "honest");
        }
        let first_hundred: Vec<&str> = (0..100).filter_map(|_| queue.pop().map(|(_, w)| w)).collect();
        let honest_turns = first_hundred.iter().filter(|w| **w == "honest").count();
        assert_eq!(honest_turns, 50, "{first_hundred:?}");
        assert_eq!(first_hundred[..4], ["gamer", "honest", "gamer", "honest"]);
    }

    #[test]
    fn the_providers_own_waiters_go_before_every_namespace() {
        let mut queue = FairQueue::new(2);
        let tenant = Tenant::cluster("a", "c");
        queue.push(0, &tenant, "urgent tenant");
        queue.push(1, &Tenant::provider(), "search");
        queue.push(0, &Tenant::provider(), "check");
        assert_eq!(queue.depth(&Tenant::provider()), 2);
        assert_eq!(queue.depths()[&Tenant::provider()], 2);
        assert_eq!(drain(&mut queue), ["check", "search", "urgent tenant"]);
    }

    #[test]
    fn a_namespace_or_cluster_that_comes_back_waits_for_its_turn() {
        let mut queue = FairQueue::new(1);
        let (a, b, a2) = (
            Tenant::cluster("a", "c"),
            Tenant::cluster("b", "c"),
            Tenant::cluster("a", "d"),
        );
        queue.push(0, &a, "a1");
        queue.push(0, &b, "b1");
        assert_eq!(queue.pop().map(|(_, w)| w), Some("a1"));
        queue.push(0, &a, "a2");
        queue.push(0, &a2, "a-d");
        assert_eq!(drain(&mut queue), ["b1", "a2", "a-d"]);
    }

    #[test]
    fn retain_drops_waiters_and_their_empty_turns() {
        let mut queue = FairQueue::new(2);
        let (a, b, a2) = (
            Tenant::cluster("a", "c"),
            Tenant::cluster("b", "c"),
            Tenant::cluster("a", "d"),
        );
        queue.push(0, &a, "a1");
        queue.push(1, &a, "a2");
        queue.push(1, &b, "b1");
        queue.push(1, &a2, "a-d");
        queue.push(1, &Tenant::provider(), "p");
        queue.retain(|waiter| !matches!(*waiter, "a2" | "b1" | "a-d" | "p"));
        assert_eq!(queue.len(), 1);
        assert!(queue.depths().keys().eq([&a]));
        assert_eq!(drain(&mut queue), ["a1"]);
        assert!(queue.is_empty());
    }

    #[test]
    fn a_tenant_is_its_namespace_and_cluster_and_no_cluster_is_the_provider() {
        let tenant = Tenant::cluster("ns", "c");
        assert_eq!((tenant.name(), tenant.namespace()), ("ns/c", Some("ns")));
        assert_eq!(tenant.to_string(), "ns/c");
        let provider = Tenant::provider();
        assert_eq!((provider.name(), provider.namespace()), (PROVIDER_TENANT, None));
        // A namespace left empty is a tenant's, not the provider's.
        assert_ne!(Tenant::cluster("", ""), provider);
        assert_eq!(Tenant::cluster("", "").namespace(), Some(""));
    }
}
