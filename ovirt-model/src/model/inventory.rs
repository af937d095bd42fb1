//! The infrastructure a VM is placed on: data centers, clusters, storage domains, networks, vNIC
//! profiles and templates.

use serde::{Deserialize, Serialize};

use super::common::{Actions, Link, Ref, Version};
use super::macros::{collection, string_enum};
use super::vm::{Cpu, OperatingSystem};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "cluster")]
pub struct Cluster {
    #[serde(rename = "@href", default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(rename = "@id", default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(rename = "link", default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Version>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_center: Option<Ref>,
}

collection!(Clusters, "clusters", "cluster", Cluster);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "data_center")]
pub struct DataCenter {
    #[serde(rename = "@href", default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(rename = "@id", default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(rename = "link", default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Version>,
}

collection!(DataCenters, "data_centers", "data_center", DataCenter);

string_enum!(
    /// Status of a storage domain, as seen from a data center (`/datacenters/{id}/storagedomains`)
    /// or `unattached` in `/storagedomains`.
    StorageDomainStatus {
        Active = "active",
        Inactive = "inactive",
        Locked = "locked",
        Mixed = "mixed",
        Unattached = "unattached",
        Maintenance = "maintenance",
        PreparingForMaintenance = "preparing_for_maintenance",
        Detaching = "detaching",
        Activating = "activating",
        Unknown = "unknown",
    }
);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StorageConnection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DataCenterRefs {
    #[serde(rename = "data_center", default)]
    pub items: Vec<Ref>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "storage_domain")]
pub struct StorageDomain {
    #[serde(rename = "@href", default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(rename = "@id", default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actions: Option<Actions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(rename = "link", default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed: Option<u64>,
    /// GiB: the engine refuses new disks on the domain once less than this is available (0 = no threshold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical_space_action_blocker: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master: Option<bool>,
    /// Present in `/storagedomains` only for unattached domains; per data center otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StorageDomainStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageConnection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_format: Option<String>,
    /// data | iso | export | image | volume | managed_block_storage
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_centers: Option<DataCenterRefs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_center: Option<Ref>,
}

collection!(StorageDomains, "storage_domains", "storage_domain", StorageDomain);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "network")]
pub struct Network {
    #[serde(rename = "@href", default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(rename = "@id", default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(rename = "link", default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_center: Option<Ref>,
}

collection!(Networks, "networks", "network", Network);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PassThrough {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "vnic_profile")]
pub struct VnicProfile {
    #[serde(rename = "@href", default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(rename = "@id", default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(rename = "link", default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_through: Option<PassThrough>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_mirroring: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_filter: Option<Ref>,
}

collection!(VnicProfiles, "vnic_profiles", "vnic_profile", VnicProfile);

string_enum!(
    TemplateStatus {
        Ok = "ok",
        Locked = "locked",
        Illegal = "illegal",
    }
);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TemplateVersion {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_number: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_template: Option<Ref>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "template")]
pub struct Template {
    #[serde(rename = "@href", default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(rename = "@id", default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actions: Option<Actions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(rename = "link", default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// The OS type (`<os><type>`): decides which guest initialization the engine delivers (cloud-init, Ignition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<OperatingSystem>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TemplateStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<TemplateVersion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<Ref>,
}

collection!(Templates, "templates", "template", Template);

/// A tag (`/tags`): engine-wide, unique by name, in a tree under the root tag.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "tag")]
pub struct Tag {
    #[serde(rename = "@href", default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(rename = "@id", default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Ref>,
}

collection!(Tags, "tags", "tag", Tag);

/// A disk profile of a storage domain (`/storagedomains/{id}/diskprofiles`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "disk_profile")]
pub struct DiskProfile {
    #[serde(rename = "@href", default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(rename = "@id", default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_domain: Option<Ref>,
}

collection!(DiskProfiles, "disk_profiles", "disk_profile", DiskProfile);
