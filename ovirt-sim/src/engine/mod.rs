//! Engine behaviour: validation, error texts and state transitions, independent of HTTP and of
//! timers. Operations return the delayed transitions they start; the server schedules them.

mod add_vm;
mod affinity;
mod devices;
mod disks;
mod ha;
mod hosts;
pub mod init;
pub mod init_network;
mod new_disks;
mod nics;
mod power;
pub mod scheduling;
mod tags;
pub mod workload;

pub use add_vm::add_vm;
pub use affinity::{add_affinity_group, add_affinity_group_vm, remove_affinity_group, remove_affinity_group_vm};
pub use devices::{
    add_numa_node, add_vm_host_device, add_vm_mediated_device, remove_vm_host_device, remove_vm_mediated_device,
};
pub use disks::{attach_extra_disk, detach_disk, update_disk};
pub use hosts::{activate_host, deactivate_host, fence_host, host_back, host_lost};
pub use new_disks::add_vm_disk;
pub use nics::{add_nic, remove_nic, update_nic};
use power::power_off;
pub use power::{force_vm_status, remove_vm, shutdown_vm, start_vm, stop_vm};
pub use tags::{add_tag, assign_vm_tag, not_authorized};

use std::time::Duration;

use capov_ovirt::model::{DiskStatus, VmStatus};
use serde::{Deserialize, Serialize};

use crate::state::copies;
use crate::state::*;

/// How an operation failed, in the engine's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineError {
    /// 404 with an empty body.
    NotFound,
    /// `<fault>` with this status.
    Fault {
        status: u16,
        reason: String,
        detail: String,
    },
    /// A failed action: `<action><fault/><status>failed</status></action>`.
    ActionFailed { status: u16, detail: String },
}

pub type EngineResult<T> = Result<T, EngineError>;

/// `ValidationUtils.NO_SPECIAL_CHARACTERS_I18N` (`^[\p{L}0-9._-]*$`), the engine's rule for the names of affinity
/// groups (`@ValidI18NName`), affinity labels, tags and clusters: letters of any script, ASCII digits (Java's `0-9`
/// is ASCII only), '.', '_' and '-'. `\p{L}` is close to Rust's alphabetic without the letter numbers (Nl, such as
/// 'Ⅻ'); the few combining marks Unicode also counts as alphabetic are admitted here, and refused by the engine.
pub fn valid_i18n_name(name: &str) -> bool {
    name.chars()
        .all(|c| (c.is_alphabetic() && !c.is_numeric()) || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
}

/// Length as the engine's bean validation counts it (`String.length()`: UTF-16 units).
pub fn java_length(text: &str) -> usize {
    text.encode_utf16().count()
}

/// A backend validation failure (reason `Operation Failed`, detail `[message]`).
pub fn operation_failed(status: u16, message: &str) -> EngineError {
    EngineError::Fault {
        status,
        reason: "Operation Failed".into(),
        detail: format!("[{message}]"),
    }
}

pub(super) fn action_failed(status: u16, message: &str) -> EngineError {
    EngineError::ActionFailed {
        status,
        detail: format!("[{message}]"),
    }
}

pub(super) fn incomplete(what: &str) -> EngineError {
    EngineError::Fault {
        status: 400,
        reason: "Incomplete parameters".into(),
        detail: what.into(),
    }
}

/// Durations of the engine's asynchronous work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Timings {
    /// `image_locked` → `down` after add.
    pub image_locked_ms: u64,
    /// `wait_for_launch` → `powering_up` → `up`.
    pub boot_ms: u64,
    /// From `up` until the guest agent reports devices and IPs.
    pub ip_report_delay_ms: u64,
    /// Disk extend (`locked` → `ok`) and VM removal.
    pub disk_operation_ms: u64,
    /// `powering_down` → `down` on shutdown.
    pub shutdown_ms: u64,
    /// A live migration, from `migrating` to `up` on the new host.
    pub migration_ms: u64,
    /// From losing a host until the engine restarts its VMs that hold a lease elsewhere (the engine waits
    /// `NumberVdsRefreshesBeforeTryToStartUnknownVms` host refreshes, 10 × 3 s).
    pub ha_restart_ms: u64,
    /// Bandwidth of each storage domain for the disk copies of cloned VMs, in MiB/s, shared evenly by the copies
    /// running at once (`state::copies`); 0 = unlimited (a clone then takes twice `image_locked_ms`).
    pub storage_mib_per_second: u64,
}

