//! The infrastructure a VM is placed on: data centers, clusters, storage domains, networks, vNIC
//! profiles and templates.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{Actions, Link, Ref, Version};
use super::macros::{collection, string_enum};
use super::vm::{Cpu, OperatingSystem};

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "cluster")]
pub struct Cluster {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub comment: Option<String>,
    #[serde(
        rename = "link",
        default,
        deserialize_with = "crate::decode_budget::items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub links: Vec<Link>,
    pub cpu: Option<Cpu>,
    pub version: Option<Version>,
    pub data_center: Option<Ref>,
}

collection!(Clusters, "clusters", "cluster", Cluster);

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "data_center")]
pub struct DataCenter {
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
    pub local: Option<bool>,
    pub status: Option<String>,
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

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StorageConnection {
    pub address: Option<String>,
    pub path: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DataCenterRefs {
    #[serde(rename = "data_center", default, deserialize_with = "crate::decode_budget::items")]
    pub items: Vec<Ref>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "storage_domain")]
pub struct StorageDomain {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub actions: Option<Actions>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub comment: Option<String>,
    #[serde(
        rename = "link",
        default,
        deserialize_with = "crate::decode_budget::items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub links: Vec<Link>,
    pub available: Option<u64>,
    pub committed: Option<u64>,
    /// GiB: the engine refuses new disks on the domain once less than this is available (0 = no threshold).
    pub critical_space_action_blocker: Option<u64>,
    pub external_status: Option<String>,
    pub master: Option<bool>,
    /// Present in `/storagedomains` only for unattached domains; per data center otherwise.
    pub status: Option<StorageDomainStatus>,
    pub storage: Option<StorageConnection>,
    pub storage_format: Option<String>,
    /// data | iso | export | image | volume | managed_block_storage
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub used: Option<u64>,
    pub data_centers: Option<DataCenterRefs>,
    pub data_center: Option<Ref>,
}

collection!(StorageDomains, "storage_domains", "storage_domain", StorageDomain);

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "network")]
pub struct Network {
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
    pub mtu: Option<u32>,
    pub data_center: Option<Ref>,
}

collection!(Networks, "networks", "network", Network);

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PassThrough {
    pub mode: Option<String>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "vnic_profile")]
pub struct VnicProfile {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub name: Option<String>,
    #[serde(
        rename = "link",
        default,
        deserialize_with = "crate::decode_budget::items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub links: Vec<Link>,
    pub pass_through: Option<PassThrough>,
    pub port_mirroring: Option<bool>,
    pub network: Option<Ref>,
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

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TemplateVersion {
    pub version_name: Option<String>,
    pub version_number: Option<u32>,
    pub base_template: Option<Ref>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "template")]
pub struct Template {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub actions: Option<Actions>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub comment: Option<String>,
    #[serde(
        rename = "link",
        default,
        deserialize_with = "crate::decode_budget::items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub links: Vec<Link>,
    pub cpu: Option<Cpu>,
    pub creation_time: Option<String>,
    pub memory: Option<u64>,
    /// The OS type (`<os><type>`): decides which guest initialization the engine delivers (cloud-init, Ignition).
    pub os: Option<OperatingSystem>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub status: Option<TemplateStatus>,
    pub version: Option<TemplateVersion>,
    pub cluster: Option<Ref>,
}

collection!(Templates, "templates", "template", Template);

/// A tag (`/tags`): engine-wide, unique by name, in a tree under the root tag.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "tag")]
pub struct Tag {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub parent: Option<Ref>,
}

collection!(Tags, "tags", "tag", Tag);

/// A disk profile of a storage domain (`/storagedomains/{id}/diskprofiles`).
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "disk_profile")]
pub struct DiskProfile {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub name: Option<String>,
    pub storage_domain: Option<Ref>,
}

collection!(DiskProfiles, "disk_profiles", "disk_profile", DiskProfile);
