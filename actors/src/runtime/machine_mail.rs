//! Mail for a machine from outside its actor: the provider's reports and the timer wheel's ticks. A machine's actor
//! may have stopped to rest (`machine::dormant`), and then the supervisor, which keeps the machine's state, takes the
//! mail for it and wakes it.

use ractor::{ActorRef, MessagingErr};

use crate::metrics::Metrics;
use crate::runtime::keys::ObjectKey;
use crate::runtime::mailbox;
use crate::runtime::messages::{MachineMsg, SupervisorMsg};

/// Sends mail to a machine's actor, or, when that actor has stopped (the machine is dormant, or the actor is
/// stopping to rest) or is not known (`None`: the machine rested), to the supervisor, which holds it for the machine
/// and wakes it.
///
/// A holder drops its `ActorRef` once the machine rests: a stopped actor's reference keeps its channels allocated
/// (about 4 KB), which is what resting is to save.
pub fn tell(
    metrics: &Metrics,
    supervisor: &ActorRef<SupervisorMsg>,
    key: &ObjectKey,
    actor: Option<&ActorRef<MachineMsg>>,
    message: MachineMsg,
) {
    let message = match actor {
        Some(actor) => match mailbox::cast(metrics, actor, message) {
            Err(MessagingErr::SendErr(message)) => message,
            _ => return,
        },
        None => message,
    };
    let to_machine = SupervisorMsg::ToMachine {
        key: key.clone(),
        message,
    };
    let _ = mailbox::cast(metrics, supervisor, to_machine);
}
