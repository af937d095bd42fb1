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
//! each). Places do ([`StepPlace`]): one of [`PASSES_AT_ONCE`] in all, taken before the pass reads the kubeconfig
//! Secret, and one of its cluster's [`PLACES_PER_CLUSTER`], taken before it waits for a turn. The pass keeps both to
//! its end, so that its Node read and the Node writes it decides on go with the same places. A pass that finds no
//! place ends ([`NoTurn::Busy`]); its actor then waits in its own message loop, outside any pass, for the places the
//! pass lacked ([`WorkloadClients::wait_place`], first come first served), and its next pass goes on with them.
//! - After a restart every Ready machine reads its Node once. Without the bound, thousands of passes waited for the
//!   eight turns at once (a 3,000-machine restart peaked at 164 MiB, against 93 MiB).
//! - The cluster's places keep a hung workload apiserver from holding more than half of all places, each for up to
//!   [`TURN_WAIT`]; its other machines wait for its places, not in the queue of all.
//! - A first form only tried for places and had each write try again: every freed place went to the waiting actors
//!   first, Node writes found none and backed off longer each time, and 200 machines stalled at 14 Ready.

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
/// Longest wait of an actor for a place. Longer than a turn's: the actor waits in its message loop, which costs
/// nothing, and in a batch thousands queue behind a few places; a wait that ends too soon sends the actor through a
/// pass and to the back of the queue.
pub const PLACE_WAIT: Duration = Duration::from_secs(300);
/// Passes in their workload step at once, across all clusters.
pub const PASSES_AT_ONCE: usize = 64;
/// Of those, passes of one workload cluster's machines.
pub const PLACES_PER_CLUSTER: usize = 32;

/// (namespace, name of the kubeconfig Secret).
pub type ClusterKey = (String, String);

/// The cached clients and the turns.
pub struct WorkloadClients {
    cached: Mutex<HashMap<ClusterKey, Cached>>,
    in_all: Arc<Semaphore>,
    passes: Arc<Semaphore>,
    turn_wait: Duration,
    secret_recheck: Duration,
}

struct Cached {
    kubeconfig: Vec<u8>,
    client: WorkloadClient,
    built_at: Instant,
    /// When a pass last read the kubeconfig Secret and found this very kubeconfig.
    checked_at: Instant,
}

impl Cached {
    /// Whether the client is still used ([`CLIENT_TTL`]), rather than built again.
    fn in_use(&self) -> bool {
        self.built_at.elapsed() < CLIENT_TTL
    }
}

/// How long a client is used without reading its kubeconfig Secret again. Every Node-step pass read it: one
/// management-cluster request per pass, each a chance to hang while holding a place at the Node step (docs/decisions.md
/// has the runs). A kubeconfig rotated or deleted is followed within this time; a refused one drops the client at
/// once.
pub const SECRET_RECHECK: Duration = Duration::from_secs(10);

/// How long a client is used before it is built again: its server's name is resolved (and checked) when it is
/// built, so a workload apiserver that moves is followed within this time.
pub const CLIENT_TTL: Duration = Duration::from_secs(600);

/// A workload cluster's client and its cluster's turns.
#[derive(Clone)]
pub struct WorkloadClient {
    pub client: kube::Client,
    turns: Arc<Semaphore>,
    places: Arc<Semaphore>,
}

/// A pass's place in its workload step: one of all ([`PASSES_AT_ONCE`]) and, once it knows its workload cluster, one
/// of the cluster's ([`PLACES_PER_CLUSTER`]); they end when dropped.
#[derive(Debug)]
pub struct StepPlace {
    _in_all: OwnedSemaphorePermit,
    cluster: Option<OwnedSemaphorePermit>,
}

/// The places a pass lacked, for its actor to wait for: the cluster's, if that was the one, and one of all.
#[derive(Clone, Debug)]
pub struct Wanted {
    cluster: Option<Arc<Semaphore>>,
}

/// A turn to talk to a workload cluster: the cluster's and one of all; both end when dropped.
pub struct Turn {
    _cluster: OwnedSemaphorePermit,
    _in_all: OwnedSemaphorePermit,
}

/// Why a pass got no turn.
#[derive(Debug)]
pub enum NoTurn {
    /// Every place was taken ([`PASSES_AT_ONCE`] or [`PLACES_PER_CLUSTER`]): nothing is known of the workload
    /// cluster; the machine waits for the places ([`WorkloadClients::wait_place`]) and tries again.
    Busy(Wanted),
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
            secret_recheck: SECRET_RECHECK,
        }
    }
}

impl WorkloadClients {
    /// The client cached for `key`, if it was built from this very `kubeconfig` (just read from its Secret).
    pub fn get(&self, key: &ClusterKey, kubeconfig: &[u8]) -> Option<WorkloadClient> {
        let mut cached = lock(&self.cached);
        let entry = (cached.get_mut(key)).filter(|cached| cached.kubeconfig == kubeconfig && cached.in_use())?;
        entry.checked_at = Instant::now();
        Some(entry.client.clone())
    }

