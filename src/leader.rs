//! Leader election (`--leader-elect`): replicas compete for a `coordination.k8s.io/v1` Lease named
//! `--leader-election-id` in the credentials namespace, through kube-lease-manager in its manual `changed()` mode.
//! Only the holder runs the controllers. A leader that loses the Lease, or fails to renew it, stops its work and
//! stands by again in the same process (an API server restart must not restart the operator); on SIGTERM it stops
//! its work and releases the Lease so that a standby takes over at once instead of waiting for the Lease to expire.
//!
//! Why `changed()` and not the crate's `watch()`: `watch()` hides API errors and keeps reporting leadership after
//! the Lease expired; `changed()` returns `Ok(false)` on loss and `Err` on any failed renewal, both taken as loss.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use prometheus::IntGauge;

use crate::fence::{LeaseFence, RenewalLayer};
use crate::lease_timing::RENEW_DEADLINE;
pub use crate::lease_timing::{LEASE_DURATION, RENEW_INTERVAL, RETRY_PERIOD};

/// Per-request timeouts of the Lease client: a renewal that hangs must fail well inside the 10 s between the
/// renewal and the expiry, not after kube's default of several minutes.
const LEASE_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const LEASE_IO_TIMEOUT: Duration = Duration::from_secs(3);
/// A standby that cannot reach the Lease retries with this backoff ceiling.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// Which Lease, who competes for it, and its timing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectionSettings {
    pub namespace: String,
    pub lease_name: String,
    /// This replica's holder identity, unique per process (see [`identity`]).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_interval: Duration,
    pub retry_period: Duration,
}

impl ElectionSettings {
    /// The default timing ([`LEASE_DURATION`], [`RENEW_INTERVAL`], [`RETRY_PERIOD`]).
    pub fn new(namespace: &str, lease_name: &str, identity: String) -> ElectionSettings {
        ElectionSettings {
            namespace: namespace.to_string(),
            lease_name: lease_name.to_string(),
            identity,
            lease_duration: LEASE_DURATION,
            renew_interval: RENEW_INTERVAL,
            retry_period: RETRY_PERIOD,
        }
    }

    /// The Lease's `leaseDurationSeconds`, and kube-lease-manager's grace: it renews `grace` seconds before expiry,
    /// i.e. every `duration - grace` seconds. `None` unless `0 < renew_interval < lease_duration` in whole seconds.
    pub fn duration_and_grace(&self) -> Option<(u64, u64)> {
        let duration = self.lease_duration.as_secs();
        let renew = self.renew_interval.as_secs();
        (renew > 0 && renew < duration).then(|| (duration, duration - renew))
    }

    fn lease(&self) -> String {
        format!("{}/{}", self.namespace, self.lease_name)
    }
}

/// A holder identity: the pod name (`POD_NAME`, else `HOSTNAME`) and a random suffix, so that a restarted process
/// in the same pod never mistakes the Lease of its previous life for its own.
pub fn identity(pod_name: Option<&str>, suffix: &str) -> String {
    let base = pod_name
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .unwrap_or("capov");
    format!("{base}_{suffix}")
}

/// Eight random hex digits for [`identity`].
pub fn random_suffix() -> String {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 4];
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        // No system randomness: the start time still differs between two lives of one pod (whose name tells pods
        // apart); the process id would not, being 1 in every container.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos());
        return format!("{nanos:08x}");
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The current holder of `lease`, if any (an empty identity counts as none).
pub fn holder(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|spec| spec.holder_identity.as_deref())
        .filter(|holder| !holder.is_empty())
}

/// A kube configuration for the Lease client: the operator's, with short request timeouts.
pub fn lease_client_config(mut config: kube::Config) -> kube::Config {
    config.connect_timeout = Some(LEASE_CONNECT_TIMEOUT);
    config.read_timeout = Some(LEASE_IO_TIMEOUT);
    config.write_timeout = Some(LEASE_IO_TIMEOUT);
    config
}

/// Why leadership ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lost {
    /// The Lease names another holder now.
    Taken,
    /// Renewing (or reading) the Lease failed: it may expire any moment, so it counts as lost.
    RenewFailed(String),
}

impl fmt::Display for Lost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lost::Taken => f.write_str("another replica holds the Lease"),
            Lost::RenewFailed(err) => write!(f, "renewing the Lease failed: {err}"),
        }
    }
}

/// A replica competing for the Lease.
pub struct Candidate {
    client: kube::Client,
    fence: Arc<LeaseFence>,
    settings: ElectionSettings,
    /// kube-lease-manager's duration and grace, validated.
    duration_and_grace: (u64, u64),
    /// Terms of leadership asked for so far (see [`Candidate::acquire`]).
    terms: std::sync::atomic::AtomicU32,
}

