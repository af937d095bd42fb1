//! Typed engine operations. Paths and parameters follow the engine's REST API v4.

use std::collections::HashMap;

use reqwest::Method;

use crate::client::{Call, Client};
use crate::error::{Error, Result};
use crate::model::*;
use crate::search;

/// How many ids or names one batched search carries (keeps URLs well under 8 KiB).
const SEARCH_BATCH: usize = 50;

/// Options of `POST /vms/{id}/start`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StartOptions {
    pub use_cloud_init: bool,
    pub use_ignition: bool,
}

/// Where one template disk of a new VM goes (`disk_attachments` of `POST /vms`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiskPlacement {
    pub template_disk_id: String,
    pub storage_domain_id: Option<String>,
    /// `cow` or `raw`.
    pub format: Option<String>,
    pub sparse: Option<bool>,
    pub alias: Option<String>,
}

impl DiskPlacement {
    /// The `<disk_attachment>` the engine expects for this placement.
    pub fn to_attachment(&self) -> DiskAttachment {
        DiskAttachment {
            disk: Some(Disk {
                id: Some(self.template_disk_id.clone()),
                alias: self.alias.clone(),
                format: self.format.clone(),
                sparse: self.sparse,
                storage_domains: self.storage_domain_id.as_ref().map(|id| StorageDomainRefs {
                    items: vec![Ref::id(id.clone())],
                }),
                ..Disk::default()
            }),
            ..DiskAttachment::default()
        }
    }
}

/// What an observation of a VM inlines: its NICs and what the guest agent reports, and with `disks` its disk
/// attachments with their disks: one request instead of three or four.
pub fn facts_follow(disks: bool) -> &'static str {
    if disks {
        "disk_attachments.disk,nics,reported_devices"
    } else {
        "nics,reported_devices"
    }
}

fn exact_name<T>(items: Vec<T>, name: &str, name_of: impl Fn(&T) -> Option<&str>) -> Vec<T> {
    items.into_iter().filter(|item| name_of(item) == Some(name)).collect()
}

impl Client {
    // ---- API root ----

    /// `GET /` — product information; also the cheapest connection and credentials check.
    pub async fn api(&self) -> Result<Api> {
        self.fetch(Call::new(Method::GET, "api", &[])).await
    }

    // ---- clusters and data centers ----

    pub async fn clusters(&self) -> Result<Vec<Cluster>> {
        Ok(self
            .fetch::<Clusters>(Call::new(Method::GET, "clusters", &["clusters"]))
            .await?
            .items)
    }

    pub async fn cluster(&self, id: &str) -> Result<Cluster> {
        self.fetch(Call::new(Method::GET, "clusters", &["clusters", id])).await
    }

    /// The cluster named exactly `name`, if any.
    pub async fn find_cluster_by_name(&self, name: &str) -> Result<Option<Cluster>> {
        let call = Call::new(Method::GET, "clusters", &["clusters"]).query("search", search::name_is(name)?);
        let found = self.fetch::<Clusters>(call).await?.items;
        Ok(exact_name(found, name, |c| c.name.as_deref()).into_iter().next())
    }

    pub async fn data_centers(&self) -> Result<Vec<DataCenter>> {
        Ok(self
            .fetch::<DataCenters>(Call::new(Method::GET, "datacenters", &["datacenters"]))
            .await?
            .items)
    }

    pub async fn data_center(&self, id: &str) -> Result<DataCenter> {
        self.fetch(Call::new(Method::GET, "datacenters", &["datacenters", id]))
            .await
    }

    /// Storage domains attached to a data center, with their per-data-center `status`.
    pub async fn data_center_storage_domains(&self, data_center_id: &str) -> Result<Vec<StorageDomain>> {
        let call = Call::new(
            Method::GET,
            "storagedomains",
            &["datacenters", data_center_id, "storagedomains"],
        );
        Ok(self.fetch::<StorageDomains>(call).await?.items)
    }

    pub async fn data_center_storage_domain(&self, data_center_id: &str, id: &str) -> Result<StorageDomain> {
        self.fetch(Call::new(
            Method::GET,
            "storagedomains",
            &["datacenters", data_center_id, "storagedomains", id],
        ))
        .await
    }

    // ---- storage domains ----

    pub async fn storage_domains(&self) -> Result<Vec<StorageDomain>> {
        Ok(self
            .fetch::<StorageDomains>(Call::new(Method::GET, "storagedomains", &["storagedomains"]))
            .await?
            .items)
    }

