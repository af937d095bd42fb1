//! Step 3, MachineCreated: bootstrap data, finding, adopting or creating the VM, and recording its system disks
//! ([`crate::machine_steps::creation`]).

use crate::machine_steps::{
    Action, BookkeepingAction, Bootstrap, BootstrapFormat, CreatedVmRecord, FoundBy, Observed, ObservedVm,
    ProviderDefaults, Requeue, VmAction, decide,
};
use capov_crds::{MachineSettings, Severity};
use capov_ovirt_model::model::VmStatus;

use super::fixtures::{
    VM_ID, deleting, engine, found_for_creation_on, owner, ready_to_create, running, state_of, vm, with_vm,
};
use crate::conditions::{State, reasons, types};
use crate::policy::feature_gates::FeatureGates;
use crate::trust::identity::{EngineIdentity, NotOwned, OwnerIdentity, Ownership};

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
            vmtags: None,
            engine_version: String::new(),
        },
        bootstrap: Bootstrap::Ready(BootstrapFormat::Ignition),
        creation: found_for_creation_on("fast", "rhcos_x64"),
        ..ready_to_create()
    };
    let Action::Vm(VmAction::Create(plan)) = decide(&o).action else {
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
    let Action::Vm(VmAction::Create(plan)) = decide(&o).action else {
        panic!("expected CreateVm")
    };
    assert!(plan.placement.clone);
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
    let Action::Vm(VmAction::Create(plan)) = decide(&Observed {
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

#[test]
fn a_name_longer_than_the_engine_allows_creates_a_shortened_vm_name_with_the_full_identity_in_the_marker() {
    let long = "production-cluster-with-a-long-descriptive-name-md-0-7d9f8b6c5x-x2kq9";
    assert!(long.len() > crate::naming::vm_name::VM_NAME_LIMIT);
    let o = Observed {
        name: long.into(),
        owner: OwnerIdentity {
            name: long.into(),
            ..owner()
        },
        ..ready_to_create()
    };
    let Action::Vm(VmAction::Create(plan)) = decide(&o).action else {
        panic!("expected CreateVm")
    };
    assert_eq!(plan.name, crate::naming::vm_name::for_object(long));
    assert!(plan.name.len() <= crate::naming::vm_name::VM_NAME_LIMIT);
    assert!(
        plan.description.starts_with(&format!("capov:default/{long} uid:")),
        "the marker names the whole OVirtMachine: {}",
        plan.description
    );
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
    for provider_id in ["vsphere://x", "ovirt://..", "ovirt://."] {
        let o = Observed {
            provider_id: Some(provider_id.into()),
            vm: None,
            ..ready_to_create()
        };
        let d = decide(&o);
        assert_eq!(d.action, Action::Wait(Requeue::OnChange));
        assert_eq!(
            state_of(&d, types::MACHINE_CREATED),
            Some((State::False(Severity::Error), reasons::INVALID_PROVIDER_ID))
        );
        let message = &d
            .conditions
            .iter()
            .find(|c| c.type_ == types::MACHINE_CREATED)
            .expect("condition")
            .message;
        assert!(
            message.contains("a UUID") && message.contains("Delete this OVirtMachine"),
            "{message}"
        );
    }
}

#[test]
fn same_named_vm_with_our_marker_is_adopted() {
    let o = Observed {
        vm: Some(vm("down", false)),
        ..ready_to_create()
    };
    assert_eq!(decide(&o).action, adopted_with_its_disks());
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

/// A moved machine on a cluster whose provider does not name the cluster it came from must not be deleted before
/// the provider is fixed (its VM would be left behind): the message says what to fix first.
#[test]
fn a_vm_of_another_management_cluster_says_how_a_moved_machine_gets_it_back() {
    let o = Observed {
        vm: Some(ObservedVm {
            ownership: Ownership::NotOwned(NotOwned::OtherManagementCluster),
            ..vm("up", true)
        }),
        ..with_vm("up", true)
    };
    let created = decide(&o).condition(types::MACHINE_CREATED).unwrap().message.clone();
    assert!(created.contains("clusterctl move"), "{created}");
    assert!(
        created.contains("capov.infrastructure.cluster.x-k8s.io/management-cluster"),
        "{created}"
    );
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
        Action::Vm(VmAction::UpgradeMarker {
            vm_id: VM_ID.into(),
            description: owner().marker(),
        })
    );
}

/// `clusterctl move` gave the object a new UID; its owner-uid annotation names the old one, which the VM's marker
/// names: the VM spec.providerID names is rewritten with the new UID (then the annotation follows) before anything
/// else, and is never re-created.
#[test]
fn a_moved_marker_on_the_recorded_vm_is_rewritten_with_this_uid_before_anything_else() {
    for status in ["down", "up"] {
        let o = Observed {
            vm: Some(ObservedVm {
                ownership: Ownership::Moved,
                ..vm(status, status == "up")
            }),
            provisioned: false,
            ..with_vm(status, status == "up")
        };
        assert_eq!(
            decide(&o).action,
            Action::Vm(VmAction::UpgradeMarker {
                vm_id: VM_ID.into(),
                description: owner().marker(),
            }),
            "{status}"
        );
    }
}

/// Hostile: a tenant re-creates an OVirtMachine of a deleted one's name with the old owner-uid annotation and no
/// providerID, to take over the VM left behind. Found by name, the moved marker proves nothing.
#[test]
fn a_moved_marker_found_by_name_is_not_adopted() {
    let d = decide(&Observed {
        vm: Some(ObservedVm {
            ownership: Ownership::Moved,
            found_by: FoundBy::Name,
            ..vm("down", false)
        }),
        ..ready_to_create()
    });
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    let created = d.condition(types::MACHINE_CREATED).unwrap();
    assert_eq!(created.reason, reasons::VM_NAME_CONFLICT);
    assert!(created.message.contains("owner-uid"), "{}", created.message);
}

#[test]
fn new_vms_are_marked_with_the_management_cluster_the_provider_names() {
    let o = Observed {
        owner: OwnerIdentity {
            management_cluster: "source-cluster".into(),
            accepted_management_clusters: vec!["source-cluster".into(), "this-cluster".into()],
            ..owner()
        },
        ..ready_to_create()
    };
    let Action::Vm(VmAction::Create(plan)) = decide(&o).action else {
        panic!("expected CreateVm")
    };
    assert!(plan.description.ends_with(" mc:source-cluster"), "{}", plan.description);
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
    assert_eq!(
        decide(&o).action,
        Action::Bookkeeping(BookkeepingAction::RecordEngine(engine().annotation()))
    );
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

/// Found by name and marker right after the create: while its disks are copied the VM may still vanish (the engine
/// deletes it when the copy fails), so the write-once providerID waits; the VM is recorded in the created-VM
/// annotation meanwhile (issue 23: a deletion while access is revoked must not release a machine whose VM exists).
#[test]
fn an_accepted_create_is_recorded_in_the_provider_id_only_once_its_disks_are_copied() {
    let by_name = |status: &str| Observed {
        vm: Some(ObservedVm {
            found_by: FoundBy::Name,
            ..vm(status, false)
        }),
        ..ready_to_create()
    };
    assert_eq!(
        decide(&by_name("image_locked")).action,
        Action::Bookkeeping(BookkeepingAction::RecordCreatedVm(Box::new(CreatedVmRecord {
            vm_id: VM_ID.into(),
            vm_name: "worker-abc123".into(),
            engine: Some(engine().annotation()),
        })))
    );
    let d = decide(&Observed {
        created_vm: Some(VM_ID.into()),
        recorded_vm_name: Some("worker-abc123".into()),
        ..by_name("image_locked")
    });
    assert_eq!(d.action, Action::Wait(Requeue::PollVm));
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::False(Severity::Info), reasons::VM_IMAGE_LOCKED))
    );
    assert_eq!(decide(&by_name("down")).action, adopted_with_its_disks());
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
    let Action::Vm(VmAction::Create(plan)) = d.action else {
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
fn first_down_records_system_disks_before_anything_else() {
    let o = Observed {
        system_disks: None,
        ..with_vm("down", false)
    };
    let d = decide(&o);
    assert_eq!(
        d.action,
        Action::Bookkeeping(BookkeepingAction::RecordSystemDisks(vec!["d-boot".into()]))
    );
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::True, reasons::VM_CREATED))
    );
}

