//! Clients of tenants' workload apiservers, kept per (namespace, kubeconfig Secret) while the kubeconfig stays the
//! same, and how many requests they send at once. Every answer is capped (`kube_clients::workload_client`); these
//! limits cap how many answers are read at the same time, so that what hostile servers can cost the operator is a
//! fixed sum, not one answer per machine waiting for its Node:
//!
//! - [`PER_CLUSTER`] request (or listing) at a time per workload cluster: the machines of one cluster take turns;
//! - [`IN_ALL`] at a time across all clusters: one tenant with many clusters cannot hold more.
//!
//! Waiting for a turn is bounded ([`TURN_WAIT`]): a machine that gets none backs off and says why.
//!
//! A pass in its workload step holds no reconcile permit, so the permits do not bound how many are alive (about 20 KB
//! each). [`PASSES_AT_ONCE`] places do: a pass takes one before it reads the kubeconfig Secret and keeps it to its
//! end, so that its Node read and the Node writes it decides on go with the same place. A pass that finds every place
//! taken ends ([`NoTurn::Busy`]); its actor then waits in its own message loop, outside any pass, for a place of its
//! own ([`WorkloadClients::wait_place`], first come first served), and its next pass goes on with it. After a restart
//! every Ready machine reads its Node once; without the bound thousands of passes waited for the eight turns at once
//! (a 3,000-machine restart peaked at 164 MiB, against 93 MiB).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Requests at a time per workload cluster: two, so that one slow answer does not stop a cluster's other machines.
pub const PER_CLUSTER: usize = 2;
/// Requests at a time across all workload clusters.
pub const IN_ALL: usize = 8;
/// Longest wait for a turn, each of the two.
pub const TURN_WAIT: Duration = Duration::from_secs(30);
/// Passes in their workload step at once, across all clusters. A hung workload apiserver holds a place for at most
/// [`TURN_WAIT`] per pass; its machines then back off.
pub const PASSES_AT_ONCE: usize = 64;

/// (namespace, name of the kubeconfig Secret).
pub type ClusterKey = (String, String);

/// The cached clients and the turns.
pub struct WorkloadClients {
    cached: Mutex<HashMap<ClusterKey, Cached>>,
    in_all: Arc<Semaphore>,
    passes: Arc<Semaphore>,
    turn_wait: Duration,
}

struct Cached {
    kubeconfig: Vec<u8>,
    client: WorkloadClient,
    built_at: Instant,
}

/// How long a client is used before it is built again: its server's name is resolved (and checked) when it is
/// built, so a workload apiserver that moves is followed within this time.
pub const CLIENT_TTL: Duration = Duration::from_secs(600);

/// A workload cluster's client and its cluster's turns.
#[derive(Clone)]
pub struct WorkloadClient {
    pub client: kube::Client,
    turns: Arc<Semaphore>,
}

/// A pass's place in its workload step ([`PASSES_AT_ONCE`]); it ends when dropped.
#[derive(Debug)]
pub struct StepPlace {
    _held: OwnedSemaphorePermit,
}

/// A turn to talk to a workload cluster: the cluster's and one of all; both end when dropped.
pub struct Turn {
    _cluster: OwnedSemaphorePermit,
    _in_all: OwnedSemaphorePermit,
}

/// Why a pass got no turn.
#[derive(Debug)]
pub enum NoTurn {
    /// Every place was taken ([`PASSES_AT_ONCE`]): nothing is known of the workload cluster; the machine waits for a
    /// place of its own ([`WorkloadClients::wait_place`]) and tries again.
    Busy,
    /// A turn did not come within [`TURN_WAIT`]: the cluster (or others) answer slowly.
    TimedOut,
}

impl Default for WorkloadClients {
    fn default() -> Self {
        WorkloadClients {
            cached: Mutex::new(HashMap::new()),
            in_all: Arc::new(Semaphore::new(IN_ALL)),
            passes: Arc::new(Semaphore::new(PASSES_AT_ONCE)),
            turn_wait: TURN_WAIT,
        }
    }
}

impl WorkloadClients {
    /// The client cached for `key`, if it was built from this very `kubeconfig`.
    pub fn get(&self, key: &ClusterKey, kubeconfig: &[u8]) -> Option<WorkloadClient> {
        let cached = lock(&self.cached);
        cached
            .get(key)
            .filter(|cached| cached.kubeconfig == kubeconfig && cached.built_at.elapsed() < CLIENT_TTL)
            .map(|cached| cached.client.clone())
    }

    /// Keeps `client`, built from `kubeconfig`, for `key`; the cluster keeps its turns when a client replaces
    /// another.
    pub fn insert(&self, key: ClusterKey, kubeconfig: Vec<u8>, client: kube::Client) -> WorkloadClient {
        let mut cached = lock(&self.cached);
        let turns = (cached.get(&key).map(|old| old.client.turns.clone()))
            .unwrap_or_else(|| Arc::new(Semaphore::new(PER_CLUSTER)));
        let client = WorkloadClient { client, turns };
        let entry = Cached {
            kubeconfig,
            client: client.clone(),
            built_at: Instant::now(),
        };
        cached.insert(key, entry);
        client
    }

