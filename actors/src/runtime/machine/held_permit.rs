//! What a running pass holds of the reconcile permits: its permit, a loan after it handed the permit on while a
//! management-cluster request hung ([`HeldPermit::awaiting`]), or nothing (during workload-cluster I/O).
//!
//! A loan lasts for the rest of the step: the pass ends at the next step boundary and continues in a new pass that
//! waits for a permit before its future exists (`pass::pass`).

use std::future::Future;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::runtime::kube::clients::{RequestTimedOut, answer_within};
use crate::runtime::permits::{Loan, Permit};

/// A management-cluster request that has not answered after this long is taken for hung: the apiserver answers
/// reads and patches in milliseconds, and seconds only when it struggles.
pub const SLOW_REQUEST: Duration = Duration::from_secs(1);

/// A management-cluster request of a pass that has not answered after this long is given up, and the pass backs off
/// and asks again. The client's read timeout (30 s) fits any request; a pass's reads and patches are small, and one
/// the apiserver holds this long is lost: waiting out the read timeout cost each machine that met one 30 s and its
/// backoff (in the benchmark's trouble 1 % of requests are held, about one machine in twenty meets one).
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(10);

enum Held {
    Permit(Permit),
    Loan(#[allow(dead_code, reason = "held for its drop: it ends the loan")] Loan),
}

/// Kept in the machine's state, so that the requests deep in a step can hand the permit on without it being passed
/// down to them. Behind a mutex only because the state is shared (`&MachineState`) across the step's awaits.
#[derive(Default)]
pub struct HeldPermit(Mutex<Option<Held>>);

impl HeldPermit {
    pub fn put(&self, permit: Permit) {
        *self.lock() = Some(Held::Permit(permit));
    }

    /// Gives back the permit, or ends the loan.
    pub fn clear(&self) {
        self.lock().take();
    }

    /// Whether the pass may go on with work the permits bound: it holds a permit or a loan.
    pub fn may_work(&self) -> bool {
        self.lock().is_some()
    }

    /// Whether the pass holds a permit itself (not a loan): only then does it start another step.
    pub fn holds_permit(&self) -> bool {
        matches!(*self.lock(), Some(Held::Permit(_)))
    }

    /// Awaits a management-cluster request made under the permit. Past [`SLOW_REQUEST`] the permit goes on to the
    /// next waiting pass and this one finishes the step on a loan, so that hung requests do not hold every permit
    /// until their timeout. While every loan is out the pass asks again every [`SLOW_REQUEST`]: a loan given back
    /// by another hung request frees this permit too, instead of it staying held until the request ends. Past
    /// [`GIVE_UP_AFTER`] the request is given up (dropped) and fails.
    pub async fn awaiting<T, E: From<RequestTimedOut>>(
        &self,
        request: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let mut request = std::pin::pin!(answer_within(GIVE_UP_AFTER, request));
        loop {
            if let Ok(answer) = tokio::time::timeout(SLOW_REQUEST, &mut request).await {
                return answer;
            }
            self.lend();
            if !self.holds_permit() {
                return request.await;
            }
        }
    }

    /// A permit becomes a loan (if one is left); a loan or nothing stays as it is.
    fn lend(&self) {
        let mut held = self.lock();
        *held = match held.take() {
            Some(Held::Permit(permit)) => Some(match permit.lend() {
                Ok(loan) => Held::Loan(loan),
                Err(permit) => Held::Permit(permit),
            }),
            other => other,
        };
    }

    /// Every change is one assignment, so a poisoned lock still holds a consistent value.
    fn lock(&self) -> MutexGuard<'_, Option<Held>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fair_share::{Class, Share};
    use crate::runtime::permits::{ReconcilePermits, no_courier};

    /// A request that answers after `delay`.
    async fn answered_after(delay: Duration) -> Result<(), String> {
        tokio::time::sleep(delay).await;
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_request_is_awaited_until_its_deadline_and_then_given_up() {
        let permits = ReconcilePermits::new(1, None, no_courier());
        let held = HeldPermit::default();
        held.put(permits.acquire(&share()).await);
        let slow = GIVE_UP_AFTER - SLOW_REQUEST;
        assert_eq!(
            held.awaiting(answered_after(slow)).await,
            Ok(()),
            "answered within its deadline"
        );
        let asked = tokio::time::Instant::now();
        let answer = held.awaiting(answered_after(GIVE_UP_AFTER * 3)).await;
        assert_eq!(answer, Err(RequestTimedOut(GIVE_UP_AFTER).to_string()));
        assert_eq!(
            asked.elapsed(),
            GIVE_UP_AFTER,
            "given up at its deadline, not at the answer"
        );
    }

    fn share() -> Share {
        Share {
            tenant: capov_ovirt::Tenant::cluster("ns", "a"),
            class: Class::New,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_quick_request_keeps_the_permit() {
        let permits = ReconcilePermits::new(1, None, no_courier());
        let held = HeldPermit::default();
        held.put(permits.acquire(&share()).await);
        let answer = held.awaiting(async { Ok::<_, String>(7) }).await;
        assert_eq!(answer, Ok(7));
        assert!(held.holds_permit());
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_request_hands_the_permit_on_and_finishes_on_a_loan() {
        let permits = ReconcilePermits::new(1, None, no_courier());
        let held = HeldPermit::default();
        held.put(permits.acquire(&share()).await);
        let waiter = {
            let permits = permits.clone();
            tokio::spawn(async move { permits.acquire(&share()).await })
        };
        let answer = held.awaiting(answered_after(SLOW_REQUEST * 30)).await;
        assert!(answer.is_err(), "a request hung past its deadline was given up");
        assert!(!held.holds_permit(), "the permit went on");
        assert!(held.may_work(), "the step finishes on its loan");
        assert!(
            waiter.is_finished(),
            "the waiting pass got the permit while the request hung"
        );
        // A second hung request in the same step keeps the loan.
        let _ = held.awaiting(answered_after(SLOW_REQUEST * 30)).await;
        assert!(held.may_work(), "a second slow request ended the loan");
        held.clear();
        assert!(!held.may_work());
    }

    #[tokio::test(start_paused = true)]
    async fn with_every_loan_out_a_hung_request_hands_its_permit_on_once_a_loan_comes_back() {
        let permits = ReconcilePermits::new(1, None, no_courier());
        let mut loans = Vec::new();
        for _ in 0..crate::runtime::permits::LOANS_PER_PERMIT {
            let Ok(loan) = permits.acquire(&share()).await.lend() else {
                panic!("a loan is left");
            };
            loans.push(loan);
        }
        let held = std::sync::Arc::new(HeldPermit::default());
        held.put(permits.acquire(&share()).await);
        let waiter = {
            let permits = permits.clone();
            tokio::spawn(async move { permits.acquire(&share()).await })
        };
        let request = {
            let held = held.clone();
            tokio::spawn(async move { held.awaiting(answered_after(SLOW_REQUEST * 30)).await })
        };
        tokio::time::sleep(SLOW_REQUEST * 3).await;
        assert!(held.holds_permit(), "no loan was left: the permit stays");
        assert!(!waiter.is_finished());
        drop(loans.pop());
        tokio::time::sleep(SLOW_REQUEST * 2).await;
        assert!(
            !held.holds_permit() && held.may_work(),
            "the returned loan went to the hung request"
        );
        assert!(
            waiter.is_finished(),
            "the waiting pass got the permit before the request ended"
        );
        assert!(!request.is_finished());
    }
}
