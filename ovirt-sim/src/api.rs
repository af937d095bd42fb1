//! `/ovirt-engine/api/...`: routing REST calls onto the engine state.

use capov_ovirt::model::{self, VmStatus};
use std::sync::Arc;

use http::Method;

use crate::body::{BodyOf, decode};
use crate::engine;
use crate::render::{self, VmFollow};
use crate::request::Incoming;
use crate::search;
use crate::shared::Shared;
use crate::state::State;
use crate::wire::{self, Format, Reply};

fn not_found() -> Reply {
    Reply::empty(404)
}

fn bad_search(message: &str, format: Format) -> Reply {
    wire::error(
        &engine::operation_failed(400, &format!("Search query is invalid: {message}")),
        format,
    )
}

const VM_ADD: BodyOf = BodyOf {
    root: "Vm",
    usage: "vms/methods/add",
};
const VM_UPDATE: BodyOf = BodyOf {
    root: "Vm",
    usage: "vm/methods/update",
};
const NIC_ADD: BodyOf = BodyOf {
    root: "Nic",
    usage: "vm_nics/methods/add",
};
const DISK_ATTACHMENT_ADD: BodyOf = BodyOf {
    root: "DiskAttachment",
    usage: "disk_attachments/methods/add",
};
const TAG_ADD: BodyOf = BodyOf {
    root: "Tag",
    usage: "tags/methods/add",
};
const VM_TAG_ADD: BodyOf = BodyOf {
    root: "Tag",
    usage: "assigned_tags/methods/add",
};
const NIC_UPDATE: BodyOf = BodyOf {
    root: "Nic",
    usage: "vm_nic/methods/update",
};
const ATTACHMENT_UPDATE: BodyOf = BodyOf {
    root: "DiskAttachment",
    usage: "disk_attachment/methods/update",
};
const DISK_UPDATE: BodyOf = BodyOf {
    root: "Disk",
    usage: "disk/methods/update",
};

/// Parses `search`, or matches everything when absent.
fn query_of(req: &Incoming) -> Result<search::Query, String> {
    search::parse(req.param("search").unwrap_or_default())
}

fn limit<T>(mut items: Vec<T>, req: &Incoming) -> Vec<T> {
    if let Some(max) = req.param("max").and_then(|m| m.parse::<i64>().ok())
        && max >= 0
    {
        items.truncate(max as usize);
    }
    items
}

/// The backend's answer to a filtered request for a query that only administrators may run.
pub const INSUFFICIENT_PERMISSIONS: &str = "Query execution failed due to insufficient permissions.";

/// Who is asking, and whether the engine filters the answer to what that user may see.
pub struct Caller {
    pub user: String,
    /// `filter=true` (parameter or `Filter` header), implied for users without an administrative role.
    pub filtered: bool,
}

impl Caller {
    pub fn of(shared: &Arc<Shared>, req: &Incoming, user: String) -> Self {
        let non_admin = shared.lock().non_admin_users.contains(&user);
        let asked = req.bool_param("filter") == Some(true)
            || req
                .header("filter")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        Caller {
            user,
            filtered: non_admin || asked,
        }
    }

    /// A filtered caller sees the VMs it has a permission on: here, those it created (the engine grants the creator
    /// `UserVmManager` on the new VM).
    fn sees(&self, vm: &crate::state::VmRecord) -> bool {
        !self.filtered || vm.created_by.as_deref() == Some(self.user.as_str())
    }
}

