//! The finalizers the supervisor writes itself: an OVirtProvider's, added at once (in the same patch as its
//! management-cluster annotation when that is absent, [`capov_core::trust::management_clusters`]) and removed, once the provider
//! is being deleted, when no OVirtMachine uses it any more; and an OVirtCluster's (`cluster::reconcile`, for each
//! watch event and again when a CAPI Cluster of its namespace changes). No later watch event may come to trigger a
//! failed write again, so each one is retried with a jittered, growing delay until it succeeds or its object is gone.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use capov_crds::labels::{MANAGEMENT_CLUSTER_ANNOTATION, PROVIDER_FINALIZER};
use capov_crds::{OVirtCluster, OVirtMachine, OVirtProvider};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::watcher::Event;
use ractor::ActorRef;

use crate::runtime::cluster::{self, SeenClusters};
use crate::runtime::messages::{FinalizerOwner, SupervisorMsg};
use crate::runtime::shared::Shared;
use crate::runtime::{finalizers, mailbox};

/// First retry of a failed finalizer write; doubling up to [`MAX_FINALIZER_RETRY`], jittered.
const FINALIZER_RETRY: Duration = Duration::from_secs(1);
const MAX_FINALIZER_RETRY: Duration = Duration::from_secs(60);

struct FinalizerRetry {
    backoff: capov_core::policy::backoff::Backoff,
    scheduled: bool,
}

/// The supervisor's finalizer writes, and the retries of those that failed. `in_use` tells whether an OVirtMachine
/// uses the provider of a name.
pub struct ProviderFinalizers {
    me: ActorRef<SupervisorMsg>,
    shared: Arc<Shared>,
    retries: HashMap<FinalizerOwner, FinalizerRetry>,
    /// The OVirtClusters seen, reconciled again when a CAPI Cluster of their namespace changes.
    clusters: SeenClusters,
}

impl ProviderFinalizers {
    pub fn new(me: ActorRef<SupervisorMsg>, shared: Arc<Shared>) -> ProviderFinalizers {
        ProviderFinalizers {
            me,
            shared,
            retries: HashMap::new(),
            clusters: SeenClusters::default(),
        }
    }

    /// Adds the provider's finalizer, or removes it when the provider is being deleted and no longer in use.
    pub async fn sync(&mut self, provider: &OVirtProvider, in_use: impl Fn(&str) -> bool) {
        let own_id = &self.shared.settings.management_cluster_id;
        let outcome = sync_provider_finalizer(&self.shared.client, provider, own_id, in_use).await;
        self.note(FinalizerOwner::Provider(provider.name_any()), outcome);
    }

    /// Notes an OVirtCluster watch event and reconciles the OVirtCluster it shows.
    pub async fn on_cluster_event(&mut self, event: Event<OVirtCluster>) {
        if let Some(object) = self.clusters.note(event) {
            self.reconcile_cluster(&object).await;
        }
    }

    /// Reconciles the OVirtClusters of `namespace` again, after a change of a CAPI Cluster there.
    pub async fn reconcile_clusters_in(&mut self, namespace: &str) {
        for object in self.clusters.in_namespace(namespace) {
            self.reconcile_cluster(&object).await;
        }
    }

    /// Reconciles an OVirtCluster ([`cluster::reconcile`]); a failed finalizer write is retried.
    async fn reconcile_cluster(&mut self, object: &OVirtCluster) {
        let outcome = cluster::reconcile_counted(&self.shared, object).await;
        let owner = FinalizerOwner::Cluster {
            namespace: object.namespace().unwrap_or_default(),
            name: object.name_any(),
        };
        self.note(owner, outcome);
    }

