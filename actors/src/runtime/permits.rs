//! The `--max-concurrent-reconciles` permits. Two queues instead of one: a machine that already has a VM is served
//! before one that has none. With a single FIFO queue a large batch goes breadth-first — every VM is created before
//! the first one is started — so the first machine turns Ready only near the end of the batch. Serving machines with
//! a VM first finishes machines as the batch goes, for the same engine load. Machines waiting for their VM to boot
//! hold no permit, so new machines still get permits while earlier ones boot.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

/// Which queue a pass waits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// The machine has a VM (spec.providerID is set, or its actor created one): it is part way through creation,
    /// running, or being deleted.
    HasVm,
    /// The machine has no VM yet.
    New,
}

pub struct ReconcilePermits {
    queues: Mutex<Queues>,
}

struct Queues {
    free: usize,
    has_vm: VecDeque<oneshot::Sender<Permit>>,
    new: VecDeque<oneshot::Sender<Permit>>,
}

/// One permit; dropping it hands it to the next waiter.
pub struct Permit {
    owner: Option<Arc<ReconcilePermits>>,
}

impl ReconcilePermits {
    pub fn new(count: usize) -> Arc<Self> {
        Arc::new(Self {
            queues: Mutex::new(Queues {
                free: count,
                has_vm: VecDeque::new(),
                new: VecDeque::new(),
            }),
        })
    }

    /// Waits for a permit. Cancel-safe: a dropped wait gives up its place, and a permit handed to a wait that was
    /// dropped meanwhile goes on to the next one.
    pub async fn acquire(self: &Arc<Self>, priority: Priority) -> Permit {
        loop {
            let receiver = {
                let mut queues = self.lock();
                // Permits are handed straight to waiters on release, so a free one means nobody is waiting.
                if queues.free > 0 {
                    queues.free -= 1;
                    return Permit {
                        owner: Some(self.clone()),
                    };
                }
                let (sender, receiver) = oneshot::channel();
                match priority {
                    Priority::HasVm => queues.has_vm.push_back(sender),
                    Priority::New => queues.new.push_back(sender),
                }
                receiver
            };
            // A sender is only dropped unsent when its waiter is gone, which cannot be this one; queue again anyway
            // rather than assume it.
            if let Ok(permit) = receiver.await {
                return permit;
            }
        }
    }

    /// How many passes wait for a permit.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        let queues = self.lock();
        queues.has_vm.len() + queues.new.len()
    }

    fn release(self: &Arc<Self>) {
        let mut permit = Permit {
            owner: Some(self.clone()),
        };
        loop {
            let next = {
                let mut queues = self.lock();
                let next = queues.has_vm.pop_front().or_else(|| queues.new.pop_front());
                if next.is_none() {
                    queues.free += 1;
                    permit.owner = None;
                }
                next
            };
            let Some(waiter) = next else { return };
            match waiter.send(permit) {
                Ok(()) => return,
                // That wait was dropped: try the next one.
                Err(returned) => permit = returned,
            }
        }
    }

    /// The queues stay consistent even if a holder panicked: every change is one push, pop or counter step.
    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.take() {
            owner.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lets spawned tasks run until `count` of them wait for a permit (current-thread runtime).
    async fn until_waiting(permits: &ReconcilePermits, count: usize) {
        while permits.waiting() < count {
            tokio::task::yield_now().await;
        }
    }

    /// A pass of a machine with a VM, started in a task so that it can wait for its permit.
    fn waiting_pass(permits: &Arc<ReconcilePermits>) -> tokio::task::JoinHandle<Permit> {
        let permits = permits.clone();
        tokio::spawn(async move { permits.acquire(Priority::HasVm).await })
    }

    fn free(permits: &ReconcilePermits) -> usize {
        permits.lock().free
    }

    #[tokio::test]
    async fn no_more_passes_than_permits_run_at_once() {
        let permits = ReconcilePermits::new(2);
        let first = permits.acquire(Priority::New).await;
        let _second = permits.acquire(Priority::New).await;
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
    async fn machines_with_a_vm_are_served_before_earlier_new_machines() {
        let permits = ReconcilePermits::new(1);
        let held = permits.acquire(Priority::New).await;
        let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for (name, priority) in [
            ("new-1", Priority::New),
            ("new-2", Priority::New),
            ("vm-1", Priority::HasVm),
        ] {
            let (waiter, order_tx) = (permits.clone(), order_tx.clone());
            tasks.push(tokio::spawn(async move {
                let _permit = waiter.acquire(priority).await;
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
        let permits = ReconcilePermits::new(1);
        let held = permits.acquire(Priority::New).await;
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
        let permits = ReconcilePermits::new(1);
        let held = permits.acquire(Priority::New).await;
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
        let _again = permits.acquire(Priority::New).await;
        assert_eq!(free(&permits), 0);
    }
}
