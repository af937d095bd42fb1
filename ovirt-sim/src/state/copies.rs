//! Disk copies of cloned VMs, sharing their storage domain's bandwidth. A clone (`POST /vms?clone=true`, or a
//! template disk copied to another domain) copies the template's whole image (its allocated bytes) while the VM is
//! `image_locked`; copies to the same domain share its bandwidth evenly, so a thousand clones at once take a
//! thousand times as long as one. A thin VM (a qcow2 layer over the template) copies nothing.
//!
//! The model: each domain has a pool of active copies with their remaining bytes. Whenever the pool changes (a copy
//! joins or ends), the time since the last change is charged to every active copy at `bandwidth / n`, and one timer
//! is set for the copy that ends first. A timer of an older pool (`epoch`) is stale and ignored.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use super::schedule::{Scheduled, Transition, later};

/// The active copies of one storage domain.
#[derive(Debug, Clone, Default)]
pub struct CopyPool {
    /// VM id → bytes still to copy.
    remaining: BTreeMap<String, f64>,
    /// When `remaining` was last brought up to date.
    updated: Option<Instant>,
    /// Bumped on every change; the pool's timer carries it.
    epoch: u64,
}

/// Every domain's pool, by storage domain id.
pub type CopyPools = HashMap<String, CopyPool>;

impl CopyPool {
    /// Charges the time since the last change to every active copy.
    fn advance(&mut self, now: Instant, bytes_per_second: f64) {
        if let Some(updated) = self.updated
            && !self.remaining.is_empty()
        {
            let share = bytes_per_second / self.remaining.len() as f64;
            let copied = now.saturating_duration_since(updated).as_secs_f64() * share;
            for left in self.remaining.values_mut() {
                *left = (*left - copied).max(0.0);
            }
        }
        self.updated = Some(now);
    }

    /// The timer for the copy that ends first, if any copy is active.
    fn next_timer(&mut self, domain: &str, bytes_per_second: f64) -> Option<Scheduled> {
        self.epoch += 1;
        let least = self.remaining.values().copied().reduce(f64::min)?;
        let seconds = least * self.remaining.len() as f64 / bytes_per_second;
        let ms = (seconds * 1000.0).ceil().min(u64::MAX as f64) as u64;
        Some(later(ms, domain, self.epoch, Transition::CopyProgress))
    }

    /// How many copies are running.
    pub fn active(&self) -> usize {
        self.remaining.len()
    }
}

/// A VM's copy of `bytes` joins its domain's pool; returns the pool's new timer.
pub fn start(pools: &mut CopyPools, domain: &str, vm_id: &str, bytes: u64, bytes_per_second: f64) -> Option<Scheduled> {
    let pool = pools.entry(domain.to_string()).or_default();
    pool.advance(Instant::now(), bytes_per_second);
    pool.remaining.insert(vm_id.to_string(), bytes as f64);
    pool.next_timer(domain, bytes_per_second)
}

/// The pool's timer fired: the copies that are done leave it (their VMs' ids are returned), and the next timer is
/// set. A stale timer (the pool changed since) does nothing.
pub fn progress(
    pools: &mut CopyPools,
    domain: &str,
    epoch: u64,
    bytes_per_second: f64,
) -> (Vec<String>, Option<Scheduled>) {
    let Some(pool) = pools.get_mut(domain) else {
        return (Vec::new(), None);
    };
    if pool.epoch != epoch {
        return (Vec::new(), None);
    }
    pool.advance(Instant::now(), bytes_per_second);
    // Less than a byte left, or what the timer's millisecond rounding leaves, counts as done.
    let slack = bytes_per_second / 1000.0;
    let done: Vec<String> = pool
        .remaining
        .iter()
        .filter(|(_, left)| **left <= slack.max(1.0))
        .map(|(id, _)| id.clone())
        .collect();
    for id in &done {
        pool.remaining.remove(id);
    }
    let next = pool.next_timer(domain, bytes_per_second);
    (done, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: f64 = (1u64 << 30) as f64;

    #[test]
    fn one_copy_takes_its_size_over_the_bandwidth() {
        let mut pools = CopyPools::new();
        let timer = start(&mut pools, "sd", "vm-1", 2 << 30, GIB).unwrap();
        assert_eq!(timer.after.as_millis(), 2000);
        assert_eq!(timer.transition, Transition::CopyProgress);
    }

    #[test]
    fn concurrent_copies_share_the_bandwidth() {
        let mut pools = CopyPools::new();
        start(&mut pools, "sd", "vm-1", 1 << 30, GIB);
        let timer = start(&mut pools, "sd", "vm-2", 1 << 30, GIB).unwrap();
        // Two copies of 1 GiB at 1 GiB/s shared: both end after about 2 s, not 1 s.
        assert!((1990..=2000).contains(&timer.after.as_millis()), "{:?}", timer.after);
        // The first timer is stale now.
        let (done, next) = progress(&mut pools, "sd", timer.generation - 1, GIB);
        assert!(done.is_empty() && next.is_none());
        // Another domain is not shared.
        let other = start(&mut pools, "sd-2", "vm-3", 1 << 30, GIB).unwrap();
        assert_eq!(other.after.as_millis(), 1000);
        assert_eq!(pools["sd"].active(), 2);
    }
}
