//! Hands the statuses the status writer is given to the metrics' census (`metrics/census.rs`): the machines by
//! phase and step and the providers' connections then count what users see in the objects' status.

use serde_json::Value;

use crate::metrics::{Metrics, Subject};
use crate::runtime::keys::{Kind, ObjectKey};

fn subject(key: &ObjectKey) -> Option<Subject> {
    match key.kind {
        Kind::Machine => Some(Subject::Machine),
        Kind::Provider => Some(Subject::Provider),
        // OVirtClusters are few and their status tells little the machines' does not; a template's status is
        // computed from its spec and cannot go wrong.
        Kind::Cluster | Kind::MachineTemplate => None,
    }
}

/// The object's latest status, as CAPOV computed it.
pub(crate) fn record(metrics: &Metrics, key: &ObjectKey, status: &Value) {
    if let Some(subject) = subject(key) {
        let namespace = key.namespace_str();
        metrics.census.record(subject, namespace, &key.name, status);
    }
}

/// The status the object carried when its actor started: counted until CAPOV computes one.
pub(crate) fn record_seen(metrics: &Metrics, key: &ObjectKey, status: &Value) {
    if let Some(subject) = subject(key) {
        let namespace = key.namespace_str();
        if !metrics.census.knows(subject, namespace, &key.name) {
            metrics.census.record(subject, namespace, &key.name, status);
        }
    }
}

pub(crate) fn forget(metrics: &Metrics, key: &ObjectKey) {
    if let Some(subject) = subject(key) {
        let namespace = key.namespace_str();
        metrics.census.forget(subject, namespace, &key.name);
    }
}
