//! The VM's affinity groups (issue #25): joining one before the first start (creating it, with the VM in it, when it
//! does not exist yet) and leaving them before the VM goes (the last member removes the group). Each change holds
//! the group's lock and reads the group again first: a sibling of this process may have created, joined or left it
//! since the decision was taken. Only one replica (the leader) acts, so the lock of this process is enough.

use capov_core::machine_steps::{GroupAction, JoinGroup, LeaveGroup, Observed, Requeue};
use capov_ovirt::Client;
use capov_ovirt::model::{AffinityGroup, AffinityLabelRefs, AffinityRule, Ref, VmRefs};

use crate::runtime::machine::outcome::{Executed, Failure, on_engine};
use crate::runtime::machine::state::MachineState;
use capov_core::conditions::{reasons, types};
use capov_core::placement::affinity_groups::{GroupFact, GroupRule, GroupState, Leave, WantedGroup, assess, leaving};

/// Joins or leaves a group; a failure is reported on MachinePlacementSet (joining) or MachineDeleted (leaving).
pub async fn execute(
    state: &MachineState,
    observed: &Observed,
    client: Option<&Client>,
    action: GroupAction,
) -> Executed {
    match action {
        GroupAction::Join(group) => {
            on_engine(client, types::MACHINE_PLACEMENT_SET, |client| async move {
                join(state, client, &group).await.map_err(placement_failure)
            })
            .await
        }
        GroupAction::Leave(group) => {
            on_engine(client, types::MACHINE_DELETED, |client| async move {
                leave(state, observed, client, &group).await
            })
            .await
        }
    }
}

/// Puts the VM into its group, creating the group with the VM in it when it is missing.
async fn join(state: &MachineState, client: &Client, join: &JoinGroup) -> Result<Executed, Failure> {
    let provider = &state.object.spec.settings.provider;
    let _held = state.shared.placements.lock_group(provider, &join.group.name).await;
    let groups = read(client, &join.cluster_id).await?;
    let labels = match &join.group.rule {
        GroupRule::HostLabel { label } => client
            .affinity_labels()
            .await?
            .into_iter()
            .filter(|l| l.name.as_deref() == Some(label))
            .filter_map(|l| Some((l.name?, l.id?)))
            .collect(),
        GroupRule::AntiAffinity { .. } => Default::default(),
    };
    match assess(&join.group, &groups, &labels, &join.vm_id) {
        GroupState::Joined { .. } => Ok(Executed::Continue),
        GroupState::NotJoined { id } => match client.add_affinity_group_vm(&join.cluster_id, &id, &join.vm_id).await {
            Ok(()) => Ok(Executed::Continue),
            Err(err) if err.is_already_a_member() => Ok(Executed::Continue),
            Err(err) => Err(err.into()),
        },
        GroupState::Missing { host_label_id } => {
            let group = new_group(&join.group, &join.vm_id, host_label_id);
            match client.add_affinity_group(&join.cluster_id, &group).await {
                Ok(_) => {
                    tracing::info!(object = %state.key, group = %join.group.name, "affinity group created");
                    Ok(Executed::Continue)
                }
                // Another management cluster's group of that name, possibly in another oVirt cluster (names are
                // engine-wide): the next pass finds it or reports the conflict.
                Err(err) if err.is_affinity_group_name_taken() => Ok(Executed::Requeue(Requeue::Backoff)),
                Err(err) => Err(err.into()),
            }
        }
        // The decision reports these; they changed since it was taken.
        GroupState::Conflict { .. } | GroupState::LabelNotFound => Ok(Executed::Continue),
    }
}

/// Takes the VM out of a group, removing the group when the VM is its last member.
async fn leave(
    state: &MachineState,
    observed: &Observed,
    client: &Client,
    leave: &LeaveGroup,
) -> Result<Executed, Failure> {
    let provider = &state.object.spec.settings.provider;
    let _held = state
        .shared
        .placements
        .lock_group(provider, &leave.leave.group_name)
        .await;
    let groups = read(client, &leave.cluster_id).await?;
    let now = leaving(&groups, &observed.group_owner, &leave.vm_id)
        .into_iter()
        .find(|l| l.group_id == leave.leave.group_id);
    let result = match now {
        None => return Ok(Executed::Continue),
        Some(Leave {
            delete_group: true,
            group_name,
            ..
        }) => {
            tracing::info!(object = %state.key, group = %group_name, "removing the affinity group with its last VM");
            client
                .remove_affinity_group(&leave.cluster_id, &leave.leave.group_id)
                .await
        }
        Some(_) => {
            client
                .remove_affinity_group_vm(&leave.cluster_id, &leave.leave.group_id, &leave.vm_id)
                .await
        }
    };
    match result {
        Ok(()) => Ok(Executed::Continue),
        Err(err) if err.is_not_found() => Ok(Executed::Continue),
        Err(err) => Err(err.into()),
    }
}

async fn read(client: &Client, cluster_id: &str) -> Result<Vec<GroupFact>, Failure> {
    Ok(client
        .affinity_groups(cluster_id)
        .await?
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
        .collect())
}

/// The group to create, with the VM already in it (one request instead of two).
fn new_group(wanted: &WantedGroup, vm_id: &str, host_label_id: Option<String>) -> AffinityGroup {
    let off = AffinityRule {
        enabled: Some(false),
        ..AffinityRule::default()
    };
    let (vms_rule, hosts_rule) = match &wanted.rule {
        GroupRule::AntiAffinity { hard } => (
            AffinityRule {
                enabled: Some(true),
                positive: Some(false),
                enforcing: Some(*hard),
            },
            off,
        ),
        GroupRule::HostLabel { .. } => (
            off,
            AffinityRule {
                enabled: Some(true),
                positive: Some(true),
                enforcing: Some(true),
            },
        ),
    };
    AffinityGroup {
        name: Some(wanted.name.clone()),
        description: Some(wanted.marker.clone()),
        vms_rule: Some(vms_rule),
        hosts_rule: Some(hosts_rule),
        vms: Some(VmRefs {
            items: vec![Ref::id(vm_id)],
        }),
        host_labels: host_label_id.map(|id| AffinityLabelRefs {
            items: vec![Ref::id(id)],
        }),
        ..AffinityGroup::default()
    }
}

/// A refusal to change groups (CAPOV's user lacks the role) reads better on MachinePlacementSet with its reason.
fn placement_failure(failure: Failure) -> Failure {
    if failure.reason == reasons::PERMISSION_DENIED {
        return Failure {
            reason: reasons::AFFINITY_GROUP_UNAVAILABLE,
            ..failure
        };
    }
    failure
}
