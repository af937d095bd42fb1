//! The control interface: seed inventory, inject faults, expire tokens, read counters and VM
//! state. Usable in-process ([`Control`]) and over HTTP as JSON under `/sim/`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use http::Method;
use serde::Deserialize;
use serde_json::json;

use crate::engine::{self, Timings};
use crate::faults::{BodyFault, FaultInjection, SlowReplies, SsoErrorStyle};
use crate::inventory::{Inventory, VmSeed};
use crate::request::Incoming;
use crate::shared::{REJECTED_BODY, Shared, WriteRecord};
use crate::state::{Delivered, DiskSnapshot, EngineVersion, Transition, VmSnapshot};
use crate::wire::Reply;

/// In-process handle on a running simulator's control interface. Cheap to clone.
#[derive(Clone)]
pub struct Control {
    pub(crate) shared: Arc<Shared>,
}

impl Control {
    /// Adds objects to the inventory.
    pub fn seed(&self, inventory: &Inventory) -> Result<(), String> {
        crate::inventory::seed(&mut self.shared.lock(), inventory)
    }

    /// Adds `count` VMs named `{prefix}{n}` made from `template` (None = Blank), status `down`.
    pub fn seed_vms(&self, prefix: &str, count: usize, template: Option<&str>) -> Result<(), String> {
        let vms = (0..count)
            .map(|n| VmSeed {
                name: format!("{prefix}{n}"),
                template: template.map(str::to_string),
                ..VmSeed::default()
            })
            .collect();
        self.seed(&Inventory {
            vms,
            ..Inventory::default()
        })
    }

    /// Attaches a new data disk (not from the template) to a VM; returns the disk id.
    pub fn attach_disk(&self, vm_id: &str, alias: &str, size_bytes: u64) -> Result<String, String> {
        engine::attach_extra_disk(&mut self.shared.lock(), vm_id, alias, size_bytes).map_err(|e| format!("{e:?}"))
    }

    /// Detaches a disk from a VM (the disk stays, unattached), as a user would before deletion.
    pub fn detach_disk(&self, vm_id: &str, disk_id: &str) -> Result<(), String> {
        engine::detach_disk(&mut self.shared.lock(), vm_id, disk_id, false).map_err(|e| format!("{e:?}"))
    }

    /// A disk that exists and is attached to no VM (a disk detached with `detach_only=true` stays so on its storage
    /// domains); None when it is attached or gone.
    pub fn floating_disk(&self, id: &str) -> Option<DiskSnapshot> {
        let state = self.shared.lock();
        state.disks.get(id).filter(|d| d.vm_id.is_none()).map(DiskSnapshot::of)
    }

    pub fn faults(&self) -> FaultInjection {
        self.shared.faults()
    }

    pub fn set_faults(&self, faults: FaultInjection) {
        *self.shared.faults.write().unwrap_or_else(|e| e.into_inner()) = faults;
    }

    fn update_faults(&self, change: impl FnOnce(&mut FaultInjection)) {
        change(&mut self.shared.faults.write().unwrap_or_else(|e| e.into_inner()));
    }

    pub fn set_latency(&self, latency: Duration) {
        self.update_faults(|f| f.latency_ms = latency.as_millis() as u64);
    }

    /// See [`SlowReplies`]; None ends them.
    pub fn set_slow_replies(&self, slow: Option<SlowReplies>) {
        self.update_faults(|f| f.slow_replies = slow);
    }

    pub fn set_error_rate(&self, rate: f64, status: u16) {
        self.update_faults(|f| {
            f.error_rate = rate;
            f.error_status = status;
        });
    }

    /// Makes the next `count` API requests matching `method` and `path_contains` fail with
    /// `status` and, when given, a fault carrying `detail` (e.g. 409 + a "VM is locked" text).
    pub fn fail_next(
        &self,
        count: u32,
        status: u16,
        detail: Option<&str>,
        method: Option<&str>,
        path_contains: Option<&str>,
    ) {
        self.update_faults(|f| {
            f.fail_next = count;
            f.error_status = status;
            f.error_detail = detail.map(str::to_string);
            f.method = method.map(str::to_string);
            f.path_contains = path_contains.map(str::to_string);
        });
    }

