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

    /// The engine loses contact with the host: `non_responsive`, its VMs `unknown`.
    pub fn lose_host(&self, name: &str) -> Result<(), String> {
        self.on_host(name, engine::host_lost)
    }

    /// A host that was non-responsive answers again; its VMs are `up` again.
    pub fn recover_host(&self, name: &str) -> Result<(), String> {
        self.on_host(name, engine::host_back)
    }

    /// The host is fenced: its VMs are down and off it, the host up.
    pub fn fence_host(&self, name: &str) -> Result<(), String> {
        self.on_host(name, engine::fence_host)
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

/// `/sim/hosts[/{name}/{maintenance|activate|lose|recover|fence}]`, `/sim/affinitygroups`,
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