impl Timings {
    /// Fast timings for tests.
    pub fn fast() -> Self {
        Self {
            image_locked_ms: 200,
            boot_ms: 300,
            ip_report_delay_ms: 300,
            disk_operation_ms: 200,
            shutdown_ms: 200,
            migration_ms: 300,
            ha_restart_ms: 300,
            storage_mib_per_second: 0,
        }
    }

    /// Timings closer to a small real engine, for demos and benchmarks: clones copy their template's allocated
    /// bytes at 1 GiB/s per storage domain, shared by the copies running at once (a fast SAN; 2.5 GiB of the
    /// default template take 2.5 s alone, 250 s for a hundred at once).
    pub fn realistic() -> Self {
        Self {
            image_locked_ms: 2000,
            boot_ms: 3000,
            ip_report_delay_ms: 2000,
            disk_operation_ms: 1000,
            shutdown_ms: 1000,
            migration_ms: 5000,
            ha_restart_ms: 30_000,
            storage_mib_per_second: 1024,
        }
    }

    /// [`Timings::storage_mib_per_second`] in bytes per second; None when unlimited.
    pub fn storage_bytes_per_second(&self) -> Option<f64> {
        (self.storage_mib_per_second > 0).then_some(self.storage_mib_per_second as f64 * (1u64 << 20) as f64)
    }
}

impl Default for Timings {
    fn default() -> Self {
        Self::fast()
    }
}

/// Ends the hold on `transition`: the held ones happen now, with what follows them after the usual delay.
pub fn release(state: &mut State, timings: &Timings, transition: Transition) -> Vec<Scheduled> {
    state.holds.retain(|held| *held != transition);
    let (due, still_held) = std::mem::take(&mut state.held)
        .into_iter()
        .partition::<Vec<_>, _>(|held| held.transition == transition);
    state.held = still_held;
    due.into_iter()
        .flat_map(|held| {
            let mut now = vec![Scheduled {
                after: Duration::ZERO,
                ..held.clone()
            }];
            if transition == Transition::VmUp {
                // Devices are reported only by a VM that is up; the report timed for the held boot was dropped.
                now.push(later(
                    timings.ip_report_delay_ms,
                    &held.target,
                    held.generation,
                    Transition::VmDevicesReported,
                ));
            }
            now
        })
        .collect()
}

/// Running states for the start/stop/remove rules.
pub(super) fn is_running(status: &VmStatus) -> bool {
    matches!(
        status,
        VmStatus::Up
            | VmStatus::PoweringUp
            | VmStatus::WaitForLaunch
            | VmStatus::PoweringDown
            | VmStatus::RebootInProgress
            | VmStatus::Migrating
            | VmStatus::NotResponding
            | VmStatus::Paused
            | VmStatus::SavingState
            | VmStatus::RestoringState
            | VmStatus::Suspended
            | VmStatus::Unknown
    )
}

/// The engine's internal status of a VM whose disk images are illegal; the REST API shows no `<status>` for it.
pub const IMAGE_ILLEGAL: &str = "image_illegal";

/// The engine's default `MaxVmNameLength` (`packaging/dbscripts/upgrade/pre_upgrade/0000_config.sql`).
pub const VM_NAME_LIMIT: usize = 64;

/// The engine's limit on VM descriptions.
pub const DESCRIPTION_LIMIT: usize = 255;

