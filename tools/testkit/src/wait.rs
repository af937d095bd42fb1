//! Waiting until the system under test reaches a state: looking again and again until a deadline. Looks come
//! quickly at first, so that a state reached in milliseconds is seen at once, and every 100 ms at most, so that a
//! probe asking an API server stays cheap over minutes.

use std::fmt::{self, Display};
use std::future::Future;
use std::time::{Duration, Instant};

const FIRST_PAUSE: Duration = Duration::from_millis(10);
const LONGEST_PAUSE: Duration = Duration::from_millis(100);

/// What one look at the system says: the awaited value, or that it is still pending. For an `Option`, `None` is
/// pending. For a `Result`, `Err` is pending and holds the state seen, which a wait that times out reports.
pub trait Observation<T> {
    fn into_outcome(self) -> Result<T, Option<String>>;
}

impl<T> Observation<T> for Option<T> {
    fn into_outcome(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

impl<T, E: Display> Observation<T> for Result<T, E> {
    fn into_outcome(self) -> Result<T, Option<String>> {
        self.map_err(|state| Some(state.to_string()))
    }
}

/// A wait that ran out of time.
#[derive(Debug)]
pub struct TimedOut {
    pub waited: Duration,
    pub looks: u32,
    /// What the last look saw, when the probe says (it returns a `Result`).
    pub last_seen: Option<String>,
}

impl Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "still pending after {:.1?} ({} looks)", self.waited, self.looks)?;
        match &self.last_seen {
            Some(state) => write!(f, "; last seen: {state}"),
            None => Ok(()),
        }
    }
}

/// Looks with `probe` until it observes the awaited value, or `timeout` has passed. For code that must return an
/// error rather than fail a test (the harness), or whose diagnosis of a timeout needs awaiting; tests use
/// [`eventually`].
pub async fn until<T, O, F, Fut>(timeout: Duration, mut probe: F) -> Result<T, TimedOut>
where
    O: Observation<T>,
    F: FnMut() -> Fut,
    Fut: Future<Output = O>,
{
    let started = Instant::now();
    let mut pause = FIRST_PAUSE;
    let mut looks = 0;
    loop {
        looks += 1;
        let last_seen = match probe().await.into_outcome() {
            Ok(value) => return Ok(value),
            Err(seen) => seen,
        };
        let waited = started.elapsed();
        if waited >= timeout {
            return Err(TimedOut {
                waited,
                looks,
                last_seen,
            });
        }
        // The last look comes at the deadline, not a pause after it.
        tokio::time::sleep(pause.min(timeout - waited)).await;
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

/// Waits until `probe` observes the awaited value and returns it; after `timeout`, fails the test naming `what` was
/// awaited and the last state seen. `what` is formatted only then, so it may carry a diagnosis taken at that moment
/// (the tail of a process's log).
///
/// The probe is a closure returning a future (`|| async { .. }`), not an async closure: a future borrowing from an
/// async closure cannot yet be proven `Send`, and waits run in spawned tasks too. What a probe keeps from one look
/// to the next it holds in a `Cell` or a `Mutex`.
pub async fn eventually<T, O, F, Fut>(timeout: Duration, what: impl Display, probe: F) -> T
where
    O: Observation<T>,
    F: FnMut() -> Fut,
    Fut: Future<Output = O>,
{
    match until(timeout, probe).await {
        Ok(value) => value,
        Err(timed_out) => panic!("timed out waiting for {what}: {timed_out}"),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test]
    async fn returns_the_first_value_observed() {
        let looks = Cell::new(0);
        let value = eventually(Duration::from_secs(5), "the third look", || async {
            looks.set(looks.get() + 1);
            (looks.get() == 3).then_some(looks.get() * 10)
        })
        .await;
        assert_eq!((value, looks.get()), (30, 3));
    }

    #[tokio::test]
    async fn a_timeout_reports_the_last_state_seen() {
        let looks = Cell::new(0);
        let timed_out = until(Duration::from_millis(50), || async {
            looks.set(looks.get() + 1);
            Err::<(), _>(format!("look {}", looks.get()))
        })
        .await
        .expect_err("never done");
        let looks = looks.get();
        assert!(timed_out.waited >= Duration::from_millis(50), "{timed_out}");
        assert_eq!(timed_out.looks, looks);
        assert_eq!(timed_out.last_seen, Some(format!("look {looks}")));
        assert!(timed_out.to_string().ends_with(&format!("; last seen: look {looks}")));
    }

    #[tokio::test]
    #[should_panic(expected = "timed out waiting for a value: still pending after")]
    async fn eventually_fails_the_test_naming_what_it_waited_for() {
        eventually(Duration::from_millis(20), "a value", || async { None::<()> }).await;
    }

    #[tokio::test]
    async fn what_is_formatted_only_when_the_wait_fails() {
        struct Diagnosis;
        impl Display for Diagnosis {
            fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
                panic!("formatted although the wait succeeded")
            }
        }
        eventually(Duration::from_secs(1), Diagnosis, || async { Some(()) }).await;
    }

    #[tokio::test]
    async fn a_wait_borrowing_what_its_task_owns_runs_in_a_spawned_task() {
        let answers = Arc::new(AtomicU32::new(0));
        let seen = tokio::spawn(async move {
            eventually(Duration::from_secs(5), "the second answer", || async {
                let answer = answers.fetch_add(1, Ordering::SeqCst);
                (answer == 1).then_some(answer)
            })
            .await
        })
        .await
        .expect("the task");
        assert_eq!(seen, 1);
    }
}
