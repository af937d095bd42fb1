//! Clients of tenants' workload apiservers, kept per (namespace, kubeconfig Secret) while the Secret stays the same
//! version, and how many requests they send at once. Every answer is capped (`kube::clients::workload_client`); these
//! limits cap how many answers are read at the same time, so that what hostile servers can cost the operator is a
//! fixed sum, not one answer per machine waiting for its Node:
//!
//! - [`PER_CLUSTER`] request (or listing) at a time per workload cluster: the machines of one cluster take turns;
//! - [`IN_ALL`] at a time across all clusters: one tenant with many clusters cannot hold more.
//!
//! The cache itself is bounded: at most [`MAX_CLIENTS`] entries and [`MAX_CLIENT_BYTES`] of the kubeconfigs their
//! clients were built from (a client keeps its kubeconfig's CA certificates and credentials), and an entry no machine
//! used for [`CLIENT_IDLE`] goes when the next entry is made. Past a bound the least recently used entry goes first. An entry in use (a pass holds
//! its client, its turns or places, or a machine waits for its places) is never evicted: a new entry would bring new
//! turns and places, and the cluster would get twice its share. Entries in use are bounded by the places
//! ([`PASSES_AT_ONCE`]), so the cache holds at most [`MAX_CLIENTS`] + [`PASSES_AT_ONCE`] entries.
//!
//! A kubeconfig refused by its checks is remembered for its Secret's version, like a client: it is parsed again
//! only when the Secret changes (or after [`CLIENT_TTL`]), and the refusal drops the client of the kubeconfig it
//! replaced.
//!
//! Reads of the kubeconfig Secrets themselves run [`SECRET_READS_AT_ONCE`] at a time: each holds the Secret's answer
//! (up to `slim_requests::SECRET_ANSWER`) until it is decoded.
//!
//! Waiting for a turn is bounded ([`TURN_WAIT`]): a machine that gets none backs off and says why.
//!
//! A pass in its workload step holds no reconcile permit, so the permits do not bound how many are alive (about 20 KB
//! each). Places do ([`StepPlace`]): one of [`PASSES_AT_ONCE`] in all, taken before the pass reads the kubeconfig
//! Secret, and one of its cluster's [`PLACES_PER_CLUSTER`], taken before it waits for a turn. The pass keeps both to
//! its end, so that its Node read and the Node writes it decides on go with the same places. A pass that finds no
//! place ends ([`NoTurn::Busy`]); a task then waits, outside any pass, for the places the pass lacked
//! ([`WorkloadClients::wait_place`], first come first served) while the machine rests, and its next pass goes on with
//! them.
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
/// Longest wait of a machine for a place. Longer than a turn's: the machine rests while a small task waits, and in a
/// batch thousands queue behind a few places; a wait that ends too soon sends the machine through a pass and to the
/// back of the queue.
pub const PLACE_WAIT: Duration = Duration::from_secs(300);
/// Passes in their workload step at once, across all clusters.
pub const PASSES_AT_ONCE: usize = 64;
/// Of those, passes of one workload cluster's machines.
pub const PLACES_PER_CLUSTER: usize = 32;

/// Entries the client cache keeps (beyond those in use).
pub const MAX_CLIENTS: usize = 256;
/// Bytes of kubeconfig the cache's clients were built from, in all (beyond entries in use). A kubeconfig Cluster API
/// writes, with its CA, client certificate and key inline, is about 6 KiB: 256 of them fit; kubeconfigs of the
/// largest size accepted (`workload_kubeconfig::MAX_BYTES`, 64 KiB) fit 32 at a time.
pub const MAX_CLIENT_BYTES: usize = 2 << 20;
/// An entry no machine used for this long goes.
pub const CLIENT_IDLE: Duration = Duration::from_secs(600);
/// Reads of kubeconfig Secrets at once, each holding its answer until it is decoded.
pub const SECRET_READS_AT_ONCE: usize = 4;

/// (namespace, name of the kubeconfig Secret).
pub type ClusterKey = (String, String);

/// A version of a kubeconfig Secret: its uid and resourceVersion (the same version holds the same kubeconfig), and
/// a fingerprint of its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretVersion {
    pub uid: String,
    pub resource_version: String,
    pub value: u64,
}

