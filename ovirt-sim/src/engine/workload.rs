//! What `POST /vms` and `PUT /vms/{id}` take beyond name, size and disks: high availability and the VM lease, CPU
//! mode and pinning, custom properties (hugepages, `mdev_type`), NUMA tune mode, dedicated hosts and the instance
//! type, with the engine's validation (`AddVmCommand.validate`, `VmManagementCommandBase.canAddLease`,
//! `CpuPinningValidator`, `VmPropertiesUtils`, `VmHandler.isVmPriorityValueLegal`) and texts (`AppErrors.properties`).

use capov_ovirt::model;

use super::*;
use crate::state::*;

/// `VmPriorityMaxValue` (`0000_config.sql`).
pub const PRIORITY_MAX: i32 = 100;

/// The instance type an add names. The REST layer looks it up by id only (`BackendVmsResource.lookupInstance` →
/// `GuidUtils.asGuid`): an id that is no UUID is a 400 (`MalformedIdExceptionMapper`), an unknown one a 404 before any
/// command runs, and a name without an id fails inside the engine (`new Guid(null)` throws a NullPointerException: an
/// internal error).
pub fn requested_instance_type(state: &State, request: &model::Vm) -> EngineResult<Option<InstanceTypeRecord>> {
    let Some(reference) = request
        .instance_type
        .as_ref()
        .filter(|r| r.id.is_some() || r.name.is_some())
    else {
        return Ok(None);
    };
    let Some(id) = reference.id.as_deref() else {
        return Err(EngineError::Fault {
            status: 500,
            reason: "Internal Server Error".into(),
            detail: "candidate can not be null please use static method createGuidFromString".into(),
        });
    };
    if !crate::ids::is_uuid(id) {
        return Err(EngineError::Fault {
            status: 400,
            reason: "Operation failed".into(),
            detail: format!("Invalid UUID string: {id}"),
        });
    }
    state
        .instance_types
        .get(id)
        .cloned()
        .map(Some)
        .ok_or(EngineError::NotFound)
}

/// The hosts `placement_policy/hosts` names, by id or name (`validateAndUpdateHostsInPlacementPolicy`; an unknown
/// host is a 404).
pub fn requested_hosts(state: &State, placement: Option<&model::PlacementPolicy>) -> EngineResult<Vec<String>> {
    let Some(hosts) = placement.and_then(|p| p.hosts.as_ref()) else {
        return Ok(Vec::new());
    };
    let mut ids = Vec::new();
    for reference in &hosts.items {
        let found = match (&reference.id, &reference.name) {
            (Some(id), _) => state.hosts.get(id),
            (None, Some(name)) => state.hosts.values().find(|h| &h.name == name),
            _ => None,
        };
        let host = found.ok_or(EngineError::NotFound)?;
        if !ids.contains(&host.id) {
            ids.push(host.id.clone());
        }
    }
    Ok(ids)
}

