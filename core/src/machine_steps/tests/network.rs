//! Step 5, MachineNetworkSet ([`crate::machine_steps::network`]).

use crate::machine_steps::{Action, Fact, Observed, PrepareAction, Requeue, decide};
use capov_crds::Severity;

use super::fixtures::{running, state_of, with_vm};
use crate::conditions::{State, reasons, types};
use crate::network::nics::{NicAssessment, NicChange};

#[test]
fn nics_are_synced_before_the_first_start() {
    let changes = vec![NicChange::Add {
        name: "nic2".into(),
        vnic_profile_id: "p2".into(),
    }];
    let d = decide(&Observed {
        nics: Fact::Read(NicAssessment::Changes(changes.clone())),
        ..with_vm("down", false)
    });
    assert_eq!(d.action, Action::Prepare(PrepareAction::SyncNics(changes)));
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
            nics: Fact::Read(nics),
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
fn a_vnic_profile_a_failure_domain_renamed_and_the_engine_lacks_names_the_domain_and_provider() {
    let mut o = with_vm("down", false);
    o.settings.provider = "engine-c".into();
    o.failure_domain = crate::placement::failure_domains::FailureDomainChoice::Found(
        crate::placement::failure_domains::FailureDomainPlacement {
            name: "site-c".into(),
            provider: Some("engine-c".into()),
            overrides: capov_crds::FailureDomainOverrides {
                vnicprofiles: vec![capov_crds::VnicProfileRename {
                    from: "ovirtmgmt".into(),
                    to: "vm-net-c".into(),
                }],
                ..Default::default()
            },
            ..Default::default()
        },
    );
    o.nics = Fact::Read(NicAssessment::ProfileNotFound {
        profile: "vm-net-c".into(),
    });
    let d = decide(&o);
    let (reason, message) = super::fixtures::reason_and_message(&d, types::MACHINE_NETWORK_SET);
    assert_eq!(reason, reasons::VNIC_PROFILE_NOT_FOUND);
    for part in ["\"vm-net-c\"", "overrides.vnicprofiles", "\"site-c\"", "\"engine-c\""] {
        assert!(message.contains(part), "{part:?} not in: {message}");
    }
}

#[test]
fn nics_are_not_touched_once_the_vm_was_started() {
    let changes = vec![NicChange::Remove { nic_id: "n1".into() }];
    let d = decide(&Observed {
        nics: Fact::Read(NicAssessment::Changes(changes)),
        ..running()
    });
    assert!(matches!(d.action, Action::Done(_)));
}