/// The cached clients and the turns.
pub struct WorkloadClients {
    cached: Mutex<Cache>,
    in_all: Arc<Semaphore>,
    passes: Arc<Semaphore>,
    secret_reads: Arc<Semaphore>,
    turn_wait: Duration,
    secret_recheck: Duration,
    bounds: CacheBounds,
}

/// The cache's bounds ([`MAX_CLIENTS`], [`MAX_CLIENT_BYTES`], [`CLIENT_IDLE`]).
#[derive(Clone, Copy, Debug)]
struct CacheBounds {
    entries: usize,
    bytes: usize,
    idle: Duration,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<ClusterKey, Cached>,
    /// The kubeconfig bytes of the entries' clients, in all.
    bytes: usize,
    /// Counts uses, to order entries by their last ([`Cached::last_use`]).
    uses: u64,
}

struct Cached {
    /// The Secret version the entry was made from.
    version: SecretVersion,
    /// The client built from its kubeconfig, or why the kubeconfig was refused.
    made: Made,
    /// The cluster's turns and places: kept while the entry is, whatever its client.
    turns: Arc<Semaphore>,
    places: Arc<Semaphore>,
    /// The size of the kubeconfig the client was built from (0 for a refusal).
    bytes: usize,
    made_at: Instant,
    /// When a pass last read the kubeconfig Secret and found this very version.
    checked_at: Instant,
    /// When a pass last used the entry, and its place in the order of uses.
    used_at: Instant,
    last_use: u64,
}

enum Made {
    Client(kube::Client),
    Refused(String),
}

impl Cached {
    fn new(version: SecretVersion, made: Made, turns: Arc<Semaphore>, places: Arc<Semaphore>, bytes: usize) -> Cached {
        let now = Instant::now();
        Cached {
            version,
            made,
            turns,
            places,
            bytes,
            made_at: now,
            checked_at: now,
            used_at: now,
            last_use: 0,
        }
    }

    /// Whether what was made is still used ([`CLIENT_TTL`]), rather than made again.
    fn fresh(&self) -> bool {
        self.made_at.elapsed() < CLIENT_TTL
    }

    /// Whether a pass or a waiting actor holds the entry's client, turns or places.
    fn held(&self) -> bool {
        Arc::strong_count(&self.turns) > 1 || Arc::strong_count(&self.places) > 1
    }

    fn client(&self) -> Option<WorkloadClient> {
        match &self.made {
            Made::Client(client) => Some(WorkloadClient {
                client: client.clone(),
                turns: self.turns.clone(),
                places: self.places.clone(),
            }),
            Made::Refused(_) => None,
        }
    }
}

/// What the cache knows of a Secret version ([`WorkloadClients::known`]).
pub enum Known {
    Client(WorkloadClient),
    /// Its kubeconfig was refused: why.
    Refused(String),
}

/// How long a client is used without reading its kubeconfig Secret again. Every Node-step pass read it: one
/// management-cluster request per pass, each a chance to hang while holding a place at the Node step (docs/decisions.md
/// has the runs). A kubeconfig rotated or deleted is followed within this time; a refused one drops the client at
/// once.
pub const SECRET_RECHECK: Duration = Duration::from_secs(10);

/// How long a client is used before it is built again: its server's name is resolved (and checked) when it is
/// built, so a workload apiserver that moves is followed within this time. A refusal is kept as long.
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

/// The places a pass lacked, for the machine to wait for: the cluster's, if that was the one, and one of all.
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
            cached: Mutex::new(Cache::default()),
            in_all: Arc::new(Semaphore::new(IN_ALL)),
            passes: Arc::new(Semaphore::new(PASSES_AT_ONCE)),
            secret_reads: Arc::new(Semaphore::new(SECRET_READS_AT_ONCE)),
            turn_wait: TURN_WAIT,
            secret_recheck: SECRET_RECHECK,
            bounds: CacheBounds {
                entries: MAX_CLIENTS,
                bytes: MAX_CLIENT_BYTES,
                idle: CLIENT_IDLE,
            },
        }
    }
}

