//! OVirtCluster: nothing to build in oVirt, so the finalizer, ready/provisioned and the Paused condition (SPEC §1),
//! the failure domains of its spec (issue #25) and the capacity of the oVirt clusters and storage domains its
//! machines use (issue #27) are all there is. Handled by the supervisor directly; no actor of its own: after each
//! provider's inventory poll every OVirtCluster is reconciled again from the store (`refresh_all`), and the status
//! writer skips the statuses that did not change. The supervisor also keeps the OVirtClusters it saw
//! ([`SeenClusters`]) so that a change of their CAPI Cluster (a pause lifted) reconciles them again: no event of
//! their own follows it.

use std::collections::BTreeMap;
use std::sync::Arc;

use capov_crds::labels::{CLUSTER_NAME_LABEL, MACHINE_FINALIZER, MANAGED_BY_ANNOTATION, PAUSED_ANNOTATION};
use capov_crds::{OVirtCluster, Severity};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;
use serde_json::json;

use crate::metrics::{kind, result};
use crate::runtime::keys::ObjectKey;
use crate::runtime::shared::Shared;
use crate::runtime::status::writer::StatusWriterMsg;
use crate::runtime::{capi, cluster_endpoint, finalizers, mailbox};
use capov_core::conditions::{ConditionUpdate, reasons, set_condition, types};

/// The OVirtClusters as the watch last showed them, by namespace and name. Lifting a Cluster's pause (as
/// `clusterctl move` does last, on the target) changes only the CAPI Cluster: its OVirtClusters are looked up here
/// and reconciled again, or they would stay Paused and never report ready.
#[derive(Default)]
pub struct SeenClusters(BTreeMap<(String, String), Arc<OVirtCluster>>);

impl SeenClusters {
    /// Notes a watch event; returns the OVirtCluster to reconcile for it.
    pub fn note(&mut self, event: Event<OVirtCluster>) -> Option<Arc<OVirtCluster>> {
        match event {
            // A relist: what it lists comes back as InitApply; what it does not list is gone.
            Event::Init => {
                self.0.clear();
                None
            }
            Event::InitApply(cluster) | Event::Apply(cluster) => {
                let cluster = Arc::new(cluster);
                self.0.insert(key_of(&cluster), cluster.clone());
                Some(cluster)
            }
            Event::Delete(cluster) => {
                self.0.remove(&key_of(&cluster));
                None
            }
            Event::InitDone => None,
        }
    }

    /// The OVirtClusters of `namespace`, to reconcile again after a change of a CAPI Cluster there.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<OVirtCluster>> {
        self.0
            .range((namespace.to_string(), String::new())..)
            .take_while(|((ns, _), _)| ns == namespace)
            .map(|(_, cluster)| cluster.clone())
            .collect()
    }
}

fn key_of(cluster: &OVirtCluster) -> (String, String) {
    (cluster.namespace().unwrap_or_default(), cluster.name_any())
}

/// [`reconcile`] for a watch event, counted in `capov_reconciles_total` and `capov_reconcile_duration_seconds`.
pub async fn reconcile_counted(shared: &Shared, cluster: &OVirtCluster) -> Result<(), String> {
    let started = std::time::Instant::now();
    let outcome = reconcile(shared, cluster).await;
    let label = if outcome.is_ok() {
        result::SUCCESS
    } else {
        result::ERROR
    };
    let metrics = &shared.metrics;
    metrics
        .reconciles_total
        .with_label_values(&[kind::CLUSTER, label])
        .inc();
    metrics
        .reconcile_duration_seconds
        .with_label_values(&[kind::CLUSTER])
        .observe(started.elapsed().as_secs_f64());
    outcome
}

