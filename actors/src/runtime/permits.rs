//! The `--max-concurrent-reconciles` permits, queued fairly (`crate::fair_share`): the namespaces take turns, within
//! a namespace's turn its CAPI Clusters, and within a cluster's turn its urgent machines (deletions, control planes)
//! go first, then those that have a VM or whose provisioning began, then untouched ones. With a single FIFO queue a
//! large batch goes breadth-first (every VM is created before the first one is started) and another tenant's machine
//! waits behind the whole batch; serving machines with a VM first finishes machines as the batch goes, and the turns
//! keep one tenant's batch, however labelled and over however many clusters, from holding up the others. Machines
//! waiting for their VM to boot hold no permit, so new machines still get permits while earlier ones boot.
//!
//! A machine whose permit is not free at once need not wait for it in a live actor: it leaves a ticket in the queue
//! ([`ReconcilePermits::acquire_or_ticket`]) and rests (`machine::dormant`); its turn hands the permit to the
//! courier, which takes it to the machine (through the supervisor, which wakes it). In a batch of 10,000 most
//! machines wait for a permit at any moment, and an actor costs about 7 KB beside its state.
//!
//! Each cluster's queue depth and wait show in `capov_reconcile_queue_depth` and
//! `capov_reconcile_queue_wait_seconds` (cluster labels bounded: `metrics::QueueMetrics`).
//!
//! A pass whose management-cluster request hangs can hand its permit on and finish its step on a [`Loan`]
//! ([`Permit::lend`]): with 1 % of requests held until their 30 s read timeout, a dozen hung requests would otherwise
//! hold every permit and stop all machines. Loans are capped at [`LOANS_PER_PERMIT`] per permit, so at most that many
//! more passes (and their memory) are alive at once however the apiserver behaves.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use capov_ovirt::{FairQueue, Tenant};
use tokio::sync::oneshot;

use crate::fair_share::Share;
use crate::metrics::QueueMetrics;
use crate::runtime::keys::ObjectKey;

pub struct ReconcilePermits {
    queues: Mutex<Queues>,
    metrics: Option<QueueMetrics>,
    courier: Courier,
}

/// Takes a permit to the machine whose ticket's turn came; gives it back when the machine cannot be reached (the
/// runtime stops), and it goes on to the next waiter.
pub type Courier = Box<dyn Fn(ObjectKey, Permit) -> Result<(), Permit> + Send + Sync>;

/// A place in the queue: a task awaiting its permit, or a machine's ticket.
enum Waiter {
    Task(oneshot::Sender<Permit>),
    Ticket { machine: ObjectKey, asked: Instant },
}

struct Queues {
    free: usize,
    waiting: FairQueue<Waiter>,
    /// Loans out now, and how many may be.
    lent: usize,
    max_lent: usize,
}

/// One permit; dropping it hands it to the next waiter.
pub struct Permit {
    owner: Option<Arc<ReconcilePermits>>,
}

/// Leave for a pass that handed its permit on while a request of its hung, to finish the step it is in; dropping it
/// ends the loan.
pub struct Loan {
    owner: Arc<ReconcilePermits>,
}

/// Loans allowed per permit.
pub const LOANS_PER_PERMIT: usize = 4;

/// The queue's classes, by `Class as usize`.
const CLASSES: usize = 3;

impl ReconcilePermits {
    /// `count` permits; `metrics` receives each cluster's queue depth and wait; `courier` takes the permits of
    /// tickets.
    pub fn new(count: usize, metrics: Option<QueueMetrics>, courier: Courier) -> Arc<Self> {
        Arc::new(Self {
            queues: Mutex::new(Queues {
                free: count,
                waiting: FairQueue::new(CLASSES),
                lent: 0,
                max_lent: count.saturating_mul(LOANS_PER_PERMIT),
            }),
            metrics,
            courier,
        })
    }

