//! The VM as `decide` sees it: found by providerID or name (or taken from what the provider's poll delivered), with
//! its disks, NICs and reported devices when the step needs them.

use std::sync::Arc;
use std::time::Instant;

use capov_ovirt::Client;

use super::observation::ObserveError;
use crate::runtime::machine::state::MachineState;
use capov_core::conditions::{reasons, types};
use capov_core::machine_steps::{FoundBy, Observed, ObservedVm, VmDisk};
use capov_core::network::addresses::{ReportedDevice, VmNic};
use capov_core::trust::identity::{NotOwned, Ownership, marker_management_cluster, ownership, parse_provider_id};
use capov_core::vm::vm_snapshot::VmSnapshot;

/// A VM as found, and how.
type Found = (Arc<VmSnapshot>, FoundBy);

/// The VM: by the providerID's id when set, else by exact name. During deletion a VM whose id is not found is
/// also looked for by name, so that "gone" is confirmed both ways before the finalizer goes. What the provider's poll
/// delivered (or an earlier read saw) while the VM stayed watched is used instead of a read: the poll reports every
/// change of it.
pub async fn find_vm(
    state: &mut MachineState,
    client: &Client,
    observed: &Observed,
) -> Result<Option<ObservedVm>, ObserveError> {
    let held = held_snapshot(state);
    let found = match observed.provider_id.as_deref().map(parse_provider_id) {
        // A providerID without a VM id: nothing to look up, and what is held stays as it is.
        Some(None) => return Ok(None),
        Some(Some(id)) if held.is_none() && may_await_search(state, observed, Instant::now()) => {
            if state.vm_search_until.is_none() {
                state.vm_search_until = Some(Instant::now() + search_deadline(state));
            }
            return Err(ObserveError::awaiting_search(id));
        }
        Some(Some(id)) => find_by_id(state, client, observed, id, held.as_ref()).await?,
        None => find_created(state, client, observed, held.as_ref()).await?,
    };
    hold_snapshot(state, found.as_ref(), held.as_ref());
    let Some((vm, found_by)) = found else {
        return Ok(None);
    };
    observed_vm(state, client, observed, &vm, found_by).await
}

/// Whether this pass may leave its VM to the provider's next batched search instead of reading it: while the actor
/// never saw the VM yet (after a restart every machine starts so, and 10,000 reads of one VM each would cost 18
/// minutes of the default engine budget where 200 searches cost 20 s), until the deadline set at its first ask.
/// Passes woken meanwhile (the CAPI Machines' first list pokes every machine, and at 10,000 it ends after most of them
/// asked) wait for the same search. Not during deletion, which reads at once, and not once the actor has seen the VM:
/// the search hands over only what changed since (a VM that joined an affinity group looks the same), so the machine
/// would wait for the deadline. If the search cannot answer by then (it fails, or the VM is gone) the next pass reads
/// the VM.
fn may_await_search(state: &MachineState, observed: &Observed, now: Instant) -> bool {
    state.vm_search_until.is_none_or(|until| now < until)
        && state.vm_snapshot_at.is_none()
        && !observed.deletion_requested
        && state.subscribed_to.is_some()
}

/// How long a machine leaves its VM to the search: two steady rounds (jittered), time for the round that answers it
/// and for one retry of a failed search.
fn search_deadline(state: &MachineState) -> std::time::Duration {
    let two_steady_rounds =
        state.shared.settings.poll_interval * 2 * capov_core::policy::backoff::STEADY_POLL_EVERY as u32;
    capov_core::policy::backoff::jittered(two_steady_rounds, fastrand::f64())
}

/// What is held of the VM, when it may stand in for a read. Watched, the VM's changes are delivered; unwatched, what
/// was seen counts only while it is as fresh as a watched one would be.
fn held_snapshot(state: &MachineState) -> Option<Arc<VmSnapshot>> {
    let fresh = state
        .vm_snapshot_at
        .is_some_and(|at| at.elapsed() <= state.shared.settings.poll_interval * 2);
    state
        .vm_snapshot
        .clone()
        .filter(|_| state.watched_vm.is_some() || fresh)
}

async fn find_by_id(
    state: &MachineState,
    client: &Client,
    observed: &Observed,
    id: &str,
    held: Option<&Arc<VmSnapshot>>,
) -> Result<Option<Found>, ObserveError> {
    match read_by_id(state, client, observed, id, held, FoundBy::ProviderId).await? {
        None if observed.deletion_requested => find_by_name(state, client, observed, held).await,
        found => Ok(found),
    }
}

