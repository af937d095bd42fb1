//! Creating a machine's VM (SPEC §2 step 3): resolve the oVirt cluster, the template (newest version in the
//! cluster's data center) and the disk placement, then send the create request.

use capov_crds::Severity;
use capov_ovirt::model::{
    Cluster, Cpu, CpuTopology, DiskAttachments, Initialization, MemoryPolicy, Ref, Template, Vm, VmType,
};
use capov_ovirt::{Client, DiskPlacement};

use crate::runtime::machine::outcome::Failure;
use crate::runtime::machine::state::MachineState;
use crate::runtime::provider::lookups::key;
use capov_core::conditions::reasons;
use capov_core::machine_steps::CreateVmPlan;
use capov_core::network::guest_network;
use capov_core::placement::capacity::{DiskSize, check_clone};
use capov_core::placement::failure_domains::cluster_not_found_message;
use capov_core::placement::{StorageDomainFact, TemplateDisk, plan_placement};
use capov_core::vm::bootstrap_payload::{self, BootstrapFormat};

const MIB: u64 = 1 << 20;

/// Creates the VM of `plan`: resolves the oVirt cluster, the newest template version in its data center and the
/// disk placement, then sends the create request. Returns the new VM's id, or the condition to report.
pub async fn create_vm(
    state: &MachineState,
    client: &Client,
    plan: &CreateVmPlan,
    bootstrap_data: String,
) -> Result<String, Failure> {
    let cluster = ovirt_cluster(state, client, plan).await?;
    let cluster_id = cluster.id.clone().unwrap_or_default();
    let data_center_id = cluster
        .data_center
        .as_ref()
        .and_then(|dc| dc.id.clone())
        .unwrap_or_default();
    let template = usable_template(state, client, plan, &data_center_id).await?;
    // The engine delivers bootstrap data only to a VM whose OS type takes its format, and rewrites it on the way:
    // refuse a mismatch and send the form the rewrite leaves intact (capov_core::vm::bootstrap_payload).
    let os_type = template.os.as_ref().and_then(|os| os.kind.as_deref());
    bootstrap_payload::check_format_fits(plan.bootstrap_format, &plan.template, os_type)
        .map_err(|refusal| Failure::error(refusal.reason, refusal.message))?;
    let custom_script = bootstrap_payload::for_engine(plan.bootstrap_format, &bootstrap_data, &plan.name)
        .map_err(|refusal| Failure::error(refusal.reason, refusal.message))?;
    drop(bootstrap_data);
    let custom_script = with_guest_network(plan, custom_script)?;
    let template_id = template.id.clone().unwrap_or_default();
    let domain_name = plan.placement.storage_domain_name.as_deref();
    let (domain, sized_disks) = placement_facts(state, client, &template_id, &data_center_id, domain_name).await?;
    let template_disks: Vec<TemplateDisk> = sized_disks.iter().map(|(disk, _)| disk.clone()).collect();
    let placement = plan_placement(&plan.placement, domain.as_ref(), &template_disks)
        .map_err(|problem| Failure::error(problem.reason(), problem.message()))?;
    if placement.clone {
        clone_fits(state, client, plan, placement.target_domain.as_ref(), &sized_disks).await?;
    }
    let mut vm = Vm {
        name: Some(plan.name.clone()),
        description: Some(plan.description.clone()),
        cluster: Some(Ref::id(cluster_id)),
        template: Some(Ref::id(template_id)),
        kind: Some(VmType::parse(plan.vm_type.as_ovirt())),
        initialization: Some(initialization(plan, custom_script)),
        ..Vm::default()
    };
    set_cpu_and_memory(&mut vm, plan)?;
    if !placement.disk_attachments.is_empty() {
        vm.disk_attachments = Some(disk_attachments(&placement.disk_attachments));
    }
    send(state, client, &vm, placement.clone).await
}

/// The VM's initialization: bootstrap data, host name, and static addresses and DNS (issue 25), which the engine
/// hands to cloud-init as network data.
fn initialization(plan: &CreateVmPlan, custom_script: String) -> Initialization {
    let mut initialization = Initialization {
        custom_script: Some(custom_script),
        host_name: Some(plan.name.clone()),
        ..Initialization::default()
    };
    guest_network::set_initialization(&mut initialization, &plan.network);
    initialization
}

/// Ignition does not read the engine's network data: the static addresses go into the Ignition config as files
/// (capov_core::network::guest_network). Cloud-config data is sent as it is.
fn with_guest_network(plan: &CreateVmPlan, custom_script: String) -> Result<String, Failure> {
    if plan.bootstrap_format != BootstrapFormat::Ignition || plan.network.is_empty() {
        return Ok(custom_script);
    }
    guest_network::add_to_ignition(&custom_script, &plan.network).map_err(|why| {
        Failure::error(
            reasons::UNSUPPORTED_BOOTSTRAP_FORMAT,
            format!("the static addresses cannot be added to the Ignition config: {why}"),
        )
    })
}

