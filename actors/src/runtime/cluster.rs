//! OVirtCluster: nothing to build in oVirt, so the finalizer, ready/provisioned and the Paused condition are all
//! there is (SPEC §1). Handled by the supervisor directly; no actor of its own. The supervisor keeps the
//! OVirtClusters it saw ([`SeenClusters`]) so that a change of their CAPI Cluster (a pause lifted) reconciles them
//! again: no event of their own follows it.

use std::collections::BTreeMap;
use std::sync::Arc;

use capov_crds::labels::{CLUSTER_NAME_LABEL, MACHINE_FINALIZER, MANAGED_BY_ANNOTATION, PAUSED_ANNOTATION};
use capov_crds::{OVirtCluster, Severity};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;
use serde_json::json;

use super::capi;
use super::finalizers;
use super::keys::ObjectKey;
use super::mailbox;
use super::shared::Shared;
use super::status_writer::StatusWriterMsg;
use crate::conditions::{ConditionUpdate, reasons, set_condition, types};
use crate::metrics::{kind, result};

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
    let now = crate::runtime::now();

    if is_paused(shared, cluster, &namespace) {
        let paused = ConditionUpdate::true_(types::PAUSED, reasons::PAUSED).with_message("reconciliation is paused");
        set_condition(&mut conditions, &paused, now, generation);
        send_status(shared, key, &observed, conditions);
        return Ok(());
    }
    let api: Api<OVirtCluster> = Api::namespaced(shared.client.clone(), &namespace);
    if cluster.metadata.deletion_timestamp.is_some() {
        return finalizers::remove(&api, cluster, MACHINE_FINALIZER)
            .await
            .map(|_| ())
            .map_err(|err| format!("cannot remove the finalizer {MACHINE_FINALIZER}: {err}"));
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
    set_condition(
        &mut conditions,
        &ConditionUpdate::true_(types::READY, reasons::READY),
        now,
        generation,
    );
    let status = json!({
        "ready": true,
        "initialization": {"provisioned": true},
        "conditions": conditions,
    });
    let _ = mailbox::cast(
        &shared.metrics,
        &shared.status_writer,
        StatusWriterMsg::Update { key, status },
    );
    Ok(())
}

/// Writes `conditions` and leaves ready/provisioned as they were observed.
fn send_status(
    shared: &Shared,
    key: ObjectKey,
    observed: &capov_crds::OVirtClusterStatus,
    conditions: Vec<capov_crds::Condition>,
) {
    let status = json!({
        "ready": observed.ready,
        "initialization": observed.initialization,
        "conditions": conditions,
    });
    let _ = mailbox::cast(
        &shared.metrics,
        &shared.status_writer,
        StatusWriterMsg::Update { key, status },
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