    /// Releases each of `providers` that is being deleted and no longer in use.
    pub async fn release_deleting<'p>(
        &mut self,
        providers: impl Iterator<Item = &'p OVirtProvider>,
        in_use: impl Fn(&str) -> bool,
    ) {
        let deleting: Vec<&OVirtProvider> = providers
            .filter(|provider| provider.metadata.deletion_timestamp.is_some())
            .collect();
        for provider in deleting {
            self.sync(provider, &in_use).await;
        }
    }

    /// Notes how a finalizer write went: a failure is retried after a jittered, growing delay (one retry queued per
    /// object at a time), a success ends the retries.
    pub fn note(&mut self, owner: FinalizerOwner, outcome: Result<(), String>) {
        let Err(message) = outcome else {
            self.retries.remove(&owner);
            return;
        };
        let retry = self.retries.entry(owner.clone()).or_insert_with(|| FinalizerRetry {
            backoff: capov_core::policy::backoff::Backoff::new(FINALIZER_RETRY, MAX_FINALIZER_RETRY),
            scheduled: false,
        });
        tracing::warn!(object = ?owner, error = %message, retry_in = ?retry.backoff.nominal(), "finalizer write failed");
        if !retry.scheduled {
            retry.scheduled = true;
            let delay = retry.backoff.next_delay();
            mailbox::cast_after(&self.shared.metrics, delay, self.me.clone(), move || {
                SupervisorMsg::RetryFinalizer(owner)
            });
        }
    }

    /// Tries a failed finalizer write again on the object as it is now; nothing to do once it is gone.
    pub async fn retry(&mut self, owner: FinalizerOwner, in_use: impl Fn(&str) -> bool) {
        match self.retries.get_mut(&owner) {
            Some(retry) => retry.scheduled = false,
            None => return,
        }
        let client = self.shared.client.clone();
        let outcome = match &owner {
            FinalizerOwner::Cluster { namespace, name } => {
                match Api::<OVirtCluster>::namespaced(client, namespace).get_opt(name).await {
                    Ok(Some(cluster)) => cluster::reconcile(&self.shared, &cluster).await,
                    Ok(None) => Ok(()),
                    Err(err) => Err(format!("cannot read OVirtCluster {namespace}/{name}: {err}")),
                }
            }
            FinalizerOwner::Provider(name) => match Api::<OVirtProvider>::all(client.clone()).get_opt(name).await {
                Ok(Some(provider)) => {
                    let own_id = &self.shared.settings.management_cluster_id;
                    sync_provider_finalizer(&client, &provider, own_id, in_use).await
                }
                Ok(None) => Ok(()),
                Err(err) => Err(format!("cannot read OVirtProvider {name}: {err}")),
            },
        };
        self.note(owner, outcome);
    }
}

/// Whether `machine` keeps provider `provider` from being deleted: it names the provider and its namespace is
/// served by it. A machine the provider refuses (NamespaceNotAllowed) does not count, else any namespace could pin
/// a provider it may not use (issue 23). Not even one whose VM CAPOV created while its namespace was allowed: its
/// spec.providerID and annotations are the tenant's to write, so they prove nothing, and the platform administrator
/// who narrowed the access decides (restoring the access lets CAPOV delete such VMs first).
pub fn holds_provider(shared: &Shared, machine: &OVirtMachine, provider: &str) -> bool {
    machine.spec.settings.provider == provider
        && shared.namespace_allowed(provider, &machine.namespace().unwrap_or_default())
}

/// Adds the provider's finalizer and, when absent, its management-cluster annotation naming `own_id` (this
/// cluster's id); or, while it is being deleted, removes the finalizer once no OVirtMachine references it.
async fn sync_provider_finalizer(
    client: &kube::Client,
    provider: &OVirtProvider,
    own_id: &str,
    in_use: impl Fn(&str) -> bool,
) -> Result<(), String> {
    let api: Api<OVirtProvider> = Api::all(client.clone());
    if provider.metadata.deletion_timestamp.is_none() {
        let annotation = (MANAGEMENT_CLUSTER_ANNOTATION, own_id);
        return finalizers::ensure_with_annotation(&api, provider, PROVIDER_FINALIZER, annotation)
            .await
            .map(|_| ())
            .map_err(|err| {
                format!("cannot add the finalizer {PROVIDER_FINALIZER} or the annotation {MANAGEMENT_CLUSTER_ANNOTATION}: {err}")
            });
    }
    if in_use(&provider.name_any()) {
        return Ok(());
    }
    finalizers::remove(&api, provider, PROVIDER_FINALIZER)
        .await
        .map(|_| ())
        .map_err(|err| format!("cannot remove the finalizer {PROVIDER_FINALIZER}: {err}"))
}
