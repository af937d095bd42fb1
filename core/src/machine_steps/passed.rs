//! What the steps of SPEC §2 share: the conditions of the steps passed so far. Every step that is passed reports
//! its condition True, so the Ready summary sees all of them; the step that stops adds why it stopped.

use super::action::{Action, Requeue};
use super::decision::Decision;
use crate::conditions::ConditionUpdate;

/// Conditions of the steps passed so far, in order; each early return adds the stopping step's condition.
pub(super) struct Passed(pub(super) Vec<ConditionUpdate>);

impl Passed {
    /// Records a step as done.
    pub(super) fn pass(&mut self, type_: &'static str, reason: &'static str) {
        self.0.push(ConditionUpdate::true_(type_, reason));
    }

    /// Records a step as done, with a message saying how.
    pub(super) fn pass_with(&mut self, type_: &'static str, reason: &'static str, message: String) {
        self.0.push(ConditionUpdate::true_(type_, reason).with_message(message));
    }

    /// Moves the conditions out, for building the stopping decision from behind a `&mut`.
    pub(super) fn take(&mut self) -> Passed {
        Passed(std::mem::take(&mut self.0))
    }

    pub(super) fn stop(self, action: Action, current: Option<ConditionUpdate>) -> Decision {
        let mut conditions = self.0;
        conditions.extend(current);
        Decision::new(action, conditions)
    }

    pub(super) fn wait(self, requeue: Requeue, current: ConditionUpdate) -> Decision {
        self.stop(Action::Wait(requeue), Some(current))
    }
}