    /// Forgets the client of `key` (its kubeconfig was refused).
    pub fn remove(&self, key: &ClusterKey) {
        lock(&self.cached).remove(key);
    }

    /// A place for a pass in its workload step, if one is free now (before the pass reads the kubeconfig Secret).
    pub fn try_place(&self) -> Result<StepPlace, NoTurn> {
        (self.passes.clone().try_acquire_owned())
            .map(|held| StepPlace { _held: held })
            .map_err(|_| NoTurn::Busy)
    }

    /// Waits for a place, in turn with the other waiting actors, for at most [`TURN_WAIT`]; None: none came.
    pub async fn wait_place(&self) -> Option<StepPlace> {
        let held = tokio::time::timeout(self.turn_wait, self.passes.clone().acquire_owned()).await;
        Some(StepPlace {
            _held: held.ok()?.ok()?,
        })
    }

    /// Waits (at most [`TURN_WAIT`] each) for the cluster's turn, then for one of all.
    pub async fn turn(&self, client: &WorkloadClient) -> Result<Turn, NoTurn> {
        let timed = |acquired: Result<Result<OwnedSemaphorePermit, _>, _>| match acquired {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(NoTurn::TimedOut),
        };
        let cluster = timed(tokio::time::timeout(self.turn_wait, client.turns.clone().acquire_owned()).await)?;
        let in_all = timed(tokio::time::timeout(self.turn_wait, self.in_all.clone().acquire_owned()).await)?;
        Ok(Turn {
            _cluster: cluster,
            _in_all: in_all,
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> kube::Client {
        let config = kube::Config::new("https://127.0.0.1:6443".parse().expect("url"));
        kube::Client::try_from(config).expect("client")
    }

    fn key(name: &str) -> ClusterKey {
        ("tenant".into(), name.into())
    }

    /// Turns waited for 50 ms instead of [`TURN_WAIT`].
    fn impatient() -> WorkloadClients {
        WorkloadClients {
            turn_wait: Duration::from_millis(50),
            ..WorkloadClients::default()
        }
    }

    #[tokio::test]
    async fn a_cached_client_serves_only_the_kubeconfig_it_was_built_from() {
        let clients = WorkloadClients::default();
        clients.insert(key("a"), b"one".to_vec(), client());
        assert!(clients.get(&key("a"), b"one").is_some());
        assert!(clients.get(&key("a"), b"two").is_none());
        clients.remove(&key("a"));
        assert!(clients.get(&key("a"), b"one").is_none());
    }

    #[tokio::test]
    async fn a_cluster_gets_its_turns_and_no_more_and_waits_are_bounded() {
        let clients = impatient();
        let a = clients.insert(key("a"), b"a".to_vec(), client());
        let mut turns: Vec<Turn> = Vec::new();
        for _ in 0..PER_CLUSTER {
            turns.push(clients.turn(&a).await.expect("a turn"));
        }
        // The cluster's turns are taken: the next wait ends after the bound without one, while another cluster
        // still gets its own.
        assert!(matches!(clients.turn(&a).await, Err(NoTurn::TimedOut)));
        let b = clients.insert(key("b"), b"b".to_vec(), client());
        assert!(clients.turn(&b).await.is_ok());
        turns.pop();
        assert!(clients.turn(&a).await.is_ok());
    }

    #[tokio::test]
    async fn all_clusters_together_get_at_most_in_all_turns() {
        let clients = impatient();
        let mut turns = Vec::new();
        for index in 0..IN_ALL {
            let cluster = clients.insert(key(&index.to_string()), vec![], client());
            turns.push(clients.turn(&cluster).await.expect("a turn"));
        }
        let one_more = clients.insert(key("one-more"), vec![], client());
        assert!(
            matches!(clients.turn(&one_more).await, Err(NoTurn::TimedOut)),
            "more than {IN_ALL} at once"
        );
        turns.pop();
        assert!(clients.turn(&one_more).await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn places_past_the_bound_are_refused_at_once_and_waited_for_in_turn() {
        let clients = WorkloadClients::default();
        let mut places: Vec<StepPlace> = std::iter::from_fn(|| clients.try_place().ok()).collect();
        assert_eq!(places.len(), PASSES_AT_ONCE);
        // A pass finds none and ends; its actor waits, bounded, for one of its own.
        assert!(matches!(clients.try_place(), Err(NoTurn::Busy)));
        assert!(
            clients.wait_place().await.is_none(),
            "a wait past the bound got a place"
        );
        // Waiting actors get the places freed, in the order they came, and keep them: a pass trying meanwhile finds
        // none.
        let mut first = Box::pin(clients.wait_place());
        let mut second = Box::pin(clients.wait_place());
        assert!(futures::poll!(first.as_mut()).is_pending());
        assert!(futures::poll!(second.as_mut()).is_pending());
        places.pop();
        assert!(matches!(futures::poll!(second.as_mut()), std::task::Poll::Pending));
        let kept = first.await.expect("the first waiting actor's place");
        assert!(matches!(clients.try_place(), Err(NoTurn::Busy)));
        drop(kept);
        assert!(second.await.is_some());
    }
}
