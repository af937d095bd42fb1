//! Mail the supervisor holds for a machine whose actor has stopped (to rest, or after a failure) until an actor
//! takes it. Each kind of message counts once, the newest of it: a later object or VM snapshot replaces an earlier
//! one, and one `Tick` or `Poke` queues the same pass as ten. So what is held stays a handful of messages whatever a
//! tenant's objects or the engine do meanwhile.

use std::mem::discriminant;

use crate::runtime::messages::MachineMsg;

#[derive(Default)]
pub struct HeldMail(Vec<MachineMsg>);

impl HeldMail {
    pub fn hold(&mut self, message: MachineMsg) {
        self.0.retain(|held| discriminant(held) != discriminant(&message));
        self.0.push(message);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a reconcile permit (`permits`) or Node-step places wait here for the machine: its actor must start at
    /// once. Few of either exist, and one idle here would hold up as many passes.
    pub fn holds_permit_or_place(&self) -> bool {
        (self.0.iter()).any(|held| matches!(held, MachineMsg::Permitted(_) | MachineMsg::Placed(_)))
    }

    pub fn take(&mut self) -> Vec<MachineMsg> {
        std::mem::take(&mut self.0)
    }

    /// Forgets what is held: an actor started afresh reads everything itself.
    pub fn clear(&mut self) {
        self.0 = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(vm_id: &str) -> MachineMsg {
        MachineMsg::VmObserved {
            vm_id: vm_id.into(),
            snapshot: None,
        }
    }

    #[test]
    fn each_kind_is_held_once_and_the_newest_wins() {
        let mut held = HeldMail::default();
        assert!(held.is_empty());
        for _ in 0..10 {
            held.hold(MachineMsg::Tick);
            held.hold(MachineMsg::Poke);
        }
        held.hold(observed("vm-1"));
        held.hold(MachineMsg::ConnectionChanged);
        held.hold(observed("vm-2"));
        let kinds: Vec<String> = held
            .take()
            .iter()
            .map(|message| match message {
                MachineMsg::Tick => "tick".into(),
                MachineMsg::Permitted(_) => "permit".into(),
                MachineMsg::Placed(_) => "place".into(),
                MachineMsg::Poke => "poke".into(),
                MachineMsg::ConnectionChanged => "connection".into(),
                MachineMsg::VmObserved { vm_id, .. } => format!("observed {vm_id}"),
                MachineMsg::ObjectChanged(_) => "object".into(),
            })
            .collect();
        assert_eq!(kinds, ["tick", "poke", "connection", "observed vm-2"]);
        assert!(held.is_empty(), "taken");
    }

    #[test]
    fn places_wake_a_machine_at_once_other_mail_in_its_turn() {
        let mut held = HeldMail::default();
        held.hold(MachineMsg::Tick);
        held.hold(observed("vm-1"));
        assert!(
            !held.holds_permit_or_place(),
            "a tick and a VM change wait for the machine's turn"
        );
        held.hold(MachineMsg::Placed(None));
        assert!(
            held.holds_permit_or_place(),
            "places (or the end of their wait) wake the machine at once"
        );
    }
}
