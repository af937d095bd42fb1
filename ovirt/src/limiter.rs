//! One engine's rate limit, shared fairly. The limit itself is governor's token bucket (`qps`, `burst`); who gets
//! the next token is a [`FairQueue`]: the provider's own checks and searches first, then the namespaces in turn,
//! within a namespace's turn its CAPI Clusters in turn, and within a cluster's turn its urgent requests (deletions,
//! control-plane machines) before its others. A tenant scaling to hundreds of machines, over however many clusters
//! and whatever it labels them, then delays another namespace's request by about one request, not by its whole
//! batch. Requests per machine and the rate are unchanged: only the order of the queue is.
//!
//! While nobody waits a request takes a free token at once. Otherwise it queues, and one task (the pump, started by
//! the first waiter and ending when the queue is empty) takes each token as the bucket allows and hands it to the
//! next waiter. A waiter that gave up (its request was cancelled) is skipped and the token goes to the next one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::sync::oneshot;

use crate::fair_queue::{FairQueue, Tenant};

/// Whose request it is, and how urgent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lane {
    pub tenant: Tenant,
    /// Goes before the cluster's other requests; never before another cluster's.
    pub urgent: bool,
}

impl Lane {
    /// The provider's own work (connection checks, the batched searches that serve every tenant), and requests that
    /// name no lane: before every tenant's.
    pub fn provider() -> Lane {
        Lane {
            tenant: Tenant::provider(),
            urgent: true,
        }
    }
}

/// How often a waiter checks that a pump serves the queue.
const PUMP_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// Classes of the queue, within a cluster's turn: urgent first.
const URGENT: usize = 0;
const NORMAL: usize = 1;

pub struct FairLimiter {
    rate: DefaultDirectRateLimiter,
    state: Mutex<State>,
}

struct State {
    queue: FairQueue<oneshot::Sender<()>>,
    /// The pump task runs.
    pumping: bool,
}

impl FairLimiter {
    pub fn new(quota: Quota) -> Arc<FairLimiter> {
        Arc::new(FairLimiter {
            rate: RateLimiter::direct(quota),
            state: Mutex::new(State {
                queue: FairQueue::new(2),
                pumping: false,
            }),
        })
    }

    /// Waits for this request's token. Cancel-safe: a dropped wait gives up its place, and a token handed to it goes
    /// to the next waiter.
    pub async fn until_ready(self: &Arc<Self>, lane: &Lane) {
        let receiver = {
            let mut state = self.lock();
            if state.queue.is_empty() && self.rate.check().is_ok() {
                return;
            }
            let (sender, receiver) = oneshot::channel();
            let class = if lane.urgent { URGENT } else { NORMAL };
            state.queue.push(class, &lane.tenant, sender);
            if !state.pumping {
                state.pumping = true;
                tokio::spawn(self.clone().pump());
            }
            receiver
        };
        let mut receiver = std::pin::pin!(receiver);
        loop {
            tokio::select! {
                // An error: the pump went away with this waiter's sender (its runtime shut down); nothing to wait for.
                _ = &mut receiver => return,
                // A pump whose runtime shut down (tests run one per test) stopped without serving this waiter.
                () = tokio::time::sleep(PUMP_CHECK) => self.ensure_pump(),
            }
        }
    }

    fn ensure_pump(self: &Arc<Self>) {
        let mut state = self.lock();
        if !state.pumping && !state.queue.is_empty() {
            state.pumping = true;
            tokio::spawn(self.clone().pump());
        }
    }

    /// Requests waiting for a token, per tenant.
    pub fn depths(&self) -> HashMap<Tenant, usize> {
        self.lock().queue.depths()
    }

    /// Hands each token the bucket allows to the next waiter, until nobody waits.
    async fn pump(self: Arc<Self>) {
        let mut stopped = PumpStopped(Some(self.clone()));
        loop {
            {
                let mut state = self.lock();
                if state.queue.is_empty() {
                    state.pumping = false;
                    stopped.0 = None;
                    return;
                }
            }
            self.rate.until_ready().await;
            loop {
                let next = self.lock().queue.pop();
                match next {
                    None => break,
                    Some((_, waiter)) => {
                        if waiter.send(()).is_ok() {
                            break;
                        }
                    }
                }
            }
        }
    }

