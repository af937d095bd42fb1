//! Typed engine objects in the XML wire format (snake_case elements, `id`/`href`/`rel` as
//! attributes). Only the fields CAPOV uses are modelled; unknown elements are ignored on input, and
//! unset fields are never written, so the engine does not read them as empty values: every struct carries
//! `#[skip_serializing_none]` (serde_with), which leaves out each `None` field, and a missing element decodes to
//! `None` (serde's rule for `Option`). Lists are written as they are, except the `link`s, which say so on the field.

mod macros;

pub mod api;
pub mod common;
pub mod devices;
pub mod disk;
pub mod inventory;
pub mod placement;
pub mod vm;

pub use api::*;
pub use common::*;
pub use devices::*;
pub use disk::*;
pub use inventory::*;
pub use placement::*;
pub use vm::*;

macros::roots!(
    Api = "api",
    Cluster = "cluster",
    DataCenter = "data_center",
    StorageDomain = "storage_domain",
    Network = "network",
    VnicProfile = "vnic_profile",
    Template = "template",
    Vm = "vm",
    VmFacts = "vm",
    Disk = "disk",
    DiskAttachment = "disk_attachment",
    Nic = "nic",
    Tag = "tag",
    DiskProfile = "disk_profile",
    ReportedDevice = "reported_device",
    Action = "action",
    Fault = "fault",
    Host = "host",
    AffinityGroup = "affinity_group",
    AffinityLabel = "affinity_label",
    HostDevice = "host_device",
    VmMediatedDevice = "vm_mediated_device",
    VirtualNumaNode = "vm_numa_node",
    InstanceType = "instance_type",
);

/// Id of the Blank template, the `template` of every VM created with `clone=true`.
pub const BLANK_TEMPLATE_ID: &str = "00000000-0000-0000-0000-000000000000";
