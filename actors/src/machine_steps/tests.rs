//! One test per branch of SPEC §2, named after the behaviour.

use std::time::Duration;

use capov_crds::{MachineSettings, Severity};
use capov_ovirt::model::VmStatus;

use super::*;
use crate::addresses::{ReportedDevice, VmNic};
use crate::conditions::{State, reasons, types};
use crate::feature_gates::FeatureGates;
use crate::identity::{EngineIdentity, NotOwned, OwnerIdentity, Ownership};
use crate::nics::{NicAssessment, NicChange};

const VM_ID: &str = "11111111-2222-3333-4444-555555555555";
const GIB: u64 = 1 << 30;

fn owner() -> OwnerIdentity {
    OwnerIdentity {
        namespace: "default".into(),
        name: "worker-abc123".into(),
        uid: "0000aaaa-0000-4000-8000-00000000000a".into(),
        previous_uid: None,
        management_cluster: "mgmt-1".into(),
    }
}

fn engine() -> EngineIdentity {
    EngineIdentity {
        url: "https://engine.example.com/ovirt-engine/api".into(),
        user: "admin@internal".into(),
    }
}

/// A machine with every precondition met, connected, bootstrap data ready, no VM yet.
fn ready_to_create() -> Observed {
    Observed {
        namespace: "default".into(),
        name: "worker-abc123".into(),
        owner: owner(),
        paused: false,
        deletion_requested: false,
        has_finalizer: true,
        owner_machine_found: true,
        cluster_found: true,
        cluster_infrastructure_provisioned: true,
        bootstrap: Bootstrap::Ready(BootstrapFormat::CloudConfig),
        connection: ProviderConnection::Ready {
            insecure_transport: false,
        },
        provider_id: None,
        failure: FailureState::Clear,
        provisioned: false,
        vm: None,
        recorded_engine: Some(engine().annotation()),
        current_engine: Some(engine()),
        system_disks: None,
        settings: MachineSettings {
            provider: "ovirt-prod".into(),
            ovirtcluster: "Default".into(),
            template: "rhcos-4.14".into(),
            ..MachineSettings::default()
        },
        provider_defaults: ProviderDefaults::default(),
        gates: FeatureGates::default(),
        nics: NicAssessment::InSync,
        node: NodeObservation::NotFound,
        control_plane_host: Some("10.0.1.100".into()),
    }
}

fn disk(id: &str, alias: &str, bootable: bool, gib: u64) -> VmDisk {
    VmDisk {
        attachment_id: format!("att-{id}"),
        disk_id: id.into(),
        alias: alias.into(),
        bootable,
        provisioned_size: gib * GIB,
        status: "ok".into(),
    }
}

fn vm(status: &str, ever_started: bool) -> ObservedVm {
    ObservedVm {
        id: VM_ID.into(),
        status: status.into(),
        ownership: Ownership::Owned,
        found_by: FoundBy::ProviderId,
        ever_started,
        os_type: None,
        disks: vec![disk("d-boot", "rhcos-4.14_Disk1", true, 20)],
        nics: vec![VmNic {
            name: "nic1".into(),
            mac: "56:6f:00:00:00:01".into(),
        }],
        reported_devices: vec![ReportedDevice {
            mac: Some("56:6f:00:00:00:01".into()),
            ips: vec!["10.0.1.11".into(), "fe80::1".into()],
        }],
    }
}

/// The VM exists and is recorded (providerID written, system disks recorded).
fn with_vm(status: &str, ever_started: bool) -> Observed {
    Observed {
        provider_id: Some(format!("ovirt://{VM_ID}")),
        vm: Some(vm(status, ever_started)),
        system_disks: Some(vec!["d-boot".into()]),
        ..ready_to_create()
    }
}

fn running() -> Observed {
    Observed {
        provisioned: true,
        node: NodeObservation::Found {
            name: "worker-abc123".into(),
            provider_id: Some(format!("ovirt://{VM_ID}")),
        },
        ..with_vm("up", true)
    }
}

fn deleting(o: Observed) -> Observed {
    Observed {
        deletion_requested: true,
        ..o
    }
}

fn state_of(d: &Decision, type_: &str) -> Option<(State, &'static str)> {
    d.condition(type_).map(|c| (c.state, c.reason))
}

fn failed(failure: ConnectionFailure, persisted_for: Duration) -> ProviderConnection {
    ProviderConnection::Failed {
        failure,
        message: "details".into(),
        persisted_for,
    }
}

// ---- pause ----

#[test]
fn paused_machine_writes_only_the_paused_condition() {
    let d = decide(&Observed {
        paused: true,
        ..ready_to_create()
    });
    assert_eq!(d.action, Action::WritePausedOnly);
    assert_eq!(d.conditions.len(), 1);
    assert_eq!(state_of(&d, types::PAUSED), Some((State::True, reasons::PAUSED)));
}

#[test]
fn paused_check_comes_before_deletion() {
    let d = decide(&Observed {
        paused: true,
        ..deleting(running())
    });
    assert_eq!(d.action, Action::WritePausedOnly);
    assert_eq!(d.conditions.len(), 1);
}

#[test]
fn unpaused_decisions_report_paused_false() {
    let d = decide(&ready_to_create());
    assert_eq!(
        state_of(&d, types::PAUSED),
        Some((State::False(Severity::Info), reasons::NOT_PAUSED))
    );
}

// ---- step 1: preconditions ----

#[test]
fn waits_for_owner_machine_without_conditions() {
    let d = decide(&Observed {
        owner_machine_found: false,
        ..ready_to_create()
    });
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    assert_eq!(d.conditions.len(), 1, "only Paused");
}

#[test]
fn waits_for_cluster_and_its_infrastructure() {
    for o in [
        Observed {
            cluster_found: false,
            ..ready_to_create()
        },
        Observed {
            cluster_infrastructure_provisioned: false,
            ..ready_to_create()
        },
    ] {
        assert_eq!(decide(&o).action, Action::Wait(Requeue::OnChange));
    }
}

#[test]
fn adds_the_finalizer_after_the_preconditions() {
    assert_eq!(
        decide(&Observed {
            has_finalizer: false,
            ..ready_to_create()
        })
        .action,
        Action::AddFinalizer
    );
    let waiting = Observed {
        has_finalizer: false,
        owner_machine_found: false,
        ..ready_to_create()
    };
    assert_eq!(decide(&waiting).action, Action::Wait(Requeue::OnChange));
}

#[test]
fn precondition_waits_do_not_block_deletion() {
    let o = Observed {
        owner_machine_found: false,
        cluster_found: false,
        cluster_infrastructure_provisioned: false,
        ..deleting(with_vm("down", true))
    };
    assert_eq!(decide(&o).action, Action::DeleteVm { vm_id: VM_ID.into() });
}

// ---- step 2 and §2.4: connection and critical errors ----

#[test]
fn transient_connection_failure_waits_with_backoff() {
    let o = Observed {
        connection: failed(ConnectionFailure::EngineUnreachable, Duration::from_secs(3600)),
        ..ready_to_create()
    };
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::CAN_CONNECT_TO_OVIRT),
        Some((State::False(Severity::Warning), reasons::ENGINE_UNREACHABLE))
    );
}