/// Without a providerID: the VM CAPOV created for this object, by the id it recorded (the created-VM annotation,
/// else what this actor created and could not record yet), so that an edit of the name template, the cluster label
/// or the spec while the disks are copied neither hides the VM nor makes a second one (issue 35). A recorded id the
/// engine does not know (the create failed and the engine removed the VM), or whose VM is not this object's (the
/// annotation is writable by the tenant), leaves the lookup by name.
async fn find_created(
    state: &MachineState,
    client: &Client,
    observed: &Observed,
    held: Option<&Arc<VmSnapshot>>,
) -> Result<Option<Found>, ObserveError> {
    let recorded = observed.created_vm.as_deref().or(state.created_vm.as_deref());
    if let Some(id) = recorded.filter(|id| capov_core::trust::identity::is_engine_id(id)) {
        let found = read_by_id(state, client, observed, id, held, FoundBy::CreatedVm).await?;
        if let Some(found) = found.filter(|(vm, _)| ownership(&vm.description, &observed.owner) == Ownership::Owned) {
            return Ok(Some(found));
        }
    }
    find_by_name(state, client, observed, held).await
}

/// The VM of `id`, from what is held when that is it, else read; None when the engine does not know it.
async fn read_by_id(
    state: &MachineState,
    client: &Client,
    observed: &Observed,
    id: &str,
    held: Option<&Arc<VmSnapshot>>,
    found_by: FoundBy,
) -> Result<Option<Found>, ObserveError> {
    if let Some(snapshot) = held.filter(|s| s.id == id) {
        return Ok(Some((snapshot.clone(), found_by)));
    }
    // NICs, reported devices and (until the machine is provisioned, or when deleting) the disks inlined: one engine
    // request per pass.
    match client.vm_facts(id, needs_disks(state, observed)).await {
        Ok(facts) => Ok(VmSnapshot::from_facts(facts).map(|s| (Arc::new(with_hosts(state, s)), found_by))),
        Err(err) if err.is_not_found() => Ok(None),
        Err(err) => Err(vm_read_error(err)),
    }
}

async fn find_by_name(
    state: &MachineState,
    client: &Client,
    observed: &Observed,
    held: Option<&Arc<VmSnapshot>>,
) -> Result<Option<Found>, ObserveError> {
    let vm_name = observed.vm_name();
    // The VM this actor created, as the poll showed it, is the one the name search would find.
    if let Some(snapshot) = held.filter(|s| state.created_vm.as_deref() == Some(s.id.as_str()) && s.name == vm_name) {
        return Ok(Some((snapshot.clone(), FoundBy::Name)));
    }
    let found = client.find_vms_facts_by_name(&vm_name).await.map_err(vm_read_error)?;
    let snapshots = found.into_iter().filter_map(VmSnapshot::from_facts).collect();
    Ok(preferred(snapshots, &observed.owner).map(|s| (Arc::new(with_hosts(state, s)), FoundBy::Name)))
}

/// Of the VMs sharing this machine's VM name (in several data centers), the one whose marker names this machine,
/// else the first: a same-named VM of someone else must not hide this machine's own.
fn preferred(snapshots: Vec<VmSnapshot>, owner: &capov_core::trust::identity::OwnerIdentity) -> Option<VmSnapshot> {
    let rank = |snapshot: &VmSnapshot| match ownership(&snapshot.description, owner) {
        Ownership::Owned => 0,
        Ownership::Legacy | Ownership::Moved => 1,
        Ownership::NotOwned(_) => 2,
    };
    let best = snapshots
        .iter()
        .enumerate()
        .min_by_key(|(index, s)| (rank(s), *index))?
        .0;
    snapshots.into_iter().nth(best)
}

/// The snapshot with its host's name and status from the provider's last inventory poll.
fn with_hosts(state: &MachineState, snapshot: VmSnapshot) -> VmSnapshot {
    let inventory = state.shared.placements.inventory(&state.object.spec.settings.provider);
    snapshot.with_hosts(inventory.as_deref())
}

/// Remembers what was found. Whether this observation is what was held (and since when) matters for the pass's
/// check before an engine write; a fresh read is held from now on.
fn hold_snapshot(state: &mut MachineState, found: Option<&Found>, held: Option<&Arc<VmSnapshot>>) {
    let from_held = matches!((found, held), (Some((snapshot, _)), Some(held)) if Arc::ptr_eq(snapshot, held));
    state.observed_snapshot_at = if from_held { state.vm_snapshot_at } else { None };
    if !from_held {
        state.vm_snapshot_at = Some(Instant::now());
    }
    state.last_seen_fingerprint = found.map(|(snapshot, _)| snapshot.fingerprints());
    state.vm_snapshot = found.map(|(snapshot, _)| snapshot.clone());
}