/// Held leadership: keep [`Leadership::hold`] polled, or the Lease is not renewed.
pub struct Leadership {
    manager: LeaseManager,
    fence: Arc<LeaseFence>,
    settings: ElectionSettings,
}

impl Candidate {
    /// A candidate with its own Lease client, built from the operator's `config` with short timeouts and the
    /// [`LeaseFence`] opened by each accepted renewal. Fails when the timing is inconsistent (see
    /// [`ElectionSettings::duration_and_grace`]) or no client can be built.
    pub fn new(config: kube::Config, settings: ElectionSettings) -> Result<Candidate, String> {
        let Some(duration_and_grace) = settings.duration_and_grace() else {
            return Err(format!(
                "leader election: the renew interval {:?} must be at least a second and shorter than the lease \
                 duration {:?}",
                settings.renew_interval, settings.lease_duration
            ));
        };
        let fence = Arc::new(LeaseFence::default());
        let client = kube::client::ClientBuilder::try_from(lease_client_config(config))
            .map_err(|err| format!("leader election: the Lease client: {err}"))?
            .with_layer(&RenewalLayer(fence.clone()))
            .build();
        Ok(Candidate {
            client,
            fence,
            settings,
            duration_and_grace,
            terms: std::sync::atomic::AtomicU32::new(0),
        })
    }

    /// Open while this replica's Lease renewals are recent enough for it to write to engines.
    pub fn fence(&self) -> Arc<LeaseFence> {
        self.fence.clone()
    }

    pub fn settings(&self) -> &ElectionSettings {
        &self.settings
    }

    /// The settings of the next term: each term after the first holds the Lease under an identity of its own
    /// (`<identity>-<term>`). Under its old identity, a replica whose Lease still names it would count as the holder
    /// at once, without a write: no renewal would open the fence, and a Lease it lost must first be taken again.
    fn next_term(&self) -> ElectionSettings {
        let term = self.terms.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut settings = self.settings.clone();
        if term > 0 {
            settings.identity = format!("{}-{term}", settings.identity);
        }
        settings
    }

    /// Waits (as a standby) until this replica holds the Lease. Never fails: API errors are logged and retried,
    /// since a standby does no work that they could harm.
    pub async fn acquire(&self) -> Leadership {
        let settings = self.next_term();
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &self.settings.namespace);
        let mut delay = self.settings.retry_period;
        let mut seen_holder: Option<String> = None;
        loop {
            // A fresh manager per round: kube-lease-manager re-reads a Lease held by someone else only when that
            // holder's term ends, so a manager kept across a release would sleep through it.
            let manager = match self.manager(&settings).await {
                Ok(manager) => manager,
                Err(err) => {
                    tracing::warn!(lease = %self.settings.lease(), error = %err, "cannot read the leader-election Lease; retrying");
                    tokio::time::sleep(capov_core::policy::backoff::jittered_retry(delay)).await;
                    delay = (delay * 2).min(MAX_RETRY_DELAY);
                    continue;
                }
            };
            tokio::select! {
                changed = manager.changed() => match changed {
                    Ok(true) => {
                        return Leadership {
                            manager,
                            fence: self.fence.clone(),
                            settings: settings.clone(),
                        };
                    }
                    Ok(false) => {}
                    Err(err) => {
                        tracing::warn!(lease = %self.settings.lease(), error = %err, "leader election failed; retrying");
                        tokio::time::sleep(capov_core::policy::backoff::jittered_retry(delay)).await;
                        delay = (delay * 2).min(MAX_RETRY_DELAY);
                        continue;
                    }
                },
                () = self.until_free(&leases, &mut seen_holder) => {}
            }
            delay = self.settings.retry_period;
        }
    }

    /// Returns once the Lease has no holder (released, or deleted), polling every retry period.
    async fn until_free(&self, leases: &Api<Lease>, seen_holder: &mut Option<String>) {
        loop {
            tokio::time::sleep(self.settings.retry_period).await;
            match leases.get_opt(&self.settings.lease_name).await {
                Ok(Some(lease)) => match holder(&lease) {
                    Some(current) => {
                        if seen_holder.as_deref() != Some(current) {
                            tracing::info!(lease = %self.settings.lease(), leader = current, "standing by: another replica leads");
                            *seen_holder = Some(current.to_string());
                        }
                    }
                    None => return,
                },
                Ok(None) => return,
                // kube-lease-manager's own loop reports API errors; this poll only shortens the wait.
                Err(err) => tracing::debug!(error = %err, "cannot read the leader-election Lease"),
            }
        }
    }

    async fn manager(
        &self,
        settings: &ElectionSettings,
    ) -> Result<LeaseManager, kube_lease_manager::LeaseManagerError> {
        let (duration, grace) = self.duration_and_grace;
        LeaseManagerBuilder::new(self.client.clone(), &settings.lease_name)
            .with_namespace(&settings.namespace)
            .with_identity(&settings.identity)
            .with_field_manager(format!("capov-leader-{}", settings.identity))
            .with_duration(duration)
            .with_grace(grace)
            .build()
            .await
    }
}

