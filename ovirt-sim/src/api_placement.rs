//! `/hosts`, `/clusters/{id}/affinitygroups` and `/affinitylabels`: routing the REST calls on where VMs run onto
//! the engine state (`engine::hosts`, `engine::affinity`).
//!
//! Permissions as the engine's: the host list is a user query (a filtered caller sees the hosts of the clusters its
//! roles cover; the simulator's users hold their role on every cluster), while affinity groups and labels are admin
//! objects: listing them is an admin-only query (`GetAffinityGroupsByClusterId`, `GetAllLabels`: 400 "insufficient
//! permissions" when filtered) and changing them needs `MANIPULATE_AFFINITY_GROUPS`, an admin action group (403).

use std::sync::Arc;

use capov_ovirt::model;
use http::Method;

use crate::api::{Caller, INSUFFICIENT_PERMISSIONS};
use crate::body::{BodyOf, decode};
use crate::engine;
use crate::render_placement as render;
use crate::request::Incoming;
use crate::search;
use crate::shared::Shared;
use crate::state::State;
use crate::wire::{self, Format, Reply};

const AFFINITY_GROUP_ADD: BodyOf = BodyOf {
    root: "AffinityGroup",
    usage: "affinity_groups/methods/add",
};
const AFFINITY_GROUP_VM_ADD: BodyOf = BodyOf {
    root: "Vm",
    usage: "affinity_group_vms/methods/add",
};
const HOST_ACTION: BodyOf = BodyOf {
    root: "Action",
    usage: "",
};

fn not_found() -> Reply {
    Reply::empty(404)
}

/// Whether a request path (what follows `/ovirt-engine/api`) is this module's.
pub fn handles(path: &[&str]) -> bool {
    matches!(
        path,
        ["hosts", ..] | ["affinitylabels", ..] | ["clusters", _, "affinitygroups", ..]
    )
}

/// Dispatches a request under `/hosts`, `/affinitylabels` or `/clusters/{id}/affinitygroups`.
pub fn handle(shared: &Arc<Shared>, req: &Incoming, path: &[&str], format: Format, caller: &Caller) -> Reply {
    match path {
        ["hosts", rest @ ..] => hosts(shared, req, rest, format),
        ["affinitylabels", ..] | ["clusters", _, "affinitygroups", ..] if caller.filtered => {
            if req.method == Method::GET {
                wire::error(&engine::operation_failed(400, INSUFFICIENT_PERMISSIONS), format)
            } else {
                wire::error(
                    &engine::operation_failed(403, "User is not authorized to perform this action."),
                    format,
                )
            }
        }
        ["affinitylabels", rest @ ..] => labels(&shared.lock(), req, rest, format),
        ["clusters", cluster, "affinitygroups", rest @ ..] => affinity_groups(shared, req, cluster, rest, format),
        _ => not_found(),
    }
}

fn hosts(shared: &Arc<Shared>, req: &Incoming, rest: &[&str], format: Format) -> Reply {
    match (&req.method, rest) {
        (&Method::GET, []) => list_hosts(&shared.lock(), req, format),
        (&Method::GET, [id]) => {
            let state = shared.lock();
            state
                .hosts
                .get(*id)
                .map_or_else(not_found, |h| wire::object(200, &render::host(&state, h), format))
        }
        (&Method::GET, [id, "devices", rest @ ..]) => {
            crate::api_workload::host_devices_of_host(&shared.lock(), id, rest, format)
        }
        (&Method::POST, [id, verb @ ("deactivate" | "activate")]) => {
            let action: model::Action = if req.body.iter().all(|b| b.is_ascii_whitespace()) {
                model::Action::default()
            } else {
                match decode(shared, req, format, &HOST_ACTION, None) {
                    Ok(action) => action,
                    Err(reply) => return reply,
                }
            };
            let timings = shared.timings();
            let result = {
                let mut state = shared.lock();
                if *verb == "deactivate" {
                    engine::deactivate_host(&mut state, &timings, id)
                } else {
                    engine::activate_host(&mut state, id).map(|()| Vec::new())
                }
            };
            match result {
                Ok(scheduled) => {
                    shared.schedule(scheduled);
                    wire::action_complete(&action, None, format)
                }
                Err(e) => wire::error(&e, format),
            }
        }
        (&Method::GET, _) => not_found(),
        _ => Reply::empty(405),
    }
}

