//! The status writer's queue: the next status to write per object, and the writes that failed. Its one rule: a
//! status that failed to be written is retried only while no newer status of the object exists, so a retry can
//! never put an older status over a newer one.

use std::collections::HashMap;
use std::hash::Hash;

pub struct WriteQueue<K, S> {
    pending: HashMap<K, S>,
    failed: HashMap<K, S>,
}

impl<K: Hash + Eq + Clone, S> Default for WriteQueue<K, S> {
    fn default() -> Self {
        Self {
            pending: HashMap::new(),
            failed: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq + Clone, S> WriteQueue<K, S> {
    /// The newest status of `key`; it replaces a queued or failed older one. True when it replaced a queued one.
    pub fn update(&mut self, key: K, status: S) -> bool {
        self.failed.remove(&key);
        self.pending.insert(key, status).is_some()
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub fn has_failed(&self) -> bool {
        !self.failed.is_empty()
    }

    /// Everything queued, to be written now.
    pub fn take_pending(&mut self) -> Vec<(K, S)> {
        self.pending.drain().collect()
    }

    /// A write of `status` failed; it is kept for the retry unless a newer status arrived meanwhile.
    pub fn write_failed(&mut self, key: K, status: S) {
        if !self.pending.contains_key(&key) {
            self.failed.insert(key, status);
        }
    }

    /// The retry is due: failed writes are queued again, behind nothing newer.
    pub fn retry_failed(&mut self) {
        for (key, status) in self.failed.drain() {
            self.pending.entry(key).or_insert(status);
        }
    }

    /// The object is gone.
    pub fn forget(&mut self, key: &K) {
        self.pending.remove(key);
        self.failed.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(queue: &mut WriteQueue<&'static str, u32>) -> Vec<(&'static str, u32)> {
        let mut all = queue.take_pending();
        all.sort();
        all
    }

    #[test]
    fn a_failed_write_is_retried_when_nothing_newer_exists() {
        let mut queue = WriteQueue::default();
        queue.update("m", 1);
        let batch = written(&mut queue);
        assert_eq!(batch, [("m", 1)]);
        queue.write_failed("m", 1);
        assert!(!queue.has_pending() && queue.has_failed());
        queue.retry_failed();
        assert_eq!(written(&mut queue), [("m", 1)]);
    }

    #[test]
    fn a_newer_status_after_the_failure_wins_over_the_retry() {
        let mut queue = WriteQueue::default();
        queue.update("m", 1);
        written(&mut queue);
        queue.write_failed("m", 1);
        queue.update("m", 2);
        queue.retry_failed();
        assert_eq!(written(&mut queue), [("m", 2)]);
        assert!(!queue.has_failed());
    }

    #[test]
    fn a_failure_reported_after_a_newer_status_was_queued_is_dropped() {
        let mut queue = WriteQueue::default();
        queue.update("m", 1);
        written(&mut queue);
        // The newer status is queued while the write of the older one is still in flight.
        queue.update("m", 2);
        queue.write_failed("m", 1);
        queue.retry_failed();
        assert_eq!(written(&mut queue), [("m", 2)]);
    }

    #[test]
    fn updates_before_a_write_coalesce_and_forget_drops_everything() {
        let mut queue = WriteQueue::default();
        assert!(!queue.update("m", 1));
        assert!(queue.update("m", 2));
        queue.update("n", 1);
        queue.forget(&"n");
        assert_eq!(written(&mut queue), [("m", 2)]);
        queue.write_failed("m", 2);
        queue.forget(&"m");
        queue.retry_failed();
        assert!(written(&mut queue).is_empty());
    }
}
