//! Data disks (step 4), tags (step 3's tail), the VM name template and the graceful shutdown on deletion.

use crate::machine_steps::{
    Action, BookkeepingAction, DataDiskPlan, DataDiskTarget, EngineLookup, Fact, Lookup, LookupFailure, Observed,
    ObservedVm, PrepareAction, ReadRequest, Requeue, VmAction, decide,
};
use std::time::Duration;

use capov_crds::{DataDisk, DataDiskStatus, DiskFormat, DiskInterface, MachineSettings};

use super::fixtures::{GIB, VM_ID, deleting, disk, ready_to_create, reason_and_message, running, state_of, with_vm};
use crate::conditions::{State, reasons, types};

fn data_disk(name: &str, gb: i64) -> DataDisk {
    DataDisk {
        name: name.into(),
        sizegb: gb,
        storagedomainname: "data1".into(),
        ..DataDisk::default()
    }
}

fn with_settings(o: Observed, change: impl FnOnce(&mut MachineSettings)) -> Observed {
    let mut o = o;
    change(&mut o.settings);
    o
}

fn vm_of(o: &mut Observed) -> &mut ObservedVm {
    o.vm.as_mut().expect("a VM")
}

/// A never-started, down VM with its system disks not recorded yet, asking for two data disks.
fn before_first_start_with_data_disks() -> Observed {
    let mut o = with_settings(with_vm("down", false), |s| {
        s.datadisks = vec![
            data_disk("data", 10),
            DataDisk {
                interface: Some(DiskInterface::Virtio),
                format: Some(DiskFormat::Raw),
                sparse: Some(false),
                diskprofile: Some("gold".into()),
                ..data_disk("etcd", 2)
            },
        ];
    });
    o.system_disks = None;
    o
}

/// The data disk lookup as the engine answers it: the storage domain `domain` is found (as `sd-<domain>`) with the
/// disk profiles `profiles` (as `profile-<name>`).
fn found_target(domain: &str, profile: Option<&str>, profiles: &[&str]) -> Fact<Lookup<DataDiskTarget>> {
    Fact::Read(Ok(DataDiskTarget {
        storage_domain_name: domain.into(),
        disk_profile_name: profile.map(String::from),
        storage_domain_id: Some(format!("sd-{domain}")),
        disk_profiles: profiles
            .iter()
            .map(|p| (p.to_string(), format!("profile-{p}")))
            .collect(),
    }))
}

fn target_lookup(domain: &str, profile: Option<&str>) -> Action {
    Action::Read(ReadRequest::Lookup(EngineLookup::DataDiskTarget {
        storage_domain_name: domain.into(),
        disk_profile_name: profile.map(String::from),
    }))
}

#[test]
fn data_disks_are_created_one_at_a_time_before_the_system_disks_are_recorded() {
    let mut o = before_first_start_with_data_disks();
    assert_eq!(decide(&o).action, target_lookup("data1", None));
    o.data_disk_target = found_target("data1", None, &[]);
    let d = decide(&o);
    let Action::Prepare(PrepareAction::AddDataDisk(plan)) = &d.action else {
        panic!("expected AddDataDisk, got {:?}", d.action);
    };
    assert_eq!(
        **plan,
        DataDiskPlan {
            alias: "worker-abc123_data".into(),
            size_bytes: 10 * GIB,
            storage_domain_name: "data1".into(),
            interface: DiskInterface::VirtioScsi,
            format: DiskFormat::Cow,
            sparse: true,
            disk_profile_name: None,
            storage_domain_id: "sd-data1".into(),
            disk_profile_id: None,
        }
    );
    assert_eq!(
        state_of(&d, types::MACHINE_DISK_RESIZED),
        Some((
            State::False(capov_crds::Severity::Info),
            reasons::WAITING_FOR_DATA_DISKS
        ))
    );

    vm_of(&mut o)
        .disks
        .push(disk("d-data", "worker-abc123_data", false, 10));
    // The target read for the first disk does not answer for the second.
    assert_eq!(decide(&o).action, target_lookup("data1", Some("gold")));
    assert!(o.unread(&ReadRequest::Lookup(EngineLookup::DataDiskTarget {
        storage_domain_name: "data1".into(),
        disk_profile_name: Some("gold".into()),
    })));
    o.data_disk_target = found_target("data1", Some("gold"), &["silver", "gold"]);
    let d = decide(&o);
    let Action::Prepare(PrepareAction::AddDataDisk(plan)) = &d.action else {
        panic!("expected the second AddDataDisk, got {:?}", d.action);
    };
    assert_eq!(
        (plan.alias.as_str(), plan.interface, plan.format, plan.sparse),
        ("worker-abc123_etcd", DiskInterface::Virtio, DiskFormat::Raw, false)
    );
    assert_eq!(plan.disk_profile_name.as_deref(), Some("gold"));
    assert_eq!(plan.disk_profile_id.as_deref(), Some("profile-gold"));
}