    pub async fn storage_domain(&self, id: &str) -> Result<StorageDomain> {
        self.fetch(Call::new(Method::GET, "storagedomains", &["storagedomains", id]))
            .await
    }

    /// Storage domains named exactly `name` (names may repeat across data centers).
    pub async fn find_storage_domains_by_name(&self, name: &str) -> Result<Vec<StorageDomain>> {
        let call =
            Call::new(Method::GET, "storagedomains", &["storagedomains"]).query("search", search::name_is(name)?);
        Ok(exact_name(self.fetch::<StorageDomains>(call).await?.items, name, |s| {
            s.name.as_deref()
        }))
    }

    // ---- networks and vNIC profiles ----

    pub async fn networks(&self) -> Result<Vec<Network>> {
        Ok(self
            .fetch::<Networks>(Call::new(Method::GET, "networks", &["networks"]))
            .await?
            .items)
    }

    pub async fn network(&self, id: &str) -> Result<Network> {
        self.fetch(Call::new(Method::GET, "networks", &["networks", id])).await
    }

    /// All vNIC profiles. The engine has no search here: resolve names client-side.
    pub async fn vnic_profiles(&self) -> Result<Vec<VnicProfile>> {
        Ok(self
            .fetch::<VnicProfiles>(Call::new(Method::GET, "vnicprofiles", &["vnicprofiles"]))
            .await?
            .items)
    }

    pub async fn network_vnic_profiles(&self, network_id: &str) -> Result<Vec<VnicProfile>> {
        let call = Call::new(Method::GET, "vnicprofiles", &["networks", network_id, "vnicprofiles"]);
        Ok(self.fetch::<VnicProfiles>(call).await?.items)
    }

    // ---- templates ----

    pub async fn template(&self, id: &str) -> Result<Template> {
        self.fetch(Call::new(Method::GET, "templates", &["templates", id]))
            .await
    }

    /// Templates named exactly `name` (all versions), optionally only those of a cluster (by name).
    pub async fn find_templates_by_name(&self, name: &str, cluster_name: Option<&str>) -> Result<Vec<Template>> {
        let mut query = search::name_is(name)?;
        if let Some(cluster) = cluster_name {
            query = format!("{query} and {}", search::equals("cluster", cluster)?);
        }
        let call = Call::new(Method::GET, "templates", &["templates"]).query("search", query);
        Ok(exact_name(self.fetch::<Templates>(call).await?.items, name, |t| {
            t.name.as_deref()
        }))
    }

    /// Disk attachments of a template (attachment id = template disk id).
    pub async fn template_disk_attachments(&self, template_id: &str) -> Result<Vec<DiskAttachment>> {
        let call = Call::new(
            Method::GET,
            "diskattachments",
            &["templates", template_id, "diskattachments"],
        );
        Ok(self.fetch::<DiskAttachments>(call).await?.items)
    }

    // ---- VMs ----

    /// `POST /vms?clone=…`. The answer is usually 202 with the VM `image_locked`; poll until `down`.
    pub async fn add_vm(&self, vm: &Vm, clone: bool) -> Result<Vm> {
        let call = Call::new(Method::POST, "vms", &["vms"])
            .query("clone", clone.to_string())
            .xml_body(vm)?;
        self.fetch(call).await
    }

    /// `GET /vms/{id}`; [`crate::Error::NotFound`] when it does not exist.
    pub async fn vm(&self, id: &str) -> Result<Vm> {
        self.fetch(Call::new(Method::GET, "vms", &["vms", id])).await
    }

    /// `GET /vms/{id}?follow=…` (e.g. `disk_attachments,nics`).
    pub async fn vm_with(&self, id: &str, follow: &str) -> Result<Vm> {
        self.fetch(Call::new(Method::GET, "vms", &["vms", id]).query("follow", follow))
            .await
    }

    /// The whole VM with what [`Client::vm_facts`] inlines ([`facts_follow`]).
    pub async fn vm_with_devices(&self, id: &str, disks: bool) -> Result<Vm> {
        self.vm_with(id, facts_follow(disks)).await
    }

    /// The VM named exactly `name` (never `worker-1` for `worker`).
    pub async fn find_vm_by_name(&self, name: &str) -> Result<Option<Vm>> {
        let found = self.search_vms(&search::name_is(name)?).await?;
        Ok(exact_name(found, name, |v| v.name.as_deref()).into_iter().next())
    }