/// Issue 35: the VM's identity is frozen once CAPOV recorded the VM it created. A tenant who changes
/// spec.vmnametemplate (or the cluster-name label `{cluster}` renders) while the disks are copied changes neither the
/// name the VM is looked for under nor the name a re-created VM would get.
#[test]
fn a_recorded_vm_name_outlives_edits_of_the_name_template_and_the_cluster_label() {
    let recorded = Observed {
        created_vm: Some(VM_ID.into()),
        recorded_vm_name: Some("worker-abc123".into()),
        cluster_name: Some("renamed-cluster".into()),
        settings: MachineSettings {
            vmnametemplate: Some("{cluster}-{name}".into()),
            ..ready_to_create().settings
        },
        ..ready_to_create()
    };
    assert_eq!(recorded.rendered_vm_name(), "renamed-cluster-worker-abc123");
    assert_eq!(recorded.vm_name(), "worker-abc123");
    // The recorded VM vanished (the engine removes a VM whose disk copy failed): the next one gets the same name.
    match decide(&recorded).action {
        Action::Vm(VmAction::Create(plan)) => assert_eq!(plan.name, "worker-abc123"),
        other => panic!("expected CreateVm, got {other:?}"),
    }
    // Without a record the template renders the name, as before.
    let unrecorded = Observed {
        created_vm: None,
        recorded_vm_name: None,
        ..recorded
    };
    assert_eq!(unrecorded.vm_name(), "renamed-cluster-worker-abc123");
}