impl WorkloadClients {
    /// What is cached for `key` if it was made from this very Secret `version` (just read) and is fresh: its client,
    /// or why its kubeconfig was refused. None: the kubeconfig is to be parsed (and a client built).
    pub fn known(&self, key: &ClusterKey, version: &SecretVersion) -> Option<Known> {
        let mut cache = lock(&self.cached);
        let entry = cache
            .used(key)
            .filter(|cached| &cached.version == version && cached.fresh())?;
        entry.checked_at = Instant::now();
        Some(match &entry.made {
            Made::Refused(why) => Known::Refused(why.clone()),
            Made::Client(_) => Known::Client(entry.client()?),
        })
    }

    /// The client cached for `key` if its kubeconfig Secret was read and matched within [`SECRET_RECHECK`]: the
    /// pass need not read it again.
    pub fn recently_checked(&self, key: &ClusterKey) -> Option<WorkloadClient> {
        let mut cache = lock(&self.cached);
        let entry = cache
            .used(key)
            .filter(|cached| cached.checked_at.elapsed() < self.secret_recheck && cached.fresh())?;
        entry.client()
    }

    /// Keeps `client`, built from a kubeconfig of `bytes` bytes in Secret `version`, for `key`; the cluster keeps its
    /// turns and places when a client replaces another. Entries past the bounds go (never one in use).
    pub fn insert(
        &self,
        key: ClusterKey,
        version: SecretVersion,
        bytes: usize,
        client: kube::Client,
    ) -> WorkloadClient {
        let mut cache = lock(&self.cached);
        let (turns, places) = cache.take_turns(&key);
        let kept = WorkloadClient {
            client: client.clone(),
            turns: turns.clone(),
            places: places.clone(),
        };
        cache.put(key, Cached::new(version, Made::Client(client), turns, places, bytes));
        self.evict(&mut cache);
        kept
    }

    /// Remembers that the kubeconfig of Secret `version` was refused (`why`): the client of the kubeconfig it
    /// replaced goes at once; the cluster keeps its turns and places.
    pub fn refuse(&self, key: ClusterKey, version: SecretVersion, why: String) {
        let mut cache = lock(&self.cached);
        let (turns, places) = cache.take_turns(&key);
        cache.put(key, Cached::new(version, Made::Refused(why), turns, places, 0));
        self.evict(&mut cache);
    }

    /// Drops the entries no one holds that no machine used for the idle time, then, while the cache is past a bound,
    /// the least recently used of those no one holds.
    fn evict(&self, cache: &mut Cache) {
        let bounds = self.bounds;
        let idle: Vec<ClusterKey> = (cache.entries.iter())
            .filter(|(_, cached)| !cached.held() && cached.used_at.elapsed() >= bounds.idle)
            .map(|(key, _)| key.clone())
            .collect();
        for key in idle {
            cache.remove(&key);
        }
        while cache.entries.len() > bounds.entries || cache.bytes > bounds.bytes {
            let oldest = (cache.entries.iter())
                .filter(|(_, cached)| !cached.held())
                .min_by_key(|(_, cached)| cached.last_use)
                .map(|(key, _)| key.clone());
            match oldest {
                Some(key) => drop(cache.remove(&key)),
                // Every entry left is in use: bounded by the places.
                None => break,
            }
        }
    }

    /// How many entries the cache holds and the kubeconfig bytes of their clients.
    #[cfg(test)]
    fn cached(&self) -> (usize, usize) {
        let cache = lock(&self.cached);
        (cache.entries.len(), cache.bytes)
    }