impl Leadership {
    /// Keeps the Lease renewed; returns when leadership ends: the Lease was taken, a renewal failed, or no renewal
    /// was accepted within the fence's deadline (kube-lease-manager retries some failures by itself; the fence
    /// does not wait for it). The fence is closed on return.
    pub async fn hold(&self) -> Lost {
        let lost = tokio::select! {
            lost = self.renewals() => lost,
            () = self.fence.closed() => Lost::RenewFailed(format!(
                "no renewal was accepted within {}s",
                RENEW_DEADLINE.as_secs()
            )),
        };
        self.fence.close();
        lost
    }

    async fn renewals(&self) -> Lost {
        loop {
            match self.manager.changed().await {
                // Still ours: changed() only returns on a change, so this does not happen, but is harmless.
                Ok(true) => continue,
                Ok(false) => return Lost::Taken,
                Err(err) => return Lost::RenewFailed(err.to_string()),
            }
        }
    }

    /// Gives the Lease up, so that a standby takes over at its next look instead of after expiry.
    pub async fn release(self) -> Result<(), String> {
        self.fence.close();
        self.manager.release().await.map_err(|err| err.to_string())
    }

    pub fn settings(&self) -> &ElectionSettings {
        &self.settings
    }
}

/// How a leader-elected run ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Shutdown asked for (as standby, or as leader after stopping the work and releasing the Lease).
    Shutdown,
    /// Leadership lost and the work could not be stopped cleanly (or was lost while starting): exit non-zero.
    Lost,
    /// The work could not start: exit non-zero.
    StartFailed,
    /// The work stopped by itself (its `Gone` future resolved): the Lease was released; exit non-zero.
    WorkStopped,
}