/// Reconciles one OVirtCluster. An error is a finalizer write that failed: the caller retries with backoff.
pub async fn reconcile(shared: &Shared, cluster: &OVirtCluster) -> Result<(), String> {
    if cluster.annotations().contains_key(MANAGED_BY_ANNOTATION) {
        return Ok(());
    }
    let namespace = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let key = ObjectKey::cluster(&namespace, &name);
    let generation = cluster.metadata.generation;
    let observed = cluster.status.clone().unwrap_or_default();
    let mut conditions = observed.conditions.clone();
    let now = crate::runtime::clock::now();

    if is_paused(shared, cluster, &namespace) {
        let paused = ConditionUpdate::true_(types::PAUSED, reasons::PAUSED).with_message("reconciliation is paused");
        set_condition(&mut conditions, &paused, now, generation);
        send_status(shared, key, &observed, conditions);
        return Ok(());
    }
    let api: Api<OVirtCluster> = Api::namespaced(shared.client.clone(), &namespace);
    if cluster.metadata.deletion_timestamp.is_some() {
        let outcome = let_go(shared, cluster, &api).await;
        // Ready describes the deletion too (CAPI contract): under way, or what holds it. Once the finalizer is gone
        // the object may be too, and the status writer drops a write to a gone object.
        set_condition(
            &mut conditions,
            &deletion_ready(outcome.as_ref().err()),
            now,
            generation,
        );
        send_status(shared, key, &observed, conditions);
        return outcome;
    }
    if let Err(err) = finalizers::ensure(&api, cluster, MACHINE_FINALIZER).await {
        let message = format!("cannot add the finalizer {MACHINE_FINALIZER}: {err}; retrying");
        let failed = ConditionUpdate::false_(
            types::READY,
            reasons::FINALIZER_WRITE_FAILED,
            Severity::Warning,
            message.clone(),
        );
        set_condition(&mut conditions, &failed, now, generation);
        send_status(shared, key, &observed, conditions);
        return Err(message);
    }
    let not_paused = ConditionUpdate::false_(types::PAUSED, reasons::NOT_PAUSED, Severity::Info, "");
    set_condition(&mut conditions, &not_paused, now, generation);
    // With the endpoint from a pool, ready only once the pool's address is the endpoint.
    if let Some((not_ready, outcome)) = cluster_endpoint::not_ready(shared, cluster).await {
        set_condition(&mut conditions, &not_ready, now, generation);
        send_status(shared, key, &observed, conditions);
        return outcome;
    }
    set_condition(
        &mut conditions,
        &ConditionUpdate::true_(types::READY, reasons::READY),
        now,
        generation,
    );
    let (domains, published) = failure_domains(shared, cluster, &namespace);
    match published {
        Some(published) => set_condition(&mut conditions, &published, now, generation),
        None => conditions.retain(|c| c.type_ != types::FAILURE_DOMAINS_PUBLISHED),
    }
    let mut status = json!({
        "ready": true,
        "initialization": {"provisioned": true},
        "conditions": conditions,
    });
    with_placement(&mut status, &domains, capacity(shared, cluster).as_ref());
    let _ = mailbox::cast(
        &shared.metrics,
        &shared.status_writer,
        StatusWriterMsg::Update {
            key,
            status,
            pace: crate::runtime::status::writer::Pace::Now,
        },
    );
    Ok(())
}

/// status.failureDomains without the domains whose provider is missing, refuses the namespace or fails its
/// connection (issue 39), and the FailureDomainsPublished condition saying which were left out and why; no
/// condition when no domain names a provider.
fn failure_domains(
    shared: &Shared,
    cluster: &OVirtCluster,
    namespace: &str,
) -> (Vec<capov_crds::FailureDomainStatus>, Option<ConditionUpdate>) {
    use capov_core::placement::failure_domains::{ProviderHealth, published_where_usable};
    let spec = &cluster.spec.failure_domains;
    let listed = shared.providers_listed.load(std::sync::atomic::Ordering::Relaxed);
    let health = |provider: &str| {
        if shared.provider(provider).is_none() {
            // Before the providers are listed, not seen yet is not missing: the domain stays published.
            if listed {
                ProviderHealth::NotFound
            } else {
                ProviderHealth::Usable
            }
        } else if !shared.namespace_allowed(provider, namespace) {
            ProviderHealth::NotAllowed
        } else if let Some((reason, message)) = shared.placements.failing(provider) {
            ProviderHealth::Failing { reason, message }
        } else {
            ProviderHealth::Usable
        }
    };
    let (published, left_out) = published_where_usable(spec, health);
    if spec.iter().all(|domain| domain.provider.is_none()) {
        return (published, None);
    }
    let condition = if left_out.is_empty() {
        ConditionUpdate::true_(types::FAILURE_DOMAINS_PUBLISHED, reasons::ALL_FAILURE_DOMAINS_PUBLISHED)
    } else {
        let message = left_out
            .iter()
            .map(|left| left.explain(namespace))
            .collect::<Vec<_>>()
            .join("; ");
        ConditionUpdate::false_(
            types::FAILURE_DOMAINS_PUBLISHED,
            reasons::FAILURE_DOMAINS_LEFT_OUT,
            Severity::Warning,
            message,
        )
    };
    (published, Some(condition))
}

