//! The affinity groups of the VM's oVirt cluster (issue #25), looked at right before the VM is first started (it
//! joins its groups first) or stopped or deleted (it leaves them first), and only for a machine that belongs in
//! groups: one request (and one more for the affinity labels of a host-label failure domain).

use std::collections::BTreeMap;

use super::observation::{Engine, ObserveError};
use capov_core::machine_steps::{GroupsObservation, Observed, ObservedVm};
use capov_core::placement::affinity_groups::{GroupFact, GroupRule};

/// Asked for (`ReadRequest::Groups`) only for a machine that belongs in groups.
pub async fn read_groups(
    engine: &Engine,
    observed: &Observed,
    vm: &ObservedVm,
) -> Result<GroupsObservation, ObserveError> {
    let Some(cluster_id) = &vm.cluster_id else {
        return Ok(GroupsObservation::Unavailable {
            message: "the engine did not say which oVirt cluster the VM is in".into(),
        });
    };
    let client = &engine.client;
    let groups = match client.affinity_groups(cluster_id).await {
        Ok(groups) => groups,
        Err(err) => return refused_or_failed(err),
    };
    let groups = groups
        .into_iter()
        .filter_map(|g| {
            let vm_ids = g.vm_ids();
            Some(GroupFact {
                id: g.id?,
                name: g.name.unwrap_or_default(),
                description: g.description.unwrap_or_default(),
                vm_ids,
            })
        })
        .collect();
    let needs_labels = observed
        .groups_wanted
        .iter()
        .any(|g| matches!(g.rule, GroupRule::HostLabel { .. }));
    let mut labels = BTreeMap::new();
    if needs_labels && !observed.deletion_requested {
        match client.affinity_labels().await {
            Ok(found) => labels.extend(found.into_iter().filter_map(|l| Some((l.name?, l.id?)))),
            Err(err) => return refused_or_failed(err),
        }
    }
    Ok(GroupsObservation::Read { groups, labels })
}

/// A refusal of the engine (CAPOV's user may not read affinity groups or labels) is an answer; anything else a
/// failed observation, retried.
fn refused_or_failed(err: capov_ovirt::Error) -> Result<GroupsObservation, ObserveError> {
    match err {
        capov_ovirt::Error::PermissionDenied { detail } => Ok(GroupsObservation::Unavailable {
            message: format!("oVirt refused: {detail}"),
        }),
        other => Err(ObserveError::new(format!("reading affinity groups: {other}"))),
    }
}