/// Dispatches one authenticated API request; `path` is what follows `/ovirt-engine/api`.
pub fn handle(shared: &Arc<Shared>, req: &Incoming, path: &[&str], format: Format, caller: &Caller) -> Reply {
    let method = &req.method;
    match (method, path) {
        (&Method::GET, []) => wire::object(200, &render::api_root(&shared.lock()), format),
        // `GetStorageDomainByIdAndStoragePoolId` is an admin query: filtered, it fails
        // (`QueriesCommandBase.validatePermissions`; the list below is a user query).
        (&Method::GET, ["datacenters", _, "storagedomains", _]) if caller.filtered => {
            wire::error(&engine::operation_failed(400, INSUFFICIENT_PERMISSIONS), format)
        }
        (_, ["vms", id, ..]) if !vm_visible(shared, id, caller) => not_found(),
        (_, ["vms", ..]) => vms(shared, req, &path[1..], format, caller),
        (&Method::PUT, ["disks", id]) => update_disk(shared, req, id, format, |state, _| {
            Some(render::disk(state.disks.get(*id)?))
        }),
        (&Method::POST, ["tags"]) => add_tag(shared, req, format, caller),
        (&Method::GET, _) => read_only(&shared.lock(), req, path, format),
        _ => Reply::empty(405),
    }
}

/// False only for an existing VM the caller may not see (the engine answers 404 as for a missing one).
fn vm_visible(shared: &Arc<Shared>, id: &str, caller: &Caller) -> bool {
    shared.lock().vms.get(id).is_none_or(|vm| caller.sees(vm))
}

/// The `GET`s of everything but VMs; a search that does not parse fails any of them.
fn read_only(state: &State, req: &Incoming, path: &[&str], format: Format) -> Reply {
    let query = match query_of(req) {
        Ok(q) => q,
        Err(e) => return bad_search(&e, format),
    };
    match path {
        ["clusters"] => list_clusters(state, &query, req, format),
        ["clusters", id] => state
            .clusters
            .get(*id)
            .map_or_else(not_found, |c| wire::object(200, &render::cluster(c), format)),
        ["datacenters"] => list_data_centers(state, &query, req, format),
        ["datacenters", id] => state
            .data_centers
            .get(*id)
            .map_or_else(not_found, |dc| wire::object(200, &render::data_center(dc), format)),
        ["datacenters", dc, "storagedomains"] => attached_storage_domains(state, dc, format),
        ["datacenters", dc, "storagedomains", id] => match state.storage_domains.get(*id) {
            Some(sd) if sd.data_center_id.as_deref() == Some(*dc) => {
                wire::object(200, &render::storage_domain(sd, true), format)
            }
            _ => not_found(),
        },
        ["storagedomains"] => list_storage_domains(state, &query, req, format),
        ["storagedomains", id] => state.storage_domains.get(*id).map_or_else(not_found, |sd| {
            wire::object(200, &render::storage_domain(sd, false), format)
        }),
        ["storagedomains", id, "diskprofiles"] => {
            if !state.storage_domains.contains_key(*id) {
                return not_found();
            }
            let items = state
                .disk_profiles
                .values()
                .filter(|p| p.storage_domain_id == *id)
                .map(render::disk_profile)
                .collect();
            wire::object(200, &model::DiskProfiles { items }, format)
        }
        ["diskprofiles", id] => state
            .disk_profiles
            .get(*id)
            .map_or_else(not_found, |p| wire::object(200, &render::disk_profile(p), format)),
        ["tags"] => {
            let items = state.tags.values().map(render::tag).collect();
            wire::object(
                200,
                &model::Tags {
                    items: limit(items, req),
                },
                format,
            )
        }
        ["tags", id] => state
            .tags
            .get(*id)
            .map_or_else(not_found, |t| wire::object(200, &render::tag(t), format)),
        ["networks"] => list_networks(state, &query, req, format),
        ["networks", id] => state
            .networks
            .get(*id)
            .map_or_else(not_found, |n| wire::object(200, &render::network(n), format)),
        ["networks", id, "vnicprofiles"] => network_vnic_profiles(state, id, format),
        // The engine offers no search on vNIC profiles: `search` is ignored.
        ["vnicprofiles"] => {
            let items = state.vnic_profiles.values().map(render::vnic_profile).collect();
            wire::object(
                200,
                &model::VnicProfiles {
                    items: limit(items, req),
                },
                format,
            )
        }
        ["vnicprofiles", id] => state
            .vnic_profiles
            .get(*id)
            .map_or_else(not_found, |p| wire::object(200, &render::vnic_profile(p), format)),
        ["templates"] => list_templates(state, &query, req, format),
        ["templates", id] => state
            .templates
            .get(*id)
            .map_or_else(not_found, |t| wire::object(200, &render::template(t), format)),
        ["templates", id, "diskattachments"] => template_disk_attachments(state, req, id, format),
        ["instancetypes", rest @ ..] => crate::api_workload::instance_types(state, req, rest, format),
        ["disks"] => list_disks(state, &query, req, format),
        ["disks", id] => state
            .disks
            .get(*id)
            .map_or_else(not_found, |d| wire::object(200, &render::disk(d), format)),
        _ => not_found(),
    }
}

