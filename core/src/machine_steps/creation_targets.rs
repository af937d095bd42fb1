//! The end of step 3 for a VM that is to be created: the engine objects it is created with. The step asks for the
//! oVirt cluster, then the newest template version in the cluster's data center, then where the template's disks
//! are and the chosen storage domain, then (for a clone) the free space of the domains the copies go to
//! ([`EngineLookup`]); each answer is judged here before the next is asked for. A refusal reports MachineCreated
//! and retries with backoff, since the engine may change (a template imported, a domain activated).

use capov_crds::{Severity, TemplateVersion};

use super::action::{Action, CreateTargets, CreateVmPlan, Requeue, VmAction};
use super::decision::Decision;
use super::engine_lookups::{EngineLookup, Lookup, LookupFailure, TemplateFact};
use super::fact::Fact;
use super::observed::{Observed, ReadRequest};
use super::passed::Passed;
use crate::conditions::{ConditionUpdate, reasons, types};
use crate::placement::capacity::{DiskSize, check_clone};
use crate::placement::failure_domains::cluster_not_found_message;
use crate::placement::host_devices::{self, DeviceHost};
use crate::placement::{StorageDomainFact, TargetDomain, TemplateDisk, plan_placement};
use crate::vm::bootstrap_payload;

/// What the creation step does next instead of creating: read a lookup, or report why no VM can be created.
enum NotYet {
    Read(EngineLookup),
    Refused(LookupFailure),
}

/// The create action for `plan` once every lookup it needs is read and passes; else the read it needs or the
/// refusal to report.
pub(super) fn create_or_look_up(o: &Observed, mut plan: CreateVmPlan, passed: &mut Passed) -> Decision {
    match targets(o, &plan) {
        Ok(targets) => {
            plan.targets = targets;
            passed.take().stop(Action::Vm(VmAction::Create(Box::new(plan))), None)
        }
        Err(NotYet::Read(lookup)) => passed.take().stop(Action::Read(ReadRequest::Lookup(lookup)), None),
        Err(NotYet::Refused(refusal)) => passed.take().wait(
            Requeue::Backoff,
            ConditionUpdate::false_(
                types::MACHINE_CREATED,
                refusal.reason,
                refusal.severity,
                refusal.message,
            ),
        ),
    }
}

fn targets(o: &Observed, plan: &CreateVmPlan) -> Result<CreateTargets, NotYet> {
    if let Some(message) = needs_newer_engine(plan, &o.provider_defaults.engine_version) {
        return Err(refused(reasons::NOT_SUPPORTED_BY_ENGINE, Severity::Error, message));
    }
    let facts = &o.creation;
    let cluster = looked_up(&facts.cluster, || EngineLookup::OvirtCluster {
        name: plan.ovirt_cluster.clone(),
    })?
    .as_ref()
    .ok_or_else(|| {
        let message = cluster_not_found_message(&plan.ovirt_cluster, plan.ovirt_cluster_domain.as_deref());
        refused(reasons::CLUSTER_NOT_FOUND, Severity::Error, message)
    })?;
    let instance_type_id = instance_type(o, plan)?;
    let device_host = device_host(o, plan, &cluster.id)?;
    let numa_hosts = numa_hosts(o, plan, &cluster.id, device_host.is_some())?;
    let versions = looked_up(&facts.template, || EngineLookup::Template {
        name: plan.template.clone(),
        data_center_id: cluster.data_center_id.clone(),
    })?;
    let template = usable_template(plan, versions)?;
    // The engine delivers bootstrap data only to a VM whose OS type takes its format (crate::vm::bootstrap_payload).
    bootstrap_payload::check_format_fits(plan.bootstrap_format, &plan.template, template.os_type.as_deref())
        .map_err(|refusal| refused(refusal.reason, Severity::Error, refusal.message))?;
    let placement_facts = looked_up(&facts.placement, || EngineLookup::Placement {
        template_id: template.id.clone(),
        data_center_id: cluster.data_center_id.clone(),
        storage_domain_name: plan.placement.storage_domain_name.clone(),
        lease_storage_domain_name: lease_domain_name(plan).map(String::from),
    })?;
    let template_disks: Vec<TemplateDisk> = placement_facts
        .template_disks
        .iter()
        .map(|(disk, _)| disk.clone())
        .collect();
    let placement = plan_placement(
        &plan.placement,
        placement_facts.storage_domain.as_ref(),
        &template_disks,
    )
    .map_err(|problem| refused(problem.reason(), Severity::Error, placement_message(plan, &problem)))?;
    let lease_domain_id = lease_domain(plan, placement_facts.lease_domain.as_ref())?;
    if placement.clone {
        clone_fits(
            o,
            plan,
            placement.target_domain.as_ref(),
            &placement_facts.template_disks,
        )?;
    }
    Ok(CreateTargets {
        cluster_id: cluster.id.clone(),
        template_id: template.id.clone(),
        clone: placement.clone,
        disk_attachments: placement.disk_attachments,
        lease_domain_id,
        instance_type_id,
        device_host,
        numa_hosts,
    })
}