/// `PUT /vms/{id}`: the fields the simulator lets a client edit (the description). Refused, as by the engine,
/// while the VM's image is locked, and for a description over 255 characters.
/// Also high availability (enabled, priority) and the VM lease (`UpdateVmCommand`: a new lease needs high
/// availability and an active data domain of the VM's data center, and cannot replace another while the VM runs).
pub fn update_vm(state: &mut State, id: &str, update: &capov_ovirt::model::Vm) -> EngineResult<()> {
    let version = state.engine_version;
    let (current, data_center_id) = {
        let vm = state.vms.get(id).ok_or(EngineError::NotFound)?;
        let data_center_id = state
            .clusters
            .get(&vm.cluster_id)
            .map(|c| c.data_center_id.clone())
            .unwrap_or_default();
        (vm.clone(), data_center_id)
    };
    if current.status == VmStatus::ImageLocked {
        return Err(operation_failed(
            409,
            "Cannot edit VM. VM is being updated or its image is locked. Please try again in a few minutes.",
        ));
    }
    if let Some(description) = &update.description
        && description.chars().count() > DESCRIPTION_LIMIT
    {
        return Err(operation_failed(
            400,
            "Cannot edit VM. The given description is too long.",
        ));
    }
    let requested = workload::requested_workload(update, &current.workload, version);
    let mut workload = current.workload.clone();
    workload.high_availability = requested.high_availability;
    workload.lease_domain_id = requested.lease_domain_id;
    workload::check_priority(workload.high_availability.priority)?;
    // `UpdateVmCommand.validate`: only a new lease (set and not the one it has) is checked: `canAddLease`, then no
    // swap of one lease for another while the VM is not down.
    if workload.lease_domain_id.is_some() && workload.lease_domain_id != current.workload.lease_domain_id {
        workload::check_lease(state, "edit", &workload, &data_center_id)?;
        if current.status != VmStatus::Down && current.workload.lease_domain_id.is_some() {
            return Err(operation_failed(
                409,
                "Cannot edit VM. Hot swapping of VM leases is not supported, please remove the current lease and \
                 then set a new one.",
            ));
        }
    }
    let vm = vm_mut(state, id)?;
    if let Some(description) = &update.description {
        vm.description = description.clone();
    }
    vm.workload = workload;
    Ok(())
}

pub(super) fn vm_mut<'a>(state: &'a mut State, id: &str) -> EngineResult<&'a mut VmRecord> {
    state.vms.get_mut(id).ok_or(EngineError::NotFound)
}

/// Applies a delayed transition; stale ones (the object moved on) are ignored. Returns what it starts in turn (the
/// copy pools' timers).
pub fn apply(state: &mut State, timings: &Timings, scheduled: &Scheduled) -> Vec<Scheduled> {
    if scheduled.transition == Transition::DiskJobDone {
        if let Some(disk) = state.disks.get_mut(&scheduled.target)
            && disk.generation == scheduled.generation
        {
            if let Some(size) = disk.pending_size.take() {
                disk.provisioned_size = size;
            }
            disk.status = DiskStatus::Ok;
        }
        return Vec::new();
    }
    if scheduled.transition == Transition::CopyProgress {
        let Some(bandwidth) = timings.storage_bytes_per_second() else {
            return Vec::new();
        };
        let (done, next) = copies::progress(&mut state.copies, &scheduled.target, scheduled.generation, bandwidth);
        for vm_id in done {
            images_ready(state, &vm_id);
        }
        return next.into_iter().collect();
    }
    if state.holds.contains(&scheduled.transition) {
        state.held.push(scheduled.clone());
        return Vec::new();
    }
    let Some(vm) = state.vms.get_mut(&scheduled.target) else {
        return Vec::new();
    };
    if vm.generation != scheduled.generation {
        return Vec::new();
    }
    match scheduled.transition {
        Transition::VmCopyStarts => {
            let disk_ids = vm.disk_ids.clone();
            let bytes: u64 = disk_ids
                .iter()
                .filter_map(|d| state.disks.get(d))
                .map(|d| d.actual_size)
                .sum();
            let domain = disk_ids
                .iter()
                .filter_map(|d| state.disks.get(d))
                .find_map(|d| d.storage_domain_ids.first().cloned())
                .unwrap_or_default();
            match timings.storage_bytes_per_second() {
                Some(bandwidth) => copies::start(&mut state.copies, &domain, &scheduled.target, bytes, bandwidth)
                    .into_iter()
                    .collect(),
                None => {
                    images_ready(state, &scheduled.target);
                    Vec::new()
                }
            }
        }
        Transition::VmImagesReady => {
            images_ready(state, &scheduled.target);
            Vec::new()
        }
        // Each boot step only moves the boot forward. The steps run on separate timers, and a runtime that is late
        // (a busy machine) can wake the boot's `VmUp` before its earlier `VmPoweringUp`: applied as it came, the
        // late step would leave the VM `powering_up` for good, which no engine does.
        Transition::VmPoweringUp => {
            if vm.status == VmStatus::WaitForLaunch {
                vm.status = VmStatus::PoweringUp;
            }
            Vec::new()
        }
        Transition::VmUp => {
            if matches!(vm.status, VmStatus::WaitForLaunch | VmStatus::PoweringUp) {
                vm.status = VmStatus::Up;
            }
            Vec::new()
        }
        // Only an agent in the guest reports its devices; without one the engine never learns them.
        Transition::VmDevicesReported => {
            if vm.status == VmStatus::Up && vm.guest_agent {
                vm.ips_reported = true;
            }
            Vec::new()
        }
        Transition::VmPoweredDown => {
            power_off(vm);
            Vec::new()
        }
        Transition::VmShutdownFailed => {
            if vm.status == VmStatus::PoweringDown {
                vm.status = VmStatus::Up;
            }
            Vec::new()
        }
        Transition::VmRemoved => {
            state.remove_vm(&scheduled.target);
            Vec::new()
        }
        Transition::VmMigrated => {
            hosts::migrated(state, &scheduled.target);
            Vec::new()
        }
        Transition::VmLeaseRestart => ha::restart_with_lease(state, timings, &scheduled.target),
        Transition::DiskJobDone | Transition::CopyProgress => Vec::new(),
    }
}