/// The found VM as `decide` sees it: with its disks, NICs and reported devices when the step needs them and the
/// VM is this machine's. None: the VM went away meanwhile.
async fn observed_vm(
    state: &MachineState,
    client: &Client,
    observed: &Observed,
    vm: &VmSnapshot,
    found_by: FoundBy,
) -> Result<Option<ObservedVm>, ObserveError> {
    let ownership = ownership(&vm.description, &observed.owner);
    let ours = ownership.proven(found_by == FoundBy::ProviderId);
    let mut found = ObservedVm {
        ever_started: started_by_status(state.status.ready, &state.status.conditions) || vm.started,
        os_type: vm.os_type.clone(),
        id: vm.id.clone(),
        status: vm.status.clone(),
        ownership,
        found_by,
        foreign_management_cluster: (ownership == Ownership::NotOwned(NotOwned::ThisObjectOtherManagementCluster))
            .then(|| marker_management_cluster(&vm.description).map(String::from))
            .flatten(),
        disks: Vec::new(),
        cluster_id: vm.cluster_id.clone(),
        host: vm.host.clone(),
        nics: Vec::new(),
        reported_devices: Vec::new(),
        tags: None,
    };
    let status = vm.status.as_str();
    if !ours || status == "image_locked" {
        return Ok(Some(found));
    }
    // Disks matter before the first start (steps 3–4) and at deletion (non-system disks); the passes of a started
    // VM (e.g. keeping its addresses current) spare the request, and so does a VM found by name outside deletion:
    // its pass only records it in spec.providerID, and its system disks with it when the poll's snapshot carries
    // them (`creation::system_disks_with_provider_id` in capov-core), which saves the machine a write of its own.
    let never_started_down = !found.ever_started && status == "down";
    let before_first_start = found_by == FoundBy::ProviderId && never_started_down;
    if found_by != FoundBy::ProviderId
        && never_started_down
        && !observed.deletion_requested
        && let Some(disks) = vm.disks.as_ref()
    {
        found.disks = disks.clone();
    }
    if observed.deletion_requested || before_first_start {
        // Creating a data disk is not idempotent (aliases are not unique in the engine): the pass that decides
        // whether one is missing reads the disks afresh, never from a snapshot the poll may not have updated yet.
        let fresh = before_first_start && !observed.settings.datadisks.is_empty();
        found.disks = match vm_disks(client, vm, fresh).await? {
            Some(disks) => disks,
            None => return Ok(None),
        };
    }
    // The tags matter only before the first start, and only when the provider tags VMs (capov_core::naming::vm_tags).
    if before_first_start && !observed.deletion_requested && observed.provider_defaults.vmtags == Some(true) {
        found.tags = match client.vm_tags(&vm.id).await {
            Ok(tags) => Some(tags.into_iter().filter_map(|t| t.name).collect()),
            Err(err) if err.is_not_found() => return Ok(None),
            Err(err) => return Err(vm_read_error(err)),
        };
    }
    if matches!(status, "up" | "migrating") {
        found.nics = vm_nics(client, vm).await?;
        found.reported_devices = reported_devices(client, vm).await?;
    }
    Ok(Some(found))
}

/// The VM's disks, inlined in the snapshot (unless `fresh`) or read; None when the VM is not found.
async fn vm_disks(client: &Client, vm: &VmSnapshot, fresh: bool) -> Result<Option<Vec<VmDisk>>, ObserveError> {
    if let Some(disks) = vm.disks.as_ref().filter(|_| !fresh) {
        return Ok(Some(disks.clone()));
    }
    // Found by name, or an engine that did not inline whole disks.
    match client.disk_attachments_with_disks(&vm.id).await {
        Ok(attachments) => Ok(Some(
            attachments
                .into_iter()
                .filter_map(|a| {
                    let disk = a.disk?;
                    Some(VmDisk {
                        attachment_id: a.id.unwrap_or_default(),
                        disk_id: disk.id?,
                        alias: disk.alias.unwrap_or_default(),
                        bootable: a.bootable == Some(true),
                        provisioned_size: disk.provisioned_size.unwrap_or(0),
                        status: disk
                            .status
                            .map(|s| s.as_str().to_string())
                            .unwrap_or_else(|| "ok".into()),
                    })
                })
                .collect(),
        )),
        Err(err) if err.is_not_found() => Ok(None),
        Err(err) => Err(vm_read_error(err)),
    }
}

