//! Messages between the runtime's actors go through here so that the per-actor metrics stay true: every message sent
//! counts into its kind's `capov_actor_mailbox_depth`, and the receiving actor counts it out, with its handling
//! time, when it handles it ([`ActorMetrics::handling`]). Timers and RPCs use the same path.
//!
//! ractor exposes no queue length, hence the counting. Messages still queued when an actor stops are dropped
//! uncounted; actors stop only when their object is deleted or the operator shuts down, so the error stays small.

use std::time::{Duration, Instant};

use prometheus::{Histogram, IntCounter, IntGauge};
use ractor::{ActorRef, MessagingErr, RpcReplyPort};
use tokio::task::JoinHandle;

use crate::metrics::Metrics;

/// A message type of one actor kind (the `kind` label of the actor metrics).
pub trait Mail: ractor::Message {
    const KIND: &'static str;
}

/// The metric series of one actor kind, resolved once.
#[derive(Clone)]
pub struct ActorMetrics {
    depth: IntGauge,
    messages: IntCounter,
    duration: Histogram,
    live: IntGauge,
}

impl ActorMetrics {
    pub fn of<M: Mail>(metrics: &Metrics) -> ActorMetrics {
        let kind = [M::KIND];
        ActorMetrics {
            depth: metrics.actor_mailbox_depth.with_label_values(&kind),
            messages: metrics.actor_messages_total.with_label_values(&kind),
            duration: metrics.actor_message_duration_seconds.with_label_values(&kind),
            live: metrics.actors_live.with_label_values(&kind),
        }
    }

    /// Call at the start of `handle`: the message leaves the mailbox now; its handling time is recorded when the
    /// returned guard drops (also on an early return or an error).
    pub fn handling(&self) -> Handling {
        self.depth.dec();
        Handling {
            messages: self.messages.clone(),
            duration: self.duration.clone(),
            started: Instant::now(),
        }
    }

    /// Counts the actor as live until the returned guard (kept in the actor's state) drops.
    pub fn alive(&self) -> Alive {
        self.live.inc();
        Alive(self.live.clone())
    }
}

pub struct Handling {
    messages: IntCounter,
    duration: Histogram,
    started: Instant,
}

impl Drop for Handling {
    fn drop(&mut self) {
        self.messages.inc();
        self.duration.observe(self.started.elapsed().as_secs_f64());
    }
}

/// Counted in its gauge while held: a live actor, a dormant machine.
pub struct Alive(IntGauge);

impl Alive {
    pub fn counted_in(gauge: &IntGauge) -> Alive {
        gauge.inc();
        Alive(gauge.clone())
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Sends a message, counting it into the receiver's mailbox depth.
pub fn cast<M: Mail>(metrics: &Metrics, to: &ActorRef<M>, message: M) -> Result<(), MessagingErr<M>> {
    let depth = metrics.actor_mailbox_depth.with_label_values(&[M::KIND]);
    depth.inc();
    to.cast(message).inspect_err(|_| depth.dec())
}

/// Sends `make()` after `delay` (dropped if the receiver has stopped by then). Abort the handle to cancel.
pub fn cast_after<M, F>(metrics: &Metrics, delay: Duration, to: ActorRef<M>, make: F) -> JoinHandle<()>
where
    M: Mail,
    F: FnOnce() -> M + Send + 'static,
{
    let metrics = metrics.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let _ = cast(&metrics, &to, make());
    })
}

/// Sends `make()` every `period`, the first time after one period, until the receiver stops or the handle is
/// aborted.
pub fn cast_every<M, F>(metrics: &Metrics, period: Duration, to: ActorRef<M>, make: F) -> JoinHandle<()>
where
    M: Mail,
    F: Fn() -> M + Send + 'static,
{
    let metrics = metrics.clone();
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if cast(&metrics, &to, make()).is_err() {
                return;
            }
        }
    })
}

/// Why a [`call`] got no answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("the actor has stopped")]
    Stopped,
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// Asks an actor and waits at most `timeout` for the answer.
pub async fn call<M, R, F>(metrics: &Metrics, to: &ActorRef<M>, ask: F, timeout: Duration) -> Result<R, CallError>
where
    M: Mail,
    R: Send + 'static,
    F: FnOnce(RpcReplyPort<R>) -> M,
{
    let (reply, answer) = ractor::concurrency::oneshot();
    cast(metrics, to, ask(reply.into())).map_err(|_| CallError::Stopped)?;
    match tokio::time::timeout(timeout, answer).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(_)) => Err(CallError::Stopped),
        Err(_) => Err(CallError::Timeout(timeout)),
    }
}