    /// Every VM (`GET /vms` without a search).
    pub async fn vms(&self) -> Result<Vec<Vm>> {
        Ok(self.fetch::<Vms>(Call::new(Method::GET, "vms", &["vms"])).await?.items)
    }

    /// `GET /vms?search=…` with a raw search expression (build it with [`crate::search`]).
    pub async fn search_vms(&self, query: &str) -> Result<Vec<Vm>> {
        let call = Call::new(Method::GET, "vms", &["vms"]).query("search", query);
        Ok(self.fetch::<Vms>(call).await?.items)
    }

    /// Status of many VMs by id, one request per 50 ids. Ids the engine does not know are absent; a VM shown without
    /// `<status>` is there as [`VmStatus::IMAGE_ILLEGAL`]. Only id and status are decoded
    /// ([`crate::model::VmStatusEntry`]).
    pub async fn vm_statuses(&self, ids: &[&str]) -> Result<HashMap<String, VmStatus>> {
        let found = self
            .batched_by_id::<VmStatusEntries, _>(ids, None, |vm| vm.id.clone())
            .await?;
        Ok(found
            .into_iter()
            .map(|(id, vm)| (id, VmStatus::of(vm.status.as_ref())))
            .collect())
    }

    /// One VM as CAPOV observes it (`GET /vms/{id}?follow=…`, see [`facts_follow`]), bootstrap data skipped.
    pub async fn vm_facts(&self, id: &str, disks: bool) -> Result<VmFacts> {
        self.fetch(Call::new(Method::GET, "vms", &["vms", id]).query("follow", facts_follow(disks)))
            .await
    }

    /// Many VMs as CAPOV observes them, one search per 50 ids with the same `follow` as [`Client::vm_facts`]: the
    /// provider's batched poll, which hands each machine what a read of its own VM would have shown. Ids the engine
    /// does not know are absent.
    pub async fn vms_facts(&self, ids: &[&str], disks: bool) -> Result<HashMap<String, VmFacts>> {
        self.batched_by_id::<VmFactsList, _>(ids, Some(facts_follow(disks)), |vm| vm.id.clone())
            .await
    }

    /// Every VM named exactly `name`, as CAPOV observes it (without inlined devices). Names are unique per data
    /// center only, so several VMs of other data centers may share one; the caller picks.
    pub async fn find_vms_facts_by_name(&self, name: &str) -> Result<Vec<VmFacts>> {
        let call = Call::new(Method::GET, "vms", &["vms"]).query("search", &search::name_is(name)?);
        let found = self.fetch::<VmFactsList>(call).await?.items;
        Ok(exact_name(found, name, |v| v.name.as_deref()))
    }

    /// `GET /vms?search=id=… or …` per 50 ids. A batch whose answer exceeds [`crate::MAX_BODY_BYTES`] (VMs carrying
    /// very large bootstrap data) or its decoding budget is asked again in halves, down to single VMs, so the read stays bounded and still
    /// succeeds.
    async fn batched_by_id<L, T>(
        &self,
        ids: &[&str],
        follow: Option<&str>,
        id_of: impl Fn(&T) -> Option<String>,
    ) -> Result<HashMap<String, T>>
    where
        L: crate::xml::Root + serde::de::DeserializeOwned + Into<Vec<T>>,
    {
        let mut found = HashMap::with_capacity(ids.len());
        let mut batches: Vec<&[&str]> = ids.chunks(SEARCH_BATCH).rev().collect();
        while let Some(batch) = batches.pop() {
            let Some(query) = search::any_of("id", batch.iter().copied()) else {
                continue;
            };
            let mut call = Call::new(Method::GET, "vms", &["vms"]).query("search", &query);
            if let Some(follow) = follow {
                call = call.query("follow", follow);
            }
            match self.fetch::<L>(call).await {
                Ok(list) => {
                    for vm in list.into() {
                        if let Some(id) = id_of(&vm)
                            && batch.contains(&id.as_str())
                        {
                            found.insert(id, vm);
                        }
                    }
                }
                Err(Error::BodyTooLarge { .. } | Error::TooManyItems { .. }) if batch.len() > 1 => {
                    let (first, second) = batch.split_at(batch.len() / 2);
                    batches.push(second);
                    batches.push(first);
                }
                Err(err) => return Err(err),
            }
        }
        Ok(found)
    }