    /// The next `vanishing` accepted creates lose their VM when the disk copy ends, the `illegal` ones after leave it
    /// `ImageIllegal`.
    pub fn fail_next_copies(&self, vanishing: u32, illegal: u32) {
        self.update_faults(|f| {
            f.vanishing_creates = vanishing;
            f.illegal_creates = illegal;
        });
    }

    /// Answers requests matching `method` and `path_contains` with `fault` (None: real answers again).
    pub fn set_body_fault(&self, fault: Option<BodyFault>, method: Option<&str>, path_contains: Option<&str>) {
        self.update_faults(|f| {
            f.body_fault = fault;
            f.method = method.map(str::to_string);
            f.path_contains = path_contains.map(str::to_string);
        });
    }

    /// Makes write requests matching `method` and `path_contains` succeed without effect (false: apply them again).
    pub fn set_writes_without_effect(&self, on: bool, method: Option<&str>, path_contains: Option<&str>) {
        self.update_faults(|f| {
            f.writes_without_effect = on;
            f.method = method.map(str::to_string);
            f.path_contains = path_contains.map(str::to_string);
        });
    }

    /// Bytes of [`BodyFault::Oversized`] answers generated so far: how much a client read (plus what the network
    /// buffers), since each chunk is made only when the connection takes it.
    /// Bytes of all engine answer bodies so far (what clients downloaded).
    pub fn response_bytes(&self) -> u64 {
        self.shared.response_bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn streamed_bytes(&self) -> u64 {
        self.shared.streamed_bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn set_outage(&self, outage: bool) {
        self.update_faults(|f| f.outage = outage);
    }

    /// While true, the engine refuses connections: its port is closed and open connections are dropped (an engine
    /// host that is down), unlike [`Control::set_outage`], which answers 503 as a proxy in front of it would.
    pub fn set_refusing_connections(&self, refusing: bool) {
        self.shared.listening.send_replace(!refusing);
    }

    pub fn set_sso_error_style(&self, style: SsoErrorStyle) {
        self.update_faults(|f| f.sso_error_style = style);
    }

    /// Invalidates every issued token: the next API call gets 401.
    pub fn expire_tokens(&self) {
        self.shared.lock().tokens.clear();
    }

    /// Number of SSO tokens currently valid (revoked and expired ones excluded).
    pub fn token_count(&self) -> usize {
        let now = std::time::Instant::now();
        self.shared
            .lock()
            .tokens
            .values()
            .filter(|t| t.expires.is_none_or(|at| at > now))
            .count()
    }

    /// Every access token the SSO issued recently (up to 1000), oldest first, including revoked and expired ones:
    /// what a client must never reveal, for tests that search its output.
    pub fn issued_tokens(&self) -> Vec<String> {
        self.shared.lock().issued_tokens.iter().cloned().collect()
    }

    /// Correlation ids received recently (up to 1000), oldest first.
    pub fn correlation_ids(&self) -> Vec<String> {
        self.shared
            .correlation_ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// Lifetime of tokens issued from now on (None = never expire).
    pub fn set_token_ttl(&self, ttl: Option<Duration>) {
        *self.shared.token_ttl.write().unwrap_or_else(|e| e.into_inner()) = ttl;
    }

    /// Adds a user or changes its password (`name` as `user@domain`).
    pub fn set_user(&self, name: &str, password: &str) {
        self.shared.lock().users.insert(name.to_string(), password.to_string());
    }

    /// Takes from a user (`false`) or gives back (`true`) the permission to create VMs: without it `POST /vms` is
    /// 403 "User is not authorized to perform this action.".
    pub fn set_user_may_create_vms(&self, name: &str, allowed: bool) {
        let mut state = self.shared.lock();
        if allowed {
            state.cannot_create_vms.remove(name);
        } else {
            state.cannot_create_vms.insert(name.to_string());
        }
    }

    /// Gives a user an administrative role (`true`, the default for users) or none (`false`): every request of a
    /// user without one is filtered (`filter=true` implied), its lists trimmed to what it may see, and admin-only
    /// queries fail with 400 "Query execution failed due to insufficient permissions.".
    pub fn set_user_admin(&self, name: &str, admin: bool) {
        let mut state = self.shared.lock();
        if admin {
            state.non_admin_users.remove(name);
        } else {
            state.non_admin_users.insert(name.to_string());
        }
    }

    /// The engine release played from now on (request elements such as `use_ignition` exist from 4.4.0).
    pub fn set_engine_version(&self, version: EngineVersion) {
        self.shared.lock().engine_version = version;
    }

    pub fn engine_version(&self) -> EngineVersion {
        self.shared.lock().engine_version
    }

    pub fn timings(&self) -> Timings {
        self.shared.timings()
    }

    /// The API writes received (oldest first), with the User-Agent of each.
    pub fn writes(&self) -> Vec<WriteRecord> {
        self.shared
            .writes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// `transition` waits until [`Control::release`]: e.g. [`Transition::VmUp`] keeps booting VMs `powering_up`,
    /// [`Transition::VmImagesReady`] keeps new VMs `image_locked`.
    pub fn hold(&self, transition: Transition) {
        let mut state = self.shared.lock();
        if !state.holds.contains(&transition) {
            state.holds.push(transition);
        }
    }

    /// The held `transition`s happen now (what follows them after the usual delays); no longer held.
    pub fn release(&self, transition: Transition) {
        let timings = self.shared.timings();
        let due = engine::release(&mut self.shared.lock(), &timings, transition);
        self.shared.schedule(due);
    }

    pub fn set_timings(&self, timings: Timings) {
        *self.shared.timings.write().unwrap_or_else(|e| e.into_inner()) = timings;
    }

    /// Requests per endpoint, keyed `METHOD /path/{id}/...` (ids replaced), plus `total`.
    pub fn counters(&self) -> BTreeMap<String, u64> {
        self.shared.counters.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn counter(&self, key: &str) -> u64 {
        self.counters().get(key).copied().unwrap_or(0)
    }

    /// Request bodies refused as the engine refuses them (unknown elements, bad values), by
    /// `service/methods/name`: a client that is right under the engine's model leaves this empty.
    pub fn rejected_bodies(&self) -> BTreeMap<String, u64> {
        self.counters()
            .into_iter()
            .filter_map(|(k, v)| k.strip_prefix(REJECTED_BODY).map(|u| (u.to_string(), v)))
            .collect()
    }

    pub fn reset_counters(&self) {
        self.shared.counters.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Every VM, for assertions such as "exactly N VMs exist".
    pub fn vms(&self) -> Vec<VmSnapshot> {
        let state = self.shared.lock();
        state.vms.values().map(|vm| state.snapshot_vm(vm)).collect()
    }

    pub fn vm_count(&self) -> usize {
        self.shared.lock().vms.len()
    }

    pub fn vm(&self, id: &str) -> Option<VmSnapshot> {
        let state = self.shared.lock();
        state.vms.get(id).map(|vm| state.snapshot_vm(vm))
    }

    pub fn vm_by_name(&self, name: &str) -> Option<VmSnapshot> {
        let state = self.shared.lock();
        state
            .vms
            .values()
            .find(|vm| vm.name == name)
            .map(|vm| state.snapshot_vm(vm))
    }

    /// What the VM's last start handed the guest (kind and user-data as the engine rewrote it); None when the start
    /// asked for an initialization its OS type does not use, or before any start.
    pub fn delivered_payload(&self, id: &str) -> Option<Delivered> {
        self.shared.lock().vms.get(id).and_then(|vm| vm.delivered.clone())
    }

    /// How many disk copies of cloned VMs are running now, over all storage domains.
    pub fn disk_copies(&self) -> usize {
        self.shared.lock().copies.values().map(|pool| pool.active()).sum()
    }

    /// Adds an address the guest holds on its first NIC besides its own, as keepalived adds a VIP: the guest agent
    /// reports it on that NIC's device (same MAC), after the VM's own address.
    pub fn add_guest_address(&self, id: &str, address: &str) -> Result<(), String> {
        let mut state = self.shared.lock();
        let vm = state.vms.get_mut(id).ok_or_else(|| format!("no VM {id}"))?;
        address
            .parse::<std::net::IpAddr>()
            .map_err(|_| format!("not an IP address: {address:?}"))?;
        vm.guest_addresses.push(address.to_string());
        Ok(())
    }

    /// Makes the VM's guest ignore (or again obey) ACPI shutdown requests.
    pub fn set_guest_ignores_acpi(&self, id: &str, ignores: bool) -> Result<(), String> {
        let mut state = self.shared.lock();
        let vm = state.vms.get_mut(id).ok_or_else(|| format!("no VM {id}"))?;
        vm.ignores_acpi = ignores;
        Ok(())
    }

    /// Whether a disk exists (attached or floating).
    pub fn disk_exists(&self, id: &str) -> bool {
        self.shared.lock().disks.contains_key(id)
    }

    /// The tags of the engine: (name, description).
    pub fn tags(&self) -> Vec<(String, String)> {
        let state = self.shared.lock();
        state
            .tags
            .values()
            .map(|t| (t.name.clone(), t.description.clone()))
            .collect()
    }

    /// Adds a tag as an engine administrator would (e.g. one CAPOV did not create); returns its id.
    pub fn add_tag(&self, name: &str, description: &str) -> Result<String, String> {
        let tag = capov_ovirt::model::Tag {
            name: Some(name.to_string()),
            description: Some(description.to_string()),
            ..Default::default()
        };
        engine::add_tag(&mut self.shared.lock(), &tag).map_err(|e| format!("{e:?}"))
    }

    /// Forces a VM into a status (e.g. `not_responding`, `up`) without the usual transitions.
    pub fn set_vm_status(&self, id: &str, status: &str) -> Result<(), String> {
        engine::force_vm_status(&mut self.shared.lock(), id, status).map_err(|e| format!("{e:?}"))
    }

    /// Id of a named object, for tests: kinds `cluster`, `datacenter`, `storagedomain`,
    /// `network`, `vnicprofile`, `template`, `vm`.
    pub fn id_of(&self, kind: &str, name: &str) -> Option<String> {
        let state = self.shared.lock();
        match kind {
            "cluster" => state.clusters.values().find(|x| x.name == name).map(|x| x.id.clone()),
            "datacenter" => state
                .data_centers
                .values()
                .find(|x| x.name == name)
                .map(|x| x.id.clone()),
            "storagedomain" => state
                .storage_domains
                .values()
                .find(|x| x.name == name)
                .map(|x| x.id.clone()),
            "network" => state.networks.values().find(|x| x.name == name).map(|x| x.id.clone()),
            "vnicprofile" => state
                .vnic_profiles
                .values()
                .find(|x| x.name == name)
                .map(|x| x.id.clone()),
            "diskprofile" => state
                .disk_profiles
                .values()
                .find(|x| x.name == name)
                .map(|x| x.id.clone()),
            "template" => state.templates.values().find(|x| x.name == name).map(|x| x.id.clone()),
            "host" => state.hosts.values().find(|x| x.name == name).map(|x| x.id.clone()),
            "instancetype" => state
                .instance_types
                .values()
                .find(|x| x.name == name)
                .map(|x| x.id.clone()),
            "vm" => state.vms.values().find(|x| x.name == name).map(|x| x.id.clone()),
            _ => None,
        }
    }

    /// Disk ids of a template, in order.
    pub fn template_disk_ids(&self, template_id: &str) -> Vec<String> {
        self.shared
            .lock()
            .templates
            .get(template_id)
            .map(|t| t.disk_ids.clone())
            .unwrap_or_default()
    }
}

#[derive(Deserialize)]
struct AttachDisk {
    alias: String,
    size_bytes: u64,
}

#[derive(Deserialize)]
struct UserChange {
    name: String,
    password: String,
    /// Administrative role (default true).
    #[serde(default = "yes")]
    admin: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct StatusChange {
    status: String,
}

#[derive(Deserialize)]
struct GuestAddress {
    address: String,
}

#[derive(Deserialize)]
struct VersionChange {
    version: EngineVersion,
}

#[derive(Deserialize)]
struct TokenTtl {
    ttl_ms: Option<u64>,
}

fn parse<T: serde::de::DeserializeOwned>(req: &Incoming) -> Result<T, Reply> {
    serde_json::from_slice(&req.body).map_err(|e| Reply::json(400, &json!({"error": e.to_string()})))
}

fn result(outcome: Result<serde_json::Value, String>) -> Reply {
    match outcome {
        Ok(value) => Reply::json(200, &value),
        Err(error) => Reply::json(400, &json!({"error": error})),
    }
}

/// `/sim/...` over HTTP (JSON in, JSON out).
pub fn handle(control: &Control, req: &Incoming, path: &[&str]) -> Reply {
    macro_rules! body {
        ($t:ty) => {
            match parse::<$t>(req) {
                Ok(v) => v,
                Err(reply) => return reply,
            }
        };
    }
    match (&req.method, path) {
        (&Method::GET, ["health"]) => Reply::json(200, &json!({"status": "ok"})),
        (&Method::GET, ["counters"]) => Reply::json(200, &json!(control.counters())),
        (&Method::GET, ["correlation-ids"]) => Reply::json(200, &json!(control.correlation_ids())),
        (&Method::GET, ["tokens"]) => Reply::json(200, &json!({"valid": control.token_count()})),
        (&Method::GET, ["tokens", "issued"]) => Reply::json(200, &json!(control.issued_tokens())),
        (&Method::POST, ["counters", "reset"]) => {
            control.reset_counters();
            Reply::json(200, &json!({}))
        }
        (&Method::GET, ["vms"]) => Reply::json(200, &json!(control.vms())),
        (&Method::GET, ["vms", id]) => match control.vm(id) {
            Some(vm) => Reply::json(200, &json!(vm)),
            None => Reply::json(404, &json!({"error": "no such VM"})),
        },
        (&Method::GET, ["vms", id, "payload"]) => match control.vm(id) {
            Some(_) => Reply::json(200, &json!({"delivered": control.delivered_payload(id)})),
            None => Reply::json(404, &json!({"error": "no such VM"})),
        },
        (&Method::POST, ["vms", id, "disks"]) => {
            let attach = body!(AttachDisk);
            result(
                control
                    .attach_disk(id, &attach.alias, attach.size_bytes)
                    .map(|disk_id| json!({"id": disk_id})),
            )
        }
        (&Method::DELETE, ["vms", id, "disks", disk_id]) => {
            result(control.detach_disk(id, disk_id).map(|()| json!({})))
        }
        (&Method::POST, ["vms", id, "status"]) => {
            let change = body!(StatusChange);
            result(control.set_vm_status(id, &change.status).map(|()| json!({})))
        }
        (&Method::POST, ["vms", id, "guest-addresses"]) => {
            let added = body!(GuestAddress);
            result(control.add_guest_address(id, &added.address).map(|()| json!({})))
        }
        (&Method::POST, ["inventory"]) => {
            let inventory = body!(Inventory);
            result(control.seed(&inventory).map(|()| json!({})))
        }
        (&Method::GET, ["faults"]) => Reply::json(200, &json!(control.faults())),
        (&Method::POST | &Method::PUT, ["faults"]) => {
            let faults = body!(FaultInjection);
            control.set_faults(faults);
            Reply::json(200, &json!(control.faults()))
        }
        (&Method::GET, ["engine-version"]) => Reply::json(200, &json!({"version": control.engine_version()})),
        (&Method::POST | &Method::PUT, ["engine-version"]) => {
            let change = body!(VersionChange);
            control.set_engine_version(change.version);
            Reply::json(200, &json!({"version": control.engine_version()}))
        }
        (&Method::GET, ["writes"]) => Reply::json(200, &json!(control.writes())),
        (&Method::GET, ["timings"]) => Reply::json(200, &json!(control.timings())),
        (&Method::POST | &Method::PUT, ["timings"]) => {
            let timings = body!(Timings);
            control.set_timings(timings);
            Reply::json(200, &json!(control.timings()))
        }
        (&Method::POST, ["tokens", "expire"]) => {
            control.expire_tokens();
            Reply::json(200, &json!({}))
        }
        (&Method::POST, ["tokens", "ttl"]) => {
            let ttl = body!(TokenTtl);
            control.set_token_ttl(ttl.ttl_ms.map(Duration::from_millis));
            Reply::json(200, &json!({}))
        }
        (&Method::POST, ["users"]) => {
            let change = body!(UserChange);
            control.set_user(&change.name, &change.password);
            control.set_user_admin(&change.name, change.admin);
            Reply::json(200, &json!({}))
        }
        _ => Reply::json(404, &json!({"error": "unknown control endpoint"})),
    }
}