/// The hosts a VM with spec.numa is pinned to (the engine adds virtual NUMA nodes only to a VM pinned to hosts): the
/// oVirt cluster's, unless the VM is pinned to its devices' host already.
fn numa_hosts(
    o: &Observed,
    plan: &CreateVmPlan,
    cluster_id: &str,
    on_device_host: bool,
) -> Result<Vec<String>, NotYet> {
    if plan.numa.is_none() || on_device_host {
        return Ok(Vec::new());
    }
    let hosts = looked_up(&o.creation.device_hosts, || EngineLookup::DeviceHosts {
        cluster_id: cluster_id.to_string(),
        names: plan.host_devices.clone(),
    })?;
    if hosts.is_empty() {
        let message = format!(
            "oVirt cluster {:?} has no host to pin the VM to, which its virtual NUMA nodes (spec.numa) need: add a \
             host, or drop spec.numa",
            plan.ovirt_cluster
        );
        return Err(refused(reasons::NO_HOST_TO_PIN, Severity::Warning, message));
    }
    Ok(hosts.iter().map(|host| host.host_id.clone()).collect())
}

/// The host that has every device of spec.hostdevices free, when some are asked for.
fn device_host(o: &Observed, plan: &CreateVmPlan, cluster_id: &str) -> Result<Option<DeviceHost>, NotYet> {
    if plan.host_devices.is_empty() {
        return Ok(None);
    }
    let hosts = looked_up(&o.creation.device_hosts, || EngineLookup::DeviceHosts {
        cluster_id: cluster_id.to_string(),
        names: plan.host_devices.clone(),
    })?;
    host_devices::choose(&plan.host_devices, hosts, &plan.ovirt_cluster)
        .map(Some)
        .map_err(|refusal| refused(refusal.reason, refusal.severity, refusal.message))
}

/// The id of the instance type spec.instancetype names, when it names one.
fn instance_type(o: &Observed, plan: &CreateVmPlan) -> Result<Option<String>, NotYet> {
    let Some(name) = &plan.instance_type else {
        return Ok(None);
    };
    let found = looked_up(&o.creation.instance_type, || EngineLookup::InstanceType {
        name: name.clone(),
    })?;
    match found {
        Some(id) => Ok(Some(id.clone())),
        None => Err(refused(
            reasons::INSTANCE_TYPE_NOT_FOUND,
            Severity::Error,
            format!("instance type {name:?} not found in oVirt: fix spec.instancetype (the engine's Instance Types)"),
        )),
    }
}

/// The fact once read; else the lookup that reads it, or the engine's failure to answer it.
fn looked_up<T>(fact: &Fact<Lookup<T>>, lookup: impl FnOnce() -> EngineLookup) -> Result<&T, NotYet> {
    match fact {
        Fact::NotRead => Err(NotYet::Read(lookup())),
        Fact::Read(Ok(found)) => Ok(found),
        Fact::Read(Err(failed)) => Err(NotYet::Refused(creation_failure(failed))),
    }
}

