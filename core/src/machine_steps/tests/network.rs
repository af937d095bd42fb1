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
fn nics_are_not_touched_once_the_vm_was_started() {
    let changes = vec![NicChange::Remove { nic_id: "n1".into() }];
    let d = decide(&Observed {
        nics: Fact::Read(NicAssessment::Changes(changes)),
        ..running()
    });
    assert!(matches!(d.action, Action::Done(_)));
}
