//! `/vms/{id}/hostdevices`, `/vms/{id}/mediateddevices` (engines 4.5 and later), `/vms/{id}/numanodes`,
//! `/hosts/{id}/devices` and `/instancetypes`: routing the REST calls on what workloads need onto the engine state
//! (`engine::devices`).

use std::sync::Arc;

use capov_ovirt::model;
use http::Method;

use crate::body::{BodyOf, decode};
use crate::engine;
use crate::render_placement as render;
use crate::request::Incoming;
use crate::search;
use crate::shared::Shared;
use crate::state::{EngineVersion, State, device_id};
use crate::wire::{self, Format, Reply};

const HOST_DEVICE_ADD: BodyOf = BodyOf {
    root: "HostDevice",
    usage: "vm_host_devices/methods/add",
};
const MEDIATED_DEVICE_ADD: BodyOf = BodyOf {
    root: "VmMediatedDevice",
    usage: "vm_mediated_devices/methods/add",
};
const NUMA_NODE_ADD: BodyOf = BodyOf {
    root: "VirtualNumaNode",
    usage: "vm_numa_nodes/methods/add",
};

/// The release that brought `/vms/{id}/mediateddevices` (API model 4.5.4, engine 4.5.0).
const MEDIATED_DEVICES_SINCE: EngineVersion = EngineVersion::new(4, 5, 0);

fn not_found() -> Reply {
    Reply::empty(404)
}

/// `/vms/{id}/{hostdevices|mediateddevices|numanodes}[/…]`; `rest` is what follows the collection.
pub fn vm_devices(shared: &Arc<Shared>, req: &Incoming, id: &str, kind: &str, rest: &[&str], format: Format) -> Reply {
    if !shared.lock().vms.contains_key(id) {
        return not_found();
    }
    match kind {
        "hostdevices" => host_devices(shared, req, id, rest, format),
        "mediateddevices" if shared.lock().engine_version >= MEDIATED_DEVICES_SINCE => {
            mediated_devices(shared, req, id, rest, format)
        }
        "numanodes" => numa_nodes(shared, req, id, rest, format),
        _ => not_found(),
    }
}

fn host_devices(shared: &Arc<Shared>, req: &Incoming, vm_id: &str, rest: &[&str], format: Format) -> Reply {
    match (&req.method, rest) {
        (&Method::GET, []) => {
            let state = shared.lock();
            let Some(vm) = state.vms.get(vm_id) else {
                return not_found();
            };
            let items = vm
                .workload
                .host_devices
                .iter()
                .filter_map(|d| render::vm_host_device(&state, vm, d))
                .collect();
            wire::object(200, &model::HostDevices { items }, format)
        }
        (&Method::GET, [device]) => {
            let state = shared.lock();
            state
                .vms
                .get(vm_id)
                .and_then(|vm| {
                    let d = vm
                        .workload
                        .host_devices
                        .iter()
                        .find(|d| device_id(&d.name) == *device)?;
                    render::vm_host_device(&state, vm, d)
                })
                .map_or_else(not_found, |d| wire::object(200, &d, format))
        }
        (&Method::POST, []) => {
            let device: model::HostDevice = match decode(shared, req, format, &HOST_DEVICE_ADD, None) {
                Ok(d) => d,
                Err(reply) => return reply,
            };
            let mut state = shared.lock();
            match engine::add_vm_host_device(&mut state, vm_id, &device) {
                Ok(name) => state
                    .vms
                    .get(vm_id)
                    .and_then(|vm| {
                        let d = vm.workload.host_devices.iter().find(|d| d.name == name)?;
                        render::vm_host_device(&state, vm, d)
                    })
                    .map_or_else(|| Reply::empty(500), |d| wire::object(201, &d, format)),
                Err(e) => wire::error(&e, format),
            }
        }
        (&Method::DELETE, [device]) => match engine::remove_vm_host_device(&mut shared.lock(), vm_id, device) {
            Ok(()) => wire::action_complete(&model::Action::default(), None, format),
            Err(e) => wire::error(&e, format),
        },
        (&Method::GET, _) => not_found(),
        _ => Reply::empty(405),
    }
}

