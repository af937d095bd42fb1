//! What a workload needs of a host beyond CPUs and memory: the host's devices (PCI cards for passthrough, GPUs with
//! their mediated-device types), the VM's host devices and mediated devices (vGPUs), its virtual NUMA nodes, and the
//! engine's instance types (named sizes).

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{Link, Ref};
use super::macros::collection;
use super::vm::{Cpu, HighAvailability, MemoryPolicy, NumaTuneMode, PlacementPolicy};

/// `<product id="0x1eb8"><name>TU104GL [Tesla T4]</name></product>`, and likewise `<vendor>`.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceIdentity {
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub name: Option<String>,
}

/// A mediated-device type a device offers (a vGPU profile), with how many more instances it can make now.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdevType {
    /// The type's name, e.g. `nvidia-222`: what a VM's mediated device asks for (`mdevType`).
    pub name: Option<String>,
    pub human_readable_name: Option<String>,
    pub available_instances: Option<u32>,
    pub description: Option<String>,
}

/// `<m_dev_types><m_dev_type/>…</m_dev_types>`.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdevTypes {
    #[serde(rename = "m_dev_type", default, deserialize_with = "crate::decode_budget::items")]
    pub items: Vec<MdevType>,
}

/// A device of a host (`/hosts/{id}/devices`), or of a VM (`/vms/{id}/hostdevices`). Its id is the hex of its name.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "host_device")]
pub struct HostDevice {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    /// libvirt's name, e.g. `pci_0000_3b_00_0`.
    pub name: Option<String>,
    /// `pci`, `scsi`, `usb_device`, `nvdimm`, …
    pub capability: Option<String>,
    pub driver: Option<String>,
    pub iommu_group: Option<u32>,
    /// A device the engine added to a VM only because it shares the IOMMU group of one asked for.
    pub placeholder: Option<bool>,
    pub product: Option<DeviceIdentity>,
    pub vendor: Option<DeviceIdentity>,
    pub virtual_functions: Option<u32>,
    pub m_dev_types: Option<MdevTypes>,
    pub host: Option<Ref>,
    pub parent_device: Option<Ref>,
    /// The running VM that holds the device; absent while it is free.
    pub vm: Option<Ref>,
}

collection!(HostDevices, "host_devices", "host_device", HostDevice);

impl HostDevice {
    /// A request naming a device for `POST /vms/{id}/hostdevices` (the engine also takes the id, the name's hex).
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// The mediated-device types the device offers.
    pub fn mdev_types(&self) -> &[MdevType] {
        self.m_dev_types
            .as_ref()
            .map(|t| t.items.as_slice())
            .unwrap_or_default()
    }
}

/// `<property><name/><value/></property>`.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Property {
    pub name: Option<String>,
    pub value: Option<String>,
}

/// `<spec_params><property/>…</spec_params>`.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Properties {
    #[serde(rename = "property", default, deserialize_with = "crate::decode_budget::items")]
    pub items: Vec<Property>,
}

/// The spec parameter that names a mediated device's type.
pub const MDEV_TYPE: &str = "mdevType";

/// A mediated device (vGPU) of a VM (`/vms/{id}/mediateddevices`, engines 4.5 and later): its type is the spec
/// parameter `mdevType`.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "vm_mediated_device")]
pub struct VmMediatedDevice {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub spec_params: Option<Properties>,
    pub vm: Option<Ref>,
}

collection!(
    VmMediatedDevices,
    "vm_mediated_devices",
    "vm_mediated_device",
    VmMediatedDevice
);

impl VmMediatedDevice {
    /// A request for a mediated device of type `mdev_type`.
    pub fn of_type(mdev_type: impl Into<String>) -> Self {
        Self {
            spec_params: Some(Properties {
                items: vec![Property {
                    name: Some(MDEV_TYPE.to_string()),
                    value: Some(mdev_type.into()),
                }],
            }),
            ..Self::default()
        }
    }

    /// The device's type (`mdevType`).
    pub fn mdev_type(&self) -> Option<&str> {
        self.spec_params
            .iter()
            .flat_map(|p| p.items.iter())
            .find(|p| p.name.as_deref() == Some(MDEV_TYPE))
            .and_then(|p| p.value.as_deref())
    }
}

/// `<core><index/></core>` of a virtual NUMA node's CPU.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Core {
    pub index: Option<u32>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cores {
    #[serde(rename = "core", default, deserialize_with = "crate::decode_budget::items")]
    pub items: Vec<Core>,
}

/// `<cpu><cores>…</cores></cpu>` of a virtual NUMA node: which virtual CPUs it holds.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNodeCpu {
    pub cores: Option<Cores>,
}

/// A pin of a virtual NUMA node to a host NUMA node (by its index).
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNodePin {
    pub index: Option<u32>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNodePins {
    #[serde(rename = "numa_node_pin", default, deserialize_with = "crate::decode_budget::items")]
    pub items: Vec<NumaNodePin>,
}

/// A virtual NUMA node of a VM (`/vms/{id}/numanodes`). `memory` is in MiB, as the engine counts it.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "vm_numa_node")]
pub struct VirtualNumaNode {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub index: Option<u32>,
    pub memory: Option<u64>,
    pub cpu: Option<NumaNodeCpu>,
    pub numa_node_pins: Option<NumaNodePins>,
    pub numa_tune_mode: Option<NumaTuneMode>,
    pub vm: Option<Ref>,
}

collection!(VirtualNumaNodes, "vm_numa_nodes", "vm_numa_node", VirtualNumaNode);

impl VirtualNumaNode {
    /// A node with these virtual CPUs and `memory_mib`.
    pub fn new(index: u32, memory_mib: u64, vcpus: impl IntoIterator<Item = u32>) -> Self {
        Self {
            index: Some(index),
            memory: Some(memory_mib),
            cpu: Some(NumaNodeCpu {
                cores: Some(Cores {
                    items: vcpus.into_iter().map(|i| Core { index: Some(i) }).collect(),
                }),
            }),
            ..Self::default()
        }
    }
}

/// A named size of the engine (`/instancetypes`): CPUs, memory, high availability and placement that a VM made with
/// it takes over whatever the request says for them.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "instance_type")]
pub struct InstanceType {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    #[serde(
        rename = "link",
        default,
        deserialize_with = "crate::decode_budget::items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub links: Vec<Link>,
    pub cpu: Option<Cpu>,
    pub high_availability: Option<HighAvailability>,
    pub memory: Option<u64>,
    pub memory_policy: Option<MemoryPolicy>,
    pub placement_policy: Option<PlacementPolicy>,
}

collection!(InstanceTypes, "instance_types", "instance_type", InstanceType);