/// `GET /clusters[?search=…]`.
fn list_clusters(state: &State, query: &search::Query, req: &Incoming, format: Format) -> Reply {
    let items = state
        .clusters
        .values()
        .filter(|c| {
            query.matches(|f| match f {
                "name" => Some(vec![c.name.clone()]),
                "id" => Some(vec![c.id.clone()]),
                "datacenter" => state
                    .data_centers
                    .get(&c.data_center_id)
                    .map(|dc| vec![dc.name.clone()]),
                _ => None,
            })
        })
        .map(render::cluster)
        .collect();
    wire::object(
        200,
        &model::Clusters {
            items: limit(items, req),
        },
        format,
    )
}

/// `GET /datacenters[?search=…]`.
fn list_data_centers(state: &State, query: &search::Query, req: &Incoming, format: Format) -> Reply {
    let items = state
        .data_centers
        .values()
        .filter(|dc| {
            query.matches(|f| match f {
                "name" => Some(vec![dc.name.clone()]),
                "id" => Some(vec![dc.id.clone()]),
                _ => None,
            })
        })
        .map(render::data_center)
        .collect();
    wire::object(
        200,
        &model::DataCenters {
            items: limit(items, req),
        },
        format,
    )
}

/// `GET /datacenters/{dc}/storagedomains`.
fn attached_storage_domains(state: &State, dc: &str, format: Format) -> Reply {
    if !state.data_centers.contains_key(dc) {
        return not_found();
    }
    let items = state
        .storage_domains
        .values()
        .filter(|sd| sd.data_center_id.as_deref() == Some(dc))
        .map(|sd| render::storage_domain(sd, true))
        .collect();
    wire::object(200, &model::StorageDomains { items }, format)
}

/// `GET /storagedomains[?search=…]`.
fn list_storage_domains(state: &State, query: &search::Query, req: &Incoming, format: Format) -> Reply {
    let items = state
        .storage_domains
        .values()
        .filter(|sd| {
            query.matches(|f| match f {
                "name" => Some(vec![sd.name.clone()]),
                "id" => Some(vec![sd.id.clone()]),
                "type" => Some(vec![sd.kind.clone()]),
                "datacenter" => sd
                    .data_center_id
                    .as_ref()
                    .and_then(|dc| state.data_centers.get(dc))
                    .map(|dc| vec![dc.name.clone()]),
                _ => None,
            })
        })
        .map(|sd| render::storage_domain(sd, false))
        .collect();
    wire::object(
        200,
        &model::StorageDomains {
            items: limit(items, req),
        },
        format,
    )
}

/// `GET /networks[?search=…]`.
fn list_networks(state: &State, query: &search::Query, req: &Incoming, format: Format) -> Reply {
    let items = state
        .networks
        .values()
        .filter(|n| {
            query.matches(|f| match f {
                "name" => Some(vec![n.name.clone()]),
                "id" => Some(vec![n.id.clone()]),
                _ => None,
            })
        })
        .map(render::network)
        .collect();
    wire::object(
        200,
        &model::Networks {
            items: limit(items, req),
        },
        format,
    )
}