/// The workload a request asks for, on top of what the VM had (`base`: the template's defaults on add, the VM's
/// own on update). Nothing is validated here.
pub fn requested_workload(request: &model::Vm, base: &VmWorkload, version: EngineVersion) -> VmWorkload {
    let mut workload = base.clone();
    if let Some(ha) = &request.high_availability {
        if let Some(enabled) = ha.enabled {
            workload.high_availability.enabled = enabled;
        }
        if let Some(priority) = ha.priority {
            workload.high_availability.priority = priority;
        }
    }
    if let Some(lease) = &request.lease {
        // An empty `<lease/>` removes it.
        workload.lease_domain_id = lease.storage_domain.as_ref().and_then(|sd| sd.id.clone());
    }
    if let Some(cpu) = &request.cpu {
        if let Some(mode) = &cpu.mode {
            workload.cpu_mode = Some(mode.clone());
        }
        if let Some(tune) = &cpu.cpu_tune {
            workload.cpu_pinning = tune.to_pinning_string();
        }
    }
    if let Some(model) = &request.custom_cpu_model {
        workload.custom_cpu_model = Some(model.clone());
    }
    if let Some(properties) = &request.custom_properties {
        workload.custom_properties = properties
            .items
            .iter()
            .map(|p| (p.name.clone().unwrap_or_default(), p.value.clone().unwrap_or_default()))
            .collect();
    }
    if let Some(policy) = &request.auto_pinning_policy {
        workload.auto_pinning_policy = Some(policy.to_string());
    }
    if let Some(policy) = &request.cpu_pinning_policy {
        workload.cpu_pinning_policy = Some(policy.to_string());
    }
    if version >= EngineVersion::new(4, 5, 0)
        && let Some(policy) = &request.auto_pinning_policy
    {
        // 4.5 maps the deprecated element onto the pinning policy (`VmMapper`: adjust → resize_and_pin_numa).
        workload.cpu_pinning_policy = Some(
            match policy {
                model::AutoPinningPolicy::Adjust => "resize_and_pin_numa",
                _ => "none",
            }
            .to_string(),
        );
    }
    // `VmMapper`: the VM's mode goes to each of its virtual NUMA nodes (none at all on an add).
    if let Some(mode) = &request.numa_tune_mode {
        for node in &mut workload.numa_nodes {
            node.tune_mode = Some(mode.to_string());
        }
    }
    workload
}

/// `VmManagementCommandBase.updateParametersVmFromInstanceType`, the part beyond the sizes (the caller replaces
/// those): the instance type's high availability and priority and its migration support replace the request's.
pub fn apply_instance_type(
    instance_type: &InstanceTypeRecord,
    workload: &mut VmWorkload,
    affinity: &mut Option<String>,
) {
    workload.high_availability = instance_type.high_availability.clone();
    workload.instance_type_id = Some(instance_type.id.clone());
    *affinity = Some(instance_type.affinity.clone());
}

/// `VmHandler.isVmPriorityValueLegal`.
pub fn check_priority(priority: i32) -> EngineResult<()> {
    if !(0..=PRIORITY_MAX).contains(&priority) {
        return Err(operation_failed(
            400,
            &format!("VM priority value passed the permitted max value, value should be between 0 and {PRIORITY_MAX}."),
        ));
    }
    Ok(())
}

/// The predefined VM custom properties of cluster levels 4.4 to 4.6 (`PredefinedVMProperties`, `0000_config.sql`)
/// with their value rules.
fn property_value_valid(key: &str, value: &str) -> Option<bool> {
    let digits = |v: &str| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit());
    let word = |v: &str| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    Some(match key {
        "sap_agent" => matches!(value, "true" | "false"),
        "sndbuf" | "hugepages" => digits(value),
        "viodiskcache" => matches!(value, "none" | "writeback" | "writethrough"),
        "scsi_hostdev" => matches!(value, "scsi_generic" | "scsi_block" | "scsi_hd" | "virtio_blk_pci"),
        "nvram_template" => true,
        // `^[^,](,?[0-9A-Za-z_-]+)+$`: a list of names separated by single commas, not starting with one.
        "mdev_type" => !value.starts_with(',') && value.len() > 1 && value.split(',').all(word),
        "vhost" => value.split(',').all(|pair| {
            pair.split_once(':').is_some_and(|(name, on)| {
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                    && matches!(on, "true" | "false")
            })
        }),
        "extra_cpu_flags" => value
            .split(',')
            .all(|flag| word(flag.strip_prefix(['+', '-']).unwrap_or(flag))),
        _ => return None,
    })
}