#[test]
fn authentication_tls_and_ca_failures_are_critical_at_once() {
    for failure in [
        ConnectionFailure::AuthenticationFailed,
        ConnectionFailure::TlsVerificationFailed,
        ConnectionFailure::InvalidCaBundle,
    ] {
        let d = decide(&Observed {
            connection: failed(failure, Duration::ZERO),
            ..ready_to_create()
        });
        match &d.action {
            Action::SetFailure { reason, message } => {
                assert_eq!(*reason, "OVirtEngineConnectionCritical");
                assert!(message.starts_with(failure.reason()), "{message}");
            }
            other => panic!("{failure:?}: {other:?}"),
        }
        assert_eq!(
            state_of(&d, types::CAN_CONNECT_TO_OVIRT),
            Some((State::False(Severity::Error), failure.reason()))
        );
    }
}

#[test]
fn missing_provider_or_credentials_become_critical_after_ten_minutes() {
    for failure in [
        ConnectionFailure::ProviderNotFound,
        ConnectionFailure::CredentialsNotFound,
    ] {
        let early = decide(&Observed {
            connection: failed(failure, Duration::from_secs(599)),
            ..ready_to_create()
        });
        assert_eq!(early.action, Action::Wait(Requeue::Backoff), "{failure:?}");
        assert_eq!(
            state_of(&early, types::CAN_CONNECT_TO_OVIRT),
            Some((State::False(Severity::Warning), failure.reason()))
        );
        let late = decide(&Observed {
            connection: failed(failure, Duration::from_secs(600)),
            ..ready_to_create()
        });
        assert!(matches!(late.action, Action::SetFailure { .. }), "{failure:?}");
    }
}

#[test]
fn other_permanent_connection_errors_are_not_failure_reasons() {
    for failure in [
        ConnectionFailure::CredentialsInvalid,
        ConnectionFailure::PermissionDenied,
    ] {
        let d = decide(&Observed {
            connection: failed(failure, Duration::from_secs(86400)),
            ..ready_to_create()
        });
        assert_eq!(d.action, Action::Wait(Requeue::Backoff));
        assert_eq!(
            state_of(&d, types::CAN_CONNECT_TO_OVIRT),
            Some((State::False(Severity::Error), failure.reason()))
        );
    }
}

#[test]
fn provisioned_machines_never_get_a_failure_reason() {
    let o = Observed {
        connection: failed(ConnectionFailure::AuthenticationFailed, Duration::ZERO),
        ..running()
    };
    assert_eq!(decide(&o).action, Action::Wait(Requeue::Backoff));
}

#[test]
fn failure_reason_stops_creation_steps() {
    let o = Observed {
        failure: FailureState::Set {
            spec_changed_since: false,
        },
        ..ready_to_create()
    };
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    assert_eq!(d.conditions.len(), 1, "only Paused");
}

#[test]
fn failure_reason_is_cleared_when_the_spec_changed() {
    let o = Observed {
        failure: FailureState::Set {
            spec_changed_since: true,
        },
        ..ready_to_create()
    };
    assert_eq!(decide(&o).action, Action::ClearFailure);
}

#[test]
fn failure_reason_does_not_stop_deletion() {
    let o = Observed {
        failure: FailureState::Set {
            spec_changed_since: false,
        },
        ..deleting(with_vm("down", false))
    };
    assert_eq!(decide(&o).action, Action::DeleteVm { vm_id: VM_ID.into() });
}

#[test]
fn connection_failure_during_deletion_is_never_critical() {
    let o = Observed {
        connection: failed(ConnectionFailure::AuthenticationFailed, Duration::ZERO),
        ..deleting(with_vm("up", true))
    };
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
}

// ---- step 3: MachineCreated ----

#[test]
fn waits_for_bootstrap_data_with_info() {
    let d = decide(&Observed {
        bootstrap: Bootstrap::NotReady,
        ..ready_to_create()
    });
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::False(Severity::Info), reasons::WAITING_FOR_BOOTSTRAP_DATA))
    );
    assert_eq!(
        state_of(&d, types::CAN_CONNECT_TO_OVIRT),
        Some((State::True, reasons::CONNECTED))
    );
}

#[test]
fn bootstrap_format_key_missing_means_cloud_config() {
    assert_eq!(
        Bootstrap::from_format_key(None),
        Bootstrap::Ready(BootstrapFormat::CloudConfig)
    );
    assert_eq!(
        Bootstrap::from_format_key(Some("cloud-config")),
        Bootstrap::Ready(BootstrapFormat::CloudConfig)
    );
    assert_eq!(
        Bootstrap::from_format_key(Some("ignition")),
        Bootstrap::Ready(BootstrapFormat::Ignition)
    );
    assert_eq!(
        Bootstrap::from_format_key(Some("mime")),
        Bootstrap::Unsupported("mime".into())
    );
}

#[test]
fn unsupported_bootstrap_format_is_an_error() {
    let d = decide(&Observed {
        bootstrap: Bootstrap::Unsupported("mime".into()),
        ..ready_to_create()
    });
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::False(Severity::Error), reasons::UNSUPPORTED_BOOTSTRAP_FORMAT))
    );
}

#[test]
fn no_vm_and_no_provider_id_creates_the_vm_with_marker_and_placement() {
    let o = Observed {
        settings: MachineSettings {
            diskclone: None,
            storagedomainname: Some("fast".into()),
            ..ready_to_create().settings
        },
        provider_defaults: ProviderDefaults {
            diskclone: Some(true),
            storagedomainname: Some("slow".into()),
        },
        bootstrap: Bootstrap::Ready(BootstrapFormat::Ignition),
        ..ready_to_create()
    };
    let Action::CreateVm(plan) = decide(&o).action else {
        panic!("expected CreateVm")
    };
    assert_eq!(plan.name, "worker-abc123");
    assert_eq!(
        plan.description,
        "capov:default/worker-abc123 uid:0000aaaa-0000-4000-8000-00000000000a mc:mgmt-1"
    );
    assert_eq!(plan.ovirt_cluster, "Default");
    assert_eq!(plan.template, "rhcos-4.14");
    assert!(plan.placement.clone);
    assert_eq!(plan.placement.storage_domain_name.as_deref(), Some("fast"));
    assert_eq!(plan.bootstrap_format, BootstrapFormat::Ignition);
}

#[test]
fn create_uses_the_clone_gate_when_nothing_else_says() {
    let o = Observed {
        gates: FeatureGates {
            disk_clone: true,
            ..FeatureGates::default()
        },
        ..ready_to_create()
    };
    let Action::CreateVm(plan) = decide(&o).action else {
        panic!("expected CreateVm")
    };
    assert!(plan.placement.clone);
}

#[test]
fn provider_id_set_and_vm_gone_is_vm_not_found_and_never_recreated() {
    let o = Observed {
        vm: None,
        ..with_vm("down", false)
    };
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::False(Severity::Error), reasons::VM_NOT_FOUND))
    );
}

#[test]
fn provisioned_machine_whose_vm_vanished_reports_vm_not_found_on_machine_on() {
    let d = decide(&Observed { vm: None, ..running() });
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    assert_eq!(
        state_of(&d, types::MACHINE_ON),
        Some((State::False(Severity::Error), reasons::VM_NOT_FOUND))
    );
}

#[test]
fn malformed_provider_id_is_an_error_not_a_create() {
    let o = Observed {
        provider_id: Some("vsphere://x".into()),
        vm: None,
        ..ready_to_create()
    };
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::False(Severity::Error), reasons::INVALID_PROVIDER_ID))
    );
}

