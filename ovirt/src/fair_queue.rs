//! A queue that is fair between tenants: waiters are grouped by class (0 the most urgent) and, within a class, by
//! tenant; `pop` takes the most urgent class that has waiters and in it the tenants in turn, each tenant's own
//! waiters first come, first served. One tenant's thousand waiters therefore delay another tenant's single waiter
//! by at most one turn, instead of a thousand.
//!
//! Used for the engine's rate limit (`limiter.rs`: one queue per engine connection, tenants are CAPI Clusters) and
//! the operator's reconcile permits.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// A tenant's name (a CAPI Cluster as `namespace/name`, or a provider's own work).
pub type Tenant = Arc<str>;

pub struct FairQueue<W> {
    classes: Vec<Class<W>>,
}

struct Class<W> {
    /// The tenants with waiters in this class, in the order they get their next turn.
    turns: VecDeque<Tenant>,
    waiting: HashMap<Tenant, VecDeque<W>>,
}

impl<W> Default for Class<W> {
    fn default() -> Self {
        Class {
            turns: VecDeque::new(),
            waiting: HashMap::new(),
        }
    }
}

impl<W> FairQueue<W> {
    /// A queue with `classes` classes (at least one).
    pub fn new(classes: usize) -> FairQueue<W> {
        FairQueue {
            classes: (0..classes.max(1)).map(|_| Class::default()).collect(),
        }
    }

    /// Queues `waiter` of `tenant` in `class` (a class past the last counts as the last).
    pub fn push(&mut self, class: usize, tenant: &Tenant, waiter: W) {
        let last = self.classes.len() - 1;
        let class = &mut self.classes[class.min(last)];
        match class.waiting.get_mut(tenant) {
            Some(queue) => queue.push_back(waiter),
            None => {
                class.waiting.insert(tenant.clone(), VecDeque::from([waiter]));
                class.turns.push_back(tenant.clone());
            }
        }
    }

    /// The next waiter: the most urgent class with waiters, the tenant whose turn it is there.
    pub fn pop(&mut self) -> Option<(Tenant, W)> {
        for class in &mut self.classes {
            let Some(tenant) = class.turns.pop_front() else {
                continue;
            };
            let queue = class.waiting.get_mut(&tenant)?;
            let waiter = queue.pop_front()?;
            if queue.is_empty() {
                class.waiting.remove(&tenant);
            } else {
                class.turns.push_back(tenant.clone());
            }
            return Some((tenant, waiter));
        }
        None
    }

    /// Drops the waiters `keep` says no to (e.g. whose callers went away), keeping everyone's place.
    pub fn retain(&mut self, mut keep: impl FnMut(&W) -> bool) {
        for class in &mut self.classes {
            class.waiting.retain(|_, queue| {
                queue.retain(&mut keep);
                !queue.is_empty()
            });
            let waiting = &class.waiting;
            class.turns.retain(|tenant| waiting.contains_key(tenant));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.classes.iter().all(|class| class.turns.is_empty())
    }

    pub fn len(&self) -> usize {
        self.classes
            .iter()
            .flat_map(|class| class.waiting.values())
            .map(VecDeque::len)
            .sum()
    }

    /// Waiters of one tenant, all classes together.
    pub fn depth(&self, tenant: &Tenant) -> usize {
        self.classes
            .iter()
            .filter_map(|class| class.waiting.get(tenant))
            .map(VecDeque::len)
            .sum()
    }

    /// Waiters per tenant, all classes together.
    pub fn depths(&self) -> HashMap<Tenant, usize> {
        let mut depths: HashMap<Tenant, usize> = HashMap::new();
        for class in &self.classes {
            for (tenant, queue) in &class.waiting {
                *depths.entry(tenant.clone()).or_default() += queue.len();
            }
        }
        depths
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(name: &str) -> Tenant {
        Arc::from(name)
    }

    fn drain(queue: &mut FairQueue<&'static str>) -> Vec<&'static str> {
        std::iter::from_fn(|| queue.pop().map(|(_, waiter)| waiter)).collect()
    }

    #[test]
    fn tenants_take_turns_whatever_their_queue_length() {
        let mut queue = FairQueue::new(1);
        let (big, small) = (tenant("ns/big"), tenant("ns/small"));
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
    fn a_more_urgent_class_goes_first() {
        let mut queue = FairQueue::new(3);
        let (big, small) = (tenant("ns/big"), tenant("ns/small"));
        queue.push(2, &big, "new worker");
        queue.push(1, &big, "worker with a VM");
        queue.push(0, &small, "control plane");
        queue.push(9, &small, "past the last class");
        assert_eq!(
            drain(&mut queue),
            ["control plane", "worker with a VM", "new worker", "past the last class"]
        );
    }

    #[test]
    fn a_tenant_that_comes_back_waits_for_its_turn() {
        let mut queue = FairQueue::new(1);
        let (a, b) = (tenant("a"), tenant("b"));
        queue.push(0, &a, "a1");
        queue.push(0, &b, "b1");
        assert_eq!(queue.pop().map(|(_, w)| w), Some("a1"));
        queue.push(0, &a, "a2");
        assert_eq!(drain(&mut queue), ["b1", "a2"]);
    }

    #[test]
    fn retain_drops_waiters_and_their_empty_turns() {
        let mut queue = FairQueue::new(2);
        let (a, b) = (tenant("a"), tenant("b"));
        queue.push(0, &a, "a1");
        queue.push(1, &a, "a2");
        queue.push(1, &b, "b1");
        queue.retain(|waiter| *waiter != "a2" && *waiter != "b1");
        assert_eq!(queue.len(), 1);
        assert_eq!(drain(&mut queue), ["a1"]);
        assert!(queue.is_empty());
    }
}