/// Issue #27's preflight: a clone whose disks do not fit the storage domain they go to (per the provider's last
/// inventory poll, with the engine's own sizing) is refused before the engine is asked. A domain the inventory does
/// not show (before the provider's first poll) is read on its own.
async fn clone_fits(
    state: &MachineState,
    client: &Client,
    plan: &CreateVmPlan,
    target: Option<&capov_core::placement::TargetDomain>,
    disks: &[(TemplateDisk, DiskSize)],
) -> Result<(), Failure> {
    let inventory = state.shared.placements.inventory(&state.object.spec.settings.provider);
    let mut by_domain: std::collections::BTreeMap<String, Vec<DiskSize>> = Default::default();
    for (disk, size) in disks {
        let domain = target
            .map(|t| t.id.clone())
            .or_else(|| disk.storage_domain_ids.first().cloned());
        if let Some(domain) = domain {
            by_domain.entry(domain).or_default().push(size.clone());
        }
    }
    for (domain_id, sizes) in by_domain {
        let domain = match inventory.as_ref().and_then(|i| i.domain(&domain_id)) {
            Some(domain) => domain.clone(),
            None => match crate::runtime::provider::inventory::domain_fact(client.storage_domain(&domain_id).await?) {
                Some(domain) => domain,
                None => continue,
            },
        };
        if let Err(shortfall) = check_clone(&domain, &sizes) {
            return Err(Failure {
                reason: reasons::INSUFFICIENT_STORAGE,
                severity: Severity::Warning,
                message: shortfall.message(&plan.template),
            });
        }
    }
    Ok(())
}

/// The oVirt cluster the machine's failure domain, else `spec.ovirtcluster`, names.
async fn ovirt_cluster(state: &MachineState, client: &Client, plan: &CreateVmPlan) -> Result<Cluster, Failure> {
    let provider = state.object.spec.settings.provider.as_str();
    let cluster_key = key(provider, &format!("cluster/{}", plan.ovirt_cluster));
    let found = state
        .shared
        .lookups
        .get(cluster_key, || client.find_cluster_by_name(&plan.ovirt_cluster))
        .await?;
    found.ok_or_else(|| {
        let message = cluster_not_found_message(&plan.ovirt_cluster, plan.ovirt_cluster_domain.as_deref());
        Failure::error(reasons::CLUSTER_NOT_FOUND, message)
    })
}

/// The newest version of `spec.template` in the data center, unless it is locked.
async fn usable_template(
    state: &MachineState,
    client: &Client,
    plan: &CreateVmPlan,
    data_center_id: &str,
) -> Result<Template, Failure> {
    let Some(template) = newest_template(state, client, &plan.template, data_center_id).await? else {
        let message = format!(
            "template {:?} not found in the data center of oVirt cluster {:?}: fix spec.template",
            plan.template, plan.ovirt_cluster
        );
        return Err(Failure::error(reasons::TEMPLATE_NOT_FOUND, message));
    };
    if template.status.as_ref().is_some_and(|s| s.as_str() == "locked") {
        let message = format!("template {:?} is locked in oVirt", plan.template);
        return Err(Failure {
            reason: reasons::TEMPLATE_NOT_READY,
            severity: Severity::Info,
            message,
        });
    }
    Ok(template)
}

/// The CPU topology and memory of `spec.cpu` and `spec.memory`, when set.
fn set_cpu_and_memory(vm: &mut Vm, plan: &CreateVmPlan) -> Result<(), Failure> {
    if let Some(cpu) = &plan.cpu {
        let positive = |value: Option<i32>| value.and_then(|v| u32::try_from(v).ok());
        vm.cpu = Some(Cpu {
            topology: Some(CpuTopology {
                sockets: positive(cpu.sockets),
                cores: positive(cpu.cores),
                threads: positive(cpu.threads),
            }),
            ..Cpu::default()
        });
    }
    if let Some(memory) = &plan.memory {
        let bytes = |field: &str, mib: Option<i64>| match mib {
            None => Ok(None),
            Some(mib) => mib_to_bytes(mib).map(Some).ok_or_else(|| {
                Failure::error(
                    reasons::CREATE_FAILED,
                    format!("spec.memory.{field} {mib} is not a memory size in MiB the engine accepts"),
                )
            }),
        };
        vm.memory = bytes("sizemb", memory.sizemb)?;
        if let Some(guaranteed) = bytes("guaranteedmb", memory.guaranteedmb)? {
            vm.memory_policy = Some(MemoryPolicy {
                guaranteed: Some(guaranteed),
                ..MemoryPolicy::default()
            });
        }
    }
    Ok(())
}