    /// A permit when one is free; else a ticket for `machine` queues in `share`'s turn, and the courier takes the
    /// permit to the machine when the turn comes (None now). A `retry` (the machine's last pass failed and it waited
    /// out its backoff) queues ahead of its own cluster's tickets of its class: it was served once already, and
    /// behind a batch it would wait for the whole queue again while its backoff grows.
    pub fn acquire_or_ticket(self: &Arc<Self>, share: &Share, machine: &ObjectKey, retry: bool) -> Option<Permit> {
        let asked = Instant::now();
        let mut queues = self.lock();
        if queues.free > 0 {
            queues.free -= 1;
            drop(queues);
            self.waited(&share.tenant, asked);
            return Some(Permit {
                owner: Some(self.clone()),
            });
        }
        let ticket = Waiter::Ticket {
            machine: machine.clone(),
            asked,
        };
        if retry {
            queues.waiting.push_first(share.class as usize, &share.tenant, ticket);
        } else {
            queues.waiting.push(share.class as usize, &share.tenant, ticket);
        }
        self.depth_changed(&queues, &share.tenant);
        None
    }

    /// Waits for a permit in `share`'s turn. Cancel-safe: a dropped wait gives up its place, and a permit handed to a
    /// wait that was dropped meanwhile goes on to the next one.
    pub async fn acquire(self: &Arc<Self>, share: &Share) -> Permit {
        let asked = Instant::now();
        loop {
            let receiver = {
                let mut queues = self.lock();
                // Permits are handed straight to waiters on release, so a free one means nobody is waiting.
                if queues.free > 0 {
                    queues.free -= 1;
                    drop(queues);
                    self.waited(&share.tenant, asked);
                    return Permit {
                        owner: Some(self.clone()),
                    };
                }
                let (sender, receiver) = oneshot::channel();
                queues
                    .waiting
                    .push(share.class as usize, &share.tenant, Waiter::Task(sender));
                self.depth_changed(&queues, &share.tenant);
                receiver
            };
            // A sender is only dropped unsent when its waiter is gone, which cannot be this one; queue again anyway
            // rather than assume it.
            if let Ok(permit) = receiver.await {
                self.waited(&share.tenant, asked);
                return permit;
            }
        }
    }

    /// How many passes wait for a permit.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    fn release(self: &Arc<Self>) {
        let mut permit = Permit {
            owner: Some(self.clone()),
        };
        loop {
            let next = {
                let mut queues = self.lock();
                let next = queues.waiting.pop();
                match &next {
                    Some((tenant, _)) => self.depth_changed(&queues, tenant),
                    None => {
                        queues.free += 1;
                        permit.owner = None;
                    }
                }
                next
            };
            let Some((tenant, waiter)) = next else { return };
            let handed = match waiter {
                Waiter::Task(sender) => sender.send(permit),
                Waiter::Ticket { machine, asked } => {
                    self.waited(&tenant, asked);
                    (self.courier)(machine, permit)
                }
            };
            match handed {
                Ok(()) => return,
                // That wait was dropped, or the machine cannot be reached: try the next one.
                Err(returned) => permit = returned,
            }
        }
    }

    fn depth_changed(&self, queues: &Queues, tenant: &Tenant) {
        if let Some(metrics) = &self.metrics {
            metrics.reconcile_depth(tenant.name(), queues.waiting.depth(tenant));
        }
    }

    fn waited(&self, tenant: &Tenant, since: Instant) {
        if let Some(metrics) = &self.metrics {
            metrics.reconcile_waited(tenant.name(), since.elapsed());
        }
    }

    /// The queues stay consistent even if a holder panicked: every change is one push, pop or counter step.
    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Permit {
    /// Hands the permit on to the next waiter and returns a loan in its place; the permit back when every loan is
    /// out.
    pub fn lend(mut self) -> Result<Loan, Permit> {
        let Some(owner) = self.owner.clone() else {
            return Err(self);
        };
        {
            let mut queues = owner.lock();
            if queues.lent >= queues.max_lent {
                drop(queues);
                if let Some(metrics) = &owner.metrics {
                    metrics.permit_loan_refused();
                }
                return Err(self);
            }
            queues.lent += 1;
        }
        if let Some(metrics) = &owner.metrics {
            metrics.permit_lent();
        }
        if let Some(owner) = self.owner.take() {
            owner.release();
        }
        Ok(Loan { owner })
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.take() {
            owner.release();
        }
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        let mut queues = self.owner.lock();
        queues.lent = queues.lent.saturating_sub(1);
    }
}

