//! Reading the engine lookups the creation step and the data disk step ask for ([`EngineLookup`]): the oVirt cluster,
//! the newest template version in its data center, the template's disks and the chosen storage domain, the free
//! space of the domains a clone goes to, and a data disk's storage domain and disk profiles. What is the same for
//! every machine of a provider goes through the provider's short-lived lookups (`runtime::provider::lookups`), so
//! that machines created together cost a few requests instead of a few each. The verdicts on the answers are the
//! steps' own (`capov_core::machine_steps`).

use capov_ovirt::Client;
use capov_ovirt::model::Template;

use crate::runtime::machine::outcome::Failure;
use crate::runtime::machine::state::MachineState;
use crate::runtime::provider::inventory::domain_fact;
use crate::runtime::provider::lookups::key;
use capov_core::machine_steps::{
    DataDiskTarget, EngineLookup, Fact, Lookup, LookupFailure, Observed, OvirtClusterFact, PlacementFacts, TemplateFact,
};
use capov_core::placement::capacity::{DiskSize, DomainFact};
use capov_core::placement::{StorageDomainFact, TemplateDisk};

/// The engine is busy with the object (409 "locked") or writes are stopped: nothing to report, the pass backs off.
pub struct RetryLater;

/// Reads `lookup` into `observed`. An engine error is the fact read (the step reports it), unless it only asks to
/// retry.
pub async fn look_up(
    state: &MachineState,
    client: &Client,
    observed: &mut Observed,
    lookup: EngineLookup,
) -> Result<(), RetryLater> {
    let provider = state.object.spec.settings.provider.as_str();
    let creation = &mut observed.creation;
    match lookup {
        EngineLookup::OvirtCluster { name } => {
            creation.cluster = answer(ovirt_cluster(state, client, provider, &name).await)?;
        }
        EngineLookup::InstanceType { name } => {
            creation.instance_type = answer(instance_type(state, client, provider, &name).await)?;
        }
        EngineLookup::Template { name, data_center_id } => {
            let versions = template_versions(state, client, provider, &name, &data_center_id).await;
            creation.template = answer(versions.map(|found| found.into_iter().map(template_fact).collect()))?;
        }
        EngineLookup::Placement {
            template_id,
            data_center_id,
            storage_domain_name,
            lease_storage_domain_name,
        } => {
            let names = DomainNames {
                disks: storage_domain_name,
                lease: lease_storage_domain_name,
            };
            let facts = placement(state, client, provider, &template_id, &data_center_id, names).await;
            creation.placement = answer(facts)?;
        }
        EngineLookup::CloneDomains { domain_ids } => {
            creation.clone_domains = answer(clone_domains(state, client, provider, &domain_ids).await)?;
        }
        EngineLookup::DeviceHosts { cluster_id, names } => {
            let hosts = super::host_devices::device_hosts(state, client, provider, &cluster_id, &names).await;
            creation.device_hosts = answer(hosts)?;
        }
        EngineLookup::VmHostDevices { vm_id } => {
            observed.vm_host_devices = answer(super::host_devices::attached(client, &vm_id).await)?;
        }
        EngineLookup::VmNumaNodes { vm_id } => {
            observed.vm_numa_nodes = answer(super::host_devices::numa_nodes(client, &vm_id).await)?;
        }
        EngineLookup::DataDiskTarget {
            storage_domain_name,
            disk_profile_name,
        } => {
            observed.data_disk_target = answer(data_disk_target(client, storage_domain_name, disk_profile_name).await)?;
        }
    }
    Ok(())
}

/// The answer as a fact: what was found, or the condition an engine error reports.
fn answer<T>(result: capov_ovirt::Result<T>) -> Result<Fact<Lookup<T>>, RetryLater> {
    match result {
        Ok(found) => Ok(Fact::Read(Ok(found))),
        Err(err) => {
            let failure = Failure::engine(&err);
            if failure.is_retry_only() {
                return Err(RetryLater);
            }
            Ok(Fact::Read(Err(LookupFailure {
                reason: failure.reason,
                severity: failure.severity,
                message: failure.message,
            })))
        }
    }
}

