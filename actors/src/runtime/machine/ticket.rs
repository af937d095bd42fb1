//! The ticket a machine leaves in the reconcile permits' queue (`runtime::permits`) while it rests, and when it
//! queues another.

use std::time::Duration;

use tokio::time::Instant;

use crate::fair_share::Class;

/// How long a machine's ticket waits for its permit before it queues once more (its first stays where it is). The
/// longest waits measured, at 10,000 machines in trouble, were a few minutes: most tickets never queue twice.
pub const TICKET_PATIENCE: Duration = Duration::from_secs(5 * 60);

/// A ticket the machine left in the permits' queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    pub class: Class,
    /// On the runtime's clock, as the timer that guards it.
    pub asked: Instant,
}

impl Ticket {
    /// Whether a pass asked for at `now` in `class` queues another ticket beside this one: when its work became more
    /// urgent than this ticket's class, or this ticket waited `TICKET_PATIENCE`.
    pub fn queue_again(&self, class: Class, now: Instant) -> bool {
        class < self.class || now.saturating_duration_since(self.asked) >= TICKET_PATIENCE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_queues_again_only_for_more_urgent_work_or_after_its_patience() {
        let asked = Instant::now();
        let ticket = Ticket {
            class: Class::Begun,
            asked,
        };
        let soon = asked + Duration::from_secs(1);
        assert!(!ticket.queue_again(Class::Begun, soon), "same class: the ticket waits");
        assert!(!ticket.queue_again(Class::New, soon), "less urgent: the ticket waits");
        assert!(
            ticket.queue_again(Class::Urgent, soon),
            "its deletion began: it queues in the urgent class"
        );
        let late = asked + TICKET_PATIENCE;
        assert!(!ticket.queue_again(Class::Begun, late - Duration::from_millis(1)));
        assert!(
            ticket.queue_again(Class::Begun, late),
            "a ticket waited out its patience queues again"
        );
    }
}