/// The endpoint's address goes back to its pool, then the finalizer goes.
async fn let_go(shared: &Shared, cluster: &OVirtCluster, api: &Api<OVirtCluster>) -> Result<(), String> {
    cluster_endpoint::release_on_deletion(shared, cluster).await?;
    finalizers::remove(api, cluster, MACHINE_FINALIZER)
        .await
        .map(|_| ())
        .map_err(|err| format!("cannot remove the finalizer {MACHINE_FINALIZER}: {err}"))
}

/// Ready of an OVirtCluster being deleted: False, Deleting while it goes, DeletionBlocked with the cause while a
/// step fails (it is retried).
fn deletion_ready(failure: Option<&String>) -> ConditionUpdate {
    match failure {
        None => ConditionUpdate::false_(
            types::READY,
            reasons::DELETING,
            Severity::Info,
            "the OVirtCluster is being deleted: an endpoint address from a pool goes back to it, then the finalizer goes",
        ),
        Some(err) => ConditionUpdate::false_(
            types::READY,
            reasons::DELETION_BLOCKED,
            Severity::Warning,
            format!("the OVirtCluster is being deleted, but {err}; retrying"),
        ),
    }
}

/// Every OVirtCluster of the store reconciled again (after an inventory poll: its capacity may have changed).
pub async fn refresh_all(shared: &Shared) {
    for cluster in shared.ovirt_clusters.state() {
        if let Err(err) = reconcile(shared, &cluster).await {
            tracing::debug!(error = %err, "refreshing an OVirtCluster failed; its watch event retries");
        }
    }
}

/// The capacity of the oVirt clusters this cluster's machines use (and its failure domains name), per provider
/// from that provider's last inventory; None before any is known.
fn capacity(shared: &Shared, cluster: &OVirtCluster) -> Option<capov_crds::ClusterCapacity> {
    let namespace = cluster.namespace().unwrap_or_default();
    let capi_cluster = cluster
        .owner_references()
        .iter()
        .find(|owner| owner.kind == "Cluster" && owner.api_version.starts_with("cluster.x-k8s.io/"))
        .map(|owner| owner.name.clone())
        .or_else(|| cluster.labels().get(CLUSTER_NAME_LABEL).cloned())
        .unwrap_or_else(|| cluster.name_any());
    let machines = shared.placements.machines_of(&namespace, &capi_cluster);
    let mut used = capov_core::placement::failure_domains::capacity_targets(
        machines
            .iter()
            .map(|machine| (machine.provider.as_str(), machine.ovirt_cluster.as_str())),
        &cluster.spec.failure_domains,
    );
    // Issue #35: only the providers that serve the namespace, and only the oVirt clusters they let tenants use.
    let visible = visibility(shared, &namespace);
    used.retain(|provider, _| visible(provider, None));
    for (provider, ovirt_clusters) in used.iter_mut() {
        ovirt_clusters.retain(|cluster| visible(provider, Some(cluster)));
    }
    let mut total = capov_crds::ClusterCapacity::default();
    for (provider, ovirt_clusters) in &used {
        if let Some(inventory) = shared.placements.inventory(provider) {
            let part = capov_core::placement::capacity::capacity_of(provider, &inventory, ovirt_clusters);
            total.ovirt_clusters.extend(part.ovirt_clusters);
            total.storage_domains.extend(part.storage_domains);
        }
    }
    capov_core::placement::failure_domains::attribute_domains(&mut total, &cluster.spec.failure_domains);
    (!total.ovirt_clusters.is_empty() || !total.storage_domains.is_empty()).then_some(total)
}

/// What an OVirtCluster in `namespace` may show of a provider's capacity ([`capov_core::placement::capacity::visible_part`]): only
/// a provider whose spec.allowedNamespaces allows the namespace, and of it only the oVirt clusters its
/// spec.tenantPlacement lets tenants use. The figures of other engines and clusters are left out, not explained in
/// the status: the machines that would use them say why (NamespaceNotAllowed, PlacementNotAllowed).
fn visibility<'a>(shared: &'a Shared, namespace: &'a str) -> impl Fn(&str, Option<&str>) -> bool + 'a {
    move |provider, cluster| {
        shared.namespace_allowed(provider, namespace)
            && cluster.is_none_or(|cluster| {
                capov_core::trust::tenancy::ovirt_cluster_allowed(shared.tenant_placement(provider).as_ref(), cluster)
            })
    }
}