/// The VM's NICs with a MAC address, inlined in the snapshot or read.
async fn vm_nics(client: &Client, vm: &VmSnapshot) -> Result<Vec<VmNic>, ObserveError> {
    if let Some(nics) = &vm.nics {
        return Ok(nics
            .iter()
            .filter_map(|n| {
                Some(VmNic {
                    name: n.name.clone(),
                    mac: n.mac.clone()?,
                })
            })
            .collect());
    }
    Ok(client
        .nics(&vm.id)
        .await
        .map_err(vm_read_error)?
        .into_iter()
        .filter_map(|n| {
            Some(VmNic {
                name: n.name.unwrap_or_default(),
                mac: n.mac?.address?,
            })
        })
        .collect())
}

/// The devices the guest agent reports (MACs and IPs), inlined in the snapshot or read.
async fn reported_devices(client: &Client, vm: &VmSnapshot) -> Result<Vec<ReportedDevice>, ObserveError> {
    if let Some(devices) = &vm.reported_devices {
        return Ok(devices.clone());
    }
    Ok(client
        .reported_devices(&vm.id)
        .await
        .map_err(vm_read_error)?
        .into_iter()
        .map(|d| ReportedDevice {
            mac: d.mac.and_then(|m| m.address),
            ips: d
                .ips
                .map(|ips| ips.items.into_iter().filter_map(|ip| ip.address).collect())
                .unwrap_or_default(),
        })
        .collect())
}

fn vm_read_error(err: capov_ovirt::Error) -> ObserveError {
    ObserveError::new(format!("reading the VM: {err}"))
}

/// Whether this pass may look at the VM's disks: steps 3–4 before the machine is provisioned, and deletion.
fn needs_disks(state: &MachineState, observed: &Observed) -> bool {
    observed.deletion_requested || !state.status.ready
}

/// CAPOV starts a VM once: it was started if the machine was ever up, the engine reports a start time (checked by
/// the caller), or CAPOV wrote MachineOn after the engine accepted the start. MachineOn `EngineError` and
/// `NoSchedulableHost` are starts the engine refused (a 503; no host to run on): the VM never ran and is started
/// again.
pub(crate) fn started_by_status(ready: bool, conditions: &[capov_crds::Condition]) -> bool {
    let refused = |reason: &str| reason == reasons::ENGINE_ERROR || reason == reasons::NO_SCHEDULABLE_HOST;
    ready
        || conditions
            .iter()
            .any(|c| c.type_ == types::MACHINE_ON && !refused(&c.reason))
}

#[cfg(test)]
mod tests {
    use super::*;
    use capov_crds::Condition;

    fn named(id: &str, description: &str) -> VmSnapshot {
        VmSnapshot {
            id: id.into(),
            name: "twin".into(),
            description: description.into(),
            status: "down".into(),
            os_type: None,
            started: false,
            disks: None,
            nics: None,
            reported_devices: None,
            cluster_id: None,
            host: None,
        }
    }

    #[test]
    fn of_same_named_vms_the_one_marked_for_this_machine_is_taken() {
        let owner = capov_core::trust::identity::OwnerIdentity {
            namespace: "tenant".into(),
            name: "twin".into(),
            uid: "6f1c2d3e-0000-4000-8000-000000000001".into(),
            previous_uid: None,
            management_cluster: "mc".into(),
            accepted_management_clusters: Vec::new(),
        };
        let foreign = named("a", "production database");
        let other_object = named("b", "capov:tenant/other uid:x mc:mc");
        let own = named("c", &owner.marker());
        let found = preferred(vec![foreign.clone(), other_object.clone(), own.clone()], &owner);
        assert_eq!(found.map(|s| s.id), Some("c".to_string()));
        let found = preferred(vec![foreign.clone(), other_object], &owner);
        assert_eq!(
            found.map(|s| s.id),
            Some("a".to_string()),
            "none is ours: the first, reported as a conflict"
        );
        assert_eq!(preferred(vec![], &owner), None);
    }

    fn machine_on(reason: &str) -> Condition {
        serde_json::from_value(serde_json::json!({
            "type": "MachineOn", "status": "False", "reason": reason, "lastTransitionTime": "2026-12-03T00:00:00Z"
        }))
        .expect("condition")
    }

    #[test]
    fn a_refused_start_is_not_a_started_vm() {
        assert!(!started_by_status(false, &[]));
        assert!(!started_by_status(false, &[machine_on(reasons::ENGINE_ERROR)]));
        assert!(!started_by_status(false, &[machine_on(reasons::NO_SCHEDULABLE_HOST)]));
        assert!(started_by_status(false, &[machine_on(reasons::VM_POWERING_UP)]));
        assert!(started_by_status(false, &[machine_on(reasons::VM_DOWN)]));
        assert!(started_by_status(true, &[]));
    }
}
