//! Disks and the attachments that connect them to VMs and templates.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{Actions, Link, Ref};
use super::macros::{collection, string_enum};

string_enum!(
    DiskStatus {
        Ok = "ok",
        Locked = "locked",
        Illegal = "illegal",
    }
);

/// `<storage_domains><storage_domain id/></storage_domains>` inside a disk.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StorageDomainRefs {
    #[serde(rename = "storage_domain", default, deserialize_with = "crate::decode_budget::items")]
    pub items: Vec<Ref>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "disk")]
pub struct Disk {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub actions: Option<Actions>,
    pub name: Option<String>,
    pub description: Option<String>,
    #[serde(
        rename = "link",
        default,
        deserialize_with = "crate::decode_budget::items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub links: Vec<Link>,
    pub actual_size: Option<u64>,
    pub alias: Option<String>,
    pub content_type: Option<String>,
    /// cow | raw
    pub format: Option<String>,
    pub image_id: Option<String>,
    pub provisioned_size: Option<u64>,
    pub shareable: Option<bool>,
    pub sparse: Option<bool>,
    pub status: Option<DiskStatus>,
    pub storage_type: Option<String>,
    pub total_size: Option<u64>,
    pub wipe_after_delete: Option<bool>,
    pub disk_profile: Option<Ref>,
    pub storage_domains: Option<StorageDomainRefs>,
}

collection!(Disks, "disks", "disk", Disk);

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "disk_attachment")]
pub struct DiskAttachment {
    /// Equals the disk id.
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub active: Option<bool>,
    pub bootable: Option<bool>,
    /// ide | virtio_scsi | virtio | spapr_vscsi | sata
    pub interface: Option<String>,
    pub logical_name: Option<String>,
    pub pass_discard: Option<bool>,
    pub read_only: Option<bool>,
    pub uses_scsi_reservation: Option<bool>,
    /// A bare reference in listings, the full disk with `?follow=disk`, a partial disk in requests.
    pub disk: Option<Disk>,
    pub template: Option<Ref>,
    pub vm: Option<Ref>,
}

collection!(DiskAttachments, "disk_attachments", "disk_attachment", DiskAttachment);