/// `VmPropertiesUtils.validateVmProperties` with `CustomPropertiesUtils.handleCustomPropertiesError`: unknown keys,
/// then bad values, then keys given twice, each with the keys comma-separated.
pub fn check_custom_properties(action: &str, properties: &[(String, String)]) -> EngineResult<()> {
    let mut unknown = Vec::new();
    let mut invalid = Vec::new();
    let mut duplicate = Vec::new();
    for (index, (key, value)) in properties.iter().enumerate() {
        match property_value_valid(key, value) {
            None => unknown.push(key.as_str()),
            Some(false) => invalid.push(key.as_str()),
            Some(true) => {}
        }
        if properties[..index].iter().any(|(earlier, _)| earlier == key) {
            duplicate.push(key.as_str());
        }
    }
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "Cannot {action} VM if some of the specified custom properties are not configured by the system. The keys are: {}",
            unknown.join(",")
        ));
    }
    if !invalid.is_empty() {
        messages.push(format!(
            "Cannot {action} VM if some of the specified custom properties have illegal values. The keys are: {}",
            invalid.join(",")
        ));
    }
    if !duplicate.is_empty() {
        messages.push(format!(
            "Cannot {action} VM if some of the specified custom properties appear more than once. The keys are: {}",
            duplicate.join(",")
        ));
    }
    if messages.is_empty() {
        return Ok(());
    }
    Err(operation_failed(400, &messages.join(", ")))
}

/// One vCPU's rule: the vCPU and its CPU set's parts (excluded, from, to).
type PinRule = (u32, Vec<(bool, u32, u32)>);

/// `CpuPinningValidator.isCpuPinningValid`: the syntax (`\d+#(\^\d+|\d+-\d+|\d+)(,…)*` joined by `_`), a host
/// selected, every vCPU within the VM's, none twice, none pinned to nothing (`0#1,^1`).
pub fn check_cpu_pinning(pinning: &str, dedicated_hosts: &[String], vcpus: u32) -> EngineResult<()> {
    if pinning.is_empty() {
        return Ok(());
    }
    let parsed: Option<Vec<PinRule>> = pinning
        .split('_')
        .map(|rule| {
            let (vcpu, set) = rule.split_once('#')?;
            let vcpu = number(vcpu)?;
            let parts = set
                .split(',')
                .map(|part| {
                    if let Some(excluded) = part.strip_prefix('^') {
                        let cpu = number(excluded)?;
                        Some((true, cpu, cpu))
                    } else if let Some((from, to)) = part.split_once('-') {
                        Some((false, number(from)?, number(to)?))
                    } else {
                        let cpu = number(part)?;
                        Some((false, cpu, cpu))
                    }
                })
                .collect::<Option<Vec<_>>>()?;
            Some((vcpu, parts))
        })
        .collect();
    let Some(rules) = parsed else {
        return Err(operation_failed(400, "CPU pinning format invalid."));
    };
    if dedicated_hosts.is_empty() {
        return Err(operation_failed(
            400,
            "Cannot set host CPU pinning when a host is not selected",
        ));
    }
    let mut seen = Vec::new();
    for (vcpu, parts) in rules {
        if vcpu >= vcpus {
            return Err(operation_failed(
                400,
                "CPU pinning validation failed - virtual CPU does not exist in vm.",
            ));
        }
        if seen.contains(&vcpu) {
            return Err(operation_failed(
                400,
                "Cannot configure CPU pinning twice to the same vCPU.",
            ));
        }
        seen.push(vcpu);
        let mut cpus: Vec<u32> = parts
            .iter()
            .filter(|(excluded, _, _)| !excluded)
            .flat_map(|(_, from, to)| *from..=*to)
            .collect();
        cpus.retain(|cpu| !parts.iter().any(|(excluded, e, _)| *excluded && e == cpu));
        if cpus.is_empty() {
            return Err(operation_failed(400, "Cannot pin a vCPU to no pCPU."));
        }
    }
    Ok(())
}