    /// VMs by exact name, one request per 50 names: name → VM (with id and status).
    pub async fn vms_by_names(&self, names: &[&str]) -> Result<HashMap<String, Vm>> {
        let mut found = HashMap::with_capacity(names.len());
        for chunk in names.chunks(SEARCH_BATCH) {
            let Some(query) = search::any_of("name", chunk.iter().copied()) else {
                continue;
            };
            for vm in self.search_vms(&query).await? {
                if let Some(name) = vm.name.clone()
                    && chunk.contains(&name.as_str())
                {
                    found.insert(name, vm);
                }
            }
        }
        Ok(found)
    }

    pub async fn start_vm(&self, id: &str, options: StartOptions) -> Result<()> {
        let action = Action {
            use_cloud_init: options.use_cloud_init.then_some(true),
            use_ignition: options.use_ignition.then_some(true),
            ..Action::default()
        };
        self.vm_action(id, "start", &action).await
    }

    /// Power off (`force` also overrides a running backup).
    pub async fn stop_vm(&self, id: &str, force: bool) -> Result<()> {
        self.vm_action(
            id,
            "stop",
            &Action {
                force: force.then_some(true),
                ..Action::default()
            },
        )
        .await
    }

    /// ACPI shutdown through the guest.
    pub async fn shutdown_vm(&self, id: &str, force: bool) -> Result<()> {
        self.vm_action(
            id,
            "shutdown",
            &Action {
                force: force.then_some(true),
                ..Action::default()
            },
        )
        .await
    }

    async fn vm_action(&self, id: &str, verb: &str, action: &Action) -> Result<()> {
        self.perform(Call::new(Method::POST, "vms", &["vms", id, verb]).xml_body(action)?)
            .await
    }

    /// `DELETE /vms/{id}`; the VM disappears once its disks are removed.
    /// Rewrites a VM's description (`PUT /vms/{id}`), e.g. to upgrade CAPOV's ownership marker.
    pub async fn update_vm_description(&self, id: &str, description: &str) -> Result<Vm> {
        let body = Vm {
            description: Some(description.to_string()),
            ..Vm::default()
        };
        self.fetch(Call::new(Method::PUT, "vms", &["vms", id]).xml_body(&body)?)
            .await
    }

    pub async fn remove_vm(&self, id: &str) -> Result<()> {
        self.perform(Call::new(Method::DELETE, "vms", &["vms", id])).await
    }

    // ---- disk attachments and disks ----

    pub async fn disk_attachments(&self, vm_id: &str) -> Result<Vec<DiskAttachment>> {
        let call = Call::new(Method::GET, "diskattachments", &["vms", vm_id, "diskattachments"]);
        Ok(self.fetch::<DiskAttachments>(call).await?.items)
    }

    /// Attachments with their disks inlined (`?follow=disk`).
    pub async fn disk_attachments_with_disks(&self, vm_id: &str) -> Result<Vec<DiskAttachment>> {
        let call =
            Call::new(Method::GET, "diskattachments", &["vms", vm_id, "diskattachments"]).query("follow", "disk");
        Ok(self.fetch::<DiskAttachments>(call).await?.items)
    }

    pub async fn disk_attachment(&self, vm_id: &str, attachment_id: &str) -> Result<DiskAttachment> {
        self.fetch(Call::new(
            Method::GET,
            "diskattachments",
            &["vms", vm_id, "diskattachments", attachment_id],
        ))
        .await
    }

    /// Grows a disk through its attachment (works on every 4.x engine). The disk turns `locked`
    /// and then `ok`; shrinking is a [`crate::Error::BadRequest`].
    pub async fn resize_disk_attachment(
        &self,
        vm_id: &str,
        attachment_id: &str,
        size_bytes: u64,
    ) -> Result<DiskAttachment> {
        let body = DiskAttachment {
            disk: Some(Disk {
                provisioned_size: Some(size_bytes),
                ..Disk::default()
            }),
            ..DiskAttachment::default()
        };
        let call = Call::new(
            Method::PUT,
            "diskattachments",
            &["vms", vm_id, "diskattachments", attachment_id],
        )
        .xml_body(&body)?;
        self.fetch(call).await
    }

    /// Detaches a disk from a VM; the disk itself stays (the engine's `detach_only=true`).
    pub async fn detach_disk(&self, vm_id: &str, attachment_id: &str) -> Result<()> {
        let call = Call::new(
            Method::DELETE,
            "diskattachments",
            &["vms", vm_id, "diskattachments", attachment_id],
        )
        .query("detach_only", "true");
        self.perform(call).await
    }

    pub async fn disk(&self, id: &str) -> Result<Disk> {
        self.fetch(Call::new(Method::GET, "disks", &["disks", id])).await
    }