    /// The client cached for `key` if its kubeconfig Secret was read and matched within [`SECRET_RECHECK`]: the
    /// pass need not read it again.
    pub fn recently_checked(&self, key: &ClusterKey) -> Option<WorkloadClient> {
        let cached = lock(&self.cached);
        let entry =
            (cached.get(key)).filter(|cached| cached.checked_at.elapsed() < self.secret_recheck && cached.in_use())?;
        Some(entry.client.clone())
    }

    /// Keeps `client`, built from `kubeconfig`, for `key`; the cluster keeps its turns and places when a client replaces
    /// another.
    pub fn insert(&self, key: ClusterKey, kubeconfig: Vec<u8>, client: kube::Client) -> WorkloadClient {
        let mut cached = lock(&self.cached);
        let (turns, places) = match cached.get(&key) {
            Some(old) => (old.client.turns.clone(), old.client.places.clone()),
            None => (
                Arc::new(Semaphore::new(PER_CLUSTER)),
                Arc::new(Semaphore::new(PLACES_PER_CLUSTER)),
            ),
        };
        let client = WorkloadClient { client, turns, places };
        let entry = Cached {
            kubeconfig,
            client: client.clone(),
            built_at: Instant::now(),
            checked_at: Instant::now(),
        };
        cached.insert(key, entry);
        client
    }

    /// Forgets the client of `key` (its kubeconfig was refused).
    pub fn remove(&self, key: &ClusterKey) {
        lock(&self.cached).remove(key);
    }

    /// A place for a pass in its workload step, if one of all is free now (before the pass reads the kubeconfig
    /// Secret).
    pub fn try_place(&self) -> Result<StepPlace, NoTurn> {
        let in_all = (self.passes.clone().try_acquire_owned()).map_err(|_| NoTurn::Busy(Wanted { cluster: None }))?;
        Ok(StepPlace {
            _in_all: in_all,
            cluster: None,
        })
    }

    /// Waits for the places `wanted`, in turn with the other waiting actors: the cluster's first, if wanted, then
    /// one of all; at most [`PLACE_WAIT`] in all. None: they did not come.
    pub async fn wait_place(&self, wanted: Wanted) -> Option<StepPlace> {
        let deadline = tokio::time::Instant::now() + PLACE_WAIT;
        let cluster = match wanted.cluster {
            Some(places) => Some(
                tokio::time::timeout_at(deadline, places.acquire_owned())
                    .await
                    .ok()?
                    .ok()?,
            ),
            None => None,
        };
        let in_all = tokio::time::timeout_at(deadline, self.passes.clone().acquire_owned()).await;
        Some(StepPlace {
            _in_all: in_all.ok()?.ok()?,
            cluster,
        })
    }

