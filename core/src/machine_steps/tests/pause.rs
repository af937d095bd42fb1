//! The pause check before every step, deletion included (SPEC §2).

use capov_crds::Severity;

use super::fixtures::{deleting, ready_to_create, running, state_of};
use crate::conditions::{State, reasons, types};
use crate::machine_steps::{Action, Observed, decide};

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