/// `GET /networks/{id}/vnicprofiles`.
fn network_vnic_profiles(state: &State, id: &str, format: Format) -> Reply {
    if !state.networks.contains_key(id) {
        return not_found();
    }
    let items = state
        .vnic_profiles
        .values()
        .filter(|p| p.network_id == id)
        .map(render::vnic_profile)
        .collect();
    wire::object(200, &model::VnicProfiles { items }, format)
}

/// `GET /templates[?search=…]`.
fn list_templates(state: &State, query: &search::Query, req: &Incoming, format: Format) -> Reply {
    let items = state
        .templates
        .values()
        .filter(|t| {
            query.matches(|f| match f {
                "name" => Some(vec![t.name.clone()]),
                "id" => Some(vec![t.id.clone()]),
                "status" => Some(vec![t.status.clone()]),
                "version_number" => Some(vec![t.version_number.to_string()]),
                "cluster" => t
                    .cluster_id
                    .as_ref()
                    .and_then(|c| state.clusters.get(c))
                    .map(|c| vec![c.name.clone()]),
                "datacenter" => t
                    .cluster_id
                    .as_ref()
                    .and_then(|c| state.clusters.get(c))
                    .and_then(|c| state.data_centers.get(&c.data_center_id))
                    .map(|dc| vec![dc.name.clone()]),
                _ => None,
            })
        })
        .map(render::template)
        .collect();
    wire::object(
        200,
        &model::Templates {
            items: limit(items, req),
        },
        format,
    )
}

/// `GET /disks[?search=…]`.
fn list_disks(state: &State, query: &search::Query, req: &Incoming, format: Format) -> Reply {
    let items: Vec<_> = state
        .disks
        .values()
        .filter(|d| {
            query.matches(|f| match f {
                "name" | "alias" => Some(vec![d.alias.clone()]),
                "id" => Some(vec![d.id.clone()]),
                "status" => Some(vec![d.status.to_string()]),
                _ => None,
            })
        })
        .map(render::disk)
        .collect();
    wire::object(
        200,
        &model::Disks {
            items: limit(items, req),
        },
        format,
    )
}

/// `GET /templates/{id}/diskattachments[?follow=disk]`.
fn template_disk_attachments(state: &State, req: &Incoming, id: &str, format: Format) -> Reply {
    let follow_disk = req
        .param("follow")
        .is_some_and(|f| f.split(',').any(|f| f.trim() == "disk"));
    match state.templates.get(id) {
        Some(t) => {
            let items = t
                .disk_ids
                .iter()
                .filter_map(|d| state.disks.get(d))
                .map(|d| render::disk_attachment(d, "templates", id, follow_disk))
                .collect();
            wire::object(200, &model::DiskAttachments { items }, format)
        }
        None => not_found(),
    }
}

fn vm_follow(req: &Incoming) -> VmFollow {
    let follow = req.param("follow").unwrap_or_default();
    let has = |name: &str| follow.split(',').any(|f| f.trim().split('.').next() == Some(name));
    VmFollow {
        disk_attachments: has("disk_attachments"),
        attachment_disks: follow.split(',').any(|f| f.trim() == "disk_attachments.disk"),
        nics: has("nics"),
        reported_devices: has("reported_devices"),
    }
}

