//! The end of step 3 for a VM to be created: the engine lookups asked for one after the other, and the verdicts on
//! what they found (not found, locked, the wrong OS type, a storage domain that cannot hold the disks, no room for a
//! clone, the engine not answering), each a MachineCreated reason with a backoff.

use capov_crds::{CpuMode, CpuPinningPolicy, CpuTuning, HighAvailability, Severity, TemplateVersion, Vgpu};

use super::fixtures::{found_for_creation, ready_to_create, reason_and_message};
use crate::conditions::{reasons, types};
use crate::machine_steps::{
    Action, CreationFacts, EngineLookup, Fact, LookupFailure, Observed, ReadRequest, Requeue, TemplateFact, VmAction,
    decide,
};
use crate::placement::StorageDomainFact;
use crate::placement::capacity::DomainFact;
use crate::vm::bootstrap_payload::BootstrapFormat;

fn with_facts(change: impl FnOnce(&mut CreationFacts)) -> Observed {
    let mut o = ready_to_create();
    change(&mut o.creation);
    o
}

fn lookup(action: Action) -> EngineLookup {
    match action {
        Action::Read(ReadRequest::Lookup(lookup)) => lookup,
        other => panic!("expected an engine lookup, got {other:?}"),
    }
}

/// The decision's MachineCreated refusal: reason, severity and message; it backs off.
fn refusal(o: &Observed) -> (&'static str, Severity, String) {
    let d = decide(o);
    assert_eq!(d.action, Action::Wait(Requeue::Backoff), "{d:?}");
    let (reason, message) = reason_and_message(&d, types::MACHINE_CREATED);
    let severity = match d.condition(types::MACHINE_CREATED).map(|c| c.state) {
        Some(crate::conditions::State::False(severity)) => severity,
        other => panic!("MachineCreated is {other:?}"),
    };
    (reason, severity, message)
}

/// Version `number` of the template (named `v<number>`), of OS type `os_type`.
fn version(number: u32, locked: bool, os_type: Option<&str>) -> TemplateFact {
    TemplateFact {
        id: format!("template-v{number}"),
        version_number: number,
        version_name: Some(format!("v{number}")),
        locked,
        os_type: os_type.map(String::from),
    }
}

fn domain(id: &str, available_gib: u64) -> DomainFact {
    DomainFact {
        id: id.into(),
        name: format!("{id}-name"),
        kind: "data".into(),
        data_center_ids: vec!["dc-1".into()],
        available: available_gib << 30,
        used: 0,
        critical_space: 0,
        file_domain: true,
    }
}

#[test]
fn the_lookups_are_asked_for_in_order_each_with_what_the_one_before_found() {
    let mut o = with_facts(|facts| *facts = CreationFacts::default());
    o.settings.storagedomainname = Some("fast".into());
    o.gates.disk_clone = true;
    assert_eq!(
        lookup(decide(&o).action),
        EngineLookup::OvirtCluster { name: "Default".into() }
    );
    o.creation.cluster = found_for_creation().cluster;
    assert_eq!(
        lookup(decide(&o).action),
        EngineLookup::Template {
            name: "rhcos-4.14".into(),
            data_center_id: "dc-1".into()
        }
    );
    o.creation.template = found_for_creation().template;
    assert_eq!(
        lookup(decide(&o).action),
        EngineLookup::Placement {
            template_id: "template-1".into(),
            data_center_id: "dc-1".into(),
            storage_domain_name: Some("fast".into()),
            lease_storage_domain_name: None,
        }
    );
    let Fact::Read(Ok(mut placement)) = found_for_creation().placement else {
        unreachable!("the fixture's placement is read");
    };
    placement.storage_domain = Some(StorageDomainFact {
        id: "sd-fast".into(),
        name: "fast".into(),
        kind: "data".into(),
        status: "active".into(),
        in_data_center: true,
    });
    o.creation.placement = Fact::Read(Ok(placement));
    o.creation.clone_domains = Fact::NotRead;
    // A clone onto the chosen domain: its free space is read next.
    assert_eq!(
        lookup(decide(&o).action),
        EngineLookup::CloneDomains {
            domain_ids: vec!["sd-fast".into()]
        }
    );
    o.creation.clone_domains = Fact::Read(Ok(vec![domain("sd-fast", 100)]));
    let Action::Vm(VmAction::Create(plan)) = decide(&o).action else {
        panic!("expected the create");
    };
    assert_eq!(
        (
            plan.targets.cluster_id.as_str(),
            plan.targets.template_id.as_str(),
            plan.targets.clone
        ),
        ("cluster-default", "template-1", true)
    );
    assert_eq!(plan.targets.disk_attachments.len(), 1);
    assert_eq!(plan.targets.disk_attachments[0].storage_domain_id, "sd-fast");
    for request in [
        EngineLookup::OvirtCluster { name: "x".into() },
        EngineLookup::CloneDomains { domain_ids: vec![] },
    ] {
        assert!(
            !o.unread(&ReadRequest::Lookup(request)),
            "a read lookup is not asked for again"
        );
    }
}