/// A courier that reaches no machine: for permits without tickets.
#[cfg(test)]
pub fn no_courier() -> Courier {
    Box::new(|_, permit| Err(permit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fair_share::Class;

    /// Lets spawned tasks run until `count` of them wait for a permit (current-thread runtime).
    async fn until_waiting(permits: &ReconcilePermits, count: usize) {
        while permits.waiting() < count {
            tokio::task::yield_now().await;
        }
    }

    /// A share of `tenant`, written `namespace/cluster`.
    fn share(tenant: &str, class: Class) -> Share {
        let (namespace, cluster) = tenant.split_once('/').unwrap_or((tenant, ""));
        Share {
            tenant: Tenant::cluster(namespace, cluster),
            class,
        }
    }

    /// A pass of a machine with a VM, started in a task so that it can wait for its permit.
    fn waiting_pass(permits: &Arc<ReconcilePermits>) -> tokio::task::JoinHandle<Permit> {
        let permits = permits.clone();
        tokio::spawn(async move { permits.acquire(&share("ns/a", Class::Begun)).await })
    }

    fn free(permits: &ReconcilePermits) -> usize {
        permits.lock().free
    }

    #[tokio::test]
    async fn no_more_passes_than_permits_run_at_once() {
        let permits = ReconcilePermits::new(2, None, no_courier());
        let first = permits.acquire(&share("ns/a", Class::New)).await;
        let _second = permits.acquire(&share("ns/a", Class::New)).await;
        let third = waiting_pass(&permits);
        until_waiting(&permits, 1).await;
        assert!(!third.is_finished(), "a third pass ran while two held the only permits");
        drop(first);
        let third = third.await.expect("the waiting pass gets the released permit");
        assert_eq!(permits.waiting(), 0);
        drop(third);
        assert_eq!(free(&permits), 1);
    }

    #[tokio::test]
    async fn a_lent_permit_goes_to_the_next_waiter_and_loans_are_capped() {
        let permits = ReconcilePermits::new(1, None, no_courier());
        let held = permits.acquire(&share("ns/a", Class::New)).await;
        let waiting = waiting_pass(&permits);
        until_waiting(&permits, 1).await;
        let loan = held.lend().map_err(|_| "refused").expect("a first loan");
        let next = waiting.await.expect("the waiting pass gets the lent permit");
        // Up to the cap, each holder may lend again; past it the permit stays where it is.
        let mut loans = vec![loan];
        let mut permit = next;
        loop {
            match permit.lend() {
                Ok(loan) => {
                    loans.push(loan);
                    permit = permits.acquire(&share("ns/a", Class::New)).await;
                }
                Err(kept) => {
                    permit = kept;
                    break;
                }
            }
        }
        assert_eq!(loans.len(), LOANS_PER_PERMIT);
        assert_eq!(free(&permits), 0, "the refused loan kept its permit");
        drop(loans.pop());
        let _loan = permit.lend().map_err(|_| "refused").expect("an ended loan makes room");
        assert_eq!(free(&permits), 1);
    }

    #[tokio::test]
    async fn machines_with_a_vm_are_served_before_earlier_new_machines() {
        let permits = ReconcilePermits::new(1, None, no_courier());
        let held = permits.acquire(&share("ns/a", Class::New)).await;
        let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for (name, class) in [("new-1", Class::New), ("new-2", Class::New), ("vm-1", Class::Begun)] {
            let (waiter, order_tx) = (permits.clone(), order_tx.clone());
            tasks.push(tokio::spawn(async move {
                let _permit = waiter.acquire(&share("ns/a", class)).await;
                let _ = order_tx.send(name);
            }));
            // Queue them in this order.
            until_waiting(&permits, tasks.len()).await;
        }
        drop(held);
        for task in tasks {
            task.await.expect("every waiter is served");
        }
        let mut order = Vec::new();
        while let Ok(name) = order_rx.try_recv() {
            order.push(name);
        }
        assert_eq!(order, ["vm-1", "new-1", "new-2"]);
        assert_eq!(free(&permits), 1);
    }

    #[tokio::test]
    async fn a_dropped_wait_gives_up_its_place_without_losing_the_permit() {
        let permits = ReconcilePermits::new(1, None, no_courier());
        let held = permits.acquire(&share("ns/a", Class::New)).await;
        let abandoned = waiting_pass(&permits);
        until_waiting(&permits, 1).await;
        abandoned.abort();
        assert!(abandoned.await.is_err_and(|e| e.is_cancelled()));
        drop(held);
        assert_eq!(
            free(&permits),
            1,
            "the permit returned to the pool instead of to the dropped wait"
        );
    }

    #[tokio::test]
    async fn a_permit_handed_to_a_wait_dropped_before_it_ran_goes_to_the_next() {
        let permits = ReconcilePermits::new(1, None, no_courier());
        let held = permits.acquire(&share("ns/a", Class::New)).await;
        let abandoned = waiting_pass(&permits);
        until_waiting(&permits, 1).await;
        // The permit is sent to the waiting task, which is then cancelled before it can take it.
        drop(held);
        abandoned.abort();
        assert!(
            abandoned.await.is_err_and(|e| e.is_cancelled()),
            "the task was cancelled before it ran"
        );
        assert_eq!(free(&permits), 1, "the permit stuck in the dropped channel came back");
        let _again = permits.acquire(&share("ns/a", Class::New)).await;
        assert_eq!(free(&permits), 0);
    }

    /// Passes queued in this order for the one permit, in the order they got it.
    async fn served_order(
        permits: &Arc<ReconcilePermits>,
        waiters: &[(&'static str, &str, Class)],
    ) -> Vec<&'static str> {
        let held = permits.acquire(&share("setup/setup", Class::New)).await;
        let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for &(name, tenant, class) in waiters {
            let (waiter, order_tx, tenant) = (permits.clone(), order_tx.clone(), tenant.to_string());
            tasks.push(tokio::spawn(async move {
                let _permit = waiter.acquire(&share(&tenant, class)).await;
                let _ = order_tx.send(name);
            }));
            until_waiting(permits, tasks.len()).await;
        }
        drop(held);
        for task in tasks {
            task.await.expect("every waiter is served");
        }
        std::iter::from_fn(|| order_rx.try_recv().ok()).collect()
    }

    #[tokio::test]
    async fn namespaces_take_turns_and_a_class_orders_only_its_own_clusters_passes() {
        let permits = ReconcilePermits::new(1, Some(QueueMetrics::new(&prometheus::Registry::new())), no_courier());
        let held = permits.acquire(&share("team-a/batch", Class::New)).await;
        let waiters = [
            ("batch-1", "team-a/batch", Class::New),
            ("batch-2", "team-a/batch", Class::New),
            ("batch-3", "team-a/batch", Class::New),
            ("batch-control-plane", "team-a/batch", Class::Urgent),
            ("other-worker", "team-b/other", Class::New),
            ("other-control-plane", "team-b/other", Class::Urgent),
        ];
        let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for (name, tenant, class) in waiters {
            let (waiter, order_tx) = (permits.clone(), order_tx.clone());
            tasks.push(tokio::spawn(async move {
                let _permit = waiter.acquire(&share(tenant, class)).await;
                let _ = order_tx.send(name);
            }));
            until_waiting(&permits, tasks.len()).await;
        }
        let depth = |tenant: &str| {
            permits
                .metrics
                .as_ref()
                .map(|m| m.reconcile_depth_of(tenant))
                .unwrap_or_default()
        };
        assert_eq!((depth("team-a/batch"), depth("team-b/other")), (4, 2));
        drop(held);
        for task in tasks {
            task.await.expect("every waiter is served");
        }
        let order: Vec<&str> = std::iter::from_fn(|| order_rx.try_recv().ok()).collect();
        assert_eq!(
            order,
            [
                "batch-control-plane",
                "other-control-plane",
                "batch-1",
                "other-worker",
                "batch-2",
                "batch-3"
            ]
        );
        assert_eq!((depth("team-a/batch"), depth("team-b/other")), (0, 0));
    }

    #[tokio::test]
    async fn a_namespaces_clusters_take_turns_within_its_share() {
        let permits = ReconcilePermits::new(1, None, no_courier());
        let order = served_order(
            &permits,
            &[
                ("a-one-1", "a/one", Class::Urgent),
                ("a-one-2", "a/one", Class::Urgent),
                ("a-two-1", "a/two", Class::Begun),
                ("a-two-2", "a/two", Class::Begun),
                ("b-1", "b/only", Class::New),
                ("b-2", "b/only", Class::New),
            ],
        )
        .await;
        assert_eq!(order, ["a-one-1", "b-1", "a-two-1", "b-2", "a-one-2", "a-two-2"]);
    }

    #[tokio::test]
    async fn a_namespace_with_a_hundred_urgent_clusters_gets_no_more_permits_than_one_with_one_cluster() {
        let permits = ReconcilePermits::new(1, None, no_courier());
        let clusters: Vec<String> = (0..100).map(|cluster| format!("gamer/c-{cluster}")).collect();
        let mut waiters: Vec<(&'static str, &str, Class)> = clusters
            .iter()
            .map(|tenant| ("gamer", tenant.as_str(), Class::Urgent))
            .collect();
        waiters.extend((0..10).map(|_| ("honest", "honest/workers", Class::New)));
        let order = served_order(&permits, &waiters).await;
        let honest_in_first_20 = order[..20].iter().filter(|name| **name == "honest").count();
        assert_eq!(honest_in_first_20, 10, "{order:?}");
    }

    fn machine(name: &str) -> ObjectKey {
        ObjectKey::machine("ns", name)
    }

    /// A courier that hands each permit over on a channel, with the machine it is for.
    fn channel_courier() -> (Courier, tokio::sync::mpsc::UnboundedReceiver<(ObjectKey, Permit)>) {
        let (sent, received) = tokio::sync::mpsc::unbounded_channel();
        let courier: Courier =
            Box::new(move |machine, permit| sent.send((machine, permit)).map_err(|returned| returned.0.1));
        (courier, received)
    }

    #[tokio::test]
    async fn a_ticket_gets_the_permit_through_the_courier_in_its_turn() {
        let (courier, mut received) = channel_courier();
        let permits = ReconcilePermits::new(1, None, courier);
        let held = permits
            .acquire_or_ticket(&share("ns/a", Class::New), &machine("first"), false)
            .expect("the free permit is taken at once");
        let queued = permits.acquire_or_ticket(&share("ns/a", Class::New), &machine("second"), false);
        assert!(queued.is_none(), "no permit was free: a ticket queues");
        let urgent = permits.acquire_or_ticket(&share("ns/a", Class::Urgent), &machine("urgent"), false);
        assert!(urgent.is_none());
        assert_eq!(permits.waiting(), 2);
        drop(held);
        let (first_served, permit) = received.try_recv().expect("the released permit went to a ticket");
        assert_eq!(
            first_served,
            machine("urgent"),
            "the urgent ticket goes first in its cluster's share"
        );
        assert!(received.try_recv().is_err(), "one permit, one machine");
        drop(permit);
        let (next, permit) = received.try_recv().expect("the permit went on to the next ticket");
        assert_eq!(next, machine("second"));
        drop(permit);
        assert_eq!((free(&permits), permits.waiting()), (1, 0));
    }

    #[tokio::test]
    async fn a_retry_ticket_goes_ahead_of_its_own_clusters_class_and_not_of_another_tenants_turn() {
        let (courier, mut received) = channel_courier();
        let permits = ReconcilePermits::new(1, None, courier);
        let mut held = permits.acquire_or_ticket(&share("a/batch", Class::Begun), &machine("running"), false);
        assert!(held.is_some(), "the free permit is taken at once");
        for name in ["batch-1", "batch-2"] {
            assert!(
                permits
                    .acquire_or_ticket(&share("a/batch", Class::Begun), &machine(name), false)
                    .is_none()
            );
        }
        assert!(
            permits
                .acquire_or_ticket(&share("b/other", Class::Begun), &machine("other-1"), false)
                .is_none()
        );
        assert!(
            permits
                .acquire_or_ticket(&share("a/batch", Class::Begun), &machine("retry"), true)
                .is_none()
        );
        let mut order = Vec::new();
        while let Some(permit) = held.take() {
            drop(permit);
            if let Ok((next, permit)) = received.try_recv() {
                order.push(next.name.to_string());
                held = Some(permit);
            }
        }
        assert_eq!(order, ["retry", "other-1", "batch-1", "batch-2"]);
    }

    #[tokio::test]
    async fn a_permit_the_courier_cannot_deliver_goes_to_the_next_waiter() {
        let permits = ReconcilePermits::new(1, None, no_courier());
        let held = permits.acquire(&share("ns/a", Class::New)).await;
        assert!(
            permits
                .acquire_or_ticket(&share("ns/a", Class::Urgent), &machine("unreachable"), false)
                .is_none()
        );
        let waiting = waiting_pass(&permits);
        until_waiting(&permits, 2).await;
        drop(held);
        let served = waiting
            .await
            .expect("the waiting pass got the permit the ticket could not take");
        assert_eq!(permits.waiting(), 0);
        drop(served);
        assert_eq!(free(&permits), 1, "no permit was lost");
    }
}