#[test]
fn same_named_vm_with_our_marker_is_adopted() {
    let o = Observed {
        vm: Some(vm("down", false)),
        ..ready_to_create()
    };
    assert_eq!(decide(&o).action, Action::WriteProviderId(format!("ovirt://{VM_ID}")));
}

#[test]
fn same_named_vm_without_marker_is_a_name_conflict_and_untouched() {
    let foreign = ObservedVm {
        ownership: Ownership::NotOwned(NotOwned::NoMarker),
        found_by: FoundBy::Name,
        ..vm("up", true)
    };
    let d = decide(&Observed {
        vm: Some(foreign),
        ..ready_to_create()
    });
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::False(Severity::Error), reasons::VM_NAME_CONFLICT))
    );
    assert!(
        d.condition(types::MACHINE_CREATED)
            .unwrap()
            .message
            .contains("no CAPOV marker")
    );
}

/// A tenant can write any providerID: the VM it names is changed only when its marker proves it is this object's.
#[test]
fn vm_found_by_provider_id_without_this_objects_marker_is_never_changed() {
    for why in [
        NotOwned::NoMarker,
        NotOwned::OtherObject,
        NotOwned::OtherManagementCluster,
        NotOwned::EarlierObject,
    ] {
        for status in ["down", "up"] {
            let o = Observed {
                vm: Some(ObservedVm {
                    ownership: Ownership::NotOwned(why),
                    ..vm(status, status == "up")
                }),
                ..with_vm(status, status == "up")
            };
            let d = decide(&o);
            assert_eq!(d.action, Action::Wait(Requeue::OnChange), "{why:?} {status}");
            let created = d.condition(types::MACHINE_CREATED).unwrap();
            assert_eq!(created.reason, reasons::VM_NOT_OWNED, "{why:?}");
            assert_eq!(created.state, State::False(Severity::Error));
            assert!(created.message.contains(why.explain()), "{}", created.message);
        }
    }
}

#[test]
fn a_legacy_marker_on_the_recorded_vm_is_upgraded_before_anything_else() {
    let o = Observed {
        vm: Some(ObservedVm {
            ownership: Ownership::Legacy,
            ..vm("down", false)
        }),
        ..with_vm("down", false)
    };
    assert_eq!(
        decide(&o).action,
        Action::UpgradeMarker {
            vm_id: VM_ID.into(),
            description: owner().marker(),
        }
    );
}

#[test]
fn a_legacy_marker_found_by_name_is_not_adopted() {
    let d = decide(&Observed {
        vm: Some(ObservedVm {
            ownership: Ownership::Legacy,
            found_by: FoundBy::Name,
            ..vm("down", false)
        }),
        ..ready_to_create()
    });
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::False(Severity::Error), reasons::VM_NAME_CONFLICT))
    );
}

#[test]
fn an_earlier_same_named_objects_vm_is_not_adopted() {
    let d = decide(&Observed {
        vm: Some(ObservedVm {
            ownership: Ownership::NotOwned(NotOwned::EarlierObject),
            found_by: FoundBy::Name,
            ..vm("down", false)
        }),
        ..ready_to_create()
    });
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::False(Severity::Error), reasons::VM_NAME_CONFLICT))
    );
}

#[test]
fn a_machine_recorded_before_the_engine_annotation_records_it_first() {
    let o = Observed {
        recorded_engine: None,
        ..with_vm("down", false)
    };
    assert_eq!(decide(&o).action, Action::RecordEngine(engine().annotation()));
}

#[test]
fn a_provider_repointed_to_another_engine_blocks_the_machine_without_engine_calls() {
    let moved = EngineIdentity {
        url: "https://other.example.com/ovirt-engine/api".into(),
        ..engine()
    };
    let o = Observed {
        current_engine: Some(moved.clone()),
        vm: None,
        ..with_vm("down", false)
    };
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    let created = d.condition(types::MACHINE_CREATED).unwrap();
    assert_eq!(created.reason, reasons::ENGINE_CHANGED);
    assert!(created.message.contains(&moved.annotation()), "{}", created.message);
    let deleting = decide(&deleting(o));
    assert_eq!(deleting.action, Action::Wait(Requeue::OnChange));
    assert_eq!(
        state_of(&deleting, types::MACHINE_DELETED),
        Some((State::False(Severity::Error), reasons::ENGINE_CHANGED))
    );
}

#[test]
fn image_locked_vm_waits_with_vm_image_locked_and_polls() {
    let d = decide(&with_vm("image_locked", false));
    assert_eq!(d.action, Action::Wait(Requeue::PollVm));
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::False(Severity::Info), reasons::VM_IMAGE_LOCKED))
    );
    assert_eq!(d.status.vm_status.as_deref(), Some("image_locked"));
}

#[test]
fn first_down_records_system_disks_before_anything_else() {
    let o = Observed {
        system_disks: None,
        ..with_vm("down", false)
    };
    let d = decide(&o);
    assert_eq!(d.action, Action::RecordSystemDisks(vec!["d-boot".into()]));
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::True, reasons::VM_CREATED))
    );
}

// ---- step 4: MachineDiskResized ----

fn wants_disk_gb(gb: i64, o: Observed) -> Observed {
    Observed {
        settings: MachineSettings {
            osdisksizegb: Some(gb),
            ..o.settings.clone()
        },
        ..o
    }
}

#[test]
fn smaller_bootable_disk_is_resized_to_osdisksizegb() {
    let d = decide(&wants_disk_gb(40, with_vm("down", false)));
    assert_eq!(
        d.action,
        Action::ResizeDisk {
            attachment_id: "att-d-boot".into(),
            disk_id: "d-boot".into(),
            size_bytes: 40 * GIB
        }
    );
    assert_eq!(
        state_of(&d, types::MACHINE_DISK_RESIZED),
        Some((State::False(Severity::Info), reasons::WAITING_FOR_DISK_RESIZE))
    );
}

#[test]
fn locked_disk_waits_for_resize_and_polls() {
    let mut o = wants_disk_gb(40, with_vm("down", false));
    if let Some(vm) = o.vm.as_mut() {
        vm.disks[0].status = "locked".into();
    }
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::PollVm));
    assert_eq!(
        state_of(&d, types::MACHINE_DISK_RESIZED),
        Some((State::False(Severity::Info), reasons::WAITING_FOR_DISK_RESIZE))
    );
}

#[test]
fn shrink_is_not_allowed_and_not_retried_until_the_spec_changes() {
    let d = decide(&wants_disk_gb(10, with_vm("down", false)));
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    assert_eq!(
        state_of(&d, types::MACHINE_DISK_RESIZED),
        Some((State::False(Severity::Error), reasons::DISK_SHRINK_NOT_ALLOWED))
    );
}

#[test]
fn disk_of_exactly_the_requested_size_is_done() {
    let d = decide(&wants_disk_gb(20, with_vm("down", false)));
    assert_eq!(
        state_of(&d, types::MACHINE_DISK_RESIZED),
        Some((State::True, reasons::DISKS_READY))
    );
    assert!(matches!(d.action, Action::StartVm { .. }));
}