    pub async fn update_disk_alias(&self, id: &str, alias: &str) -> Result<Disk> {
        let body = Disk {
            alias: Some(alias.to_string()),
            ..Disk::default()
        };
        self.fetch(Call::new(Method::PUT, "disks", &["disks", id]).xml_body(&body)?)
            .await
    }

    /// Grows a disk through `PUT /disks/{id}` (engines ≥ 4.4).
    pub async fn resize_disk(&self, id: &str, size_bytes: u64) -> Result<Disk> {
        let body = Disk {
            provisioned_size: Some(size_bytes),
            ..Disk::default()
        };
        self.fetch(Call::new(Method::PUT, "disks", &["disks", id]).xml_body(&body)?)
            .await
    }

    // ---- NICs and reported devices ----

    pub async fn nics(&self, vm_id: &str) -> Result<Vec<Nic>> {
        Ok(self
            .fetch::<Nics>(Call::new(Method::GET, "nics", &["vms", vm_id, "nics"]))
            .await?
            .items)
    }

    /// Adds a NIC (`name` mandatory; `interface` defaults to virtio).
    pub async fn add_nic(&self, vm_id: &str, nic: &Nic) -> Result<Nic> {
        self.fetch(Call::new(Method::POST, "nics", &["vms", vm_id, "nics"]).xml_body(nic)?)
            .await
    }

    pub async fn update_nic(&self, vm_id: &str, nic_id: &str, nic: &Nic) -> Result<Nic> {
        self.fetch(Call::new(Method::PUT, "nics", &["vms", vm_id, "nics", nic_id]).xml_body(nic)?)
            .await
    }

    pub async fn remove_nic(&self, vm_id: &str, nic_id: &str) -> Result<()> {
        self.perform(Call::new(Method::DELETE, "nics", &["vms", vm_id, "nics", nic_id]))
            .await
    }

    // ---- data disks, disk profiles and tags ----

    /// Creates a new disk on the VM (`POST /vms/{id}/diskattachments` with a disk that has no id); the engine
    /// answers at once with the disk `locked` until its image exists.
    pub async fn add_vm_disk(&self, vm_id: &str, attachment: &DiskAttachment) -> Result<DiskAttachment> {
        let call = Call::new(Method::POST, "diskattachments", &["vms", vm_id, "diskattachments"]);
        self.fetch(call.xml_body(attachment)?).await
    }

    /// The disk profiles of a storage domain.
    pub async fn storage_domain_disk_profiles(&self, storage_domain_id: &str) -> Result<Vec<DiskProfile>> {
        let call = Call::new(
            Method::GET,
            "diskprofiles",
            &["storagedomains", storage_domain_id, "diskprofiles"],
        );
        Ok(self.fetch::<DiskProfiles>(call).await?.items)
    }

    /// The tags assigned to a VM.
    pub async fn vm_tags(&self, vm_id: &str) -> Result<Vec<Tag>> {
        let call = Call::new(Method::GET, "tags", &["vms", vm_id, "tags"]);
        Ok(self.fetch::<Tags>(call).await?.items)
    }

    /// Creates a tag (under the root tag); 409 "The specified Tag name already exists." when the name is taken.
    pub async fn add_tag(&self, name: &str, description: &str) -> Result<Tag> {
        let tag = Tag {
            name: Some(name.to_string()),
            description: Some(description.to_string()),
            ..Tag::default()
        };
        self.fetch(Call::new(Method::POST, "tags", &["tags"]).xml_body(&tag)?)
            .await
    }

    /// Assigns the tag of this name to the VM (the engine looks the name up; 404 when no tag has it).
    pub async fn assign_vm_tag(&self, vm_id: &str, name: &str) -> Result<Tag> {
        let tag = Tag {
            name: Some(name.to_string()),
            ..Tag::default()
        };
        self.fetch(Call::new(Method::POST, "tags", &["vms", vm_id, "tags"]).xml_body(&tag)?)
            .await
    }

    /// Devices the guest agent reports (network interfaces with their IPs); empty until it runs.
    pub async fn reported_devices(&self, vm_id: &str) -> Result<Vec<ReportedDevice>> {
        let call = Call::new(Method::GET, "reporteddevices", &["vms", vm_id, "reporteddevices"]);
        Ok(self.fetch::<ReportedDevices>(call).await?.items)
    }
}

/// The blank template as a reference (`template` of cloned VMs).
pub fn blank_template() -> Ref {
    Ref::id(BLANK_TEMPLATE_ID)
}