/// `GET /vms[?search=…]`. Renders under the state lock but serialises after releasing it, so
/// large answers do not stall other requests.
fn search_vms(shared: &Arc<Shared>, req: &Incoming, format: Format, caller: &Caller) -> Reply {
    let query = match query_of(req) {
        Ok(q) => q,
        Err(e) => return bad_search(&e, format),
    };
    let state = shared.lock();
    let follow = vm_follow(req);
    // Exact id/name disjunctions (batched status reads) are answered from the indexes.
    let records: Vec<_> = if let Some(ids) = query.literal_alternatives("id") {
        ids.iter().filter_map(|id| state.vms.get(*id)).collect()
    } else if let Some(names) = query.literal_alternatives("name") {
        names
            .iter()
            .filter_map(|name| state.vm_names.get(*name))
            .flat_map(|ids| ids.iter().filter_map(|id| state.vms.get(id)))
            .collect()
    } else if query.matches_all() {
        state.vms.values().collect()
    } else {
        state
            .vms
            .values()
            .filter(|vm| {
                query.matches(|f| match f {
                    "name" => Some(vec![vm.name.clone()]),
                    "id" => Some(vec![vm.id.clone()]),
                    "status" => Some(vec![vm.status.to_string()]),
                    "description" => Some(vec![vm.description.clone()]),
                    "cluster" => state.clusters.get(&vm.cluster_id).map(|c| vec![c.name.clone()]),
                    "template" => state.templates.get(&vm.template_id).map(|t| vec![t.name.clone()]),
                    _ => None,
                })
            })
            .collect()
    };
    let visible: Vec<_> = records.into_iter().filter(|vm| caller.sees(vm)).collect();
    let items = limit(visible, req)
        .into_iter()
        .map(|vm| render::vm(&state, vm, follow))
        .collect();
    let reply = wire::object(200, &model::Vms { items }, format);
    real_size(&state, reply, format)
}

/// A VM answer as large as a real engine's: the elements CAPOV's model does not carry added to every VM
/// (`engine_only`).
fn real_size(state: &State, reply: Reply, format: Format) -> Reply {
    if !(200..300).contains(&reply.status) {
        return reply;
    }
    let up = |id: &str| state.vms.get(id).is_some_and(|vm| vm.status == VmStatus::Up);
    Reply {
        body: crate::engine_only::add(reply.body, format, &up),
        ..reply
    }
}

fn vms(shared: &Arc<Shared>, req: &Incoming, path: &[&str], format: Format, caller: &Caller) -> Reply {
    let method = req.method.clone();
    match (method, path) {
        (Method::GET, []) => search_vms(shared, req, format, caller),
        (Method::POST, []) => add_vm(shared, req, format, caller),
        (Method::GET, [id]) => {
            let state = shared.lock();
            state.vms.get(*id).map_or_else(not_found, |vm| {
                real_size(
                    &state,
                    wire::object(200, &render::vm(&state, vm, vm_follow(req)), format),
                    format,
                )
            })
        }
        (Method::PUT, [id]) => {
            let update: model::Vm = match decode(shared, req, format, &VM_UPDATE, None) {
                Ok(vm) => vm,
                Err(reply) => return reply,
            };
            let mut state = shared.lock();
            match engine::update_vm(&mut state, id, &update) {
                Ok(()) => match state.vms.get(*id) {
                    Some(vm) => real_size(
                        &state,
                        wire::object(200, &render::vm(&state, vm, vm_follow(req)), format),
                        format,
                    ),
                    None => not_found(),
                },
                Err(e) => wire::error(&e, format),
            }
        }
        (Method::DELETE, [id]) => {
            let timings = shared.timings();
            let result = engine::remove_vm(&mut shared.lock(), &timings, id);
            match result {
                Ok(scheduled) => {
                    shared.schedule(scheduled);
                    wire::action_complete(&model::Action::default(), None, format)
                }
                Err(e) => wire::error(&e, format),
            }
        }
        (Method::POST, [id, verb @ ("start" | "stop" | "shutdown")]) => vm_action(shared, req, id, verb, format),
        (_, [id, "diskattachments", rest @ ..]) => vm_disk_attachments(shared, req, id, rest, format),
        (_, [id, "nics", rest @ ..]) => vm_nics(shared, req, id, rest, format),
        (_, [id, "tags"]) => vm_tags(shared, req, id, format, caller),
        (_, [id, kind @ ("hostdevices" | "mediateddevices" | "numanodes"), rest @ ..]) => {
            crate::api_workload::vm_devices(shared, req, id, kind, rest, format)
        }
        (Method::GET, [id, "reporteddevices"]) => {
            let state = shared.lock();
            let Some(vm) = state.vms.get(*id) else {
                return not_found();
            };
            wire::object(
                200,
                &model::ReportedDevices {
                    items: render::reported_devices(vm, state.engine_version),
                },
                format,
            )
        }
        (Method::GET, _) => not_found(),
        _ => Reply::empty(405),
    }
}