#[test]
fn vm_without_bootable_disk_cannot_be_resized() {
    let mut o = wants_disk_gb(40, with_vm("down", false));
    if let Some(vm) = o.vm.as_mut() {
        vm.disks[0].bootable = false;
    }
    let d = decide(&o);
    assert_eq!(
        state_of(&d, types::MACHINE_DISK_RESIZED),
        Some((State::False(Severity::Error), reasons::NO_BOOTABLE_DISK))
    );
}

#[test]
fn absurd_disk_size_is_invalid_not_a_panic() {
    let d = decide(&wants_disk_gb(i64::MAX, with_vm("down", false)));
    assert_eq!(
        state_of(&d, types::MACHINE_DISK_RESIZED),
        Some((State::False(Severity::Error), reasons::INVALID_DISK_SIZE))
    );
}

#[test]
fn disk_aliases_are_renamed_per_gates_after_resizing() {
    let gates = FeatureGates {
        disk_add_vm_name: true,
        ..FeatureGates::default()
    };
    let d = decide(&Observed {
        gates,
        ..with_vm("down", false)
    });
    assert_eq!(
        d.action,
        Action::RenameDiskAlias {
            disk_id: "d-boot".into(),
            new_alias: "rhcos-4.14_worker-abc123_Disk1".into()
        }
    );
    let resize_first = decide(&wants_disk_gb(
        40,
        Observed {
            gates,
            ..with_vm("down", false)
        },
    ));
    assert!(matches!(resize_first.action, Action::ResizeDisk { .. }));
}

#[test]
fn disks_are_not_touched_once_the_vm_was_started() {
    let d = decide(&wants_disk_gb(
        40,
        Observed {
            gates: FeatureGates {
                disk_add_vm_name: true,
                ..FeatureGates::default()
            },
            ..with_vm("down", true)
        },
    ));
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::MACHINE_ON),
        Some((State::False(Severity::Warning), reasons::VM_DOWN))
    );
}

// ---- step 5: MachineNetworkSet ----

#[test]
fn nics_are_synced_before_the_first_start() {
    let changes = vec![NicChange::Add {
        name: "nic2".into(),
        vnic_profile_id: "p2".into(),
    }];
    let d = decide(&Observed {
        nics: NicAssessment::Changes(changes.clone()),
        ..with_vm("down", false)
    });
    assert_eq!(d.action, Action::SyncNics(changes));
    assert_eq!(
        state_of(&d, types::MACHINE_DISK_RESIZED),
        Some((State::True, reasons::DISKS_READY))
    );
}

#[test]
fn unknown_or_ambiguous_vnic_profile_is_an_error() {
    for (nics, reason) in [
        (
            NicAssessment::ProfileNotFound { profile: "x".into() },
            reasons::VNIC_PROFILE_NOT_FOUND,
        ),
        (
            NicAssessment::ProfileAmbiguous {
                profile: "x".into(),
                networks: vec!["a".into(), "b".into()],
            },
            reasons::VNIC_PROFILE_AMBIGUOUS,
        ),
    ] {
        let d = decide(&Observed {
            nics,
            ..with_vm("down", false)
        });
        assert_eq!(d.action, Action::Wait(Requeue::Backoff));
        assert_eq!(
            state_of(&d, types::MACHINE_NETWORK_SET),
            Some((State::False(Severity::Error), reason))
        );
    }
}

#[test]
fn nics_are_not_touched_once_the_vm_was_started() {
    let changes = vec![NicChange::Remove { nic_id: "n1".into() }];
    let d = decide(&Observed {
        nics: NicAssessment::Changes(changes),
        ..running()
    });
    assert!(matches!(d.action, Action::Done(_)));
}

// ---- step 6: MachineOn ----

#[test]
fn prepared_vm_is_started_with_cloud_init() {
    let d = decide(&with_vm("down", false));
    assert_eq!(d.action, Action::StartVm { use_ignition: false });
    assert_eq!(
        state_of(&d, types::MACHINE_NETWORK_SET),
        Some((State::True, reasons::NETWORK_SET))
    );
    assert_eq!(
        state_of(&d, types::MACHINE_ON),
        Some((State::False(Severity::Info), reasons::VM_POWERING_UP))
    );
}

#[test]
fn ignition_bootstrap_starts_with_use_ignition() {
    let o = Observed {
        bootstrap: Bootstrap::Ready(BootstrapFormat::Ignition),
        vm: Some(ObservedVm {
            os_type: Some("rhcos_x64".into()),
            ..vm("down", false)
        }),
        ..with_vm("down", false)
    };
    assert_eq!(decide(&o).action, Action::StartVm { use_ignition: true });
}

#[test]
fn a_vm_whose_os_type_does_not_take_the_bootstrap_format_is_not_started() {
    for (format, os_type) in [
        (BootstrapFormat::CloudConfig, "rhcos_x64"),
        (BootstrapFormat::Ignition, "other_linux"),
        (BootstrapFormat::Ignition, "other"),
    ] {
        let o = Observed {
            bootstrap: Bootstrap::Ready(format),
            vm: Some(ObservedVm {
                os_type: Some(os_type.into()),
                ..vm("down", false)
            }),
            ..with_vm("down", false)
        };
        let d = decide(&o);
        assert_eq!(d.action, Action::Wait(Requeue::Backoff), "{format:?} on {os_type}");
        let on = d.condition(types::MACHINE_ON).unwrap();
        assert_eq!(on.reason, reasons::BOOTSTRAP_FORMAT_MISMATCH);
        assert_eq!(on.state, State::False(Severity::Error));
        assert!(
            on.message.contains(os_type) && on.message.contains("not started"),
            "{}",
            on.message
        );
    }
}

#[test]
fn powering_up_is_info_with_message_powering_up_and_polls() {
    for status in ["wait_for_launch", "powering_up"] {
        let d = decide(&with_vm(status, false));
        assert_eq!(d.action, Action::Wait(Requeue::PollVm), "{status}");
        let on = d.condition(types::MACHINE_ON).unwrap();
        assert_eq!(
            (on.state, on.reason, on.message.as_str()),
            (State::False(Severity::Info), "VMPoweringUp", "powering up")
        );
    }
}

#[test]
fn up_vm_sets_machine_on_provisioned_and_addresses() {
    let o = Observed {
        provisioned: false,
        ..running()
    };
    let d = decide(&o);
    assert_eq!(state_of(&d, types::MACHINE_ON), Some((State::True, reasons::VM_UP)));
    assert!(d.status.mark_provisioned);
    let addresses: Vec<(&str, &str)> = d
        .status
        .addresses
        .as_ref()
        .unwrap()
        .iter()
        .map(|a| (a.type_.as_str(), a.address.as_str()))
        .collect();
    assert_eq!(
        addresses,
        vec![("InternalIP", "10.0.1.11"), ("InternalDNS", "worker-abc123")]
    );
    assert_eq!(d.status.vm_status.as_deref(), Some("up"));
}

#[test]
fn migrating_counts_as_up() {
    let d = decide(&Observed {
        vm: Some(vm("migrating", true)),
        ..running()
    });
    assert_eq!(state_of(&d, types::MACHINE_ON), Some((State::True, reasons::VM_UP)));
}

#[test]
fn control_plane_vip_is_not_an_address() {
    let mut o = running();
    if let Some(vm) = o.vm.as_mut() {
        vm.reported_devices[0].ips.push("10.0.1.100".into());
    }
    let d = decide(&o);
    assert!(!d.status.addresses.unwrap().iter().any(|a| a.address == "10.0.1.100"));
}