/// Where each template disk goes, as the create request's disk attachments.
fn disk_attachments(placed: &[capov_core::placement::DiskPlacement]) -> DiskAttachments {
    let items = placed
        .iter()
        .map(|disk| {
            DiskPlacement {
                template_disk_id: disk.template_disk_id.clone(),
                storage_domain_id: Some(disk.storage_domain_id.clone()),
                format: disk.format_cow.then(|| "cow".to_string()),
                ..DiskPlacement::default()
            }
            .to_attachment()
        })
        .collect();
    DiskAttachments { items }
}

/// Sends the create request (as a clone of the template when `clone`).
async fn send(state: &MachineState, client: &Client, vm: &Vm, clone: bool) -> Result<String, Failure> {
    match client.add_vm(vm, clone).await {
        Ok(created) => match created.id.filter(|id| !id.is_empty()) {
            Some(id) => {
                tracing::info!(object = %state.key, vm = %id, clone, "VM created");
                Ok(id)
            }
            // The VM may exist: the next pass finds it by name and marker instead of recording `ovirt://`.
            None => Err(Failure::error(
                reasons::CREATE_FAILED,
                "the engine accepted the VM but its answer carried no VM id; looking it up by name next",
            )),
        },
        // The name search found no VM of this name, yet the engine has one in the cluster's data center: one this
        // engine user may not see. Retrying quietly would repeat this for ever with nothing on the machine.
        Err(err) if err.is_name_in_use() => Err(Failure::error(
            reasons::VM_NAME_CONFLICT,
            name_in_use_message(vm.name.as_deref().unwrap_or_default()),
        )),
        Err(err) if err.is_low_disk_space() => Err(Failure {
            reason: reasons::LOW_DISK_SPACE,
            severity: Severity::Warning,
            message: capov_core::placement::engine_refusals::low_disk_space_message(err.detail().unwrap_or_default()),
        }),
        Err(err) => Err(Failure::engine(&err)),
    }
}

/// MachineCreated's message when the engine refuses the create because the name is taken by a VM the name search
/// did not show.
fn name_in_use_message(name: &str) -> String {
    format!(
        "oVirt refused to create the VM: the name {name:?} is already in use in the cluster's data center by a VM \
         that CAPOV's engine user cannot see; that VM is left untouched. Rename or remove it in oVirt, or give the \
         engine user a role on it if it is this machine's own; retrying with backoff"
    )
}

/// MiB to bytes; None for a negative size or one that does not fit in 64 bits.
fn mib_to_bytes(mib: i64) -> Option<u64> {
    u64::try_from(mib).ok()?.checked_mul(MIB)
}

/// The newest version of the named template among the templates of the data center's clusters.
async fn newest_template(
    state: &MachineState,
    client: &Client,
    name: &str,
    data_center_id: &str,
) -> capov_ovirt::Result<Option<Template>> {
    let (lookups, provider) = (&state.shared.lookups, state.object.spec.settings.provider.as_str());
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
    Ok(templates
        .into_iter()
        .filter(in_data_center)
        .max_by_key(|t| t.version.as_ref().and_then(|v| v.version_number).unwrap_or(0)))
}

/// What the placement needs to know from the engine: the chosen storage domain (if any) and the template disks with
/// their sizes. The chosen storage domain is read afresh (its status matters); the template's disks come from the
/// lookups.
async fn placement_facts(
    state: &MachineState,
    client: &Client,
    template_id: &str,
    data_center_id: &str,
    domain_name: Option<&str>,
) -> capov_ovirt::Result<(Option<StorageDomainFact>, Vec<(TemplateDisk, DiskSize)>)> {
    let provider = state.object.spec.settings.provider.as_str();
    let disks = state
        .shared
        .lookups
        .get(key(provider, &format!("template-disks/{template_id}")), || {
            template_disks(client, template_id)
        })
        .await?;
    let Some(name) = domain_name else {
        return Ok((None, disks));
    };
    let Some(domain) = client.find_storage_domains_by_name(name).await?.into_iter().next() else {
        return Ok((None, disks));
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
    let fact = StorageDomainFact {
        id,
        name: domain.name.unwrap_or_default(),
        kind: domain.kind.unwrap_or_default(),
        status,
        in_data_center,
    };
    Ok((Some(fact), disks))
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

#[cfg(test)]
mod tests {
    use super::mib_to_bytes;

    #[test]
    fn memory_sizes_convert_without_overflow() {
        assert_eq!(mib_to_bytes(1), Some(1 << 20));
        assert_eq!(mib_to_bytes(6_291_456), Some(6 << 40));
        assert_eq!(mib_to_bytes(-1), None);
        assert_eq!(mib_to_bytes(i64::MAX), None);
    }
}