#[test]
fn a_data_disk_on_a_storage_domain_or_profile_the_engine_lacks_says_which_field_to_fix() {
    let mut o = before_first_start_with_data_disks();
    o.data_disk_target = Fact::Read(Ok(DataDiskTarget {
        storage_domain_id: None,
        disk_profiles: Vec::new(),
        storage_domain_name: "data1".into(),
        disk_profile_name: None,
    }));
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    let (reason, message) = reason_and_message(&d, types::MACHINE_DISK_RESIZED);
    assert_eq!(reason, reasons::STORAGE_DOMAIN_NOT_FOUND);
    assert!(
        message.contains("\"data1\"") && message.contains("spec.datadisks[].storagedomainname"),
        "{message}"
    );

    vm_of(&mut o)
        .disks
        .push(disk("d-data", "worker-abc123_data", false, 10));
    o.data_disk_target = found_target("data1", Some("gold"), &["silver", "bronze"]);
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    let (reason, message) = reason_and_message(&d, types::MACHINE_DISK_RESIZED);
    assert_eq!(reason, reasons::DISK_PROFILE_NOT_FOUND);
    assert!(
        message.contains("silver, bronze") && message.contains("spec.datadisks[].diskprofile"),
        "{message}"
    );
}

#[test]
fn a_data_disk_lookup_the_engine_refused_is_reported_on_machine_disk_resized() {
    let mut o = before_first_start_with_data_disks();
    o.data_disk_target = Fact::Read(Err(LookupFailure {
        reason: reasons::PERMISSION_DENIED,
        severity: capov_crds::Severity::Error,
        message: "GET /storagedomains was refused".into(),
    }));
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        reason_and_message(&d, types::MACHINE_DISK_RESIZED),
        (
            reasons::PERMISSION_DENIED,
            "GET /storagedomains was refused".to_string()
        )
    );
}

#[test]
fn a_locked_data_disk_is_waited_for_and_a_broken_one_is_reported() {
    let mut o = before_first_start_with_data_disks();
    let mut locked = disk("d-data", "worker-abc123_data", false, 10);
    locked.status = "locked".into();
    vm_of(&mut o).disks.push(locked);
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::PollVm));

    vm_of(&mut o).disks[1].status = "illegal".into();
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    let (state, reason) = state_of(&d, types::MACHINE_DISK_RESIZED).expect("condition");
    assert_eq!(
        (state, reason),
        (State::False(capov_crds::Severity::Error), reasons::DATA_DISK_FAILED)
    );
}

#[test]
fn the_system_disks_recorded_include_the_data_disks_and_are_reported() {
    let mut o = before_first_start_with_data_disks();
    vm_of(&mut o)
        .disks
        .push(disk("d-data", "worker-abc123_data", false, 10));
    vm_of(&mut o).disks.push(disk("d-etcd", "worker-abc123_etcd", false, 2));
    let d = decide(&o);
    assert_eq!(
        d.action,
        Action::Bookkeeping(BookkeepingAction::RecordSystemDisks(vec![
            "d-boot".into(),
            "d-data".into(),
            "d-etcd".into()
        ]))
    );

    // Recorded by an earlier CAPOV before the data disks existed: recorded again, the VM never ran.
    o.system_disks = Some(vec!["d-boot".into()]);
    assert!(
        matches!(decide(&o).action, Action::Bookkeeping(BookkeepingAction::RecordSystemDisks(ids)) if ids.len() == 3)
    );

    o.system_disks = Some(vec!["d-boot".into(), "d-data".into(), "d-etcd".into()]);
    let d = decide(&o);
    assert!(matches!(d.action, Action::Vm(VmAction::Start { .. })), "{:?}", d.action);
    assert_eq!(
        d.status.data_disks,
        Some(vec![
            DataDiskStatus {
                name: "data".into(),
                disk_id: "d-data".into(),
                alias: "worker-abc123_data".into(),
                size_bytes: 10 * GIB,
            },
            DataDiskStatus {
                name: "etcd".into(),
                disk_id: "d-etcd".into(),
                alias: "worker-abc123_etcd".into(),
                size_bytes: 2 * GIB,
            },
        ])
    );
}

#[test]
fn data_disks_count_as_the_vms_own_at_deletion_and_a_csi_disk_still_blocks() {
    let mut o = deleting(running());
    vm_of(&mut o).status = "down".into();
    vm_of(&mut o)
        .disks
        .push(disk("d-data", "worker-abc123_data", false, 10));
    o.system_disks = Some(vec!["d-boot".into(), "d-data".into()]);
    assert_eq!(decide(&o).action, Action::Vm(VmAction::Delete { vm_id: VM_ID.into() }));
    vm_of(&mut o).disks.push(disk("d-pvc", "pvc-0001", false, 1));
    let d = decide(&o);
    assert_eq!(
        state_of(&d, types::MACHINE_DELETED).map(|(_, r)| r),
        Some(reasons::VM_HAS_NON_SYSTEM_DISK)
    );
}