    /// A turn to read a kubeconfig Secret ([`SECRET_READS_AT_ONCE`]), waited for at most [`TURN_WAIT`].
    pub async fn secret_read(&self) -> Option<OwnedSemaphorePermit> {
        let permit = tokio::time::timeout(self.turn_wait, self.secret_reads.clone().acquire_owned()).await;
        permit.ok()?.ok()
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

impl Cache {
    /// The turns and places of `key`'s entry, which goes; new ones if there is none.
    fn take_turns(&mut self, key: &ClusterKey) -> (Arc<Semaphore>, Arc<Semaphore>) {
        match self.remove(key) {
            Some(old) => (old.turns, old.places),
            None => (
                Arc::new(Semaphore::new(PER_CLUSTER)),
                Arc::new(Semaphore::new(PLACES_PER_CLUSTER)),
            ),
        }
    }

    /// `key`'s entry, marked used now.
    fn used(&mut self, key: &ClusterKey) -> Option<&mut Cached> {
        self.uses += 1;
        let uses = self.uses;
        let entry = self.entries.get_mut(key)?;
        entry.used_at = Instant::now();
        entry.last_use = uses;
        Some(entry)
    }

    fn put(&mut self, key: ClusterKey, mut entry: Cached) {
        self.uses += 1;
        entry.last_use = self.uses;
        self.bytes += entry.bytes;
        if let Some(old) = self.entries.insert(key, entry) {
            self.bytes -= old.bytes;
        }
    }

    fn remove(&mut self, key: &ClusterKey) -> Option<Cached> {
        let old = self.entries.remove(key)?;
        self.bytes -= old.bytes;
        Some(old)
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

    fn version(resource_version: &str) -> SecretVersion {
        SecretVersion {
            uid: "uid-1".into(),
            resource_version: resource_version.into(),
            value: 0,
        }
    }

    fn known_client(clients: &WorkloadClients, name: &str, resource_version: &str) -> bool {
        matches!(
            clients.known(&key(name), &version(resource_version)),
            Some(Known::Client(_))
        )
    }

    #[tokio::test]
    async fn a_cached_client_serves_only_the_secret_version_it_was_built_from() {
        let clients = WorkloadClients::default();
        clients.insert(key("a"), version("1"), 10, client());
        assert!(known_client(&clients, "a", "1"));
        assert!(clients.known(&key("a"), &version("2")).is_none());
        // The Secret deleted and written again, at the same resourceVersion by chance: another uid.
        let recreated = SecretVersion {
            uid: "uid-2".into(),
            ..version("1")
        };
        assert!(clients.known(&key("a"), &recreated).is_none());
        // A refused kubeconfig is remembered for its version, and drops the client of the one it replaced.
        clients.refuse(key("a"), version("2"), "field \"exec\" is not allowed".into());
        assert!(matches!(
            clients.known(&key("a"), &version("2")),
            Some(Known::Refused(why)) if why.contains("exec")
        ));
        assert!(clients.known(&key("a"), &version("1")).is_none());
        assert!(clients.recently_checked(&key("a")).is_none());
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
        clients.insert(key("a"), version("1"), 3, client());
        assert!(clients.recently_checked(&key("a")).is_some());
        // Refused (the kubeconfig changed to one that fails the checks): gone at once.
        clients.refuse(key("a"), version("2"), "refused".into());
        assert!(clients.recently_checked(&key("a")).is_none());
        // Past the window the Secret is read again; a read that matches opens a new window.
        let clients = WorkloadClients {
            secret_recheck: Duration::ZERO,
            ..WorkloadClients::default()
        };
        clients.insert(key("a"), version("1"), 3, client());
        assert!(clients.recently_checked(&key("a")).is_none());
        assert!(known_client(&clients, "a", "1"));
    }

    #[tokio::test]
    async fn a_cluster_gets_its_turns_and_no_more_and_waits_are_bounded() {
        let clients = impatient();
        let a = clients.insert(key("a"), version("1"), 1, client());
        let mut turns = Vec::new();
        for _ in 0..PER_CLUSTER {
            turns.push(pass_turn(&clients, &a).await.expect("a turn"));
        }
        // The cluster's turns are taken: the next wait ends after the bound without one, while another cluster
        // still gets its own.
        assert!(matches!(pass_turn(&clients, &a).await, Err(NoTurn::TimedOut)));
        let b = clients.insert(key("b"), version("1"), 1, client());
        assert!(pass_turn(&clients, &b).await.is_ok());
        turns.pop();
        assert!(pass_turn(&clients, &a).await.is_ok());
    }

    #[tokio::test]
    async fn all_clusters_together_get_at_most_in_all_turns() {
        let clients = impatient();
        let mut turns = Vec::new();
        for index in 0..IN_ALL {
            let cluster = clients.insert(key(&index.to_string()), version("1"), 1, client());
            turns.push(pass_turn(&clients, &cluster).await.expect("a turn"));
        }
        let one_more = clients.insert(key("one-more"), version("1"), 1, client());
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
        let a = clients.insert(key("a"), version("1"), 1, client());
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
        let b = clients.insert(key("b"), version("1"), 1, client());
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

    /// A cache with these bounds.
    fn bounded(entries: usize, bytes: usize, idle: Duration) -> WorkloadClients {
        WorkloadClients {
            bounds: CacheBounds { entries, bytes, idle },
            ..WorkloadClients::default()
        }
    }

    fn cached_names(clients: &WorkloadClients) -> Vec<String> {
        let mut names: Vec<String> = lock(&clients.cached)
            .entries
            .keys()
            .map(|(_, name)| name.clone())
            .collect();
        names.sort();
        names
    }

    #[tokio::test]
    async fn the_cache_keeps_at_most_its_count_and_the_least_recently_used_go_first() {
        let clients = bounded(3, usize::MAX, CLIENT_IDLE);
        for name in ["a", "b", "c"] {
            clients.insert(key(name), version("1"), 1, client());
        }
        // a is used again: b is now the least recently used.
        assert!(known_client(&clients, "a", "1"));
        clients.insert(key("d"), version("1"), 1, client());
        assert_eq!(cached_names(&clients), ["a", "c", "d"]);
        clients.refuse(key("e"), version("1"), "refused".into());
        assert_eq!(cached_names(&clients), ["a", "d", "e"]);
        assert_eq!(clients.cached(), (3, 2));
    }

    #[tokio::test]
    async fn the_cache_keeps_at_most_its_bytes_of_kubeconfig() {
        let clients = bounded(usize::MAX, 100, CLIENT_IDLE);
        clients.insert(key("a"), version("1"), 60, client());
        clients.insert(key("b"), version("1"), 30, client());
        assert_eq!(clients.cached(), (2, 90));
        clients.insert(key("c"), version("1"), 60, client());
        assert_eq!(cached_names(&clients), ["b", "c"]);
        assert_eq!(clients.cached(), (2, 90));
        // A client replaced by another of the same cluster counts once.
        clients.insert(key("c"), version("2"), 10, client());
        assert_eq!(clients.cached(), (2, 40));
    }

    #[tokio::test]
    async fn an_entry_in_use_is_never_evicted_and_goes_once_it_is_not() {
        let clients = bounded(1, usize::MAX, CLIENT_IDLE);
        // A pass holds a's client; another pass of a holds only one of its places.
        let a = clients.insert(key("a"), version("1"), 1, client());
        let (place, turn) = pass_turn(&clients, &a).await.expect("a turn");
        drop(turn);
        // b is held while it is inserted (its pass is about to use it): both stay, past the bound.
        clients.insert(key("b"), version("1"), 1, client());
        assert_eq!(cached_names(&clients), ["a", "b"]);
        drop(a);
        clients.insert(key("c"), version("1"), 1, client());
        assert_eq!(cached_names(&clients), ["a", "c"], "a's place is held: still in use");
        let places = lock(&clients.cached).entries[&key("a")].places.clone();
        drop(place);
        drop(places);
        clients.insert(key("d"), version("1"), 1, client());
        assert_eq!(cached_names(&clients), ["d"]);
    }

    #[tokio::test]
    async fn entries_no_machine_used_for_the_idle_time_go() {
        let clients = bounded(MAX_CLIENTS, MAX_CLIENT_BYTES, Duration::ZERO);
        clients.insert(key("a"), version("1"), 1, client());
        let b = clients.insert(key("b"), version("1"), 1, client());
        clients.insert(key("c"), version("1"), 1, client());
        // a was idle (for the bound of zero) and held by no one; b is held.
        assert!(cached_names(&clients).contains(&"b".to_string()));
        assert!(!cached_names(&clients).contains(&"a".to_string()));
        drop(b);
        let clients_default = WorkloadClients::default();
        clients_default.insert(key("a"), version("1"), 1, client());
        clients_default.insert(key("b"), version("1"), 1, client());
        assert_eq!(clients_default.cached().0, 2, "within the idle time both stay");
    }

    #[tokio::test]
    async fn a_cluster_keeps_its_turns_and_places_through_a_refusal() {
        let clients = WorkloadClients::default();
        let a = clients.insert(key("a"), version("1"), 1, client());
        let (_place, _turn) = pass_turn(&clients, &a).await.expect("a turn");
        clients.refuse(key("a"), version("2"), "refused".into());
        let again = clients.insert(key("a"), version("3"), 1, client());
        assert!(Arc::ptr_eq(&a.places, &again.places) && Arc::ptr_eq(&a.turns, &again.turns));
    }
}