/// A lookup's engine error is reported as the creation's: an unnamed one as CreateFailed.
fn creation_failure(failed: &LookupFailure) -> LookupFailure {
    let reason = match failed.reason {
        reasons::ENGINE_ERROR => reasons::CREATE_FAILED,
        reason => reason,
    };
    LookupFailure {
        reason,
        ..failed.clone()
    }
}

/// The placement refusal's message; a storage domain a failure domain's overrides named says to fix it there.
fn placement_message(plan: &CreateVmPlan, problem: &crate::placement::PlacementError) -> String {
    match (problem, &plan.storage_domain_fix) {
        (crate::placement::PlacementError::StorageDomainNotFound { name }, Some(fix)) => {
            format!("storage domain {name:?} not found in oVirt: fix {fix}")
        }
        _ => problem.message(),
    }
}

fn refused(reason: &'static str, severity: Severity, message: String) -> NotYet {
    NotYet::Refused(LookupFailure {
        reason,
        severity,
        message,
    })
}

/// The template version spec.templateversion names, else the newest, unless there is none or the engine is still
/// making it.
fn usable_template<'t>(plan: &CreateVmPlan, versions: &'t [TemplateFact]) -> Result<&'t TemplateFact, NotYet> {
    if versions.is_empty() {
        let message = format!(
            "template {:?} not found in the data center of oVirt cluster {:?}: fix {}",
            plan.template, plan.ovirt_cluster, plan.template_fix
        );
        return Err(refused(reasons::TEMPLATE_NOT_FOUND, Severity::Error, message));
    }
    let chosen = match &plan.template_version {
        None => versions.iter().max_by_key(|version| version.version_number),
        Some(wanted) => versions.iter().find(|version| is_version(version, wanted)),
    };
    let Some(template) = chosen else {
        let message = version_not_found_message(plan, versions);
        return Err(refused(reasons::TEMPLATE_VERSION_NOT_FOUND, Severity::Error, message));
    };
    if template.locked {
        let message = format!(
            "template {:?} (version {}) is locked in oVirt",
            plan.template, template.version_number
        );
        return Err(refused(reasons::TEMPLATE_NOT_READY, Severity::Info, message));
    }
    Ok(template)
}

fn is_version(version: &TemplateFact, wanted: &TemplateVersion) -> bool {
    match (wanted.number, &wanted.name) {
        (Some(number), _) => i64::from(version.version_number) == i64::from(number),
        (None, Some(name)) => version.version_name.as_deref() == Some(name.as_str()),
        (None, None) => false,
    }
}

/// TemplateVersionNotFound's message: the version asked for and the ones there are.
fn version_not_found_message(plan: &CreateVmPlan, versions: &[TemplateFact]) -> String {
    let wanted = match plan.template_version.as_ref().map(|v| (v.number, v.name.as_deref())) {
        Some((Some(number), _)) => format!("number {number}"),
        Some((None, Some(name))) => format!("name {name:?}"),
        _ => "none".to_string(),
    };
    let mut known: Vec<(u32, String)> = versions
        .iter()
        .map(|v| (v.version_number, v.version_name.clone().unwrap_or_default()))
        .collect();
    known.sort();
    let known: Vec<String> = known
        .into_iter()
        .map(|(number, name)| match name.is_empty() {
            true => number.to_string(),
            false => format!("{number} ({name:?})"),
        })
        .collect();
    format!(
        "template {:?} has no version of {wanted} in the data center of oVirt cluster {:?} (its versions: {}): fix \
         spec.templateversion",
        plan.template,
        plan.ovirt_cluster,
        known.join(", ")
    )
}

/// spec.highavailability.leasestoragedomain, when high availability is on.
fn lease_domain_name(plan: &CreateVmPlan) -> Option<&str> {
    plan.high_availability
        .as_ref()
        .filter(|ha| ha.enabled)
        .and_then(|ha| ha.leasestoragedomain.as_deref())
}

