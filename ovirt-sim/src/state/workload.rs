//! What a VM asks of its host beyond CPUs and memory, and what hosts offer: high availability and leases, CPU mode
//! and pinning, NUMA nodes, custom properties (hugepages, `mdev_type`), instance types, host devices and
//! mediated-device (vGPU) types, and which running VM holds which device.

use serde::Serialize;

use super::{State, VmRecord};

/// High availability and the settings the engine keeps beside it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HighAvailability {
    /// The engine's `auto_startup`: restart the VM when it goes down unexpectedly.
    pub enabled: bool,
    /// Restart order (higher first), 0 to 100 (`VmPriorityMaxValue`).
    pub priority: i32,
}

/// A virtual NUMA node of a VM.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NumaNodeRecord {
    pub id: String,
    pub index: u32,
    /// MiB, as the engine counts NUMA memory.
    pub memory_mib: u64,
    pub vcpus: Vec<u32>,
    pub tune_mode: Option<String>,
    /// Indexes of the host NUMA nodes it is pinned to.
    pub pinned_to: Vec<u32>,
}

/// A host device attached to a VM (of the one host it is pinned to).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VmHostDevice {
    pub name: String,
    /// Added only because it shares the IOMMU group of a device asked for.
    pub placeholder: bool,
}

/// A mediated device (vGPU) of a VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MediatedDeviceRecord {
    pub id: String,
    pub mdev_type: String,
}

/// Everything about a VM's placement and tuning beyond its size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmWorkload {
    pub high_availability: HighAvailability,
    /// The storage domain of its VM lease.
    pub lease_domain_id: Option<String>,
    /// `host_passthrough`, `host_model` or `custom`.
    pub cpu_mode: Option<String>,
    pub custom_cpu_model: Option<String>,
    /// The engine's CPU pinning string (`0#1_1#2-3`), empty without pinning.
    pub cpu_pinning: String,
    /// `auto_pinning_policy` (4.4) or `cpu_pinning_policy` (4.5), as the request named it.
    pub auto_pinning_policy: Option<String>,
    pub cpu_pinning_policy: Option<String>,
    pub numa_nodes: Vec<NumaNodeRecord>,
    /// Name → value, in the request's order.
    pub custom_properties: Vec<(String, String)>,
    pub instance_type_id: Option<String>,
    /// The hosts it may run on (the engine's dedicated hosts).
    pub dedicated_hosts: Vec<String>,
    pub host_devices: Vec<VmHostDevice>,
    pub mediated_devices: Vec<MediatedDeviceRecord>,
    /// While it runs: the host device (name) each of its mediated devices took an instance on, in order.
    pub mdev_assignments: Vec<(String, String)>,
    /// How often the engine restarted it after its host was lost or fenced.
    pub ha_restarts: u32,
}

impl VmWorkload {
    /// The value of custom property `name`.
    pub fn custom_property(&self, name: &str) -> Option<&str> {
        self.custom_properties
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The mdev types the VM needs a free instance of: its mediated devices' (4.5) and those of the `mdev_type`
    /// custom property (4.4's way, a leading `nodisplay` dropped: `MDevTypesUtils.getMDevTypes`).
    pub fn mdev_types(&self) -> Vec<String> {
        let mut types: Vec<String> = self.mediated_devices.iter().map(|m| m.mdev_type.clone()).collect();
        if let Some(property) = self.custom_property("mdev_type").filter(|p| !p.trim().is_empty()) {
            let mut listed: Vec<&str> = property.split(',').collect();
            if listed.first() == Some(&"nodisplay") {
                listed.remove(0);
            }
            types.extend(listed.into_iter().map(str::to_string));
        }
        types
    }

    /// The host devices it asks for by name (placeholders included: they go with their group).
    pub fn needs_host_devices(&self) -> bool {
        !self.host_devices.is_empty()
    }
}

/// A mediated-device type a host device offers, and how many instances it can make at most.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MdevTypeRecord {
    pub name: String,
    pub human_readable_name: String,
    pub description: String,
    pub max_instances: u32,
}

