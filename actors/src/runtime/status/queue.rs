//! The status writer's queue: the next status to write per object, and the writes that failed. Its one rule: a
//! status that failed to be written is retried only while no newer status of the object exists, so a retry can
//! never put an older status over a newer one. A status may also be held (an object written moments ago, its change
//! only progress): it waits out of turn, coalescing what follows, until it is released or an update not held
//! replaces it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;

pub struct WriteQueue<K, S> {
    pending: HashMap<K, S>,
    /// The keys of `pending` in the order they got there (written first come, first served); a key may stay here
    /// after `forget`, and is then skipped.
    order: VecDeque<K>,
    /// The keys of `pending` that are held: not in `order` until released.
    held: HashSet<K>,
    failed: HashMap<K, S>,
}

impl<K: Hash + Eq + Clone, S> Default for WriteQueue<K, S> {
    fn default() -> Self {
        Self {
            pending: HashMap::new(),
            order: VecDeque::new(),
            held: HashSet::new(),
            failed: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq + Clone, S> WriteQueue<K, S> {
    /// The newest status of `key`; it replaces a queued, held or failed older one. Held (`hold`) it waits for
    /// [`WriteQueue::release`]; not held it takes its turn, also when it replaces a held one. True when it replaced
    /// a queued or held one.
    pub fn update(&mut self, key: K, status: S, hold: bool) -> bool {
        self.failed.remove(&key);
        let replaced = self.pending.insert(key.clone(), status).is_some();
        if self.held.contains(&key) {
            if !hold {
                self.held.remove(&key);
                self.order.push_back(key);
            }
        } else if !replaced {
            if hold {
                self.held.insert(key);
            } else {
                self.order.push_back(key);
            }
        }
        replaced
    }

    /// Objects whose status waits to be written: queued, held or failed (a key is never both queued and failed).
    pub fn pending_len(&self) -> usize {
        self.pending.len() + self.failed.len()
    }

    #[cfg(test)]
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Whether a status not held is queued for an object outside `busy`.
    pub fn has_pending_except(&self, busy: &HashSet<K>) -> bool {
        let busy_queued = busy
            .iter()
            .filter(|key| self.pending.contains_key(*key) && !self.held.contains(*key))
            .count();
        self.pending.len() - self.held.len() > busy_queued
    }

    pub fn has_failed(&self) -> bool {
        !self.failed.is_empty()
    }

    pub fn has_held(&self) -> bool {
        !self.held.is_empty()
    }

    /// The held statuses whose object `due` names take their turn now.
    pub fn release(&mut self, due: impl Fn(&K) -> bool) {
        let released: Vec<K> = self.held.iter().filter(|key| due(key)).cloned().collect();
        for key in released {
            self.held.remove(&key);
            self.order.push_back(key);
        }
    }

    /// Everything queued, to be written now.
    #[cfg(test)]
    pub fn take_pending(&mut self) -> Vec<(K, S)> {
        self.take_batch(usize::MAX)
    }

    /// Up to `max` queued statuses, oldest first, to be written now.
    #[cfg(test)]
    pub fn take_batch(&mut self, max: usize) -> Vec<(K, S)> {
        self.take_batch_except(max, |_| false)
    }

    /// Up to `max` queued statuses, oldest first, to be written now, leaving queued (in their place) those of the
    /// objects `busy` names. Held statuses stay.
    pub fn take_batch_except(&mut self, max: usize, busy: impl Fn(&K) -> bool) -> Vec<(K, S)> {
        let mut batch = Vec::new();
        let mut skipped = Vec::new();
        while batch.len() < max
            && let Some(key) = self.order.pop_front()
        {
            if self.held.contains(&key) {
                // Held after an earlier entry of it was left here by `forget`; it is queued again on release.
                continue;
            }
            if busy(&key) {
                if self.pending.contains_key(&key) {
                    skipped.push(key);
                }
                continue;
            }
            if let Some(status) = self.pending.remove(&key) {
                batch.push((key, status));
            }
        }
        for key in skipped.into_iter().rev() {
            self.order.push_front(key);
        }
        if self.pending.len() == self.held.len() {
            // Only keys of forgotten objects can be left: nothing to keep them for.
            self.order.clear();
        }
        batch
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
            if let std::collections::hash_map::Entry::Vacant(entry) = self.pending.entry(key.clone()) {
                entry.insert(status);
                self.order.push_back(key);
            }
        }
    }

    /// Whether a status of `key` waits to be written (queued, held or failed).
    pub fn holds(&self, key: &K) -> bool {
        self.pending.contains_key(key) || self.failed.contains_key(key)
    }

    /// The object is gone.
    pub fn forget(&mut self, key: &K) {
        self.pending.remove(key);
        self.held.remove(key);
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
        queue.update("m", 1, false);
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
        queue.update("m", 1, false);
        written(&mut queue);
        queue.write_failed("m", 1);
        queue.update("m", 2, false);
        queue.retry_failed();
        assert_eq!(written(&mut queue), [("m", 2)]);
        assert!(!queue.has_failed());
    }

    #[test]
    fn a_failure_reported_after_a_newer_status_was_queued_is_dropped() {
        let mut queue = WriteQueue::default();
        queue.update("m", 1, false);
        written(&mut queue);
        // The newer status is queued while the write of the older one is still in flight.
        queue.update("m", 2, false);
        queue.write_failed("m", 1);
        queue.retry_failed();
        assert_eq!(written(&mut queue), [("m", 2)]);
    }

    #[test]
    fn batches_are_taken_oldest_first() {
        let mut queue = WriteQueue::default();
        queue.update("a", 1, false);
        queue.update("b", 1, false);
        queue.update("c", 1, false);
        queue.update("a", 2, false);
        assert_eq!(queue.take_batch(2), [("a", 2), ("b", 1)]);
        queue.forget(&"c");
        assert!(queue.take_batch(2).is_empty());
    }

    #[test]
    fn a_busy_objects_status_stays_queued_in_its_place() {
        let mut queue = WriteQueue::default();
        queue.update("a", 1, false);
        queue.update("b", 1, false);
        queue.update("c", 1, false);
        assert_eq!(queue.take_batch_except(1, |key| *key == "a"), [("b", 1)]);
        let busy = std::collections::HashSet::from(["a"]);
        assert!(queue.has_pending_except(&busy), "c");
        assert_eq!(queue.take_batch_except(1, |key| *key == "a"), [("c", 1)]);
        assert!(!queue.has_pending_except(&busy), "only a, whose write is under way");
        queue.update("c", 2, false);
        assert_eq!(queue.take_batch(3), [("a", 1), ("c", 2)]);
    }

    #[test]
    fn updates_before_a_write_coalesce_and_forget_drops_everything() {
        let mut queue = WriteQueue::default();
        assert!(!queue.update("m", 1, false));
        assert!(queue.update("m", 2, false));
        queue.update("n", 1, false);
        queue.forget(&"n");
        assert_eq!(written(&mut queue), [("m", 2)]);
        queue.write_failed("m", 2);
        queue.forget(&"m");
        queue.retry_failed();
        assert!(written(&mut queue).is_empty());
    }

    #[test]
    fn a_held_status_waits_for_its_release_and_coalesces_meanwhile() {
        let mut queue = WriteQueue::default();
        queue.update("a", 1, true);
        queue.update("b", 1, false);
        assert!(!queue.update("c", 1, true));
        assert!(queue.update("a", 2, true), "coalesced into the held one");
        let none = std::collections::HashSet::new();
        assert_eq!(queue.take_batch(3), [("b", 1)]);
        assert!(
            !queue.has_pending_except(&none),
            "held statuses are not for writing now"
        );
        assert!(queue.has_held());
        queue.release(|key| *key == "a");
        assert!(queue.has_pending_except(&none));
        assert_eq!(queue.take_batch(3), [("a", 2)]);
        queue.release(|_| true);
        assert_eq!(queue.take_batch(3), [("c", 1)]);
        assert!(!queue.has_held());
    }

    #[test]
    fn an_update_not_held_releases_the_held_status_it_replaces() {
        let mut queue = WriteQueue::default();
        queue.update("a", 1, true);
        assert!(queue.update("a", 2, false));
        assert!(!queue.has_held());
        assert_eq!(queue.take_batch(3), [("a", 2)]);
    }

    #[test]
    fn a_queued_status_stays_in_its_turn_when_a_held_update_replaces_it() {
        let mut queue = WriteQueue::default();
        queue.update("a", 1, false);
        queue.update("a", 2, true);
        assert!(!queue.has_held());
        assert_eq!(queue.take_batch(3), [("a", 2)]);
    }

    #[test]
    fn pending_counts_queued_held_and_failed_objects_once_each() {
        let mut queue = WriteQueue::default();
        queue.update("queued", 1, false);
        queue.update("held", 1, true);
        queue.update("failed", 1, false);
        queue.update("failed", 2, false);
        assert_eq!(queue.pending_len(), 3);
        let batch = queue.take_batch_except(3, |key| *key != "failed");
        assert_eq!(batch, vec![("failed", 2)]);
        queue.write_failed("failed", 2);
        assert_eq!(queue.pending_len(), 3, "a failed write waits for its retry");
        queue.update("failed", 3, false);
        assert_eq!(queue.pending_len(), 3, "a newer status replaces the failed one");
        queue.forget(&"held");
        assert_eq!(queue.pending_len(), 2);
    }

    #[test]
    fn forgetting_a_held_object_drops_its_status() {
        let mut queue = WriteQueue::default();
        queue.update("a", 1, true);
        queue.forget(&"a");
        assert!(!queue.has_held() && !queue.has_pending());
        queue.release(|_| true);
        assert!(queue.take_batch(3).is_empty());
    }
}