/// Adds the failure domains and the capacity to a status, each only when there is any (an empty list or a null
/// would be written as such).
fn with_placement(
    status: &mut serde_json::Value,
    domains: &[capov_crds::FailureDomainStatus],
    capacity: Option<&capov_crds::ClusterCapacity>,
) {
    if !domains.is_empty() {
        status["failureDomains"] = json!(domains);
    }
    if let Some(capacity) = capacity {
        status["capacity"] = json!(capacity);
    }
}

/// Writes `conditions` and leaves the rest as it was observed, but for capacity the namespace may no longer see.
fn send_status(
    shared: &Shared,
    key: ObjectKey,
    observed: &capov_crds::OVirtClusterStatus,
    conditions: Vec<capov_crds::Condition>,
) {
    let mut status = json!({
        "ready": observed.ready,
        "initialization": observed.initialization,
        "conditions": conditions,
    });
    let namespace = key.namespace_str();
    let capacity = observed
        .capacity
        .clone()
        .and_then(|capacity| capov_core::placement::capacity::visible_part(capacity, visibility(shared, namespace)));
    with_placement(&mut status, &observed.failure_domains, capacity.as_ref());
    let _ = mailbox::cast(
        &shared.metrics,
        &shared.status_writer,
        StatusWriterMsg::Update {
            key,
            status,
            pace: crate::runtime::status::writer::Pace::Now,
        },
    );
}

fn is_paused(shared: &Shared, cluster: &OVirtCluster, namespace: &str) -> bool {
    if cluster.annotations().contains_key(PAUSED_ANNOTATION) {
        return true;
    }
    let Some(cluster_name) = cluster.labels().get(CLUSTER_NAME_LABEL) else {
        return false;
    };
    let reference = ObjectRef::new(cluster_name).within(namespace);
    shared
        .capi_clusters
        .get(&reference)
        .is_some_and(|capi_cluster| capi::cluster_paused(&capi_cluster))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(namespace: &str, name: &str) -> OVirtCluster {
        let mut cluster = OVirtCluster::new(name, Default::default());
        cluster.metadata.namespace = Some(namespace.into());
        cluster
    }

    fn names(clusters: &[Arc<OVirtCluster>]) -> Vec<String> {
        clusters.iter().map(|c| c.name_any()).collect()
    }

    #[test]
    fn ready_of_a_cluster_being_deleted_says_so_or_what_holds_it() {
        let going = deletion_ready(None);
        assert_eq!(
            (going.state, going.reason),
            (capov_core::conditions::State::False(Severity::Info), reasons::DELETING)
        );
        let held = deletion_ready(Some(&"cannot remove the finalizer: conflict".to_string()));
        assert_eq!(
            (held.state, held.reason),
            (
                capov_core::conditions::State::False(Severity::Warning),
                reasons::DELETION_BLOCKED
            )
        );
        assert!(
            held.message.contains("cannot remove the finalizer: conflict"),
            "{}",
            held.message
        );
    }

    #[test]
    fn a_namespace_gives_back_its_clusters_as_last_seen_and_not_those_deleted() {
        let mut seen = SeenClusters::default();
        for (namespace, name) in [
            ("team-a", "one"),
            ("team-a", "two"),
            ("team-ab", "three"),
            ("team", "four"),
        ] {
            assert!(seen.note(Event::Apply(cluster(namespace, name))).is_some());
        }
        assert_eq!(names(&seen.in_namespace("team-a")), ["one", "two"]);
        assert!(seen.note(Event::Delete(cluster("team-a", "one"))).is_none());
        assert_eq!(names(&seen.in_namespace("team-a")), ["two"]);
        assert!(seen.in_namespace("elsewhere").is_empty());
    }

    #[test]
    fn a_relist_forgets_what_it_does_not_list_again() {
        let mut seen = SeenClusters::default();
        seen.note(Event::Apply(cluster("team-a", "gone")));
        seen.note(Event::Init);
        seen.note(Event::InitApply(cluster("team-a", "kept")));
        seen.note(Event::InitDone);
        assert_eq!(names(&seen.in_namespace("team-a")), ["kept"]);
    }
}