#[test]
fn later_down_is_vm_down_warning_and_not_restarted() {
    let d = decide(&Observed {
        vm: Some(vm("down", true)),
        ..running()
    });
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::MACHINE_ON),
        Some((State::False(Severity::Warning), reasons::VM_DOWN))
    );
    assert!(
        !d.status.mark_provisioned,
        "provisioned is never touched again, not reset"
    );
}

#[test]
fn paused_not_responding_unknown_are_vm_not_responding_warning() {
    for status in ["paused", "not_responding", "unknown"] {
        let d = decide(&Observed {
            vm: Some(vm(status, true)),
            ..running()
        });
        assert_eq!(
            state_of(&d, types::MACHINE_ON),
            Some((State::False(Severity::Warning), reasons::VM_NOT_RESPONDING)),
            "{status}"
        );
    }
}

#[test]
fn transitional_states_after_start_poll_with_info() {
    for status in ["powering_down", "reboot_in_progress", "saving_state", "restoring_state"] {
        let d = decide(&Observed {
            vm: Some(vm(status, true)),
            ..running()
        });
        assert_eq!(d.action, Action::Wait(Requeue::PollVm), "{status}");
        assert_eq!(
            state_of(&d, types::MACHINE_ON),
            Some((State::False(Severity::Info), reasons::VM_TRANSITIONING)),
            "{status}"
        );
    }
}

#[test]
fn image_locked_after_start_is_vm_locked() {
    let d = decide(&Observed {
        vm: Some(vm("image_locked", true)),
        ..running()
    });
    assert_eq!(
        state_of(&d, types::MACHINE_ON),
        Some((State::False(Severity::Info), reasons::VM_LOCKED))
    );
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::True, reasons::VM_CREATED))
    );
}

#[test]
fn never_started_vm_in_an_odd_state_does_not_claim_disks_and_nics_done() {
    let d = decide(&with_vm("unassigned", false));
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(d.condition(types::MACHINE_DISK_RESIZED), None);
    assert_eq!(
        state_of(&d, types::MACHINE_ON),
        Some((State::False(Severity::Warning), reasons::VM_NOT_RESPONDING))
    );
}

// ---- step 7: K8sProviderIDSetup ----

#[test]
fn node_not_registered_yet_waits_for_node() {
    let d = decide(&Observed {
        node: NodeObservation::NotFound,
        ..running()
    });
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::K8S_PROVIDER_ID_SETUP),
        Some((State::False(Severity::Info), reasons::WAITING_FOR_NODE))
    );
    assert!(
        d.status.mark_provisioned,
        "the VM is up even though the Node is not there yet"
    );
}

#[test]
fn unreachable_workload_cluster_is_a_warning() {
    let d = decide(&Observed {
        node: NodeObservation::Unreachable {
            message: "timeout".into(),
        },
        ..running()
    });
    assert_eq!(
        state_of(&d, types::K8S_PROVIDER_ID_SETUP),
        Some((State::False(Severity::Warning), reasons::WORKLOAD_CLUSTER_UNREACHABLE))
    );
}

#[test]
fn node_without_provider_id_gets_ours() {
    let node = NodeObservation::Found {
        name: "worker-abc123".into(),
        provider_id: None,
    };
    assert_eq!(
        decide(&Observed { node, ..running() }).action,
        Action::SetNodeProviderId {
            node_name: "worker-abc123".into(),
            provider_id: format!("ovirt://{VM_ID}")
        }
    );
}

#[test]
fn node_with_another_provider_id_is_a_mismatch_error() {
    let node = NodeObservation::Found {
        name: "worker-abc123".into(),
        provider_id: Some("ovirt://other".into()),
    };
    let d = decide(&Observed { node, ..running() });
    assert_eq!(
        state_of(&d, types::K8S_PROVIDER_ID_SETUP),
        Some((State::False(Severity::Error), reasons::PROVIDER_ID_MISMATCH))
    );
}

#[test]
fn fully_set_up_machine_is_done_with_every_step_true() {
    let d = decide(&running());
    assert_eq!(d.action, Action::Done(Requeue::Steady));
    for type_ in crate::conditions::MACHINE_READY_INPUTS {
        assert_eq!(d.condition(type_).map(|c| c.state), Some(State::True), "{type_}");
    }
}

#[test]
fn done_without_ip_keeps_looking_with_backoff() {
    let mut o = running();
    if let Some(vm) = o.vm.as_mut() {
        vm.reported_devices.clear();
    }
    assert_eq!(decide(&o).action, Action::Done(Requeue::Backoff));
}

/// No guest agent: the VM is up (MachineOn stays True, SPEC step 6) and the message says why there is no address
/// and what fixes it; the machine keeps looking with backoff instead of polling hard.
#[test]
fn up_without_reported_devices_says_the_guest_agent_is_missing() {
    let mut o = running();
    if let Some(vm) = o.vm.as_mut() {
        vm.reported_devices.clear();
    }
    let d = decide(&o);
    assert_eq!(d.action, Action::Done(Requeue::Backoff));
    let on = d.condition(types::MACHINE_ON).unwrap();
    assert_eq!((on.state, on.reason), (State::True, reasons::VM_UP));
    assert!(on.message.contains("qemu-guest-agent"), "{}", on.message);
    let addresses = d.status.addresses.unwrap();
    assert_eq!(addresses.len(), 1, "only the VM name: {addresses:?}");

    // Devices, but nothing usable on them: the message names the rule instead.
    if let Some(vm) = o.vm.as_mut() {
        vm.reported_devices = vec![ReportedDevice {
            mac: Some("0a:58:0a:f4:00:01".into()),
            ips: vec!["10.244.0.1".into()],
        }];
    }
    let d = decide(&o);
    let on = d.condition(types::MACHINE_ON).unwrap();
    assert!(on.message.contains("MAC is one of the VM's NICs"), "{}", on.message);

    // Before the Node joined, WaitingForNode points at it too.
    o.node = NodeObservation::NotFound;
    let d = decide(&o);
    let setup = d.condition(types::K8S_PROVIDER_ID_SETUP).unwrap();
    assert_eq!(setup.reason, reasons::WAITING_FOR_NODE);
    assert!(setup.message.contains("no IP address"), "{}", setup.message);
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
}

#[test]
fn up_with_an_address_has_no_message_on_machine_on() {
    let d = decide(&running());
    assert_eq!(d.condition(types::MACHINE_ON).unwrap().message, "");
}

// ---- §2.1 deletion ----

#[test]
fn deletion_without_finalizer_does_nothing() {
    let d = decide(&Observed {
        has_finalizer: false,
        ..deleting(running())
    });
    assert_eq!(d.action, Action::Done(Requeue::OnChange));
}

#[test]
fn deletion_with_no_vm_removes_the_finalizer() {
    let d = decide(&deleting(ready_to_create()));
    assert_eq!(d.action, Action::RemoveFinalizer { left_alone: None });
}

#[test]
fn deletion_leaves_a_same_named_vm_without_marker_alone() {
    let foreign = ObservedVm {
        ownership: Ownership::NotOwned(NotOwned::NoMarker),
        found_by: FoundBy::Name,
        ..vm("up", true)
    };
    let d = decide(&deleting(Observed {
        vm: Some(foreign),
        ..ready_to_create()
    }));
    assert!(
        matches!(&d.action, Action::RemoveFinalizer { left_alone: Some(note) } if note.contains("no CAPOV marker")),
        "{:?}",
        d.action
    );
}

