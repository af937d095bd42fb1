//! The control interface's hand on where VMs run and on what they need: hosts going into maintenance, losing
//! contact, coming back or being fenced; the affinity groups as the engine holds them; the space storage domains
//! have. In-process on [`Control`], over HTTP under `/sim/hosts`, `/sim/affinitygroups` and `/sim/storagedomains`.

use http::Method;
use serde::Deserialize;
use serde_json::json;

use crate::control::Control;
use crate::engine;
use crate::request::Incoming;
use crate::state::{AffinityGroupSnapshot, HostSnapshot};

/// A device of a host as tests see it.
#[derive(Debug, Clone, serde::Serialize, PartialEq, Eq)]
pub struct HostDeviceSnapshot {
    pub name: String,
    /// The name of the running VM that holds it (passed through, or a vGPU instance on it).
    pub held_by: Option<String>,
    pub taken_elsewhere: bool,
    /// Free instances per mdev type it offers.
    pub mdev_available: Vec<(String, u32)>,
}
use crate::wire::Reply;

impl Control {
    /// Every host, by name.
    pub fn hosts(&self) -> Vec<HostSnapshot> {
        let state = self.shared.lock();
        let mut hosts: Vec<HostSnapshot> = state.hosts.values().map(|h| state.snapshot_host(h)).collect();
        hosts.sort_by(|a, b| a.name.cmp(&b.name));
        hosts
    }

    pub fn host_by_name(&self, name: &str) -> Option<HostSnapshot> {
        self.hosts().into_iter().find(|h| h.name == name)
    }

    /// The name of the host a VM runs on (its source while it migrates); None while it is not running.
    pub fn vm_host(&self, vm_id: &str) -> Option<String> {
        let state = self.shared.lock();
        let host = state.vms.get(vm_id)?.placement.host.clone()?;
        state.hosts.get(&host).map(|h| h.name.clone())
    }

    /// Puts a host into maintenance as an administrator does (`POST /hosts/{id}/deactivate`): its VMs migrate away.
    pub fn deactivate_host(&self, name: &str) -> Result<(), String> {
        let timings = self.shared.timings();
        let scheduled = self.on_host(name, |state, id| engine::deactivate_host(state, &timings, id))?;
        self.shared.schedule(scheduled);
        Ok(())
    }

    pub fn activate_host(&self, name: &str) -> Result<(), String> {
        self.on_host(name, engine::activate_host)
    }

    /// The engine loses contact with the host: `non_responsive`, its VMs `unknown`; highly available VMs with a
    /// lease are restarted on another host after [`crate::Timings::ha_restart_ms`].
    pub fn lose_host(&self, name: &str) -> Result<(), String> {
        let timings = self.shared.timings();
        let scheduled = self.on_host(name, |state, id| engine::host_lost(state, &timings, id))?;
        self.shared.schedule(scheduled);
        Ok(())
    }

    /// A host that was non-responsive answers again; its VMs are `up` again.
    pub fn recover_host(&self, name: &str) -> Result<(), String> {
        self.on_host(name, engine::host_back)
    }

    /// The host is fenced: its VMs are down and off it, highly available ones restarted on other hosts, the host
    /// up.
    pub fn fence_host(&self, name: &str) -> Result<(), String> {
        let timings = self.shared.timings();
        let scheduled = self.on_host(name, |state, id| engine::fence_host(state, &timings, id))?;
        self.shared.schedule(scheduled);
        Ok(())
    }

    /// The devices of a host, with who holds each and the free instances of each mdev type.
    pub fn host_devices(&self, host: &str) -> Result<Vec<HostDeviceSnapshot>, String> {
        let state = self.shared.lock();
        let record = state
            .hosts
            .values()
            .find(|h| h.name == host)
            .ok_or_else(|| format!("no host {host:?}"))?;
        Ok(record
            .devices
            .iter()
            .map(|d| HostDeviceSnapshot {
                name: d.name.clone(),
                held_by: state.device_holder(&record.id, &d.name).map(|vm| vm.name.clone()),
                taken_elsewhere: d.taken_elsewhere,
                mdev_available: d
                    .mdev_types
                    .iter()
                    .map(|t| (t.name.clone(), state.mdev_available(&record.id, d, &t.name)))
                    .collect(),
            })
            .collect())
    }