/// `/vms/{id}/diskattachments[/{disk_id}]`; `rest` is what follows `diskattachments`.
fn vm_disk_attachments(shared: &Arc<Shared>, req: &Incoming, id: &str, rest: &[&str], format: Format) -> Reply {
    match (&req.method, rest) {
        (&Method::GET, []) => {
            let state = shared.lock();
            let Some(vm) = state.vms.get(id) else {
                return not_found();
            };
            let inline = req
                .param("follow")
                .is_some_and(|f| f.split(',').any(|f| f.trim() == "disk"));
            let items = vm
                .disk_ids
                .iter()
                .filter_map(|d| state.disks.get(d))
                .map(|d| render::disk_attachment(d, "vms", id, inline))
                .collect();
            wire::object(200, &model::DiskAttachments { items }, format)
        }
        (&Method::GET, [disk_id]) => {
            let state = shared.lock();
            match state.vms.get(id) {
                Some(vm) if vm.disk_ids.iter().any(|d| d == disk_id) => match state.disks.get(*disk_id) {
                    Some(d) => wire::object(200, &render::disk_attachment(d, "vms", id, false), format),
                    None => not_found(),
                },
                _ => not_found(),
            }
        }
        (&Method::POST, []) => {
            let attachment: model::DiskAttachment = match decode(shared, req, format, &DISK_ATTACHMENT_ADD, None) {
                Ok(a) => a,
                Err(reply) => return reply,
            };
            let timings = shared.timings();
            let mut state = shared.lock();
            match engine::add_vm_disk(&mut state, &timings, id, &attachment) {
                Ok((disk_id, scheduled)) => {
                    let reply = match state.disks.get(&disk_id) {
                        Some(d) => wire::object(201, &render::disk_attachment(d, "vms", id, true), format),
                        None => Reply::empty(500),
                    };
                    drop(state);
                    shared.schedule(scheduled);
                    reply
                }
                Err(e) => wire::error(&e, format),
            }
        }
        (&Method::PUT, [disk_id]) => {
            let attached = shared
                .lock()
                .vms
                .get(id)
                .is_some_and(|vm| vm.disk_ids.iter().any(|d| d == disk_id));
            if !attached {
                return not_found();
            }
            let attachment: model::DiskAttachment = match decode(shared, req, format, &ATTACHMENT_UPDATE, None) {
                Ok(a) => a,
                Err(reply) => return reply,
            };
            let disk = attachment.disk.unwrap_or_default();
            apply_disk_update(shared, disk_id, &disk, format, |state, _| {
                Some(render::disk_attachment(state.disks.get(*disk_id)?, "vms", id, false))
            })
        }
        (&Method::DELETE, [disk_id]) => {
            let remove = req.bool_param("detach_only") == Some(false);
            match engine::detach_disk(&mut shared.lock(), id, disk_id, remove) {
                Ok(()) => wire::action_complete(&model::Action::default(), None, format),
                Err(e) => wire::error(&e, format),
            }
        }
        (&Method::GET, _) => not_found(),
        _ => Reply::empty(405),
    }
}