#[test]
fn deletion_never_touches_a_vm_named_by_provider_id_that_is_not_this_objects() {
    for why in [
        NotOwned::NoMarker,
        NotOwned::OtherManagementCluster,
        NotOwned::EarlierObject,
    ] {
        let mut o = deleting(running());
        if let Some(vm) = o.vm.as_mut() {
            vm.ownership = Ownership::NotOwned(why);
        }
        let d = decide(&o);
        assert!(
            matches!(&d.action, Action::RemoveFinalizer { left_alone: Some(note) } if note.contains(why.explain())),
            "{why:?}: {:?}",
            d.action
        );
    }
}

#[test]
fn deletion_deletes_a_recorded_vm_with_a_legacy_marker_but_not_one_found_by_name() {
    let mut o = deleting(with_vm("down", true));
    if let Some(vm) = o.vm.as_mut() {
        vm.ownership = Ownership::Legacy;
    }
    assert_eq!(decide(&o).action, Action::DeleteVm { vm_id: VM_ID.into() });
    if let Some(vm) = o.vm.as_mut() {
        vm.found_by = FoundBy::Name;
    }
    assert!(matches!(
        decide(&o).action,
        Action::RemoveFinalizer { left_alone: Some(_) }
    ));
}

#[test]
fn deletion_of_a_machine_refused_by_its_provider_releases_it_unless_it_recorded_a_vm() {
    let refused = ProviderConnection::Failed {
        failure: ConnectionFailure::NamespaceNotAllowed,
        message: "not allowed".into(),
        persisted_for: Duration::ZERO,
    };
    let never_had_a_vm = deleting(Observed {
        connection: refused.clone(),
        ..ready_to_create()
    });
    assert_eq!(
        decide(&never_had_a_vm).action,
        Action::RemoveFinalizer { left_alone: None }
    );
    let had_one = deleting(Observed {
        connection: refused,
        ..running()
    });
    let d = decide(&had_one);
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::CAN_CONNECT_TO_OVIRT),
        Some((State::False(Severity::Error), reasons::NAMESPACE_NOT_ALLOWED))
    );
}

#[test]
fn deletion_by_name_with_marker_deletes_our_vm() {
    let d = decide(&deleting(Observed {
        vm: Some(vm("down", false)),
        ..ready_to_create()
    }));
    assert_eq!(d.action, Action::DeleteVm { vm_id: VM_ID.into() });
}

#[test]
fn non_system_disk_blocks_deletion_and_retries_every_minute() {
    let mut o = deleting(running());
    if let Some(vm) = o.vm.as_mut() {
        vm.disks.push(disk("csi-1", "pvc-123", false, 5));
    }
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::After(Duration::from_secs(60))));
    let deleted = d.condition(types::MACHINE_DELETED).unwrap();
    assert_eq!(deleted.reason, "VMHasNonSystemDisk");
    assert_eq!(deleted.message, "VM has non system disk, cannot delete");
    assert!(matches!(deleted.state, State::False(_)));
}

#[test]
fn without_annotation_a_started_vm_counts_only_its_bootable_disk_as_system() {
    let mut o = Observed {
        system_disks: None,
        ..deleting(running())
    };
    assert_eq!(decide(&o).action, Action::StopVmForce { vm_id: VM_ID.into() });
    if let Some(vm) = o.vm.as_mut() {
        vm.disks.push(disk("csi-1", "pvc-123", false, 5));
    }
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::After(Duration::from_secs(60))));
    let deleted = d.condition(types::MACHINE_DELETED).unwrap();
    assert_eq!(deleted.reason, reasons::VM_HAS_NON_SYSTEM_DISK);
    assert!(deleted.message.starts_with("VM has non system disk, cannot delete"));
    assert!(deleted.message.contains("system-disks"), "{}", deleted.message);
}

#[test]
fn without_annotation_a_never_started_vm_counts_all_disks_as_system() {
    let mut o = Observed {
        system_disks: None,
        ..deleting(with_vm("down", false))
    };
    if let Some(vm) = o.vm.as_mut() {
        vm.disks.push(disk("d2", "extra", false, 5));
    }
    assert_eq!(decide(&o).action, Action::DeleteVm { vm_id: VM_ID.into() });
}

#[test]
fn down_or_unassigned_vm_is_deleted_without_stopping() {
    for status in ["down", "unassigned"] {
        let d = decide(&deleting(with_vm(status, true)));
        assert_eq!(d.action, Action::DeleteVm { vm_id: VM_ID.into() }, "{status}");
    }
}

#[test]
fn image_locked_vm_waits_before_deletion() {
    let d = decide(&deleting(with_vm("image_locked", false)));
    assert_eq!(d.action, Action::Wait(Requeue::PollVm));
    assert_eq!(
        state_of(&d, types::MACHINE_DELETED),
        Some((State::False(Severity::Info), reasons::VM_LOCKED))
    );
}

#[test]
fn running_vm_is_force_stopped_before_deletion() {
    for status in [
        "up",
        "powering_up",
        "paused",
        "not_responding",
        "powering_down",
        "suspended",
    ] {
        let d = decide(&deleting(with_vm(status, true)));
        assert_eq!(d.action, Action::StopVmForce { vm_id: VM_ID.into() }, "{status}");
    }
}

/// The engine refuses stop and remove in these states: no stop is sent, the machine backs off (the VM watch wakes it
/// when the status changes) with a Warning that says what clears it.
#[test]
fn unknown_saving_or_restoring_vm_blocks_deletion_with_backoff() {
    for (status, hint) in [
        ("unknown", "lost contact"),
        ("saving_state", "suspended or resumed"),
        ("restoring_state", "suspended or resumed"),
    ] {
        let d = decide(&deleting(with_vm(status, true)));
        assert_eq!(d.action, Action::Wait(Requeue::Backoff), "{status}");
        let deleted = d.condition(types::MACHINE_DELETED).unwrap();
        assert_eq!(deleted.reason, reasons::VM_STATE_BLOCKS_DELETION, "{status}");
        assert_eq!(deleted.state, State::False(Severity::Warning), "{status}");
        assert!(deleted.message.contains(status), "{}", deleted.message);
        assert!(deleted.message.contains(hint), "{}", deleted.message);
    }
}

#[test]
fn vm_gone_after_delete_releases_the_machine() {
    let d = decide(&deleting(Observed { vm: None, ..running() }));
    assert_eq!(d.action, Action::RemoveFinalizer { left_alone: None });
}

// ---- helpers and the whole way through ----

#[test]
fn connection_failure_reasons_round_trip() {
    for failure in ConnectionFailure::ALL {
        assert_eq!(ConnectionFailure::from_reason(failure.reason()), Some(failure));
    }
    assert_eq!(ConnectionFailure::from_reason("Connected"), None);
}

