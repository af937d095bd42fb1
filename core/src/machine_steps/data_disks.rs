//! SPEC §2 step 4 (`MachineDiskResized`), its first part, only while the VM was never started: the data disks of
//! spec.datadisks are created on the VM one per pass and waited for until oVirt has made their images. They exist
//! before the system disks are recorded, so the deletion guard counts them as the VM's own (deleted with it),
//! never as a CSI volume. A data disk is known by its alias, `<vm name>_<spec name>`.

use super::action::{Action, DataDiskPlan, PrepareAction, Requeue};
use capov_crds::{DataDisk, DataDiskStatus, Severity};

use super::decision::Decision;
use super::engine_lookups::EngineLookup;
use super::fact::Fact;
use super::observed::{Observed, ObservedVm, ReadRequest};
use super::passed::Passed;
use crate::conditions::{ConditionUpdate, reasons, types};

const GIB: u64 = 1 << 30;

/// The alias of a data disk of the VM `vm_name`: holds the VM name as a whole `_` token, so the alias renaming of
/// the feature gates ([`crate::naming::disk_alias`]) leaves it as it is.
pub fn data_disk_alias(vm_name: &str, disk_name: &str) -> String {
    format!("{vm_name}_{disk_name}")
}

/// Ok = every data disk exists and is ready, as `status.dataDisks` reports them; Err = the decision that creates
/// the next one or waits.
pub(super) fn check(o: &Observed, vm: &ObservedVm, passed: &mut Passed) -> Result<Vec<DataDiskStatus>, Box<Decision>> {
    let false_ = |reason, severity, message: String| {
        ConditionUpdate::false_(types::MACHINE_DISK_RESIZED, reason, severity, message)
    };
    let vm_name = o.vm_name();
    let mut report = Vec::with_capacity(o.settings.datadisks.len());
    for wanted in &o.settings.datadisks {
        let alias = data_disk_alias(&vm_name, &wanted.name);
        let Some(found) = vm.disks.iter().find(|d| d.alias == alias) else {
            let Some(size_bytes) = u64::try_from(wanted.sizegb).ok().and_then(|gb| gb.checked_mul(GIB)) else {
                let message = format!(
                    "spec.datadisks {:?}: sizegb {} is not a valid size in GiB",
                    wanted.name, wanted.sizegb
                );
                return Err(Box::new(passed.take().wait(
                    Requeue::OnChange,
                    false_(reasons::INVALID_DISK_SIZE, Severity::Error, message),
                )));
            };
            let (storage_domain_id, disk_profile_id) = target(o, wanted, &alias, passed)?;
            let plan = DataDiskPlan {
                alias: alias.clone(),
                size_bytes,
                storage_domain_name: wanted.storagedomainname.clone(),
                interface: wanted.interface.unwrap_or_default(),
                format: wanted.format.unwrap_or_default(),
                sparse: wanted.sparse.unwrap_or(true),
                disk_profile_name: wanted.diskprofile.clone(),
                storage_domain_id,
                disk_profile_id,
            };
            let message = format!(
                "creating data disk {alias} ({} GiB on {})",
                wanted.sizegb, wanted.storagedomainname
            );
            return Err(Box::new(passed.take().stop(
                Action::Prepare(PrepareAction::AddDataDisk(Box::new(plan))),
                Some(false_(reasons::WAITING_FOR_DATA_DISKS, Severity::Info, message)),
            )));
        };
        match found.status.as_str() {
            "ok" => {}
            "locked" => {
                let message = format!("waiting for oVirt to create data disk {alias}");
                return Err(Box::new(passed.take().wait(
                    Requeue::PollVm,
                    false_(reasons::WAITING_FOR_DATA_DISKS, Severity::Info, message),
                )));
            }
            status => {
                let message = format!(
                    "data disk {alias} ({}) is {status} in oVirt: its image could not be created. Remove the disk \
                     in oVirt (CAPOV creates it again) or delete this OVirtMachine",
                    found.disk_id
                );
                return Err(Box::new(passed.take().wait(
                    Requeue::Backoff,
                    false_(reasons::DATA_DISK_FAILED, Severity::Error, message),
                )));
            }
        }
        report.push(DataDiskStatus {
            name: wanted.name.clone(),
            disk_id: found.disk_id.clone(),
            alias,
            size_bytes: found.provisioned_size,
        });
    }
    Ok(report)
}

/// The ids of the data disk's storage domain and disk profile, named in spec.datadisks; Err = the decision that asks
/// for them, or reports the name the engine does not know.
fn target(
    o: &Observed,
    wanted: &DataDisk,
    alias: &str,
    passed: &mut Passed,
) -> Result<(String, Option<String>), Box<Decision>> {
    let refuse = |passed: &mut Passed, reason, severity, message| {
        let update = ConditionUpdate::false_(types::MACHINE_DISK_RESIZED, reason, severity, message);
        Box::new(passed.take().wait(Requeue::Backoff, update))
    };
    let target = match &o.data_disk_target {
        Fact::Read(Ok(target)) if target.answers(&wanted.storagedomainname, wanted.diskprofile.as_deref()) => target,
        Fact::Read(Err(failed)) => return Err(refuse(passed, failed.reason, failed.severity, failed.message.clone())),
        _ => {
            let lookup = EngineLookup::DataDiskTarget {
                storage_domain_name: wanted.storagedomainname.clone(),
                disk_profile_name: wanted.diskprofile.clone(),
            };
            return Err(Box::new(
                passed.take().stop(Action::Read(ReadRequest::Lookup(lookup)), None),
            ));
        }
    };
    let Some(domain_id) = &target.storage_domain_id else {
        let message = format!(
            "storage domain {:?} of data disk {alias} not found in oVirt: fix spec.datadisks[].storagedomainname",
            wanted.storagedomainname
        );
        return Err(refuse(
            passed,
            reasons::STORAGE_DOMAIN_NOT_FOUND,
            Severity::Error,
            message,
        ));
    };
    let Some(profile_name) = &wanted.diskprofile else {
        return Ok((domain_id.clone(), None));
    };
    match target.disk_profiles.iter().find(|(name, _)| name == profile_name) {
        Some((_, profile_id)) => Ok((domain_id.clone(), Some(profile_id.clone()))),
        None => {
            let known: Vec<&str> = target.disk_profiles.iter().map(|(name, _)| name.as_str()).collect();
            let message = format!(
                "disk profile {profile_name:?} of data disk {alias} is not a profile of storage domain {:?} (its \
                 profiles: {}): fix spec.datadisks[].diskprofile",
                wanted.storagedomainname,
                known.join(", ")
            );
            Err(refuse(
                passed,
                reasons::DISK_PROFILE_NOT_FOUND,
                Severity::Error,
                message,
            ))
        }
    }
}
