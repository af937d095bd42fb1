//! The provider's batched search of the VMs its machines watch, handed over as snapshots, and the engine request
//! metrics of its client.

use std::collections::HashMap;
use std::sync::Arc;

use capov_core::placement::capacity::Inventory;
use capov_ovirt::{Client, Outcome, RequestEvent};
use ractor::ActorRef;

use crate::metrics::Metrics;
use crate::runtime::keys::ObjectKey;
use crate::runtime::machine_mail::tell;
use crate::runtime::mailbox;
use crate::runtime::messages::{Cadence, Connection, MachineMsg, ProviderMsg};
use capov_core::vm::vm_snapshot::{Fingerprints, VmSnapshot};

use super::state::*;

/// What one poll compares a searched VM against: each watch of it (normally one).
#[derive(Clone, Copy)]
pub(super) struct Due {
    pub(super) cadence: Cadence,
    pub(super) seen: Option<Fingerprints>,
    pub(super) first_sight: bool,
}

/// One search for every VM due this poll (those in a transition each time, those of Ready machines every
/// STEADY_POLL_EVERY-th), run as a task. It reads what a machine's own read would (`follow` of NICs, reported
/// devices and, for VMs in a transition, whole disks), so a VM that changed is handed to its machine as a snapshot and
/// its pass decides without reading the VM again ([`report_polled`]). A Ready machine thus costs its share of one
/// search a minute, and a machine waiting for a permit in a large batch its share of one search per poll, instead of
/// a read of its own per change. A tick while the previous search still runs is skipped.
pub(super) fn poll(me: &ActorRef<ProviderMsg>, state: &mut ProviderState) {
    let Connection::Ready { client, .. } = &state.connection else {
        return;
    };
    if state.poll_in_flight {
        return;
    }
    state.polls = state.polls.wrapping_add(1);
    if !state.subscribers.is_empty() {
        let (me, metrics) = (me.clone(), state.metrics.clone());
        state
            .inventory
            .poll_if_due(&state.key.name, state.polls, client, move |inventory| {
                let _ = mailbox::cast(&metrics, &me, ProviderMsg::Inventoried(inventory));
            });
    }
    if state.inventory.awaiting_first() {
        return;
    }
    // Polls count from 1, so steady rounds fall on 1, 13, …: after a restart the first search (at the second poll
    // while the first inventory is read) hands every machine its VM (they all watch with nothing seen), and the next
    // steady round comes a whole round later. A host that changed state shows in the snapshots
    // of its VMs: search them all now, not at the steady turn.
    let steady_due = state.polls % capov_core::policy::backoff::STEADY_POLL_EVERY == 1
        || std::mem::take(&mut state.inventory.search_all);
    // What each due watch last reported, by VM: the task keeps only the VMs that differ from it, so that a search
    // of thousands of VMs never holds more than one batch of answers at once.
    let mut seen_by_vm: HashMap<String, Vec<Due>> = HashMap::new();
    let mut searched: Vec<(ObjectKey, String)> = Vec::new();
    for (machine, watched) in &state.watched {
        if steady_due || watched.watch.cadence == Cadence::EveryPoll || watched.first_sight() {
            searched.push((machine.clone(), watched.watch.vm_id.clone()));
            // Nearly every VM has one watch: room for one, not the four a first push makes (96 bytes a VM).
            let dues = seen_by_vm
                .entry(watched.watch.vm_id.clone())
                .or_insert_with(|| Vec::with_capacity(1));
            dues.push(Due {
                cadence: watched.watch.cadence,
                seen: watched.seen,
                first_sight: watched.first_sight(),
            });
        }
    }
    if searched.is_empty() {
        return;
    }
    // Disks matter to VMs in a transition (before the first start, at deletion); Ready VMs are searched without. A VM
    // watched both ways (two machines naming one VM) is searched with disks, which serves both.
    let (mut moving, mut steady): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for (vm_id, watches) in &seen_by_vm {
        if watches.iter().any(|due| due.cadence == Cadence::EveryPoll) {
            moving.push(vm_id.clone());
        } else {
            steady.push(vm_id.clone());
        }
    }
    state.poll_in_flight = true;
    let client = client.with_correlation_id("capov-status-poll");
    let inventory = state.inventory.current();
    let (me, metrics, provider) = (me.clone(), state.metrics.clone(), state.key.clone());
    tokio::spawn(async move {
        let changed = search(
            &client,
            [(moving, true), (steady, false)],
            &seen_by_vm,
            inventory,
            &provider,
        )
        .await;
        let _ = mailbox::cast(&metrics, &me, ProviderMsg::Polled { searched, changed });
    });
}