#[test]
fn create_plan_carries_type_cpu_and_memory() {
    let settings = MachineSettings {
        vmtype: capov_crds::VmType::HighPerformance,
        cpu: Some(capov_crds::CpuTopology {
            sockets: Some(2),
            cores: Some(4),
            threads: Some(1),
        }),
        memory: Some(capov_crds::Memory {
            sizemb: Some(8192),
            guaranteedmb: Some(4096),
        }),
        ..ready_to_create().settings
    };
    let Action::CreateVm(plan) = decide(&Observed {
        settings: settings.clone(),
        ..ready_to_create()
    })
    .action
    else {
        panic!("expected CreateVm")
    };
    assert_eq!(plan.vm_type, capov_crds::VmType::HighPerformance);
    assert_eq!(plan.cpu, settings.cpu);
    assert_eq!(plan.memory, settings.memory);
    assert!(!plan.placement.clone, "gate default");
    assert_eq!(plan.placement.storage_domain_name, None);
}

/// Feeds each decision's expected outcome back as the next observation, from nothing to a running machine and
/// back to nothing, and checks that the actions come in SPEC order.
#[test]
fn happy_path_walks_through_every_step_in_order() {
    let gates = FeatureGates {
        disk_add_vm_name: true,
        ..FeatureGates::default()
    };
    let mut o = wants_disk_gb(
        40,
        Observed {
            has_finalizer: false,
            bootstrap: Bootstrap::NotReady,
            gates,
            ..ready_to_create()
        },
    );
    let mut seen = Vec::new();
    for _ in 0..30 {
        let d = decide(&o);
        let label = format!("{:?}", d.action)
            .split(['(', ' ', '{'])
            .next()
            .unwrap_or_default()
            .to_string();
        seen.push(label);
        match d.action {
            Action::AddFinalizer => o.has_finalizer = true,
            Action::Wait(_) if o.bootstrap == Bootstrap::NotReady => {
                o.bootstrap = Bootstrap::Ready(BootstrapFormat::CloudConfig)
            }
            Action::CreateVm(_) => {
                o.vm = Some(ObservedVm {
                    status: "image_locked".into(),
                    ..vm("image_locked", false)
                });
                o.provider_id = Some(format!("ovirt://{VM_ID}"));
            }
            Action::Wait(Requeue::PollVm) if o.vm.as_ref().is_some_and(|v| v.status == "image_locked") => {
                o.vm.as_mut().unwrap().status = "down".into()
            }
            Action::RecordSystemDisks(ids) => o.system_disks = Some(ids),
            Action::ResizeDisk { size_bytes, .. } => o.vm.as_mut().unwrap().disks[0].provisioned_size = size_bytes,
            Action::RenameDiskAlias { new_alias, .. } => o.vm.as_mut().unwrap().disks[0].alias = new_alias,
            Action::StartVm { .. } => {
                let v = o.vm.as_mut().unwrap();
                v.status = "powering_up".into();
                v.ever_started = true;
            }
            Action::Wait(Requeue::PollVm) => o.vm.as_mut().unwrap().status = "up".into(),
            Action::Wait(Requeue::Backoff) if matches!(o.node, NodeObservation::NotFound) => {
                assert!(d.status.mark_provisioned);
                o.provisioned = true;
                o.node = NodeObservation::Found {
                    name: o.name.clone(),
                    provider_id: None,
                };
            }
            Action::SetNodeProviderId { provider_id, node_name } => {
                o.node = NodeObservation::Found {
                    name: node_name,
                    provider_id: Some(provider_id),
                }
            }
            Action::Done(_) if !o.deletion_requested => o.deletion_requested = true,
            Action::StopVmForce { .. } => o.vm.as_mut().unwrap().status = "down".into(),
            Action::DeleteVm { .. } => o.vm = None,
            Action::RemoveFinalizer { .. } => break,
            other => panic!("unexpected {other:?} after {seen:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            "AddFinalizer",
            "Wait",
            "CreateVm",
            "Wait",
            "RecordSystemDisks",
            "ResizeDisk",
            "RenameDiskAlias",
            "StartVm",
            "Wait",
            "Wait",
            "SetNodeProviderId",
            "Done",
            "StopVmForce",
            "DeleteVm",
            "RemoveFinalizer"
        ]
    );
}

// ---- plain http engines and engine URLs with userinfo ----

fn over_plain_http(o: Observed) -> Observed {
    Observed {
        connection: ProviderConnection::Ready {
            insecure_transport: true,
        },
        ..o
    }
}

#[test]
fn plain_http_connection_is_true_with_reason_insecure_transport() {
    for (what, o) in [
        ("create", ready_to_create()),
        ("running", running()),
        ("deleting", deleting(running())),
        ("deleting, VM gone", deleting(Observed { vm: None, ..running() })),
    ] {
        let d = decide(&over_plain_http(o));
        let condition = d.condition(types::CAN_CONNECT_TO_OVIRT).expect(what);
        assert_eq!(
            (condition.state, condition.reason),
            (State::True, reasons::INSECURE_TRANSPORT),
            "{what}"
        );
        assert!(
            condition.message.contains("unencrypted"),
            "{what}: {}",
            condition.message
        );
    }
    let https = decide(&running());
    assert_eq!(
        state_of(&https, types::CAN_CONNECT_TO_OVIRT),
        Some((State::True, reasons::CONNECTED))
    );
}

#[test]
fn plain_http_changes_nothing_but_the_reason_and_leaves_the_machine_ready() {
    let secure = decide(&running());
    let insecure = decide(&over_plain_http(running()));
    assert_eq!(insecure.action, secure.action);
    let mut conditions = Vec::new();
    let now = k8s_openapi::jiff::Timestamp::from_second(1).expect("time");
    for update in &insecure.conditions {
        crate::conditions::set_condition(&mut conditions, update, now, Some(1));
    }
    let ready = crate::conditions::ready_summary(&conditions, crate::conditions::MACHINE_READY_INPUTS);
    assert_eq!((ready.state, ready.reason), (State::True, reasons::READY));
}

#[test]
fn an_engine_url_with_userinfo_is_an_error_that_never_fails_the_machine() {
    let d = decide(&Observed {
        connection: failed(ConnectionFailure::InvalidEngineUrl, Duration::from_secs(86400)),
        ..ready_to_create()
    });
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::CAN_CONNECT_TO_OVIRT),
        Some((State::False(Severity::Error), reasons::INVALID_ENGINE_URL))
    );
}

// ---- step 7: a rejected workload kubeconfig ----

#[test]
fn rejected_workload_kubeconfig_is_an_error_retried_with_backoff() {
    let message = "the workload kubeconfig in Secret default/workload-kubeconfig (key value) was rejected and nothing \
                   was sent to its server: users[0] \"admin\": field \"tokenFile\" is not allowed: put the token \
                   itself in \"token\"";
    let d = decide(&Observed {
        node: NodeObservation::Rejected {
            message: message.into(),
        },
        ..running()
    });
    // Secrets are not watched: only a timed retry sees the fixed kubeconfig.
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    let setup = d.condition(types::K8S_PROVIDER_ID_SETUP).expect("K8sProviderIDSetup");
    assert_eq!(
        (setup.state, setup.reason),
        (State::False(Severity::Error), reasons::WORKLOAD_KUBECONFIG_REJECTED)
    );
    assert_eq!(setup.message, message, "the message names the field and the fix");
    assert_eq!(state_of(&d, types::MACHINE_ON), Some((State::True, reasons::VM_UP)));
    assert!(d.status.mark_provisioned, "the VM is up whatever the kubeconfig says");
}

// ---- the Node is read only when step 7 needs it, without a permit ----