#[test]
fn a_thin_copy_needs_no_free_space_lookup() {
    let o = with_facts(|facts| facts.clone_domains = Fact::NotRead);
    let Action::Vm(VmAction::Create(plan)) = decide(&o).action else {
        panic!("expected the create");
    };
    assert!(!plan.targets.clone && plan.targets.disk_attachments.is_empty());
}

#[test]
fn an_ovirt_cluster_the_engine_lacks_names_the_field_to_fix() {
    let o = with_facts(|facts| facts.cluster = Fact::Read(Ok(None)));
    let (reason, severity, message) = refusal(&o);
    assert_eq!((reason, severity), (reasons::CLUSTER_NOT_FOUND, Severity::Error));
    assert!(
        message.contains("\"Default\"") && message.contains("spec.ovirtcluster"),
        "{message}"
    );
}

#[test]
fn a_template_a_failure_domain_overrides_and_the_engine_lacks_names_the_domain_and_the_provider() {
    let mut o = with_facts(|facts| facts.template = Fact::Read(Ok(Vec::new())));
    o.settings.provider = "engine-b".into();
    o.failure_domain = crate::placement::failure_domains::FailureDomainChoice::Found(
        crate::placement::failure_domains::FailureDomainPlacement {
            name: "site-b".into(),
            provider: Some("engine-b".into()),
            overrides: capov_crds::FailureDomainOverrides {
                template: Some("ubuntu-b".into()),
                storagedomainname: None,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    o.settings = o.failure_domain.apply_overrides(o.settings.clone());
    let (reason, severity, message) = refusal(&o);
    assert_eq!((reason, severity), (reasons::TEMPLATE_NOT_FOUND, Severity::Error));
    assert!(
        message.contains("\"ubuntu-b\"")
            && message.contains("failure domain \"site-b\"")
            && message.contains("OVirtProvider \"engine-b\""),
        "{message}"
    );
    assert!(!message.contains("fix spec.template"), "{message}");
}

#[test]
fn a_missing_template_is_an_error_and_a_locked_one_is_waited_for() {
    let o = with_facts(|facts| facts.template = Fact::Read(Ok(Vec::new())));
    let (reason, severity, message) = refusal(&o);
    assert_eq!((reason, severity), (reasons::TEMPLATE_NOT_FOUND, Severity::Error));
    assert!(
        message.contains("\"rhcos-4.14\"") && message.contains("fix spec.template"),
        "{message}"
    );

    let o = with_facts(|facts| facts.template = Fact::Read(Ok(vec![version(1, true, None)])));
    let (reason, severity, _) = refusal(&o);
    assert_eq!((reason, severity), (reasons::TEMPLATE_NOT_READY, Severity::Info));
    assert_eq!(o.creation.placement, found_for_creation().placement);
}

#[test]
fn bootstrap_data_the_templates_os_type_cannot_take_is_refused_before_the_disks_are_looked_up() {
    let mut o = with_facts(|facts| {
        facts.template = Fact::Read(Ok(vec![version(1, false, Some("rhcos_x64"))]));
        facts.placement = Fact::NotRead;
    });
    o.bootstrap = crate::machine_steps::Bootstrap::Ready(BootstrapFormat::CloudConfig);
    let (reason, severity, message) = refusal(&o);
    assert_eq!(
        (reason, severity),
        (reasons::BOOTSTRAP_FORMAT_MISMATCH, Severity::Error)
    );
    assert!(message.contains("No VM was created"), "{message}");
}

#[test]
fn a_chosen_storage_domain_the_engine_lacks_is_refused() {
    let mut o = ready_to_create();
    o.settings.storagedomainname = Some("fast".into());
    let (reason, severity, message) = refusal(&o);
    assert_eq!((reason, severity), (reasons::STORAGE_DOMAIN_NOT_FOUND, Severity::Error));
    assert!(message.contains("\"fast\""), "{message}");
}

#[test]
fn a_storage_domain_a_failure_domain_overrides_and_the_engine_lacks_names_the_domain_and_the_provider() {
    let mut o = ready_to_create();
    o.settings.provider = "engine-b".into();
    o.failure_domain = crate::placement::failure_domains::FailureDomainChoice::Found(
        crate::placement::failure_domains::FailureDomainPlacement {
            name: "site-b".into(),
            provider: Some("engine-b".into()),
            overrides: capov_crds::FailureDomainOverrides {
                template: None,
                storagedomainname: Some("fast-b".into()),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    o.settings = o.failure_domain.apply_overrides(o.settings.clone());
    let (reason, severity, message) = refusal(&o);
    assert_eq!((reason, severity), (reasons::STORAGE_DOMAIN_NOT_FOUND, Severity::Error));
    for part in [
        "\"fast-b\"",
        "overrides.storagedomainname",
        "\"site-b\"",
        "\"engine-b\"",
    ] {
        assert!(message.contains(part), "{part:?} not in: {message}");
    }
}

#[test]
fn a_clone_that_does_not_fit_its_domain_is_refused_as_a_warning() {
    let mut o = with_facts(|facts| facts.clone_domains = Fact::Read(Ok(vec![domain("sd-1", 1)])));
    o.gates.disk_clone = true;
    let (reason, severity, message) = refusal(&o);
    assert_eq!((reason, severity), (reasons::INSUFFICIENT_STORAGE, Severity::Warning));
    assert!(
        message.contains("\"sd-1-name\"") && message.contains("rhcos-4.14"),
        "{message}"
    );
    // A domain the engine does not show is not judged.
    o.creation.clone_domains = Fact::Read(Ok(vec![domain("sd-other", 1)]));
    assert!(matches!(decide(&o).action, Action::Vm(VmAction::Create(_))));
}

#[test]
fn a_lookup_the_engine_did_not_answer_is_reported_as_create_failed_or_by_its_own_reason() {
    let failure = |reason| LookupFailure {
        reason,
        severity: Severity::Warning,
        message: "the engine answered 500".into(),
    };
    let o = with_facts(|facts| facts.template = Fact::Read(Err(failure(reasons::ENGINE_ERROR))));
    assert_eq!(
        refusal(&o),
        (
            reasons::CREATE_FAILED,
            Severity::Warning,
            "the engine answered 500".into()
        )
    );
    let o = with_facts(|facts| facts.placement = Fact::Read(Err(failure(reasons::PERMISSION_DENIED))));
    assert_eq!(refusal(&o).0, reasons::PERMISSION_DENIED);
}

#[test]
fn the_newest_version_is_used_unless_spec_templateversion_pins_one() {
    let mut o = with_facts(|facts| {
        facts.template = Fact::Read(Ok(vec![
            version(1, false, None),
            version(3, false, None),
            version(2, false, None),
        ]))
    });
    let created = |o: &Observed| match decide(o).action {
        Action::Vm(VmAction::Create(plan)) => plan.targets.template_id,
        other => panic!("expected the create, got {other:?}"),
    };
    assert_eq!(created(&o), "template-v3");
    o.settings.templateversion = Some(TemplateVersion {
        number: Some(2),
        name: None,
    });
    assert_eq!(created(&o), "template-v2");
    o.settings.templateversion = Some(TemplateVersion {
        number: None,
        name: Some("v1".into()),
    });
    assert_eq!(created(&o), "template-v1");
}

#[test]
fn a_pinned_version_the_template_lacks_lists_the_versions_there_are() {
    let mut o =
        with_facts(|facts| facts.template = Fact::Read(Ok(vec![version(2, false, None), version(1, false, None)])));
    o.settings.templateversion = Some(TemplateVersion {
        number: Some(7),
        name: None,
    });
    let (reason, severity, message) = refusal(&o);
    assert_eq!(
        (reason, severity),
        (reasons::TEMPLATE_VERSION_NOT_FOUND, Severity::Error)
    );
    assert!(
        message.contains("number 7")
            && message.contains("1 (\"v1\"), 2 (\"v2\")")
            && message.contains("spec.templateversion"),
        "{message}"
    );
    // A locked pinned version is waited for, as the newest is.
    o.creation.template = Fact::Read(Ok(vec![version(7, true, None)]));
    assert_eq!(refusal(&o).0, reasons::TEMPLATE_NOT_READY);
}

#[test]
fn high_availability_with_a_lease_reads_and_checks_the_lease_domain() {
    let mut o = with_facts(|facts| facts.placement = Fact::NotRead);
    o.settings.highavailability = Some(HighAvailability {
        enabled: true,
        priority: Some(50),
        leasestoragedomain: Some("leases".into()),
    });
    let EngineLookup::Placement {
        lease_storage_domain_name,
        ..
    } = lookup(decide(&o).action)
    else {
        panic!("expected the placement lookup");
    };
    assert_eq!(lease_storage_domain_name.as_deref(), Some("leases"));

    o.creation.placement = found_for_creation().placement;
    let (reason, _, message) = refusal(&o);
    assert_eq!(reason, reasons::STORAGE_DOMAIN_NOT_FOUND);
    assert!(
        message.contains("spec.highavailability.leasestoragedomain"),
        "{message}"
    );

    let lease = |status: &str| {
        let mut facts = found_for_creation();
        if let Fact::Read(Ok(placement)) = &mut facts.placement {
            placement.lease_domain = Some(StorageDomainFact {
                id: "sd-leases".into(),
                name: "leases".into(),
                kind: "data".into(),
                status: status.into(),
                in_data_center: true,
            });
        }
        facts
    };
    o.creation = lease("maintenance");
    let (reason, _, message) = refusal(&o);
    assert_eq!(reason, reasons::STORAGE_DOMAIN_NOT_AVAILABLE);
    assert!(message.contains("\"maintenance\""), "{message}");

    o.creation = lease("active");
    let Action::Vm(VmAction::Create(plan)) = decide(&o).action else {
        panic!("expected the create");
    };
    assert_eq!(plan.targets.lease_domain_id.as_deref(), Some("sd-leases"));
    assert_eq!(plan.high_availability.and_then(|ha| ha.priority), Some(50));

    // Without high availability no lease is asked for.
    if let Some(ha) = o.settings.highavailability.as_mut() {
        ha.enabled = false;
    }
    o.creation = found_for_creation();
    let Action::Vm(VmAction::Create(plan)) = decide(&o).action else {
        panic!("expected the create");
    };
    assert_eq!(plan.targets.lease_domain_id, None);
}

#[test]
fn cpu_tuning_hugepages_and_vgpus_go_into_the_plan_as_written() {
    let mut o = ready_to_create();
    o.settings.cputuning = Some(CpuTuning {
        mode: Some(CpuMode::Custom),
        custommodel: Some("Skylake-Server".into()),
        pinningpolicy: Some(CpuPinningPolicy::Dedicated),
    });
    o.provider_defaults.engine_version = "4.5.4-1.el8".into();
    o.settings.hugepageskib = Some(1_048_576);
    o.settings.vgpu = Some(Vgpu {
        types: vec!["nvidia-22".into()],
        display: None,
    });
    let Action::Vm(VmAction::Create(plan)) = decide(&o).action else {
        panic!("expected the create");
    };
    assert_eq!(plan.cpu_tuning, o.settings.cputuning);
    assert_eq!(plan.hugepages_kib, Some(1_048_576));
    assert_eq!(plan.vgpu, o.settings.vgpu);
}

#[test]
fn a_pinning_policy_is_refused_before_any_lookup_on_an_engine_older_than_4_5() {
    let mut o = ready_to_create();
    o.settings.cputuning = Some(CpuTuning {
        pinningpolicy: Some(CpuPinningPolicy::ResizeAndPinNuma),
        ..CpuTuning::default()
    });
    o.creation = CreationFacts::default();
    o.provider_defaults.engine_version = "4.4.10.7-1.el8".into();
    let (reason, severity, message) = refusal(&o);
    assert_eq!((reason, severity), (reasons::NOT_SUPPORTED_BY_ENGINE, Severity::Error));
    assert_eq!(
        message,
        "spec.cputuning.pinningpolicy resize_and_pin_numa needs oVirt 4.5 or later, and the engine runs \
         4.4.10.7-1.el8: remove the field or upgrade the engine"
    );
    // 4.5 and later, and an engine that did not say its version, get the lookups (and the request).
    for version in ["4.5.0", "4.10.1-1.el9", "5.0", ""] {
        o.provider_defaults.engine_version = version.into();
        assert!(
            matches!(decide(&o).action, Action::Read(ReadRequest::Lookup(_))),
            "engine {version:?}"
        );
    }
    // Without a pinning policy the release does not matter.
    o.settings.cputuning = None;
    o.provider_defaults.engine_version = "4.3.10".into();
    assert!(matches!(decide(&o).action, Action::Read(ReadRequest::Lookup(_))));
}

#[test]
fn an_instance_type_is_looked_up_by_name_and_one_the_engine_lacks_is_refused() {
    let mut o = ready_to_create();
    o.settings.instancetype = Some("Large".into());
    assert_eq!(
        lookup(decide(&o).action),
        EngineLookup::InstanceType { name: "Large".into() }
    );
    o.creation.instance_type = Fact::Read(Ok(None));
    let (reason, severity, message) = refusal(&o);
    assert_eq!((reason, severity), (reasons::INSTANCE_TYPE_NOT_FOUND, Severity::Error));
    assert!(
        message.contains("\"Large\"") && message.contains("spec.instancetype"),
        "{message}"
    );
    o.creation.instance_type = Fact::Read(Ok(Some("it-large".into())));
    let Action::Vm(VmAction::Create(plan)) = decide(&o).action else {
        panic!("expected the create");
    };
    assert_eq!(plan.targets.instance_type_id.as_deref(), Some("it-large"));
}