    /// The queue stays consistent even if a holder panicked: every change is one push or pop.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Marks the pump stopped when its task is dropped before the queue ran empty (its runtime shut down), so that a
/// waiter starts a new one.
struct PumpStopped(Option<Arc<FairLimiter>>);

impl Drop for PumpStopped {
    fn drop(&mut self) {
        if let Some(limiter) = self.0.take() {
            let mut state = limiter.lock();
            state.pumping = false;
            // Waiters whose callers are gone hold nothing.
            state.queue.retain(|waiter| !waiter.is_closed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU32;
    use std::time::Duration;

    /// Real time: governor keeps its own clock.
    fn limiter(per_second: u32) -> Arc<FairLimiter> {
        let rate = NonZeroU32::new(per_second).expect("rate");
        FairLimiter::new(Quota::per_second(rate).allow_burst(NonZeroU32::MIN))
    }

    /// A lane of `tenant`, written `namespace/cluster`.
    fn lane(tenant: &str, urgent: bool) -> Lane {
        let (namespace, cluster) = tenant.split_once('/').unwrap_or((tenant, ""));
        Lane {
            tenant: Tenant::cluster(namespace, cluster),
            urgent,
        }
    }

    /// Queues `count` requests of `lane`, each recording its name when it gets its token.
    fn queue_requests(
        limiter: &Arc<FairLimiter>,
        lane: &Lane,
        name: &'static str,
        count: usize,
        order: &tokio::sync::mpsc::UnboundedSender<&'static str>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        (0..count)
            .map(|_| {
                let (limiter, lane, order) = (limiter.clone(), lane.clone(), order.clone());
                tokio::spawn(async move {
                    limiter.until_ready(&lane).await;
                    let _ = order.send(name);
                })
            })
            .collect()
    }

    async fn until_queued(limiter: &FairLimiter, count: usize) {
        while limiter.lock().queue.len() < count {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_tenants_single_request_waits_one_turn_behind_a_batch() {
        let limiter = limiter(100);
        let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
        // The one free token goes at once.
        limiter.until_ready(&lane("ns/batch", false)).await;
        let mut tasks = queue_requests(&limiter, &lane("ns/batch", false), "batch", 20, &order_tx);
        until_queued(&limiter, 20).await;
        tasks.extend(queue_requests(
            &limiter,
            &lane("ns/other", false),
            "other",
            1,
            &order_tx,
        ));
        until_queued(&limiter, 21).await;
        assert_eq!(limiter.depths()[&lane("ns/batch", false).tenant], 20);
        for task in tasks {
            task.await.expect("every request gets its token");
        }
        let mut order = Vec::new();
        while let Ok(name) = order_rx.try_recv() {
            order.push(name);
        }
        let other_at = order.iter().position(|name| *name == "other").expect("served");
        assert!(other_at <= 1, "the other tenant's request came {other_at}th: {order:?}");
        assert!(limiter.depths().is_empty());
    }

    /// Requests queued in this order, in the order they got their tokens. The tasks are spawned without a yield in
    /// between, and the current-thread runtime runs spawned tasks in order: each queues in turn, and the pump (spawned
    /// by the first) runs after the last has queued.
    async fn served_order(limiter: &Arc<FairLimiter>, groups: &[(Lane, &'static str, usize)]) -> Vec<&'static str> {
        let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
        // The one free token goes at once: everything after it queues.
        limiter.until_ready(&lane("setup/setup", false)).await;
        let tasks: Vec<_> = groups
            .iter()
            .flat_map(|(lane, name, count)| queue_requests(limiter, lane, name, *count, &order_tx))
            .collect();
        for task in tasks {
            task.await.expect("served");
        }
        std::iter::from_fn(|| order_rx.try_recv().ok()).collect()
    }

    #[tokio::test]
    async fn urgent_requests_go_first_within_their_namespace_only() {
        let limiter = limiter(100);
        let order = served_order(
            &limiter,
            &[
                (lane("a/batch", false), "a worker", 3),
                (lane("a/batch", true), "a control plane", 2),
                (lane("b/other", false), "b worker", 2),
            ],
        )
        .await;
        assert_eq!(
            order,
            [
                "a control plane",
                "b worker",
                "a control plane",
                "b worker",
                "a worker",
                "a worker",
                "a worker"
            ]
        );
    }

    #[tokio::test]
    async fn a_namespace_with_a_hundred_urgent_clusters_gets_no_more_tokens_than_one_with_one_cluster() {
        let limiter = limiter(100);
        let mut groups: Vec<(Lane, &'static str, usize)> = (0..100)
            .map(|cluster| (lane(&format!("gamer/c-{cluster}"), true), "gamer", 1))
            .collect();
        groups.push((lane("honest/workers", false), "honest", 10));
        let order = served_order(&limiter, &groups).await;
        let honest_in_first_20 = order[..20].iter().filter(|name| **name == "honest").count();
        assert_eq!(honest_in_first_20, 10, "{order:?}");
    }

    #[tokio::test]
    async fn the_providers_own_requests_go_before_every_tenants() {
        let limiter = limiter(100);
        let order = served_order(
            &limiter,
            &[
                (lane("a/batch", true), "a control plane", 3),
                (Lane::provider(), "search", 2),
            ],
        )
        .await;
        assert_eq!(&order[..2], ["search", "search"], "{order:?}");
    }

    #[tokio::test]
    async fn the_rate_is_the_limit_whatever_the_order() {
        let limiter = limiter(100);
        let (order_tx, _order_rx) = tokio::sync::mpsc::unbounded_channel();
        let started = std::time::Instant::now();
        let mut tasks = queue_requests(&limiter, &lane("a", false), "a", 15, &order_tx);
        tasks.extend(queue_requests(&limiter, &lane("b", true), "b", 15, &order_tx));
        for task in tasks {
            task.await.expect("served");
        }
        let took = started.elapsed();
        // 30 tokens at 100/s with a burst of one: the first at once, the 29 others 10 ms apart.
        assert!(took >= Duration::from_millis(280), "{took:?}");
    }

    #[tokio::test]
    async fn a_cancelled_wait_passes_its_token_on() {
        let limiter = limiter(100);
        limiter.until_ready(&lane("a", false)).await;
        let abandoned = {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.until_ready(&lane("a", false)).await })
        };
        until_queued(&limiter, 1).await;
        abandoned.abort();
        let _ = abandoned.await;
        let next = {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.until_ready(&lane("b", false)).await })
        };
        tokio::time::timeout(Duration::from_secs(1), next)
            .await
            .expect("the next waiter is served, not left behind the abandoned one")
            .expect("served");
    }
}