    /// Something outside the engine's VMs takes (`true`) or frees (`false`) a device of a host: a taken device is
    /// unavailable to VMs, for passthrough and for vGPU instances alike.
    pub fn set_host_device_taken(&self, host: &str, device: &str, taken: bool) -> Result<(), String> {
        let mut state = self.shared.lock();
        let record = state
            .hosts
            .values_mut()
            .find(|h| h.name == host)
            .ok_or_else(|| format!("no host {host:?}"))?;
        let device = record
            .devices
            .iter_mut()
            .find(|d| d.name == device)
            .ok_or_else(|| format!("no device {device:?} on host {host:?}"))?;
        device.taken_elsewhere = taken;
        Ok(())
    }

    /// Every affinity group of the engine, by name.
    pub fn affinity_groups(&self) -> Vec<AffinityGroupSnapshot> {
        let state = self.shared.lock();
        let mut groups: Vec<AffinityGroupSnapshot> = state
            .affinity_groups
            .values()
            .map(|g| state.snapshot_group(g))
            .collect();
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        groups
    }

    /// Sets how much a storage domain has available (e.g. to make clones no longer fit).
    pub fn set_storage_available(&self, domain: &str, bytes: u64) -> Result<(), String> {
        let mut state = self.shared.lock();
        let record = state
            .storage_domains
            .values_mut()
            .find(|sd| sd.name == domain)
            .ok_or_else(|| format!("no storage domain {domain:?}"))?;
        record.available = bytes;
        Ok(())
    }

    /// The bytes a storage domain has available.
    pub fn storage_available(&self, domain: &str) -> Option<u64> {
        let state = self.shared.lock();
        state
            .storage_domains
            .values()
            .find(|sd| sd.name == domain)
            .map(|sd| sd.available)
    }

    fn on_host<T>(
        &self,
        name: &str,
        change: impl FnOnce(&mut crate::state::State, &str) -> engine::EngineResult<T>,
    ) -> Result<T, String> {
        let mut state = self.shared.lock();
        let id = state
            .hosts
            .values()
            .find(|h| h.name == name)
            .map(|h| h.id.clone())
            .ok_or_else(|| format!("no host {name:?}"))?;
        change(&mut state, &id).map_err(|e| format!("{e:?}"))
    }
}

#[derive(Deserialize)]
struct Available {
    bytes: u64,
}

/// Whether a control path (what follows `/sim/`) is this module's.
pub fn handles(path: &[&str]) -> bool {
    matches!(path, ["hosts", ..] | ["affinitygroups"] | ["storagedomains", ..])
}

/// `/sim/hosts[/{name}/{maintenance|activate|lose|recover|fence}]`, `/sim/hosts/{name}/devices[/{device}/{take|free}]`,
/// `/sim/affinitygroups`,
/// `/sim/storagedomains/{name}/available`.
pub fn handle(control: &Control, req: &Incoming, path: &[&str]) -> Reply {
    let outcome = match (&req.method, path) {
        (&Method::GET, ["hosts"]) => return Reply::json(200, &json!(control.hosts())),
        (&Method::GET, ["affinitygroups"]) => return Reply::json(200, &json!(control.affinity_groups())),
        (&Method::POST, ["hosts", name, "maintenance"]) => control.deactivate_host(name),
        (&Method::POST, ["hosts", name, "activate"]) => control.activate_host(name),
        (&Method::POST, ["hosts", name, "lose"]) => control.lose_host(name),
        (&Method::POST, ["hosts", name, "recover"]) => control.recover_host(name),
        (&Method::POST, ["hosts", name, "fence"]) => control.fence_host(name),
        (&Method::GET, ["hosts", name, "devices"]) => {
            return match control.host_devices(name) {
                Ok(devices) => Reply::json(200, &json!(devices)),
                Err(error) => Reply::json(404, &json!({"error": error})),
            };
        }
        (&Method::POST, ["hosts", name, "devices", device, verb @ ("take" | "free")]) => {
            control.set_host_device_taken(name, device, *verb == "take")
        }
        (&Method::POST | &Method::PUT, ["storagedomains", name, "available"]) => {
            match serde_json::from_slice::<Available>(&req.body) {
                Ok(available) => control.set_storage_available(name, available.bytes),
                Err(e) => Err(e.to_string()),
            }
        }
        _ => return Reply::json(404, &json!({"error": "unknown control endpoint"})),
    };
    match outcome {
        Ok(()) => Reply::json(200, &json!({})),
        Err(error) => Reply::json(400, &json!({"error": error})),
    }
}
