//! What every connection and timer of one simulator shares: the engine state, the settings tests change, and the
//! counts and records tests read.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use crate::engine::{self, Timings};
use crate::faults::{FaultInjection, fault_matches};
use crate::request::Incoming;
use crate::state::{CopyOutcome, Scheduled, State};
use crate::wire::{Format, Reply};

/// State shared by all connections and timers.
pub struct Shared {
    state: Mutex<State>,
    pub(crate) timings: RwLock<Timings>,
    pub(crate) faults: RwLock<FaultInjection>,
    pub(crate) counters: Mutex<BTreeMap<String, u64>>,
    pub(crate) token_ttl: RwLock<Option<Duration>>,
    /// The most recent correlation ids received, oldest first.
    pub(crate) correlation_ids: Mutex<std::collections::VecDeque<String>>,
    /// Bytes of oversized answers generated so far ([`crate::faults::BodyFault::Oversized`]).
    pub(crate) streamed_bytes: Arc<AtomicU64>,
    /// Bytes of every engine answer body (API and SSO), for benchmarks: what clients download.
    pub(crate) response_bytes: AtomicU64,
    /// Every API write received (most recent [`REMEMBERED_WRITES`]), with who sent it: tests check that two
    /// replicas never wrote at once.
    pub(crate) writes: Mutex<std::collections::VecDeque<WriteRecord>>,
    /// False while the simulator refuses connections (its port closed, open connections dropped), as a stopped
    /// engine or a host that is down; see [`crate::Control::set_refusing_connections`].
    pub(crate) listening: tokio::sync::watch::Sender<bool>,
}

/// Counter prefix of request bodies refused by the model check.
pub(crate) const REJECTED_BODY: &str = "rejected-body ";
/// One API write (`POST`, `PUT`, `DELETE`) as the engine received it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WriteRecord {
    /// When it arrived, in milliseconds since the Unix epoch.
    pub received_ms: u64,
    pub method: String,
    pub path: String,
    /// The sender's User-Agent (CAPOV's names its replica).
    pub user_agent: String,
    /// The answer's status.
    pub status: u16,
}

/// How many writes the simulator remembers.
const REMEMBERED_WRITES: usize = 100_000;

impl Shared {
    /// A simulator's shared part around `state`: no faults, counts or records yet, its port open.
    pub fn new(state: State, timings: Timings, token_ttl: Option<Duration>) -> Self {
        Shared {
            state: Mutex::new(state),
            timings: RwLock::new(timings),
            faults: RwLock::new(FaultInjection::default()),
            counters: Mutex::new(BTreeMap::new()),
            token_ttl: RwLock::new(token_ttl),
            correlation_ids: Mutex::new(std::collections::VecDeque::new()),
            writes: Mutex::new(std::collections::VecDeque::new()),
            listening: tokio::sync::watch::channel(true).0,
            streamed_bytes: Arc::new(AtomicU64::new(0)),
            response_bytes: AtomicU64::new(0),
        }
    }

    /// The engine state. Never held across an await.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn timings(&self) -> Timings {
        *self.timings.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn faults(&self) -> FaultInjection {
        self.faults.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn token_ttl(&self) -> Option<Duration> {
        *self.token_ttl.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs delayed transitions on a tokio timer (no thread per VM): the steps of one operation in one task, in
    /// their order. On separate timers, a late runtime (a busy machine) could wake a later step first, e.g. a boot's
    /// device report before its `up`, which then never came.
    pub fn schedule(self: &Arc<Self>, mut items: Vec<Scheduled>) {
        if items.is_empty() {
            return;
        }
        items.sort_by_key(|item| item.after);
        let shared = Arc::clone(self);
        let start = tokio::time::Instant::now();
        tokio::spawn(async move {
            for item in items {
                tokio::time::sleep_until(start + item.after).await;
                let timings = shared.timings();
                let more = engine::apply(&mut shared.lock(), &timings, &item);
                shared.schedule(more);
            }
        });
    }

    /// An injected error for this API request, if the fault settings call for one.
    pub(crate) fn injected_error(&self, req: &Incoming, format: Format) -> Option<Reply> {
        let mut faults = self.faults.write().unwrap_or_else(|e| e.into_inner());
        if !fault_matches(&faults, req) {
            return None;
        }
        let hit = if faults.fail_next > 0 {
            faults.fail_next -= 1;
            true
        } else {
            faults.error_rate > 0.0 && fastrand::f64() < faults.error_rate
        };
        if !hit {
            return None;
        }
        Some(match &faults.error_detail {
            Some(detail) => crate::wire::error(&engine::operation_failed(faults.error_status, detail), format),
            None => Reply::empty(faults.error_status),
        })
    }

    /// The outcome of the disk copy of an accepted add, consuming one injected copy failure if any.
    pub(crate) fn take_copy_fault(&self) -> CopyOutcome {
        let mut faults = self.faults.write().unwrap_or_else(|e| e.into_inner());
        if faults.vanishing_creates > 0 {
            faults.vanishing_creates -= 1;
            CopyOutcome::Vanishes
        } else if faults.illegal_creates > 0 {
            faults.illegal_creates -= 1;
            CopyOutcome::Illegal
        } else {
            CopyOutcome::Succeeds
        }
    }

    /// Counts a request body the engine would refuse, under `rejected-body {service/methods/name}` (outside `total`).
    pub(crate) fn count_rejected_body(&self, usage: &str) {
        let mut counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        *counters.entry(format!("{REJECTED_BODY}{usage}")).or_insert(0) += 1;
    }

    pub(crate) fn record_write(&self, record: WriteRecord) {
        let mut writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        if writes.len() == REMEMBERED_WRITES {
            writes.pop_front();
        }
        writes.push_back(record);
    }

    pub(crate) fn count(&self, key: String) {
        let mut counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        *counters.entry(key).or_insert(0) += 1;
        *counters.entry("total".to_string()).or_insert(0) += 1;
    }
}