/// `GET /hosts[?search=…]` (by name, status or cluster).
fn list_hosts(state: &State, req: &Incoming, format: Format) -> Reply {
    let query = match search::parse(req.param("search").unwrap_or_default()) {
        Ok(query) => query,
        Err(e) => {
            return wire::error(
                &engine::operation_failed(400, &format!("Search query is invalid: {e}")),
                format,
            );
        }
    };
    let items = state
        .hosts
        .values()
        .filter(|h| {
            query.matches(|f| match f {
                "name" => Some(vec![h.name.clone()]),
                "status" => Some(vec![h.status.to_string()]),
                "cluster" => state.clusters.get(&h.cluster_id).map(|c| vec![c.name.clone()]),
                _ => None,
            })
        })
        .map(|h| render::host(state, h))
        .collect();
    wire::object(200, &model::Hosts { items }, format)
}

fn labels(state: &State, req: &Incoming, rest: &[&str], format: Format) -> Reply {
    match (&req.method, rest) {
        (&Method::GET, []) => {
            let items = state.affinity_labels.values().map(render::affinity_label).collect();
            wire::object(200, &model::AffinityLabels { items }, format)
        }
        (&Method::GET, [id]) => state
            .affinity_labels
            .get(*id)
            .map_or_else(not_found, |l| wire::object(200, &render::affinity_label(l), format)),
        (&Method::GET, [id, "hosts"]) => match state.affinity_labels.get(*id) {
            Some(label) => {
                let items = label
                    .host_ids
                    .iter()
                    .filter_map(|h| state.hosts.get(h))
                    .map(|h| render::host(state, h))
                    .collect();
                wire::object(200, &model::Hosts { items }, format)
            }
            None => not_found(),
        },
        (&Method::GET, _) => not_found(),
        _ => Reply::empty(405),
    }
}

/// `/clusters/{id}/affinitygroups[/{group}[/vms[/{vm}]]]`; `rest` is what follows `affinitygroups`.
fn affinity_groups(shared: &Arc<Shared>, req: &Incoming, cluster: &str, rest: &[&str], format: Format) -> Reply {
    match (&req.method, rest) {
        (&Method::GET, []) => {
            let state = shared.lock();
            if !state.clusters.contains_key(cluster) {
                return not_found();
            }
            let items = state
                .affinity_groups
                .values()
                .filter(|g| g.cluster_id == cluster)
                .map(render::affinity_group)
                .collect();
            wire::object(200, &model::AffinityGroups { items }, format)
        }
        (&Method::POST, []) => {
            let group: model::AffinityGroup = match decode(shared, req, format, &AFFINITY_GROUP_ADD, None) {
                Ok(group) => group,
                Err(reply) => return reply,
            };
            let mut state = shared.lock();
            match engine::add_affinity_group(&mut state, cluster, &group) {
                Ok(id) => state.affinity_groups.get(&id).map_or_else(
                    || Reply::empty(500),
                    |g| wire::object(201, &render::affinity_group(g), format),
                ),
                Err(e) => wire::error(&e, format),
            }
        }
        (&Method::GET, [id]) => shared
            .lock()
            .affinity_groups
            .get(*id)
            .filter(|g| g.cluster_id == cluster)
            .map_or_else(not_found, |g| wire::object(200, &render::affinity_group(g), format)),
        (&Method::DELETE, [id]) => match engine::remove_affinity_group(&mut shared.lock(), cluster, id) {
            Ok(()) => wire::action_complete(&model::Action::default(), None, format),
            Err(e) => wire::error(&e, format),
        },
        (&Method::POST, [id, "vms"]) => {
            let vm: model::Vm = match decode(shared, req, format, &AFFINITY_GROUP_VM_ADD, None) {
                Ok(vm) => vm,
                Err(reply) => return reply,
            };
            let vm_id = vm.id.unwrap_or_default();
            match engine::add_affinity_group_vm(&mut shared.lock(), cluster, id, &vm_id) {
                Ok(()) => {
                    let added = model::Vm {
                        id: Some(vm_id),
                        ..model::Vm::default()
                    };
                    wire::object(201, &added, format)
                }
                Err(e) => wire::error(&e, format),
            }
        }
        (&Method::DELETE, [id, "vms", vm]) => {
            match engine::remove_affinity_group_vm(&mut shared.lock(), cluster, id, vm) {
                Ok(()) => wire::action_complete(&model::Action::default(), None, format),
                Err(e) => wire::error(&e, format),
            }
        }
        (&Method::GET, _) => not_found(),
        _ => Reply::empty(405),
    }
}