/// The poll task's search, batch by batch (with disks for the VMs in a transition): the VMs that differ from what
/// their watches last reported (None inside: not found), or None when a search failed.
async fn search(
    client: &Client,
    lists: [(Vec<String>, bool); 2],
    seen_by_vm: &HashMap<String, Vec<Due>>,
    inventory: Option<Arc<Inventory>>,
    provider: &ObjectKey,
) -> Option<HashMap<String, Option<Arc<VmSnapshot>>>> {
    let mut changed = HashMap::new();
    for (ids, disks) in lists {
        for batch in ids.chunks(SEARCH_BATCH) {
            let batch: Vec<&str> = batch.iter().map(String::as_str).collect();
            let mut found = match client.vms_facts(&batch, disks).await {
                Ok(found) => found,
                Err(err) => {
                    tracing::debug!(%provider, error = %err, "status poll failed");
                    return None;
                }
            };
            for vm_id in batch {
                let snapshot = found
                    .remove(vm_id)
                    .and_then(VmSnapshot::from_facts)
                    .map(|s| s.with_hosts(inventory.as_deref()));
                let watches = seen_by_vm.get(vm_id).map(Vec::as_slice).unwrap_or_default();
                if differs_from_any(snapshot.as_ref(), watches) {
                    changed.insert(vm_id.to_string(), snapshot.map(Arc::new));
                }
            }
        }
    }
    Some(changed)
}

/// Each tenant's requests waiting for this provider's rate limit, sampled once per poll interval; a tenant whose
/// queue emptied since the last sample is reported at zero.
pub(super) fn report_queue_depths(state: &mut ProviderState) {
    let Some(client) = &state.client else {
        return;
    };
    let depths = client.queue_depths();
    for tenant in state
        .queued_tenants
        .iter()
        .filter(|tenant| !depths.contains_key(*tenant))
    {
        state.metrics.queues.engine_depth(&state.key.name, tenant.name(), 0);
    }
    for (tenant, depth) in &depths {
        state
            .metrics
            .queues
            .engine_depth(&state.key.name, tenant.name(), *depth);
    }
    state.queued_tenants = depths.into_keys().collect();
}

/// How many VMs one search asks for (the client halves a batch whose answer is too large).
pub(super) const SEARCH_BATCH: usize = 50;

/// Whether a watch would report `snapshot` (None: not found): it differs from what the watch last reported.
pub(super) fn differs(snapshot: Option<&VmSnapshot>, cadence: Cadence, seen: Option<&Fingerprints>) -> bool {
    // Searches of VMs in a transition inline their disks, those of Ready VMs do not.
    let with_disks = cadence == Cadence::EveryPoll;
    let pick = |f: &Fingerprints| if with_disks { f.with_disks } else { f.without_disks };
    snapshot.map(|s| s.fingerprint(with_disks)) != seen.map(pick)
}

/// Whether the poll hands `snapshot` over: some watch of it has not seen it yet.
pub(super) fn differs_from_any(snapshot: Option<&VmSnapshot>, watches: &[Due]) -> bool {
    watches
        .iter()
        .any(|due| due.first_sight || differs(snapshot, due.cadence, due.seen.as_ref()))
}

/// Hands each searched VM that differs from what its machine saw to the machine, and keeps watching it: a machine
/// waiting for a reconcile permit (in a large batch, for minutes) gets every later change too, so that its pass can
/// decide from what it holds instead of reading the VM. Watches that changed while the search ran (another VM, or
/// removed) are left alone; one whose `seen` changed meanwhile is compared again.
pub(super) fn report_polled(
    state: &mut ProviderState,
    searched: &[(ObjectKey, String)],
    changed: &HashMap<String, Option<Arc<VmSnapshot>>>,
) {
    for (machine, vm_id) in searched {
        let Some(watched) = state.watched.get_mut(machine) else {
            continue;
        };
        if watched.watch.vm_id != *vm_id {
            continue;
        }
        let first_sight = watched.first_sight();
        watched.searched = true;
        let Some(snapshot) = changed.get(vm_id) else {
            continue;
        };
        if !first_sight && !differs(snapshot.as_deref(), watched.watch.cadence, watched.seen.as_ref()) {
            continue;
        }
        watched.seen = snapshot.as_ref().map(|s| s.fingerprints());
        if let Some(actor) = state.subscribers.get(machine) {
            let observed = MachineMsg::VmObserved {
                vm_id: vm_id.clone(),
                snapshot: snapshot.clone(),
            };
            tell(&state.metrics, &state.supervisor, machine, actor.as_ref(), observed);
        }
    }
}