/// The leader-elected life of the process: stand by until the Lease is ours, then `start` the work, hold the
/// Lease while it runs, and `stop` it on `shutdown` (then release the Lease). On loss — the Lease taken, or the API
/// server out of reach for longer than the renew deadline, as during its restart — the work is stopped and the
/// replica stands by again, so that an API server restart does not restart the process; only when `stop` reports
/// that the work did not stop in time does the run end with [`Ended::Lost`]. `start` also returns a future that
/// resolves if the work stops by itself; the Lease is then released and the process exits non-zero, so that a
/// standby takes over at once. `leader` is the `capov_leader` gauge.
pub async fn run<W, Gone, Start, Stop>(
    candidate: Candidate,
    leader: IntGauge,
    shutdown: impl Future<Output = ()>,
    mut start: Start,
    mut stop: Stop,
) -> Ended
where
    Start: AsyncFnMut() -> Result<(W, Gone), String>,
    Gone: Future<Output = ()>,
    Stop: AsyncFnMut(W) -> bool,
{
    let lease = candidate.settings().lease();
    let identity = candidate.settings().identity.clone();
    tokio::pin!(shutdown);
    loop {
        leader.set(0);
        tracing::info!(%lease, %identity, "waiting to become the leader");
        let leadership = tokio::select! {
            leadership = candidate.acquire() => leadership,
            () = &mut shutdown => {
                tracing::info!("shutting down (standby)");
                return Ended::Shutdown;
            }
        };
        leader.set(1);
        let identity = leadership.settings().identity.clone();
        tracing::info!(%lease, %identity, "became the leader; starting the controllers");

        // The work starts while the Lease is renewed: starting may take longer than a renewal period. A start cut
        // short may have left actors behind, so that loss ends the process.
        let started = tokio::select! {
            started = start() => started,
            lost = leadership.hold() => {
                leader.set(0);
                tracing::error!(%lease, %identity, reason = %lost, "lost leadership before the controllers started; exiting");
                return Ended::Lost;
            }
        };
        let (work, gone) = match started {
            Ok(started) => started,
            Err(err) => {
                tracing::error!(error = %err, "cannot start the controllers");
                leader.set(0);
                if let Err(err) = leadership.release().await {
                    tracing::warn!(error = %err, "cannot release the leader-election Lease");
                }
                return Ended::StartFailed;
            }
        };
        tokio::pin!(gone);

        let lost = tokio::select! {
            lost = leadership.hold() => Some(lost),
            () = &mut shutdown => None,
            () = &mut gone => {
                leader.set(0);
                tracing::error!(%lease, %identity, "the controllers stopped by themselves; releasing the Lease and exiting");
                stop(work).await;
                if let Err(err) = leadership.release().await {
                    tracing::warn!(%lease, error = %err, "cannot release the leader-election Lease; it expires by itself");
                }
                return Ended::WorkStopped;
            }
        };
        if let Some(lost) = lost {
            leader.set(0);
            tracing::error!(%lease, %identity, reason = %lost, "lost leadership; stopping all controllers");
            if stop(work).await {
                tracing::info!(%lease, %identity, "the controllers stopped; standing by again");
                continue;
            }
            tracing::error!(%lease, %identity, "the controllers did not stop in time; exiting");
            return Ended::Lost;
        }

        tracing::info!("shutting down");
        // Renewals go on while the actors stop, so that the Lease is never left to expire with work still running.
        tokio::select! {
            _ = stop(work) => {}
            lost = leadership.hold() => {
                leader.set(0);
                tracing::error!(%lease, %identity, reason = %lost, "lost leadership while shutting down; exiting");
                return Ended::Lost;
            }
        }
        leader.set(0);
        match leadership.release().await {
            Ok(()) => tracing::info!(%lease, %identity, "released the leader-election Lease"),
            Err(err) => {
                tracing::warn!(%lease, error = %err, "cannot release the leader-election Lease; it expires by itself")
            }
        }
        return Ended::Shutdown;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;

    #[test]
    fn identity_is_the_pod_name_and_a_suffix() {
        assert_eq!(
            identity(Some("capov-controller-manager-7d9f"), "0a1b2c3d"),
            "capov-controller-manager-7d9f_0a1b2c3d"
        );
        assert_eq!(identity(Some("  "), "0a1b2c3d"), "capov_0a1b2c3d");
        assert_eq!(identity(None, "0a1b2c3d"), "capov_0a1b2c3d");
    }

    #[test]
    fn random_suffixes_are_eight_hex_digits_and_differ() {
        let (a, b) = (random_suffix(), random_suffix());
        assert_eq!(a.len(), 8);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b, "two draws of 32 random bits were equal");
    }

    #[test]
    fn default_timing_renews_every_five_seconds_of_fifteen() {
        let settings = ElectionSettings::new("capov-system", "capov-controller-manager", "a_1".into());
        assert_eq!(settings.duration_and_grace(), Some((15, 10)));
        assert!(
            LEASE_CONNECT_TIMEOUT + LEASE_IO_TIMEOUT * 2 < LEASE_DURATION - RENEW_INTERVAL,
            "a hung renewal must fail before the Lease expires"
        );
        assert!(RETRY_PERIOD < LEASE_DURATION / 3);
    }

    #[test]
    fn inconsistent_timing_is_refused() {
        let base = ElectionSettings::new("ns", "lease", "a_1".into());
        for (duration, renew) in [(15, 15), (15, 20), (15, 0), (0, 0)] {
            let settings = ElectionSettings {
                lease_duration: Duration::from_secs(duration),
                renew_interval: Duration::from_secs(renew),
                ..base.clone()
            };
            assert_eq!(settings.duration_and_grace(), None, "{duration}/{renew}");
        }
        let fast = ElectionSettings {
            lease_duration: Duration::from_secs(4),
            renew_interval: Duration::from_secs(1),
            ..base
        };
        assert_eq!(fast.duration_and_grace(), Some((4, 3)));
    }

    #[test]
    fn holder_ignores_empty_identities() {
        let with = |holder: Option<&str>| Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(String::from),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(holder(&with(Some("a_1"))), Some("a_1"));
        assert_eq!(holder(&with(Some(""))), None);
        assert_eq!(holder(&with(None)), None);
        assert_eq!(holder(&Lease::default()), None);
    }

    #[test]
    fn lease_client_has_short_timeouts() {
        let config = lease_client_config(kube::Config::new("https://127.0.0.1:6443".parse().expect("uri")));
        assert_eq!(config.connect_timeout, Some(LEASE_CONNECT_TIMEOUT));
        assert_eq!(config.read_timeout, Some(LEASE_IO_TIMEOUT));
        assert_eq!(config.write_timeout, Some(LEASE_IO_TIMEOUT));
    }

    #[tokio::test]
    async fn each_term_after_the_first_holds_the_lease_under_an_identity_of_its_own() {
        let config = kube::Config::new("https://127.0.0.1:6443".parse().expect("uri"));
        let settings = ElectionSettings::new("ns", "lease", "pod-a_0a1b2c3d".into());
        let candidate = Candidate::new(config, settings).expect("candidate");
        let identities: Vec<String> = (0..3).map(|_| candidate.next_term().identity).collect();
        assert_eq!(identities, ["pod-a_0a1b2c3d", "pod-a_0a1b2c3d-1", "pod-a_0a1b2c3d-2"]);
    }

    #[test]
    fn lost_reads_as_a_reason() {
        assert_eq!(Lost::Taken.to_string(), "another replica holds the Lease");
        assert!(Lost::RenewFailed("timed out".into()).to_string().contains("timed out"));
    }
}