/// The id of the lease's storage domain, which must be an active data domain of the cluster's data center.
fn lease_domain(plan: &CreateVmPlan, found: Option<&StorageDomainFact>) -> Result<Option<String>, NotYet> {
    let Some(name) = lease_domain_name(plan) else {
        return Ok(None);
    };
    let Some(domain) = found else {
        let message = format!(
            "storage domain {name:?} for the VM lease not found in oVirt: fix spec.highavailability.leasestoragedomain"
        );
        return Err(refused(reasons::STORAGE_DOMAIN_NOT_FOUND, Severity::Error, message));
    };
    if !(domain.in_data_center && domain.kind == "data" && domain.status == "active") {
        let attached = if domain.in_data_center {
            ""
        } else {
            ", not attached to the data center"
        };
        let message = format!(
            "storage domain {name:?} cannot hold the VM lease: it must be an active data domain of the oVirt \
             cluster's data center (it is of type {:?}, status {:?}{attached}); fix \
             spec.highavailability.leasestoragedomain or activate the domain",
            domain.kind, domain.status
        );
        return Err(refused(reasons::STORAGE_DOMAIN_NOT_AVAILABLE, Severity::Error, message));
    }
    Ok(Some(domain.id.clone()))
}

/// Issue #27's preflight: a clone whose disks do not fit the storage domain they go to (the target domain, else
/// the one each template disk is on; with the engine's own sizing) is refused before the engine is asked. A domain
/// the engine does not show is not judged.
fn clone_fits(
    o: &Observed,
    plan: &CreateVmPlan,
    target: Option<&TargetDomain>,
    disks: &[(TemplateDisk, DiskSize)],
) -> Result<(), NotYet> {
    let sizes = sizes_by_domain(target, disks);
    if sizes.is_empty() {
        return Ok(());
    }
    let domains = looked_up(&o.creation.clone_domains, || EngineLookup::CloneDomains {
        domain_ids: sizes.keys().cloned().collect(),
    })?;
    for (domain_id, sizes) in &sizes {
        let Some(domain) = domains.iter().find(|domain| &domain.id == domain_id) else {
            continue;
        };
        check_clone(domain, sizes).map_err(|shortfall| {
            refused(
                reasons::INSUFFICIENT_STORAGE,
                Severity::Warning,
                shortfall.message(&plan.template),
            )
        })?;
    }
    Ok(())
}

/// The sizes of the template's disks by the storage domain each copy goes to.
fn sizes_by_domain(
    target: Option<&TargetDomain>,
    disks: &[(TemplateDisk, DiskSize)],
) -> std::collections::BTreeMap<String, Vec<DiskSize>> {
    let mut by_domain: std::collections::BTreeMap<String, Vec<DiskSize>> = Default::default();
    for (disk, size) in disks {
        let domain = target
            .map(|target| target.id.clone())
            .or_else(|| disk.storage_domain_ids.first().cloned());
        if let Some(domain) = domain {
            by_domain.entry(domain).or_default().push(size.clone());
        }
    }
    by_domain
}

/// Why the engine cannot take the plan, when a setting it asks for came with a later engine release than the one
/// connected: refused here with a message that says what to change, rather than sent and answered with the engine's
/// "Request syntactically incorrect". An engine whose version is not known gets the request, and the last word.
pub(super) fn needs_newer_engine(plan: &CreateVmPlan, engine_version: &str) -> Option<String> {
    let policy = plan.cpu_tuning.as_ref()?.pinningpolicy?;
    let release = release_of(engine_version)?;
    (release < (4, 5)).then(|| {
        format!(
            "spec.cputuning.pinningpolicy {} needs oVirt 4.5 or later, and the engine runs {engine_version}: remove \
             the field or upgrade the engine",
            policy.as_ovirt()
        )
    })
}

/// `(major, minor)` of an engine version such as `4.4.10.7-1.el8`.
fn release_of(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}