async fn ovirt_cluster(
    state: &MachineState,
    client: &Client,
    provider: &str,
    name: &str,
) -> capov_ovirt::Result<Option<OvirtClusterFact>> {
    let found = state
        .shared
        .lookups
        .get(key(provider, &format!("cluster/{name}")), || {
            client.find_cluster_by_name(name)
        })
        .await?;
    Ok(found.map(|cluster| OvirtClusterFact {
        id: cluster.id.unwrap_or_default(),
        data_center_id: cluster.data_center.and_then(|dc| dc.id).unwrap_or_default(),
    }))
}

async fn instance_type(
    state: &MachineState,
    client: &Client,
    provider: &str,
    name: &str,
) -> capov_ovirt::Result<Option<String>> {
    let found = state
        .shared
        .lookups
        .get(key(provider, &format!("instance-type/{name}")), || {
            client.find_instance_type_by_name(name)
        })
        .await?;
    Ok(found.and_then(|instance_type| instance_type.id))
}

fn template_fact(template: Template) -> TemplateFact {
    let version = template.version.as_ref();
    TemplateFact {
        id: template.id.clone().unwrap_or_default(),
        version_number: version.and_then(|v| v.version_number).unwrap_or(1),
        version_name: version
            .and_then(|v| v.version_name.clone())
            .filter(|name| !name.is_empty()),
        locked: template
            .status
            .as_ref()
            .is_some_and(|status| status.as_str() == "locked"),
        os_type: template.os.and_then(|os| os.kind),
    }
}

/// The versions of the named template among the templates of the data center's clusters.
async fn template_versions(
    state: &MachineState,
    client: &Client,
    provider: &str,
    name: &str,
    data_center_id: &str,
) -> capov_ovirt::Result<Vec<Template>> {
    let lookups = &state.shared.lookups;
    let templates = lookups
        .get(key(provider, &format!("templates/{name}")), || {
            client.find_templates_by_name(name, None)
        })
        .await?;
    let clusters = lookups.get(key(provider, "clusters"), || client.clusters()).await?;
    let in_data_center = |template: &Template| {
        let Some(cluster_id) = template.cluster.as_ref().and_then(|c| c.id.as_deref()) else {
            return true;
        };
        clusters.iter().any(|c| {
            c.id.as_deref() == Some(cluster_id)
                && c.data_center.as_ref().and_then(|dc| dc.id.as_deref()) == Some(data_center_id)
        })
    };
    Ok(templates.into_iter().filter(in_data_center).collect())
}

/// The storage domains a placement names: the disks' and the lease's.
struct DomainNames {
    disks: Option<String>,
    lease: Option<String>,
}

/// The template's disks with their sizes (from the lookups) and the named storage domains, read afresh (their
/// status matters).
async fn placement(
    state: &MachineState,
    client: &Client,
    provider: &str,
    template_id: &str,
    data_center_id: &str,
    names: DomainNames,
) -> capov_ovirt::Result<PlacementFacts> {
    let template_disks = state
        .shared
        .lookups
        .get(key(provider, &format!("template-disks/{template_id}")), || {
            template_disks(client, template_id)
        })
        .await?;
    let disks_domain = match &names.disks {
        Some(name) => storage_domain(client, name, data_center_id).await?,
        None => None,
    };
    let lease_domain = match &names.lease {
        Some(name) if names.disks.as_ref() == Some(name) => disks_domain.clone(),
        Some(name) => storage_domain(client, name, data_center_id).await?,
        None => None,
    };
    Ok(PlacementFacts {
        storage_domain: disks_domain,
        lease_domain,
        template_disks,
    })
}