fn number(text: &str) -> Option<u32> {
    (!text.is_empty() && text.chars().all(|c| c.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// `VmHandler.validateDedicatedVdsExistOnSameCluster`.
pub fn check_dedicated_hosts(state: &State, action: &str, hosts: &[String], cluster_id: &str) -> EngineResult<()> {
    if hosts
        .iter()
        .any(|h| state.hosts.get(h).is_none_or(|host| host.cluster_id != cluster_id))
    {
        return Err(operation_failed(
            409,
            &format!(
                "Cannot {action} VM. VM is pinned to a specific host. The host's cluster must be the same as the selected VM cluster."
            ),
        ));
    }
    Ok(())
}

/// `VmManagementCommandBase.canAddLease`: high availability on, then `VmCommand.validateLeaseStorageDomain`: a
/// domain of the VM's data center (else "doesn't exist"), active (`StorageDomainValidator.isDomainExistAndActive`,
/// the status by its Java name), a data domain (`isDataDomain`).
pub fn check_lease(state: &State, action: &str, workload: &VmWorkload, data_center_id: &str) -> EngineResult<()> {
    let Some(domain_id) = &workload.lease_domain_id else {
        return Ok(());
    };
    if !workload.high_availability.enabled {
        return Err(operation_failed(
            409,
            &format!("Cannot {action} VM. A VM lease was defined but high availability option is set to false."),
        ));
    }
    let Some(domain) = state
        .storage_domains
        .get(domain_id)
        .filter(|sd| sd.data_center_id.as_deref() == Some(data_center_id))
    else {
        return Err(operation_failed(
            400,
            &format!("Cannot {action} VM. Storage Domain doesn't exist."),
        ));
    };
    if domain.status != "active" {
        return Err(operation_failed(
            409,
            &format!(
                "Cannot {action} VM. The relevant Storage Domain's status is {}.",
                super::new_disks::status_name(&domain.status)
            ),
        ));
    }
    if domain.kind != "data" {
        return Err(operation_failed(
            400,
            &format!("Cannot {action} VM. Action is only applicable for Data domains."),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_pinning_follows_the_engines_validator() {
        let host = vec!["h".to_string()];
        assert_eq!(check_cpu_pinning("0#1_1#2-3,^3", &host, 2), Ok(()));
        assert_eq!(
            check_cpu_pinning("0:1", &host, 2),
            Err(operation_failed(400, "CPU pinning format invalid."))
        );
        assert_eq!(
            check_cpu_pinning("0#1", &[], 2),
            Err(operation_failed(
                400,
                "Cannot set host CPU pinning when a host is not selected"
            ))
        );
        assert_eq!(
            check_cpu_pinning("2#1", &host, 2),
            Err(operation_failed(
                400,
                "CPU pinning validation failed - virtual CPU does not exist in vm."
            ))
        );
        assert_eq!(
            check_cpu_pinning("0#1_0#2", &host, 2),
            Err(operation_failed(
                400,
                "Cannot configure CPU pinning twice to the same vCPU."
            ))
        );
        assert_eq!(
            check_cpu_pinning("0#1,^1", &host, 2),
            Err(operation_failed(400, "Cannot pin a vCPU to no pCPU."))
        );
    }

    #[test]
    fn custom_properties_are_the_predefined_ones_with_their_value_rules() {
        let props = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        assert_eq!(
            check_custom_properties(
                "add",
                &props(&[("hugepages", "1048576"), ("mdev_type", "nodisplay,nvidia-222")])
            ),
            Ok(())
        );
        assert_eq!(
            check_custom_properties("add", &props(&[("hugepages", "1G")])),
            Err(operation_failed(
                400,
                "Cannot add VM if some of the specified custom properties have illegal values. The keys are: hugepages"
            ))
        );
        assert_eq!(
            check_custom_properties("add", &props(&[("gpu", "yes"), ("colour", "red")])),
            Err(operation_failed(
                400,
                "Cannot add VM if some of the specified custom properties are not configured by the system. The keys are: gpu,colour"
            ))
        );
    }

    #[test]
    fn priorities_are_0_to_100() {
        assert_eq!(check_priority(100), Ok(()));
        assert!(check_priority(101).is_err());
        assert!(check_priority(-1).is_err());
    }
}