#[test]
fn reaching_step_7_without_the_node_asks_for_it() {
    let d = decide(&Observed {
        node: NodeObservation::NotRead,
        ..running()
    });
    assert_eq!(d.action, Action::ReadNode);
    assert!(!d.action.needs_permit(), "workload I/O never holds a reconcile permit");
    // Steps 1–6 are passed all the same: the decision taken after the read only adds step 7.
    assert_eq!(state_of(&d, types::MACHINE_ON), Some((State::True, reasons::VM_UP)));
}

#[test]
fn an_unread_node_is_not_asked_for_before_step_7() {
    // A VM still powering up stops at step 6: no workload call in that pass.
    let d = decide(&Observed {
        node: NodeObservation::NotRead,
        ..with_vm("powering_up", true)
    });
    assert_ne!(d.action, Action::ReadNode);
}

#[test]
fn only_workload_and_waiting_actions_run_without_a_permit() {
    let node = Action::SetNodeProviderId {
        node_name: "n".into(),
        provider_id: "ovirt://x".into(),
    };
    for action in [
        Action::ReadNode,
        node,
        Action::Wait(Requeue::Backoff),
        Action::Done(Requeue::Steady),
    ] {
        assert!(!action.needs_permit(), "{action:?}");
    }
    for action in [
        Action::AddFinalizer,
        Action::StartVm { use_ignition: false },
        Action::DeleteVm { vm_id: VM_ID.into() },
        Action::RecordEngine(engine().annotation()),
    ] {
        assert!(action.needs_permit(), "{action:?}");
    }
}

#[test]
fn what_was_seen_of_a_vm_is_dropped_after_every_engine_write_and_only_then() {
    for action in [
        Action::StartVm { use_ignition: false },
        Action::StopVmForce { vm_id: VM_ID.into() },
        Action::DeleteVm { vm_id: VM_ID.into() },
        Action::ResizeDisk {
            attachment_id: "a".into(),
            disk_id: "d".into(),
            size_bytes: 1,
        },
        Action::RenameDiskAlias {
            disk_id: "d".into(),
            new_alias: "x".into(),
        },
        Action::SyncNics(vec![]),
        Action::UpgradeMarker {
            vm_id: VM_ID.into(),
            description: "m".into(),
        },
    ] {
        assert!(action.writes_engine(), "{action:?}");
    }
    for action in [
        Action::AddFinalizer,
        Action::WriteProviderId(format!("ovirt://{VM_ID}")),
        Action::RecordEngine(engine().annotation()),
        Action::RecordSystemDisks(vec!["d".into()]),
        Action::ReadNode,
        Action::Wait(Requeue::PollVm),
        Action::Done(Requeue::Steady),
    ] {
        assert!(!action.writes_engine(), "{action:?}");
    }
}

// ---- the hot-loop guard ----

#[test]
fn an_action_followed_by_the_same_observation_had_no_effect() {
    // An engine that answers 200 to a disk rename without applying it: the VM looks the same afterwards.
    let gates = FeatureGates {
        disk_add_vm_name: true,
        ..FeatureGates::default()
    };
    let before = Observed {
        gates,
        ..with_vm("down", false)
    };
    let acted = decide(&before).action;
    assert!(matches!(acted, Action::RenameDiskAlias { .. }), "{acted:?}");
    let after = before.clone();
    let next = decide(&after).action;
    assert!(without_effect(&before, &acted, &after, &next));
}

#[test]
fn an_action_whose_effect_shows_is_progress() {
    // The finalizer was added: the next observation differs, whatever comes next.
    let before = Observed {
        has_finalizer: false,
        ..ready_to_create()
    };
    let acted = decide(&before).action;
    assert_eq!(acted, Action::AddFinalizer);
    let after = ready_to_create();
    assert!(!without_effect(&before, &acted, &after, &decide(&after).action));
    // The same observation with another action (e.g. NICs read and re-decided) is not taken for a loop either.
    assert!(!without_effect(
        &before,
        &acted,
        &before,
        &Action::Wait(Requeue::OnChange)
    ));
}

#[test]
fn a_name_longer_than_the_engine_allows_creates_a_shortened_vm_name_with_the_full_identity_in_the_marker() {
    let long = "production-cluster-with-a-long-descriptive-name-md-0-7d9f8b6c5x-x2kq9";
    assert!(long.len() > crate::vm_name::VM_NAME_LIMIT);
    let o = Observed {
        name: long.into(),
        owner: OwnerIdentity {
            name: long.into(),
            ..owner()
        },
        ..ready_to_create()
    };
    let Action::CreateVm(plan) = decide(&o).action else {
        panic!("expected CreateVm")
    };
    assert_eq!(plan.name, crate::vm_name::for_object(long));
    assert!(plan.name.len() <= crate::vm_name::VM_NAME_LIMIT);
    assert!(
        plan.description.starts_with(&format!("capov:default/{long} uid:")),
        "the marker names the whole OVirtMachine: {}",
        plan.description
    );
}

/// Found by name and marker right after the create: while its disks are copied the VM may still vanish (the engine
/// deletes it when the copy fails), so the write-once providerID waits.
#[test]
fn an_accepted_create_is_recorded_in_the_provider_id_only_once_its_disks_are_copied() {
    let by_name = |status: &str| Observed {
        vm: Some(ObservedVm {
            found_by: FoundBy::Name,
            ..vm(status, false)
        }),
        ..ready_to_create()
    };
    let d = decide(&by_name("image_locked"));
    assert_eq!(d.action, Action::Wait(Requeue::PollVm));
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::False(Severity::Info), reasons::VM_IMAGE_LOCKED))
    );
    assert_eq!(
        decide(&by_name("down")).action,
        Action::WriteProviderId(format!("ovirt://{VM_ID}"))
    );
}

/// The create vanished during the copy: no providerID was written, no VM is found by name, so the next pass
/// creates it again (with the same marker).
#[test]
fn a_create_that_vanished_before_it_was_recorded_is_created_again() {
    let d = decide(&Observed {
        vm: None,
        provider_id: None,
        ..ready_to_create()
    });
    let Action::CreateVm(plan) = d.action else {
        panic!("expected CreateVm, got {:?}", d.action)
    };
    assert_eq!(plan.description, owner().marker());
}

/// A VM shown without `<status>` (ImageIllegal) exists: an error naming it, never VMNotFound, never a new VM.
#[test]
fn a_vm_without_status_is_image_illegal_not_absent() {
    for o in [
        with_vm(VmStatus::IMAGE_ILLEGAL, false),
        Observed {
            provisioned: true,
            ..with_vm(VmStatus::IMAGE_ILLEGAL, true)
        },
    ] {
        let d = decide(&o);
        assert_eq!(d.action, Action::Wait(Requeue::Backoff));
        let type_ = if o.provisioned {
            types::MACHINE_ON
        } else {
            types::MACHINE_CREATED
        };
        assert_eq!(
            state_of(&d, type_),
            Some((State::False(Severity::Error), reasons::VM_IMAGE_ILLEGAL))
        );
        let message = &d.condition(type_).expect("condition").message;
        assert!(message.contains(VM_ID) && message.contains("illegal"), "{message}");
    }
}

#[test]
fn a_vm_without_status_is_deleted_without_a_stop() {
    let d = decide(&deleting(with_vm(VmStatus::IMAGE_ILLEGAL, false)));
    assert_eq!(d.action, Action::DeleteVm { vm_id: VM_ID.into() });
}