fn mediated_devices(shared: &Arc<Shared>, req: &Incoming, vm_id: &str, rest: &[&str], format: Format) -> Reply {
    match (&req.method, rest) {
        (&Method::GET, []) => {
            let state = shared.lock();
            let items = state
                .vms
                .get(vm_id)
                .map(|vm| {
                    vm.workload
                        .mediated_devices
                        .iter()
                        .map(|m| render::mediated_device(vm_id, m))
                        .collect()
                })
                .unwrap_or_default();
            wire::object(200, &model::VmMediatedDevices { items }, format)
        }
        (&Method::GET, [device]) => shared
            .lock()
            .vms
            .get(vm_id)
            .and_then(|vm| vm.workload.mediated_devices.iter().find(|m| m.id == *device))
            .map_or_else(not_found, |m| {
                wire::object(200, &render::mediated_device(vm_id, m), format)
            }),
        (&Method::POST, []) => {
            let device: model::VmMediatedDevice = match decode(shared, req, format, &MEDIATED_DEVICE_ADD, None) {
                Ok(d) => d,
                Err(reply) => return reply,
            };
            let mut state = shared.lock();
            match engine::add_vm_mediated_device(&mut state, vm_id, &device) {
                Ok(id) => state
                    .vms
                    .get(vm_id)
                    .and_then(|vm| vm.workload.mediated_devices.iter().find(|m| m.id == id))
                    .map_or_else(
                        || Reply::empty(500),
                        |m| wire::object(201, &render::mediated_device(vm_id, m), format),
                    ),
                Err(e) => wire::error(&e, format),
            }
        }
        (&Method::DELETE, [device]) => match engine::remove_vm_mediated_device(&mut shared.lock(), vm_id, device) {
            Ok(()) => wire::action_complete(&model::Action::default(), None, format),
            Err(e) => wire::error(&e, format),
        },
        (&Method::GET, _) => not_found(),
        _ => Reply::empty(405),
    }
}

fn numa_nodes(shared: &Arc<Shared>, req: &Incoming, vm_id: &str, rest: &[&str], format: Format) -> Reply {
    match (&req.method, rest) {
        (&Method::GET, []) => {
            let state = shared.lock();
            let items = state
                .vms
                .get(vm_id)
                .map(|vm| {
                    vm.workload
                        .numa_nodes
                        .iter()
                        .map(|n| render::numa_node(vm_id, n))
                        .collect()
                })
                .unwrap_or_default();
            wire::object(200, &model::VirtualNumaNodes { items }, format)
        }
        (&Method::POST, []) => {
            let node: model::VirtualNumaNode = match decode(shared, req, format, &NUMA_NODE_ADD, None) {
                Ok(n) => n,
                Err(reply) => return reply,
            };
            let mut state = shared.lock();
            match engine::add_numa_node(&mut state, vm_id, &node) {
                Ok(id) => state
                    .vms
                    .get(vm_id)
                    .and_then(|vm| vm.workload.numa_nodes.iter().find(|n| n.id == id))
                    .map_or_else(
                        || Reply::empty(500),
                        |n| wire::object(201, &render::numa_node(vm_id, n), format),
                    ),
                Err(e) => wire::error(&e, format),
            }
        }
        (&Method::GET, _) => not_found(),
        _ => Reply::empty(405),
    }
}

/// `GET /hosts/{id}/devices[/{device}]`.
pub fn host_devices_of_host(state: &State, host_id: &str, rest: &[&str], format: Format) -> Reply {
    let Some(host) = state.hosts.get(host_id) else {
        return not_found();
    };
    match rest {
        [] => {
            let items = host
                .devices
                .iter()
                .map(|d| render::host_device(state, host, d))
                .collect();
            wire::object(200, &model::HostDevices { items }, format)
        }
        [device] => host
            .devices
            .iter()
            .find(|d| device_id(&d.name) == *device)
            .map_or_else(not_found, |d| {
                wire::object(200, &render::host_device(state, host, d), format)
            }),
        _ => not_found(),
    }
}

/// `GET /instancetypes[?search=name=…]`, `GET /instancetypes/{id}`.
pub fn instance_types(state: &State, req: &Incoming, rest: &[&str], format: Format) -> Reply {
    match rest {
        [] => {
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
                .instance_types
                .values()
                .filter(|t| {
                    query.matches(|f| match f {
                        "name" => Some(vec![t.name.clone()]),
                        "id" => Some(vec![t.id.clone()]),
                        _ => None,
                    })
                })
                .map(render::instance_type)
                .collect();
            wire::object(200, &model::InstanceTypes { items }, format)
        }
        [id] => state
            .instance_types
            .get(*id)
            .map_or_else(not_found, |t| wire::object(200, &render::instance_type(t), format)),
        _ => not_found(),
    }
}