/// `/vms/{id}/nics[/{nic_id}]`; `rest` is what follows `nics`.
fn vm_nics(shared: &Arc<Shared>, req: &Incoming, id: &str, rest: &[&str], format: Format) -> Reply {
    match (&req.method, rest) {
        (&Method::GET, []) => {
            let state = shared.lock();
            let Some(vm) = state.vms.get(id) else {
                return not_found();
            };
            wire::object(
                200,
                &model::Nics {
                    items: vm.nics.iter().map(|n| render::nic(id, n)).collect(),
                },
                format,
            )
        }
        (&Method::POST, []) => {
            let nic: model::Nic = match decode(shared, req, format, &NIC_ADD, None) {
                Ok(n) => n,
                Err(reply) => return reply,
            };
            let mut state = shared.lock();
            match engine::add_nic(&mut state, id, &nic) {
                Ok(nic_id) => nic_reply(&state, id, &nic_id, 201, format),
                Err(e) => wire::error(&e, format),
            }
        }
        (&Method::GET, [nic_id]) => nic_reply(&shared.lock(), id, nic_id, 200, format),
        (&Method::PUT, [nic_id]) => {
            let nic: model::Nic = match decode(shared, req, format, &NIC_UPDATE, None) {
                Ok(n) => n,
                Err(reply) => return reply,
            };
            let mut state = shared.lock();
            match engine::update_nic(&mut state, id, nic_id, &nic) {
                Ok(()) => nic_reply(&state, id, nic_id, 200, format),
                Err(e) => wire::error(&e, format),
            }
        }
        (&Method::DELETE, [nic_id]) => match engine::remove_nic(&mut shared.lock(), id, nic_id) {
            Ok(()) => wire::action_complete(&model::Action::default(), None, format),
            Err(e) => wire::error(&e, format),
        },
        (&Method::GET, _) => not_found(),
        _ => Reply::empty(405),
    }
}

fn nic_reply(state: &State, vm_id: &str, nic_id: &str, status: u16, format: Format) -> Reply {
    match state
        .vms
        .get(vm_id)
        .and_then(|vm| vm.nics.iter().find(|n| n.id == nic_id))
    {
        Some(nic) => wire::object(status, &render::nic(vm_id, nic), format),
        None => not_found(),
    }
}

fn add_vm(shared: &Arc<Shared>, req: &Incoming, format: Format, caller: &Caller) -> Reply {
    if shared.lock().cannot_create_vms.contains(&caller.user) {
        // `USER_NOT_AUTHORIZED_TO_PERFORM_ACTION`, an error of type NO_PERMISSION: 403 (`ErrorMessageHelper`).
        return wire::error(
            &engine::operation_failed(403, "User is not authorized to perform this action."),
            format,
        );
    }
    let mut request: model::Vm = match decode(shared, req, format, &VM_ADD, None) {
        Ok(vm) => vm,
        Err(reply) => return reply,
    };
    // `BackendVmsResource.add`: a filtered caller's placement policy is dropped, so it cannot pin VMs to hosts.
    if caller.filtered {
        request.placement_policy = None;
    }
    let clone = req.bool_param("clone").unwrap_or(false);
    let timings = shared.timings();
    let mut state = shared.lock();
    match engine::add_vm(&mut state, &timings, &request, clone) {
        Ok(added) => {
            if let Some(vm) = state.vms.get_mut(&added.vm_id) {
                vm.created_by = Some(caller.user.clone());
                if added.accepted {
                    vm.copy_outcome = shared.take_copy_fault();
                }
            }
            let reply = match state.vms.get(&added.vm_id) {
                Some(vm) => {
                    let body = render::vm(&state, vm, VmFollow::default());
                    let location = body.href.clone().unwrap_or_default();
                    real_size(
                        &state,
                        wire::object(if added.accepted { 202 } else { 201 }, &body, format),
                        format,
                    )
                    .with_header("Location", location)
                }
                None => Reply::empty(500),
            };
            drop(state);
            shared.schedule(added.scheduled);
            reply
        }
        Err(e) => wire::error(&e, format),
    }
}