/// Feeds the engine request metrics of this provider from the client's per-request reports.
/// A request that failed in transport, with a 5xx or with a 401 tells the provider actor, which then checks the
/// connection (debounced), so that its conditions and its machines' follow an outage or a changed password.
pub(super) fn engine_request_observer(
    metrics: &Metrics,
    provider: &str,
    me: &ActorRef<ProviderMsg>,
) -> Arc<dyn capov_ovirt::RequestObserver> {
    let metrics = metrics.clone();
    let provider = provider.to_string();
    let me = me.clone();
    Arc::new(move |event: &RequestEvent<'_>| {
        let code = match event.outcome {
            Outcome::Status(code) => code.to_string(),
            Outcome::Failed(_) => "error".to_string(),
        };
        let trouble = match event.outcome {
            Outcome::Failed(_) => true,
            Outcome::Status(code) => code == 401 || code >= 500,
        };
        if trouble {
            let _ = mailbox::cast(&metrics, &me, ProviderMsg::Trouble);
        }
        metrics
            .engine_requests_total
            .with_label_values(&[provider.as_str(), event.method, event.resource, code.as_str()])
            .inc();
        metrics
            .engine_request_duration_seconds
            .with_label_values(&[provider.as_str(), event.method, event.resource])
            .observe(event.latency.as_secs_f64());
        metrics
            .queues
            .engine_waited(provider.as_str(), event.tenant, event.rate_limit_wait);
        if !event.rate_limit_wait.is_zero() {
            metrics
                .engine_rate_limit_wait_seconds
                .with_label_values(&[provider.as_str()])
                .observe(event.rate_limit_wait.as_secs_f64());
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::messages::VmWatch;

    fn snapshot(status: &str, with_disk: bool) -> VmSnapshot {
        VmSnapshot {
            id: "vm-1".into(),
            name: "worker".into(),
            description: "marker".into(),
            status: status.into(),
            os_type: None,
            started: false,
            disks: with_disk.then(|| {
                vec![capov_core::machine_steps::VmDisk {
                    attachment_id: "a".into(),
                    disk_id: "d".into(),
                    alias: "x".into(),
                    bootable: true,
                    provisioned_size: 1,
                    status: "ok".into(),
                }]
            }),
            nics: None,
            reported_devices: None,
            cluster_id: None,
            host: None,
        }
    }

    #[test]
    fn a_watch_reports_what_differs_from_what_it_last_reported() {
        let down = snapshot("down", true);
        let seen = Some(down.fingerprints());
        assert!(!differs(Some(&down), Cadence::EveryPoll, seen.as_ref()));
        assert!(differs(Some(&snapshot("up", true)), Cadence::EveryPoll, seen.as_ref()));
        assert!(differs(None, Cadence::EveryPoll, seen.as_ref()), "a VM that is gone");
        assert!(!differs(None, Cadence::EveryPoll, None), "still not there");
        assert!(differs(Some(&down), Cadence::EveryPoll, None), "first seen");
    }

    #[test]
    fn a_steady_search_without_disks_matches_what_was_seen_with_them() {
        let seen = Some(snapshot("up", true).fingerprints());
        assert!(!differs(Some(&snapshot("up", false)), Cadence::Steady, seen.as_ref()));
        assert!(differs(Some(&snapshot("up", false)), Cadence::EveryPoll, seen.as_ref()));
        let due = |cadence, first_sight| Due {
            cadence,
            seen,
            first_sight,
        };
        let watches = [due(Cadence::Steady, false), due(Cadence::EveryPoll, false)];
        assert!(!differs_from_any(Some(&snapshot("up", true)), &watches));
        assert!(differs_from_any(Some(&snapshot("down", true)), &watches));
    }

    #[test]
    fn a_first_sight_is_handed_over_even_when_the_vm_is_not_found() {
        let first = Due {
            cadence: Cadence::Steady,
            seen: None,
            first_sight: true,
        };
        assert!(differs_from_any(None, &[first]), "not found is an answer too");
        assert!(differs_from_any(Some(&snapshot("up", false)), &[first]));
        let unseen_after_a_search = Due {
            first_sight: false,
            ..first
        };
        assert!(!differs_from_any(None, &[unseen_after_a_search]), "still not there");
        let watched = |seen, searched| Watched {
            watch: VmWatch {
                vm_id: "vm-1".into(),
                cadence: Cadence::Steady,
            },
            seen,
            searched,
        };
        assert!(watched(None, false).first_sight());
        assert!(!watched(None, true).first_sight());
        assert!(!watched(Some(snapshot("up", false).fingerprints()), false).first_sight());
    }
}