/// A device of a host, as vdsm reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostDeviceRecord {
    /// libvirt's name (`pci_0000_3b_00_0`); the REST id is its hex.
    pub name: String,
    pub capability: String,
    pub vendor_id: String,
    pub vendor_name: String,
    pub product_id: String,
    pub product_name: String,
    pub iommu_group: Option<u32>,
    pub driver: Option<String>,
    pub parent: Option<String>,
    pub mdev_types: Vec<MdevTypeRecord>,
    /// Held by something outside the engine's VMs (e.g. another consumer on the host, [`crate::Control::take_host_device`]).
    pub taken_elsewhere: bool,
}

/// A named size of the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceTypeRecord {
    pub id: String,
    pub name: String,
    pub description: String,
    pub memory: u64,
    /// `min_allocated_mem`: the guaranteed memory it sets.
    pub guaranteed: u64,
    pub sockets: u32,
    pub cores: u32,
    pub threads: u32,
    pub high_availability: HighAvailability,
    /// Its migration support (`migratable`, `user_migratable`, `pinned`).
    pub affinity: String,
}

/// A host device's REST id: the hex of its name's UTF-8 bytes (`HexUtils.string2hex`).
pub fn device_id(name: &str) -> String {
    name.bytes().map(|b| format!("{b:02x}")).collect()
}

impl State {
    /// The running VM that holds host device `name` of `host_id` (passed through), if any.
    pub fn device_holder<'a>(&'a self, host_id: &'a str, name: &'a str) -> Option<&'a VmRecord> {
        self.vms_using_host(host_id).find(|vm| {
            vm.workload.host_devices.iter().any(|d| d.name == name)
                || vm.workload.mdev_assignments.iter().any(|(device, _)| device == name)
        })
    }

    /// The VMs running on, or migrating to, a host.
    fn vms_using_host<'a>(&'a self, host_id: &'a str) -> impl Iterator<Item = &'a VmRecord> + 'a {
        self.vms.values().filter(move |vm| {
            vm.placement.host.as_deref() == Some(host_id) || vm.placement.migrating_to.as_deref() == Some(host_id)
        })
    }

    /// Whether a PCI device of the host is free for passthrough: nothing holds it, no vGPU instance lives on it.
    pub fn device_free(&self, host_id: &str, name: &str, asking_vm: &str) -> bool {
        let Some(device) = self
            .hosts
            .get(host_id)
            .and_then(|h| h.devices.iter().find(|d| d.name == name))
        else {
            return false;
        };
        !device.taken_elsewhere && self.device_holder(host_id, name).is_none_or(|vm| vm.id == asking_vm)
    }

    /// How many more instances of `mdev_type` device `device` of the host can make now. A GPU runs instances of one
    /// type at a time (NVIDIA's rule), so instances of another type leave none; a device passed through whole or
    /// taken elsewhere has none.
    pub fn mdev_available(&self, host_id: &str, device: &HostDeviceRecord, mdev_type: &str) -> u32 {
        let Some(offered) = device.mdev_types.iter().find(|t| t.name == mdev_type) else {
            return 0;
        };
        if device.taken_elsewhere {
            return 0;
        }
        let mut used = 0u32;
        for vm in self.vms_using_host(host_id) {
            if vm.workload.host_devices.iter().any(|d| d.name == device.name) {
                return 0;
            }
            for (name, kind) in &vm.workload.mdev_assignments {
                if name == &device.name {
                    if kind != mdev_type {
                        return 0;
                    }
                    used += 1;
                }
            }
        }
        offered.max_instances.saturating_sub(used)
    }

    /// The device of the host with a free instance of `mdev_type`, if any (the first by name).
    pub fn mdev_device_with_room(&self, host_id: &str, mdev_type: &str) -> Option<String> {
        let host = self.hosts.get(host_id)?;
        host.devices
            .iter()
            .find(|d| self.mdev_available(host_id, d, mdev_type) > 0)
            .map(|d| d.name.clone())
    }
}