fn vm_action(shared: &Arc<Shared>, req: &Incoming, id: &str, verb: &str, format: Format) -> Reply {
    let action: model::Action = if req.body.iter().all(|b| b.is_ascii_whitespace()) {
        model::Action::default()
    } else {
        let action = BodyOf {
            root: "Action",
            usage: "",
        };
        match decode(shared, req, format, &action, Some(verb)) {
            Ok(a) => a,
            Err(reply) => return reply,
        }
    };
    let timings = shared.timings();
    let result = {
        let mut state = shared.lock();
        match verb {
            "start" => engine::start_vm(&mut state, &timings, id, &action),
            "stop" => engine::stop_vm(&mut state, id).map(|()| Vec::new()),
            _ => engine::shutdown_vm(&mut state, &timings, id),
        }
    };
    match result {
        Ok(scheduled) => {
            shared.schedule(scheduled);
            wire::action_complete(&action, Some(id), format)
        }
        Err(e) => wire::error(&e, format),
    }
}

fn update_disk<T: serde::Serialize>(
    shared: &Arc<Shared>,
    req: &Incoming,
    disk_id: &str,
    format: Format,
    render_after: impl Fn(&State, &str) -> Option<T>,
) -> Reply {
    let disk: model::Disk = match decode(shared, req, format, &DISK_UPDATE, None) {
        Ok(d) => d,
        Err(reply) => return reply,
    };
    apply_disk_update(shared, disk_id, &disk, format, render_after)
}

fn apply_disk_update<T: serde::Serialize>(
    shared: &Arc<Shared>,
    disk_id: &str,
    disk: &model::Disk,
    format: Format,
    render_after: impl Fn(&State, &str) -> Option<T>,
) -> Reply {
    let timings = shared.timings();
    let mut state = shared.lock();
    match engine::update_disk(&mut state, &timings, disk_id, disk) {
        Ok(scheduled) => {
            let reply = render_after(&state, disk_id).map_or_else(not_found, |body| wire::object(200, &body, format));
            drop(state);
            shared.schedule(scheduled);
            reply
        }
        Err(e) => wire::error(&e, format),
    }
}

/// `POST /tags`: administrators only (`TAG_MANAGEMENT` on the system).
fn add_tag(shared: &Arc<Shared>, req: &Incoming, format: Format, caller: &Caller) -> Reply {
    let tag: model::Tag = match decode(shared, req, format, &TAG_ADD, None) {
        Ok(t) => t,
        Err(reply) => return reply,
    };
    let mut state = shared.lock();
    if state.non_admin_users.contains(&caller.user) {
        return wire::error(&engine::not_authorized(), format);
    }
    match engine::add_tag(&mut state, &tag) {
        Ok(id) => match state.tags.get(&id) {
            Some(t) => wire::object(201, &render::tag(t), format),
            None => Reply::empty(500),
        },
        Err(e) => wire::error(&e, format),
    }
}

/// `GET|POST /vms/{id}/tags`: the VM's tags; assigning one needs `TAG_MANAGEMENT` on the system.
fn vm_tags(shared: &Arc<Shared>, req: &Incoming, id: &str, format: Format, caller: &Caller) -> Reply {
    match req.method {
        Method::GET => {
            let state = shared.lock();
            let Some(vm) = state.vms.get(id) else {
                return not_found();
            };
            let items = vm
                .tag_ids
                .iter()
                .filter_map(|t| state.tags.get(t))
                .map(|t| render::vm_tag(id, t))
                .collect();
            wire::object(200, &model::Tags { items }, format)
        }
        Method::POST => {
            let tag: model::Tag = match decode(shared, req, format, &VM_TAG_ADD, None) {
                Ok(t) => t,
                Err(reply) => return reply,
            };
            let mut state = shared.lock();
            if state.non_admin_users.contains(&caller.user) {
                return wire::error(&engine::not_authorized(), format);
            }
            match engine::assign_vm_tag(&mut state, id, &tag) {
                Ok(tag_id) => match state.tags.get(&tag_id) {
                    Some(t) => wire::object(201, &render::vm_tag(id, t), format),
                    None => Reply::empty(500),
                },
                Err(e) => wire::error(&e, format),
            }
        }
        _ => Reply::empty(405),
    }
}
