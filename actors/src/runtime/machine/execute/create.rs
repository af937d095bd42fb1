//! Creating a machine's VM (SPEC §2 step 3) in the oVirt cluster, from the template and with the disk placement
//! the creation step resolved from its lookups (`observe::engine_lookups`): the request itself.

use capov_crds::Severity;
use capov_ovirt::model::{
    Cpu, CpuTopology, CustomProperties, CustomProperty, DiskAttachments, HighAvailability, HostRefs, Initialization,
    MemoryPolicy, PlacementPolicy, Ref, StorageDomainLease, Vm, VmType,
};
use capov_ovirt::{Client, DiskPlacement};

use crate::runtime::machine::outcome::Failure;
use crate::runtime::machine::state::MachineState;
use capov_core::conditions::reasons;
use capov_core::machine_steps::CreateVmPlan;
use capov_core::network::guest_network;
use capov_core::vm::bootstrap_payload::{self, BootstrapFormat};

const MIB: u64 = 1 << 20;

/// Creates the VM of `plan` in the engine objects its creation step resolved (`plan.targets`): shapes the bootstrap
/// data as the engine delivers it, then sends the create request. Returns the new VM's id, or the condition to
/// report.
pub async fn create_vm(
    state: &MachineState,
    client: &Client,
    plan: &CreateVmPlan,
    bootstrap_data: String,
) -> Result<String, Failure> {
    let custom_script = bootstrap_payload::for_engine(plan.bootstrap_format, &bootstrap_data, &plan.name)
        .map_err(|refusal| Failure::error(refusal.reason, refusal.message))?;
    drop(bootstrap_data);
    let custom_script = with_guest_network(plan, custom_script)?;
    let targets = &plan.targets;
    let mut vm = Vm {
        name: Some(plan.name.clone()),
        description: Some(plan.description.clone()),
        cluster: Some(Ref::id(targets.cluster_id.clone())),
        template: Some(Ref::id(targets.template_id.clone())),
        kind: Some(VmType::parse(plan.vm_type.as_ovirt())),
        initialization: Some(initialization(plan, custom_script)),
        ..Vm::default()
    };
    set_cpu_and_memory(&mut vm, plan)?;
    set_workload_tuning(&mut vm, plan);
    if !targets.disk_attachments.is_empty() {
        vm.disk_attachments = Some(disk_attachments(&targets.disk_attachments));
    }
    pin_to_hosts(state, &mut vm, plan)?;
    send(state, client, &vm, targets.clone).await
}

/// spec.numa (without host devices): the VM is pinned to the hosts of its oVirt cluster, which the engine wants before
/// it takes virtual NUMA nodes; it may still migrate among them.
fn pin_to_numa_hosts(vm: &mut Vm, plan: &CreateVmPlan) {
    if plan.targets.numa_hosts.is_empty() {
        return;
    }
    vm.placement_policy = Some(PlacementPolicy {
        affinity: None,
        hosts: Some(HostRefs {
            items: plan.targets.numa_hosts.iter().map(|id| Ref::id(id.clone())).collect(),
        }),
    });
}

/// The hosts the VM is pinned to. With spec.hostdevices, the host the step chose (the engine adds host devices only
/// to a VM pinned to their one host), never migrating (a passed-through device cannot move); the devices are claimed
/// first, so that another machine of this process does not pick them before this VM runs, and one that did in the
/// meantime makes this pass retry (the next reads them as held). Else spec.numa's hosts, if any.
fn pin_to_hosts(state: &MachineState, vm: &mut Vm, plan: &CreateVmPlan) -> Result<(), Failure> {
    let Some(host) = &plan.targets.device_host else {
        pin_to_numa_hosts(vm, plan);
        return Ok(());
    };
    let provider = state.object.spec.settings.provider.as_str();
    let claims = &state.shared.device_claims;
    if let Err(other) = claims.claim(&state.key, provider, &host.host_id, &host.devices) {
        tracing::info!(object = %state.key, host = %host.host_name, holder = %other, "host devices taken meanwhile");
        return Err(Failure::retry());
    }
    vm.placement_policy = Some(PlacementPolicy {
        affinity: Some("pinned".to_string()),
        hosts: Some(HostRefs {
            items: vec![Ref::id(host.host_id.clone())],
        }),
    });
    Ok(())
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

/// spec.instancetype and spec.highavailability (with the ids the step resolved), spec.cputuning, spec.hugepageskib
/// and spec.vgpu, when set (issue 38). The CPU mode joins the topology of `set_cpu_and_memory` in the request's `cpu` element.
fn set_workload_tuning(vm: &mut Vm, plan: &CreateVmPlan) {
    if let Some(ha) = &plan.high_availability {
        vm.high_availability = Some(HighAvailability {
            enabled: Some(ha.enabled),
            priority: ha.priority,
        });
    }
    if let Some(id) = &plan.targets.instance_type_id {
        vm.instance_type = Some(Ref::id(id.clone()));
    }
    if let Some(domain_id) = &plan.targets.lease_domain_id {
        vm.lease = Some(StorageDomainLease {
            storage_domain: Some(Ref::id(domain_id.clone())),
        });
    }
    if let Some(tuning) = &plan.cpu_tuning {
        if let Some(mode) = tuning.mode {
            vm.cpu.get_or_insert_with(Cpu::default).mode = Some(mode.as_ovirt().to_string());
        }
        vm.custom_cpu_model = tuning.custommodel.clone();
        vm.cpu_pinning_policy = tuning
            .pinningpolicy
            .map(|policy| capov_ovirt::model::CpuPinningPolicy::parse(policy.as_ovirt()));
    }
    let mut properties = Vec::new();
    if let Some(kib) = plan.hugepages_kib {
        properties.push(CustomProperty::new("hugepages", kib.to_string()));
    }
    // The `mdev_type` property asks for vGPUs on every engine release (`/vms/{id}/mediateddevices` only from 4.5).
    if let Some(vgpu) = &plan.vgpu {
        properties.push(CustomProperty::new("mdev_type", vgpu.mdev_type_property()));
    }
    if !properties.is_empty() {
        vm.custom_properties = Some(CustomProperties { items: properties });
    }
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