    /// Takes one of the cluster's places into `place` unless it holds one (none free: [`NoTurn::Busy`]), then waits
    /// (at most [`TURN_WAIT`] each) for the cluster's turn and for one of all.
    pub async fn turn(&self, client: &WorkloadClient, place: &mut StepPlace) -> Result<Turn, NoTurn> {
        let holds_cluster_place =
            (place.cluster.as_ref()).is_some_and(|held| Arc::ptr_eq(held.semaphore(), &client.places));
        if !holds_cluster_place {
            let busy = || {
                NoTurn::Busy(Wanted {
                    cluster: Some(client.places.clone()),
                })
            };
            place.cluster = Some(client.places.clone().try_acquire_owned().map_err(|_| busy())?);
        }
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

    /// A pass's place and its turn at `cluster`, as `workload::connect` takes them.
    async fn pass_turn(clients: &WorkloadClients, cluster: &WorkloadClient) -> Result<(StepPlace, Turn), NoTurn> {
        let mut place = clients.try_place()?;
        let turn = clients.turn(cluster, &mut place).await?;
        Ok((place, turn))
    }

    #[tokio::test]
    async fn a_client_is_used_without_its_secret_only_shortly_after_a_read_matched() {
        let clients = WorkloadClients::default();
        assert!(clients.recently_checked(&key("a")).is_none());
        clients.insert(key("a"), b"one".to_vec(), client());
        assert!(clients.recently_checked(&key("a")).is_some());
        // Refused (the kubeconfig changed to one that fails the checks): gone at once.
        clients.remove(&key("a"));
        assert!(clients.recently_checked(&key("a")).is_none());
        // Past the window the Secret is read again; a read that matches opens a new window.
        let clients = WorkloadClients {
            secret_recheck: Duration::ZERO,
            ..WorkloadClients::default()
        };
        clients.insert(key("a"), b"one".to_vec(), client());
        assert!(clients.recently_checked(&key("a")).is_none());
        assert!(clients.get(&key("a"), b"one").is_some());
    }

    #[tokio::test]
    async fn a_cluster_gets_its_turns_and_no_more_and_waits_are_bounded() {
        let clients = impatient();
        let a = clients.insert(key("a"), b"a".to_vec(), client());
        let mut turns = Vec::new();
        for _ in 0..PER_CLUSTER {
            turns.push(pass_turn(&clients, &a).await.expect("a turn"));
        }
        // The cluster's turns are taken: the next wait ends after the bound without one, while another cluster
        // still gets its own.
        assert!(matches!(pass_turn(&clients, &a).await, Err(NoTurn::TimedOut)));
        let b = clients.insert(key("b"), b"b".to_vec(), client());
        assert!(pass_turn(&clients, &b).await.is_ok());
        turns.pop();
        assert!(pass_turn(&clients, &a).await.is_ok());
    }

    #[tokio::test]
    async fn all_clusters_together_get_at_most_in_all_turns() {
        let clients = impatient();
        let mut turns = Vec::new();
        for index in 0..IN_ALL {
            let cluster = clients.insert(key(&index.to_string()), vec![], client());
            turns.push(pass_turn(&clients, &cluster).await.expect("a turn"));
        }
        let one_more = clients.insert(key("one-more"), vec![], client());
        assert!(
            matches!(pass_turn(&clients, &one_more).await, Err(NoTurn::TimedOut)),
            "more than {IN_ALL} at once"
        );
        turns.pop();
        assert!(pass_turn(&clients, &one_more).await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn places_past_the_bound_are_refused_at_once_and_waited_for_in_turn() {
        let clients = WorkloadClients::default();
        let mut places: Vec<StepPlace> = std::iter::from_fn(|| clients.try_place().ok()).collect();
        assert_eq!(places.len(), PASSES_AT_ONCE);
        // A pass finds none and ends; its actor waits, bounded, for one of its own.
        let Err(NoTurn::Busy(wanted)) = clients.try_place() else {
            panic!("a pass got a place past {PASSES_AT_ONCE}");
        };
        assert!(
            clients.wait_place(wanted.clone()).await.is_none(),
            "a wait past the bound got a place"
        );
        // Waiting actors get the places freed, in the order they came, and keep them: a pass trying meanwhile finds
        // none.
        let mut first = Box::pin(clients.wait_place(wanted.clone()));
        let mut second = Box::pin(clients.wait_place(wanted));
        assert!(futures::poll!(first.as_mut()).is_pending());
        assert!(futures::poll!(second.as_mut()).is_pending());
        places.pop();
        assert!(futures::poll!(second.as_mut()).is_pending());
        let kept = first.await.expect("the first waiting actor's place");
        assert!(matches!(clients.try_place(), Err(NoTurn::Busy(_))));
        drop(kept);
        assert!(second.await.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn one_cluster_holds_at_most_its_places_and_its_machines_wait_for_those() {
        let clients = WorkloadClients::default();
        let a = clients.insert(key("a"), b"a".to_vec(), client());
        // Passes of cluster a take all its places: two get a turn, the others wait for one.
        let (mut held, mut waiting) = (Vec::new(), Vec::new());
        for _ in 0..PLACES_PER_CLUSTER {
            let (clients, a) = (&clients, a.clone());
            let mut pass = Box::pin(async move {
                let mut place = clients.try_place().expect("a place of all");
                let turn = clients.turn(&a, &mut place).await;
                (place, turn)
            });
            match futures::poll!(pass.as_mut()) {
                std::task::Poll::Ready(with_turn) => held.push(with_turn),
                std::task::Poll::Pending => waiting.push(pass),
            }
        }
        assert_eq!(held.len(), PER_CLUSTER);
        // The next pass of a is refused at once, though places of all are free; another cluster's pass is not.
        let mut place = clients.try_place().expect("a place of all");
        let Err(NoTurn::Busy(wanted)) = clients.turn(&a, &mut place).await else {
            panic!("a pass past the cluster's {PLACES_PER_CLUSTER} places waited for a turn");
        };
        drop(place);
        let b = clients.insert(key("b"), b"b".to_vec(), client());
        assert!(pass_turn(&clients, &b).await.is_ok());
        // Its actor waits for one of a's places; once a pass of a ends, it has one, and its pass needs no other.
        let mut wait = Box::pin(clients.wait_place(wanted));
        assert!(futures::poll!(wait.as_mut()).is_pending());
        drop(held.pop());
        let mut place = wait.await.expect("a place of cluster a");
        let cluster_places_free = a.places.available_permits();
        let _turn = clients.turn(&a, &mut place).await;
        assert_eq!(
            a.places.available_permits(),
            cluster_places_free,
            "the pass took a second place of a"
        );
    }
}