/// A created VM found by its recorded id while image_locked is waited for; once its disks are copied it is recorded
/// in spec.providerID, whatever name the spec now renders.
#[test]
fn a_vm_found_by_its_recorded_id_is_waited_for_and_then_recorded() {
    let found = |status: &str| Observed {
        created_vm: Some(VM_ID.into()),
        recorded_vm_name: Some("worker-abc123".into()),
        settings: MachineSettings {
            vmnametemplate: Some("edited-{name}".into()),
            ..ready_to_create().settings
        },
        vm: Some(ObservedVm {
            found_by: FoundBy::CreatedVm,
            ..vm(status, false)
        }),
        ..ready_to_create()
    };
    assert_eq!(decide(&found("image_locked")).action, Action::Wait(Requeue::PollVm));
    assert_eq!(decide(&found("down")).action, adopted_with_its_disks());
}

/// spec.provider changed to another engine while the created VM's disks were copied: there "not found" proves
/// nothing, so no second VM is created; the condition says how to go on.
#[test]
fn a_created_vm_recorded_on_another_engine_is_neither_looked_for_nor_created_again() {
    let d = decide(&Observed {
        created_vm: Some(VM_ID.into()),
        recorded_vm_name: Some("worker-abc123".into()),
        recorded_engine: Some("admin@internal at https://old-engine.example.com/ovirt-engine/api".into()),
        vm: None,
        ..ready_to_create()
    });
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::False(Severity::Error), reasons::ENGINE_CHANGED))
    );
}

/// The providerID write of the test VM, never started, of a machine without data disks: its disks recorded with it.
fn adopted_with_its_disks() -> Action {
    Action::Bookkeeping(BookkeepingAction::WriteProviderId {
        provider_id: format!("ovirt://{VM_ID}"),
        system_disks: Some(vm("down", false).disks.iter().map(|d| d.disk_id.clone()).collect()),
    })
}

#[test]
fn the_system_disks_go_with_the_provider_id_only_when_no_data_disk_is_still_to_come() {
    let provider_id_write = |o: &Observed| match decide(o).action {
        Action::Bookkeeping(BookkeepingAction::WriteProviderId { system_disks, .. }) => system_disks,
        other => panic!("expected the providerID write, got {other:?}"),
    };
    let plain = Observed {
        vm: Some(vm("down", false)),
        ..ready_to_create()
    };
    assert!(provider_id_write(&plain).is_some_and(|ids| !ids.is_empty()));
    let with_data_disk = Observed {
        settings: MachineSettings {
            datadisks: vec![capov_crds::DataDisk {
                name: "data".into(),
                sizegb: 10,
                ..Default::default()
            }],
            ..plain.settings.clone()
        },
        ..plain.clone()
    };
    assert_eq!(
        provider_id_write(&with_data_disk),
        None,
        "the record must wait for the data disk"
    );
    let disks_unread = Observed {
        vm: Some(ObservedVm {
            disks: vec![],
            ..vm("down", false)
        }),
        ..plain.clone()
    };
    assert_eq!(provider_id_write(&disks_unread), None);
    let already_recorded = Observed {
        system_disks: Some(vec!["d".into()]),
        ..plain
    };
    assert_eq!(provider_id_write(&already_recorded), None);
}
