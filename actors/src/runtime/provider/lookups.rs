//! Engine objects that every machine of a provider looks up the same way while creating and preparing its VM (the
//! oVirt cluster, the clusters of a data center, a template's versions and disks, networks, vNIC profiles). They are
//! kept for a short while, so that machines created together cost a few lookups instead of a few per machine; the
//! engine rate limit (10 requests/s by default) is what bounds how fast a large batch of machines comes up.
//!
//! A failed lookup, and one that found nothing (no template of that name, no such cluster), is not kept: an object
//! created after a machine reported it missing is seen at the machine's next retry. Other staleness is bounded by
//! the time to live, e.g. a network added to a data center whose networks were just listed.

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a looked-up engine object is reused.
pub const LOOKUP_TTL: Duration = Duration::from_secs(30);

type Entry = (Instant, Arc<dyn Any + Send + Sync>);

/// Whether a lookup's answer found anything; only such answers are kept.
pub trait Answer {
    fn found(&self) -> bool;
}

impl<T> Answer for Vec<T> {
    fn found(&self) -> bool {
        !self.is_empty()
    }
}

impl<T> Answer for Option<T> {
    fn found(&self) -> bool {
        self.is_some()
    }
}

/// The key of what `provider`'s engine answered for `what`, e.g. `key("engine-a", "clusters")`.
pub fn key(provider: &str, what: &str) -> String {
    format!("{provider}/{what}")
}

pub struct Lookups {
    ttl: Duration,
    entries: Mutex<HashMap<String, Entry>>,
}

impl Lookups {
    pub fn new(ttl: Duration) -> Self {
        Lookups {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The value kept under `key` (name it after the provider and what was looked up) while it is fresh, else what
    /// `fetch` returns, kept when it succeeded and found something. Concurrent misses may each fetch; the last one
    /// is kept.
    pub async fn get<T, F, Fut>(&self, key: String, fetch: F) -> capov_ovirt::Result<T>
    where
        T: Answer + Clone + Send + Sync + 'static,
        F: FnOnce() -> Fut,
        Fut: Future<Output = capov_ovirt::Result<T>>,
    {
        if let Some(value) = self.fresh::<T>(&key) {
            return Ok(value);
        }
        let value = fetch().await?;
        if !value.found() {
            return Ok(value);
        }
        let mut entries = self.lock();
        let ttl = self.ttl;
        entries.retain(|_, (at, _)| at.elapsed() < ttl);
        entries.insert(key, (Instant::now(), Arc::new(value.clone())));
        Ok(value)
    }

    fn fresh<T: Clone + 'static>(&self, key: &str) -> Option<T> {
        let entries = self.lock();
        let (at, value) = entries.get(key)?;
        if at.elapsed() >= self.ttl {
            return None;
        }
        value.downcast_ref::<T>().cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn a_fresh_value_is_reused_and_an_expired_or_failed_one_is_not() {
        let fetches = AtomicU32::new(0);
        let fetch = || async {
            fetches.fetch_add(1, Ordering::SeqCst);
            Ok::<_, capov_ovirt::Error>(vec!["Default".to_string()])
        };
        let lookups = Lookups::new(Duration::from_millis(200));
        assert_eq!(
            lookups.get("p/clusters".into(), fetch).await.ok(),
            Some(vec!["Default".into()])
        );
        assert_eq!(
            lookups.get("p/clusters".into(), fetch).await.ok(),
            Some(vec!["Default".into()])
        );
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
        // Another key, and a value of another type under the same key, are fetched.
        lookups.get("q/clusters".into(), fetch).await.ok();
        assert_eq!(fetches.load(Ordering::SeqCst), 2);
        let other = lookups
            .get("p/clusters".into(), || async {
                Ok::<_, capov_ovirt::Error>(Some(7u32))
            })
            .await;
        assert_eq!(other.ok(), Some(Some(7)));

        tokio::time::sleep(Duration::from_millis(250)).await;
        lookups.get("q/clusters".into(), fetch).await.ok();
        assert_eq!(fetches.load(Ordering::SeqCst), 3, "an expired value is fetched again");

        let failing = || async { Err::<Option<u64>, _>(capov_ovirt::Error::Timeout("slow".into())) };
        assert!(lookups.get("p/failing".into(), failing).await.is_err());
        let value = lookups
            .get("p/failing".into(), || async { Ok::<_, capov_ovirt::Error>(Some(1u64)) })
            .await;
        assert_eq!(value.ok(), Some(Some(1)), "a failure is not kept");
    }

    #[tokio::test]
    async fn an_answer_that_found_nothing_is_not_kept() {
        let lookups = Lookups::new(Duration::from_secs(30));
        let missing = lookups
            .get("p/templates/rhcos".into(), || async {
                Ok::<_, capov_ovirt::Error>(Vec::<u8>::new())
            })
            .await;
        assert_eq!(missing.ok(), Some(vec![]));
        // Created since: the next lookup sees it at once instead of after the time to live.
        let created = lookups
            .get("p/templates/rhcos".into(), || async {
                Ok::<_, capov_ovirt::Error>(vec![1u8])
            })
            .await;
        assert_eq!(created.ok(), Some(vec![1]));
        let absent = lookups
            .get("p/cluster/Default".into(), || async {
                Ok::<_, capov_ovirt::Error>(None::<u8>)
            })
            .await;
        assert_eq!(absent.ok(), Some(None));
        let present = lookups
            .get("p/cluster/Default".into(), || async {
                Ok::<_, capov_ovirt::Error>(Some(2u8))
            })
            .await;
        assert_eq!(present.ok(), Some(Some(2)));
    }
}