#[test]
fn missing_tags_are_assigned_before_the_first_start_when_the_provider_asks_for_them() {
    let mut o = with_vm("down", false);
    o.provider_defaults.vmtags = Some(true);
    vm_of(&mut o).tags = Some(vec!["capov".into()]);
    assert_eq!(
        decide(&o).action,
        Action::Prepare(PrepareAction::Tag(vec![
            "capov-ns-default".into(),
            "capov.cluster.default.cluster-1".into()
        ]))
    );
    for off in [Some(false), None] {
        o.provider_defaults.vmtags = off;
        assert!(
            matches!(decide(&o).action, Action::Vm(VmAction::Start { .. })),
            "{off:?}"
        );
    }
    o.provider_defaults.vmtags = Some(true);
    vm_of(&mut o).tags = Some(vec![
        "capov".into(),
        "capov-ns-default".into(),
        "capov.cluster.default.cluster-1".into(),
        "an-admins-own".into(),
    ]);
    assert!(matches!(decide(&o).action, Action::Vm(VmAction::Start { .. })));
}

#[test]
fn the_name_template_names_the_vm_everywhere() {
    let o = with_settings(ready_to_create(), |s| {
        s.vmnametemplate = Some("{cluster}-{namespace}-{name}".into())
    });
    assert_eq!(o.vm_name(), "cluster-1-default-worker-abc123");
    let Action::Vm(VmAction::Create(plan)) = decide(&o).action else {
        panic!("expected CreateVm");
    };
    assert_eq!(plan.name, "cluster-1-default-worker-abc123");
    // Data disk aliases follow the VM name.
    let mut o = with_settings(before_first_start_with_data_disks(), |s| {
        s.vmnametemplate = Some("{namespace}-{name}".into())
    });
    o.system_disks = None;
    o.data_disk_target = found_target("data1", None, &[]);
    let Action::Prepare(PrepareAction::AddDataDisk(plan)) = decide(&o).action else {
        panic!("expected AddDataDisk");
    };
    assert_eq!(plan.alias, "default-worker-abc123_data");
}

fn graceful(seconds: i64, status: &str, elapsed: Duration) -> Observed {
    let mut o = with_settings(deleting(running()), |s| {
        s.gracefulshutdowntimeoutseconds = Some(seconds)
    });
    vm_of(&mut o).status = status.into();
    o.deletion_requested_for = Some(elapsed);
    o
}

#[test]
fn graceful_shutdown_asks_the_guest_then_forces_after_the_timeout() {
    let d = decide(&graceful(60, "up", Duration::from_secs(10)));
    assert_eq!(
        d.action,
        Action::Vm(VmAction::Shutdown {
            vm_id: VM_ID.into(),
            deadline_in: Duration::from_secs(50)
        })
    );
    assert_eq!(
        state_of(&d, types::MACHINE_DELETED).map(|(_, r)| r),
        Some(reasons::VM_SHUTTING_DOWN)
    );
    // Shutting down: wait, at the latest until the deadline.
    let d = decide(&graceful(60, "powering_down", Duration::from_secs(45)));
    assert_eq!(d.action, Action::Wait(Requeue::PollVmWithin(Duration::from_secs(15))));
    // The guest ignored it (the engine shows the VM up again, or still powering down): forced at the deadline.
    for status in ["up", "powering_down"] {
        let d = decide(&graceful(60, status, Duration::from_secs(60)));
        assert_eq!(d.action, Action::Vm(VmAction::StopForce { vm_id: VM_ID.into() }));
        let (state, reason) = state_of(&d, types::MACHINE_DELETED).expect("condition");
        assert_eq!(
            (state, reason),
            (State::False(capov_crds::Severity::Warning), reasons::VM_STOPPING)
        );
    }
    // Down: deleted, whatever the timeout.
    assert!(matches!(
        decide(&graceful(60, "down", Duration::ZERO)).action,
        Action::Vm(VmAction::Delete { .. })
    ));
}

#[test]
fn without_a_timeout_or_in_a_state_the_guest_cannot_answer_the_vm_is_powered_off_at_once() {
    for (seconds, status) in [(0, "up"), (60, "powering_up"), (60, "not_responding"), (60, "paused")] {
        let d = decide(&graceful(seconds, status, Duration::ZERO));
        assert_eq!(
            d.action,
            Action::Vm(VmAction::StopForce { vm_id: VM_ID.into() }),
            "{seconds}s, {status}"
        );
    }
    let mut o = deleting(running());
    o.deletion_requested_for = Some(Duration::from_secs(5));
    assert!(matches!(decide(&o).action, Action::Vm(VmAction::StopForce { .. })));
}
