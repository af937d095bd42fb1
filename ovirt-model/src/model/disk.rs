//! Disks and the attachments that connect them to VMs and templates.

use serde::{Deserialize, Serialize};

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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StorageDomainRefs {
    #[serde(rename = "storage_domain", default)]
    pub items: Vec<Ref>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "disk")]
pub struct Disk {
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
    #[serde(rename = "link", default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual_size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// cow | raw
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned_size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shareable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DiskStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wipe_after_delete: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_profile: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_domains: Option<StorageDomainRefs>,
}

collection!(Disks, "disks", "disk", Disk);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "disk_attachment")]
pub struct DiskAttachment {
    /// Equals the disk id.
    #[serde(rename = "@href", default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(rename = "@id", default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootable: Option<bool>,
    /// ide | virtio_scsi | virtio | spapr_vscsi | sata
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_discard: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses_scsi_reservation: Option<bool>,
    /// A bare reference in listings, the full disk with `?follow=disk`, a partial disk in requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<Disk>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<Ref>,
}

collection!(DiskAttachments, "disk_attachments", "disk_attachment", DiskAttachment);