/// The storage domain of this name and its status in the data center; None when the engine has none of the name.
async fn storage_domain(
    client: &Client,
    name: &str,
    data_center_id: &str,
) -> capov_ovirt::Result<Option<StorageDomainFact>> {
    let Some(domain) = client.find_storage_domains_by_name(name).await?.into_iter().next() else {
        return Ok(None);
    };
    let id = domain.id.clone().unwrap_or_default();
    // The list of the data center's domains is a user query; `GET /datacenters/{dc}/storagedomains/{id}` is an
    // admin-only one that fails for an engine user without an administrative role
    // (docs/engine-permissions.md).
    let attached = client
        .data_center_storage_domains(data_center_id)
        .await?
        .into_iter()
        .find(|sd| sd.id.as_deref() == Some(id.as_str()));
    let (in_data_center, status) = match attached {
        Some(attached) => (
            true,
            attached.status.map(|s| s.as_str().to_string()).unwrap_or_default(),
        ),
        None => (false, String::new()),
    };
    Ok(Some(StorageDomainFact {
        id,
        name: domain.name.unwrap_or_default(),
        kind: domain.kind.unwrap_or_default(),
        status,
        in_data_center,
    }))
}

async fn template_disks(client: &Client, template_id: &str) -> capov_ovirt::Result<Vec<(TemplateDisk, DiskSize)>> {
    let mut disks = Vec::new();
    for attachment in client.template_disk_attachments(template_id).await? {
        let Some(disk_id) = attachment.disk.as_ref().and_then(|d| d.id.clone()) else {
            continue;
        };
        let disk = client.disk(&disk_id).await?;
        let provisioned = disk.provisioned_size.unwrap_or(0);
        let size = DiskSize {
            provisioned,
            actual: disk.actual_size.unwrap_or(provisioned),
            cow: disk.format.as_deref() == Some("cow"),
            sparse: disk.sparse.unwrap_or(true),
        };
        let template_disk = TemplateDisk {
            id: disk_id,
            alias: disk.alias.unwrap_or_default(),
            storage_domain_ids: disk
                .storage_domains
                .map(|refs| refs.items.into_iter().filter_map(|r| r.id).collect())
                .unwrap_or_default(),
        };
        disks.push((template_disk, size));
    }
    Ok(disks)
}

/// The domains a clone goes to, as the provider's last inventory poll saw them (with the engine's own sizing); a
/// domain the inventory does not show (before the provider's first poll) is read on its own.
async fn clone_domains(
    state: &MachineState,
    client: &Client,
    provider: &str,
    domain_ids: &[String],
) -> capov_ovirt::Result<Vec<DomainFact>> {
    let inventory = state.shared.placements.inventory(provider);
    let mut domains = Vec::with_capacity(domain_ids.len());
    for id in domain_ids {
        let known = inventory.as_ref().and_then(|inventory| inventory.domain(id)).cloned();
        let domain = match known {
            Some(domain) => Some(domain),
            None => domain_fact(client.storage_domain(id).await?),
        };
        domains.extend(domain);
    }
    Ok(domains)
}

/// A data disk's storage domain by name and, when a profile is named, the domain's disk profiles.
async fn data_disk_target(
    client: &Client,
    storage_domain_name: String,
    disk_profile_name: Option<String>,
) -> capov_ovirt::Result<DataDiskTarget> {
    let storage_domain_id = client
        .find_storage_domains_by_name(&storage_domain_name)
        .await?
        .into_iter()
        .find_map(|domain| domain.id);
    let disk_profiles = match (&storage_domain_id, &disk_profile_name) {
        (Some(domain_id), Some(_)) => client
            .storage_domain_disk_profiles(domain_id)
            .await?
            .into_iter()
            .filter_map(|profile| Some((profile.name?, profile.id?)))
            .collect(),
        _ => Vec::new(),
    };
    Ok(DataDiskTarget {
        storage_domain_name,
        disk_profile_name,
        storage_domain_id,
        disk_profiles,
    })
}