/// The disk copy of an added VM ended: as its fault injection says, the VM vanishes, turns ImageIllegal, or is
/// `down` with its disks `ok`.
fn images_ready(state: &mut State, vm_id: &str) {
    let Some(vm) = state.vms.get_mut(vm_id) else {
        return;
    };
    if vm.status != VmStatus::ImageLocked || vm.removing {
        return;
    }
    match vm.copy_outcome {
        CopyOutcome::Vanishes => {
            state.remove_vm(vm_id);
        }
        CopyOutcome::Illegal => {
            vm.status = VmStatus::parse(IMAGE_ILLEGAL);
            let disk_ids = vm.disk_ids.clone();
            for disk_id in disk_ids {
                if let Some(disk) = state.disks.get_mut(&disk_id) {
                    disk.status = DiskStatus::Illegal;
                }
            }
        }
        CopyOutcome::Succeeds => {
            vm.status = VmStatus::Down;
            let disk_ids = vm.disk_ids.clone();
            for disk_id in disk_ids {
                if let Some(disk) = state.disks.get_mut(&disk_id)
                    && disk.pending_size.is_none()
                {
                    disk.status = DiskStatus::Ok;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use capov_ovirt::model::{self, Ref};

    use super::*;
    use crate::inventory::{default_inventory, seed};

    fn engine() -> (State, String, String) {
        let mut state = State::default();
        seed(&mut state, &default_inventory()).unwrap();
        let cluster = state.clusters.keys().next().unwrap().clone();
        let template = state.templates.keys().next().unwrap().clone();
        (state, cluster, template)
    }

    fn request(name: &str, cluster: &str, template: &str) -> model::Vm {
        model::Vm {
            name: Some(name.into()),
            cluster: Some(Ref::id(cluster)),
            template: Some(Ref::id(template)),
            ..model::Vm::default()
        }
    }

    /// Applies every scheduled transition at once, in schedule order.
    fn settle(state: &mut State, scheduled: Vec<Scheduled>) {
        let mut scheduled = scheduled;
        scheduled.sort_by_key(|s| s.after);
        for item in &scheduled {
            apply(state, &Timings::fast(), item);
        }
    }

    #[test]
    fn add_then_images_ready_then_start_to_up_with_devices() {
        let (mut state, cluster, template) = engine();
        let timings = Timings::fast();
        let added = add_vm(&mut state, &timings, &request("a", &cluster, &template), false).unwrap();
        assert!(added.accepted);
        assert_eq!(state.vms[&added.vm_id].status, VmStatus::ImageLocked);
        settle(&mut state, added.scheduled);
        assert_eq!(state.vms[&added.vm_id].status, VmStatus::Down);

        let scheduled = start_vm(&mut state, &timings, &added.vm_id, &model::Action::default()).unwrap();
        assert_eq!(state.vms[&added.vm_id].status, VmStatus::WaitForLaunch);
        settle(&mut state, scheduled);
        assert_eq!(state.vms[&added.vm_id].status, VmStatus::Up);
        assert!(state.vms[&added.vm_id].ips_reported);
    }

    #[test]
    fn without_a_guest_agent_an_up_vm_never_reports_devices() {
        let (mut state, cluster, template) = engine();
        state.templates.get_mut(&template).unwrap().guest_agent = false;
        let timings = Timings::fast();
        let added = add_vm(&mut state, &timings, &request("quiet", &cluster, &template), false).unwrap();
        settle(&mut state, added.scheduled);
        let boot = start_vm(&mut state, &timings, &added.vm_id, &model::Action::default()).unwrap();
        settle(&mut state, boot);
        let vm = &state.vms[&added.vm_id];
        assert_eq!(vm.status, VmStatus::Up);
        assert!(!vm.ips_reported);
        assert!(crate::render::reported_devices(vm, EngineVersion::DEFAULT).is_empty());
    }

    #[test]
    fn a_held_boot_stays_powering_up_until_released() {
        let (mut state, cluster, template) = engine();
        let timings = Timings::fast();
        let added = add_vm(&mut state, &timings, &request("held", &cluster, &template), false).unwrap();
        settle(&mut state, added.scheduled);
        state.holds.push(Transition::VmUp);
        let boot = start_vm(&mut state, &timings, &added.vm_id, &model::Action::default()).unwrap();
        settle(&mut state, boot);
        assert_eq!(state.vms[&added.vm_id].status, VmStatus::PoweringUp);
        assert!(!state.vms[&added.vm_id].ips_reported);

        let due = release(&mut state, &timings, Transition::VmUp);
        settle(&mut state, due);
        assert!(state.holds.is_empty() && state.held.is_empty());
        assert_eq!(state.vms[&added.vm_id].status, VmStatus::Up);
        assert!(state.vms[&added.vm_id].ips_reported);
    }

    /// The boot's timers fire in any order when the runtime is late: `VmUp` before `VmPoweringUp` must still end
    /// `up` (it used to leave the VM `powering_up` for good: 1 of 1,000 VMs in a benchmark on a busy machine).
    #[test]
    fn boot_steps_applied_out_of_order_still_end_up() {
        let (mut state, cluster, template) = engine();
        let timings = Timings::fast();
        let added = add_vm(&mut state, &timings, &request("late", &cluster, &template), false).unwrap();
        settle(&mut state, added.scheduled);
        let mut boot = start_vm(&mut state, &timings, &added.vm_id, &model::Action::default()).unwrap();
        // Latest first: devices reported, up, then powering up.
        boot.sort_by_key(|s| std::cmp::Reverse(s.after));
        let up_at = boot.iter().position(|s| s.transition == Transition::VmUp).unwrap();
        apply(&mut state, &timings, &boot[up_at]);
        assert_eq!(state.vms[&added.vm_id].status, VmStatus::Up);
        for item in &boot {
            apply(&mut state, &timings, item);
        }
        assert_eq!(state.vms[&added.vm_id].status, VmStatus::Up);
        assert!(state.vms[&added.vm_id].ips_reported);
    }

    #[test]
    fn stale_timers_do_not_resurrect_a_stopped_vm() {
        let (mut state, cluster, template) = engine();
        let timings = Timings::fast();
        let added = add_vm(&mut state, &timings, &request("b", &cluster, &template), false).unwrap();
        settle(&mut state, added.scheduled);
        let boot = start_vm(&mut state, &timings, &added.vm_id, &model::Action::default()).unwrap();
        stop_vm(&mut state, &added.vm_id).unwrap();
        settle(&mut state, boot);
        assert_eq!(state.vms[&added.vm_id].status, VmStatus::Down);
    }

    #[test]
    fn vm_without_disks_is_down_at_once_and_cannot_start() {
        let (mut state, cluster, _) = engine();
        let timings = Timings::fast();
        let added = add_vm(
            &mut state,
            &timings,
            &request("blank", &cluster, model::BLANK_TEMPLATE_ID),
            false,
        )
        .unwrap();
        assert!(!added.accepted);
        assert_eq!(state.vms[&added.vm_id].status, VmStatus::Down);
        let err = start_vm(&mut state, &timings, &added.vm_id, &model::Action::default()).unwrap_err();
        assert_eq!(
            err,
            EngineError::ActionFailed {
                status: 409,
                detail: "[Cannot run VM without at least one bootable disk.]".into()
            }
        );
    }

    #[test]
    fn disk_extend_applies_size_when_the_job_ends() {
        let (mut state, cluster, template) = engine();
        let timings = Timings::fast();
        let added = add_vm(&mut state, &timings, &request("c", &cluster, &template), false).unwrap();
        settle(&mut state, added.scheduled);
        let disk_id = state.vms[&added.vm_id].disk_ids[0].clone();
        let before = state.disks[&disk_id].provisioned_size;
        let update = model::Disk {
            provisioned_size: Some(before * 2),
            ..model::Disk::default()
        };
        let job = update_disk(&mut state, &timings, &disk_id, &update).unwrap();
        assert_eq!(state.disks[&disk_id].provisioned_size, before, "not yet");
        settle(&mut state, job);
        assert_eq!(state.disks[&disk_id].provisioned_size, before * 2);
        assert_eq!(state.disks[&disk_id].status, DiskStatus::Ok);
    }

    #[test]
    fn shutdown_of_a_booting_vm_is_a_stop() {
        let (mut state, cluster, template) = engine();
        let timings = Timings::fast();
        let added = add_vm(&mut state, &timings, &request("d", &cluster, &template), false).unwrap();
        settle(&mut state, added.scheduled);
        start_vm(&mut state, &timings, &added.vm_id, &model::Action::default()).unwrap();
        assert!(shutdown_vm(&mut state, &timings, &added.vm_id).unwrap().is_empty());
        assert_eq!(state.vms[&added.vm_id].status, VmStatus::Down);
    }

    fn new_disk(domain: &str, format: &str, sparse: bool, profile: Option<&str>) -> model::DiskAttachment {
        model::DiskAttachment {
            interface: Some("virtio_scsi".into()),
            disk: Some(model::Disk {
                alias: Some("vm_data".into()),
                provisioned_size: Some(1 << 30),
                format: Some(format.into()),
                sparse: Some(sparse),
                storage_domains: Some(model::StorageDomainRefs {
                    items: vec![Ref::id(domain)],
                }),
                disk_profile: profile.map(Ref::id),
                ..model::Disk::default()
            }),
            ..model::DiskAttachment::default()
        }
    }

    fn refusal(result: EngineResult<(String, Vec<Scheduled>)>) -> (u16, String) {
        match result {
            Err(EngineError::Fault { status, detail, .. }) => (status, detail),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn new_disks_follow_the_engines_format_and_profile_rules() {
        let (mut state, cluster, template) = engine();
        let timings = Timings::fast();
        let added = add_vm(&mut state, &timings, &request("e", &cluster, &template), false).unwrap();
        settle(&mut state, added.scheduled);
        let vm = added.vm_id;
        let domain = |state: &State, name: &str| {
            state
                .storage_domains
                .values()
                .find(|d| d.name == name)
                .unwrap()
                .id
                .clone()
        };
        let (data1, data2) = (domain(&state, "data1"), domain(&state, "data2"));
        let profile_of = |state: &State, sd: &str| {
            state
                .disk_profiles
                .values()
                .find(|p| p.storage_domain_id == sd)
                .unwrap()
                .id
                .clone()
        };
        let profile2 = profile_of(&state, &data2);

        // A thin cow disk: locked until its image exists, then ok, with the domain's own profile.
        let (disk, job) = add_vm_disk(&mut state, &timings, &vm, &new_disk(&data1, "cow", true, None)).unwrap();
        assert_eq!(state.disks[&disk].status, DiskStatus::Locked);
        settle(&mut state, job);
        assert_eq!(state.disks[&disk].status, DiskStatus::Ok);
        assert_eq!(state.disks[&disk].disk_profile_id, Some(profile_of(&state, &data1)));
        assert!(state.vms[&vm].disk_ids.contains(&disk));

        assert_eq!(
            refusal(add_vm_disk(
                &mut state,
                &timings,
                &vm,
                &new_disk(&data1, "cow", false, None)
            )),
            (
                409,
                "[Cannot add Virtual Disk. Disk configuration (COW Preallocated backup-None) is incompatible with the \
                 storage domain type.]"
                    .into()
            )
        );
        // Thin raw: fine on file storage, refused on block storage.
        let job = add_vm_disk(&mut state, &timings, &vm, &new_disk(&data1, "raw", true, None))
            .unwrap()
            .1;
        settle(&mut state, job);
        state.storage_domains.get_mut(&data1).unwrap().storage_type = "iscsi".into();
        assert_eq!(
            refusal(add_vm_disk(
                &mut state,
                &timings,
                &vm,
                &new_disk(&data1, "raw", true, None)
            ))
            .0,
            409
        );
        let job = add_vm_disk(&mut state, &timings, &vm, &new_disk(&data1, "raw", false, None))
            .unwrap()
            .1;
        settle(&mut state, job);
        // A profile of another domain.
        let (status, detail) = refusal(add_vm_disk(
            &mut state,
            &timings,
            &vm,
            &new_disk(&data1, "cow", true, Some(&profile2)),
        ));
        assert_eq!(status, 400);
        assert!(detail.contains("is not assigned to Storage Domain data1"), "{detail}");
        let job = add_vm_disk(
            &mut state,
            &timings,
            &vm,
            &new_disk(&data2, "cow", true, Some(&profile2)),
        )
        .unwrap()
        .1;
        settle(&mut state, job);
        // Removing the VM removes its disks.
        let disks = state.vms[&vm].disk_ids.clone();
        let removal = remove_vm(&mut state, &timings, &vm).unwrap();
        settle(&mut state, removal);
        assert!(disks.iter().all(|d| !state.disks.contains_key(d)));
    }

    #[test]
    fn tags_are_unique_by_name_and_assigned_by_name() {
        let (mut state, cluster, template) = engine();
        let timings = Timings::fast();
        let added = add_vm(&mut state, &timings, &request("f", &cluster, &template), false).unwrap();
        let tag = |name: &str| model::Tag {
            name: Some(name.into()),
            ..model::Tag::default()
        };
        assert_eq!(
            assign_vm_tag(&mut state, &added.vm_id, &tag("capov")),
            Err(EngineError::NotFound)
        );
        let id = add_tag(&mut state, &tag("capov")).unwrap();
        assert_eq!(state.tags[&id].parent_id.as_deref(), Some(ROOT_TAG_ID));
        assert_eq!(
            add_tag(&mut state, &tag("capov")),
            Err(operation_failed(409, "The specified Tag name already exists."))
        );
        assert!(add_tag(&mut state, &tag("no spaces")).is_err());
        assert!(add_tag(&mut state, &tag(&"x".repeat(51))).is_err());
        assert_eq!(assign_vm_tag(&mut state, &added.vm_id, &tag("capov")), Ok(id.clone()));
        assert_eq!(assign_vm_tag(&mut state, &added.vm_id, &tag("capov")), Ok(id.clone()));
        assert_eq!(state.vms[&added.vm_id].tag_ids.len(), 1);
    }

    #[test]
    fn a_guest_that_ignores_acpi_is_up_again_after_a_shutdown() {
        let (mut state, cluster, template) = engine();
        let timings = Timings::fast();
        let added = add_vm(&mut state, &timings, &request("g", &cluster, &template), false).unwrap();
        settle(&mut state, added.scheduled);
        let boot = start_vm(&mut state, &timings, &added.vm_id, &model::Action::default()).unwrap();
        settle(&mut state, boot);
        state.vms.get_mut(&added.vm_id).unwrap().ignores_acpi = true;
        let shutdown = shutdown_vm(&mut state, &timings, &added.vm_id).unwrap();
        assert_eq!(state.vms[&added.vm_id].status, VmStatus::PoweringDown);
        settle(&mut state, shutdown);
        assert_eq!(state.vms[&added.vm_id].status, VmStatus::Up);
        stop_vm(&mut state, &added.vm_id).unwrap();
        assert_eq!(state.vms[&added.vm_id].status, VmStatus::Down);
    }
}
