//! What a machine actor holds between messages and passes.

use std::sync::Arc;
use std::time::Instant;

use capov_crds::{OVirtMachine, OVirtMachineStatus};
use ractor::ActorRef;

use crate::runtime::keys::ObjectKey;
use crate::runtime::mailbox::{self, ActorMetrics, Alive};
use crate::runtime::messages::{MachineMsg, ProviderMsg, VmWatch};
use crate::runtime::shared::Shared;
use capov_core::machine_steps::{Action, Observed};
use capov_core::vm::vm_snapshot::{Fingerprints, VmSnapshot};

pub struct MachineState {
    pub(super) key: ObjectKey,
    /// The object as last seen by the watch (shared with the supervisor) or as returned by this actor's own write;
    /// without managedFields (`slim`).
    pub(super) object: Arc<OVirtMachine>,
    pub(super) shared: Arc<Shared>,
    /// The status CAPOV owns, as last sent to the status writer.
    pub(super) status: OVirtMachineStatus,
    /// The fingerprint (`status::writer::fingerprint`) of the status last sent to the status writer, or seen on the
    /// object when the actor started.
    pub(super) sent_status: Option<u64>,
    /// `pass::headline` of the status last sent: a status whose headline is unchanged is only progress.
    pub(super) sent_headline: Option<u64>,
    /// Since when the machine has waited for a missing provider or credentials (SPEC §2.4: critical after 10 min).
    pub(super) missing_since: Option<std::time::Instant>,
    /// 5 s doubling to 5 min, each wait jittered (capov_core::policy::backoff).
    pub(super) backoff: capov_core::policy::backoff::Backoff,
    pub(super) pass_queued: bool,
    /// This actor's timer in the shared wheel (`runtime::timer_wheel`): the `Tick` of its next pass.
    pub(super) timer: crate::runtime::timer_wheel::TimerId,
    pub(super) subscribed_to: Option<(String, ActorRef<ProviderMsg>)>,
    pub(super) watched_vm: Option<VmWatch>,
    pub(super) last_seen_vm_status: Option<String>,
    /// The VM as last seen (by this actor's read or delivered by the provider's poll) and its fingerprint. While the
    /// VM is watched the poll delivers every change, so a pass decides from this instead of reading the VM again;
    /// any engine write on the VM, or the end of the watch, drops it.
    pub(super) vm_snapshot: Option<Arc<VmSnapshot>>,
    /// When `vm_snapshot` was read or delivered: while the VM is not watched, what it shows is trusted only while it
    /// is about as fresh as a watched one.
    pub(super) vm_snapshot_at: Option<Instant>,
    /// When what this pass's observation took from `vm_snapshot` was seen; None when it read the VM itself.
    pub(super) observed_snapshot_at: Option<Instant>,
    pub(super) last_seen_fingerprint: Option<Fingerprints>,
    /// The watched VM and status (hashed) when the last transition guard timer was set, and how many guards in a
    /// row were set with nothing changed: the guard's delay grows with them (`schedule::guard_delay`).
    pub(super) guard_key: Option<u64>,
    pub(super) quiet_guards: u8,
    /// The last successful action of a pass that ended to wait for its permit outside the pass (see `pass::pass`),
    /// and what it observed before acting: the next pass's hot-loop guard compares against it.
    pub(super) carried_success: Option<Box<(Observed, Action)>>,
    /// The VM this actor created and has not recorded in spec.providerID yet (it is recorded once its disks are
    /// copied): recording it then is not an adoption.
    pub(super) created_vm: Option<String>,
    /// The last pass ended with a backoff (a failed request, or a wait for something that failed): the next pass is
    /// a retry, and its ticket queues ahead of its cluster's others of its class (`permits::acquire_or_ticket`).
    pub(super) last_pass_failed: bool,
    /// A deadline the decision set (`Requeue::PollVmWithin`): the next pass runs at the latest then, even if the
    /// watched VM does not change. Taken when the next pass is scheduled.
    pub(super) deadline: Option<std::time::Duration>,
    /// The disks this actor detached from the VM while deleting it (gate disk-detach-when-node-gone), named in the
    /// MachineDeleted conditions until the VM is gone.
    pub(super) detached_disks: Vec<String>,
    /// Whether the machine had never been provisioned when this actor started: its first Ready is then timed
    /// (`capov_machine_time_to_ready_seconds`), once.
    pub(super) awaiting_first_ready: bool,
    /// Until when this actor leaves its VM, never seen yet, to the provider's search
    /// (`observe::vm::may_await_search`): set at its first ask; passes after it without a held snapshot read the VM.
    pub(super) vm_search_until: Option<std::time::Instant>,
    /// The bootstrap data Secret a pass found the data in, and its format (`observe::bootstrap`).
    pub(super) bootstrap_seen: Option<(String, capov_core::machine_steps::BootstrapFormat)>,
    /// The running pass's read of the bootstrap data (the Secret's name, the data), for its create step: the first
    /// pass of a new machine reads the Secret to learn its format and then creates the VM, and a second read of the
    /// same write-once Secret cost each machine one more request under its permit. Dropped at the pass's end.
    pub(super) bootstrap_data: Option<Box<(String, String)>>,
    /// The Node as the running pass's last write to it answered (`execute::node`): the next step decides on it
    /// instead of reading the Node again, one request fewer on the workload cluster's two turns. Dropped at the
    /// pass's end.
    pub(super) node_written: Option<Box<capov_core::machine_steps::NodeObservation>>,
    /// The places at the Node step the last pass found taken (`workload::clients::NoTurn::Busy`): the actor waits
    /// for them before its next pass.
    pub(super) workload_place_wanted: Option<crate::runtime::workload::clients::Wanted>,
    /// The running pass's place at the Node step, taken at its first workload request (or before the pass, when
    /// wanted) and kept to its end: its Node read and the writes decided on it need no other.
    pub(super) workload_place: Option<crate::runtime::workload::clients::StepPlace>,
    /// The running pass's permit or loan (`held_permit`); nothing between passes.
    pub(super) permit: super::held_permit::HeldPermit,
    /// The machine's ticket waiting in the permits' queue: the pass runs when its permit comes
    /// (`MachineMsg::Permitted`).
    pub(super) awaiting_permit: Option<super::ticket::Ticket>,
    /// A task waits for the Node-step places the last pass lacked (`pass::wait_for_place`): the pass runs when they
    /// come (`MachineMsg::Placed`).
    pub(super) awaiting_place: bool,
    /// The last pass left nothing to do before its next one, which is not due at once (`schedule::is_restful`).
    pub(super) restful: bool,
    /// The actor is stopping to leave this state with the supervisor (`dormant`).
    pub(super) resting: bool,
    pub(super) mail: ActorMetrics,
    /// Counts the actor in `capov_actors_live`; None while the machine is dormant.
    pub(super) alive: Option<Alive>,
}

impl MachineState {
    /// A machine actor's state when it starts: a pass is queued, nothing is watched or held yet.
    pub(super) fn new(
        key: ObjectKey,
        object: Arc<OVirtMachine>,
        status: OVirtMachineStatus,
        shared: Arc<Shared>,
    ) -> MachineState {
        let mail = ActorMetrics::of::<MachineMsg>(&shared.metrics);
        let timer = shared.timers.new_id();
        MachineState {
            key,
            object,
            shared,
            awaiting_first_ready: !status.ready,
            status,
            sent_status: None,
            sent_headline: None,
            missing_since: None,
            backoff: capov_core::policy::backoff::Backoff::steps(),
            pass_queued: true,
            timer,
            subscribed_to: None,
            watched_vm: None,
            last_seen_vm_status: None,
            vm_snapshot: None,
            vm_snapshot_at: None,
            observed_snapshot_at: None,
            last_seen_fingerprint: None,
            guard_key: None,
            quiet_guards: 0,
            carried_success: None,
            created_vm: None,
            last_pass_failed: false,
            deadline: None,
            detached_disks: Vec::new(),
            vm_search_until: None,
            bootstrap_seen: None,
            bootstrap_data: None,
            node_written: None,
            workload_place_wanted: None,
            workload_place: None,
            permit: Default::default(),
            awaiting_permit: None,
            awaiting_place: false,
            restful: false,
            resting: false,
            alive: Some(mail.alive()),
            mail,
        }
    }

    /// What the machine holds beyond itself, given back when it is gone for good (its object deleted, the runtime
    /// stopping): its timer, its place in the placements, its device claims, its provider subscription.
    pub(super) fn release(&mut self) {
        self.shared.timers.cancel(self.timer);
        self.shared.placements.forget_machine(&self.key);
        self.shared.device_claims.release(&self.key);
        if let Some((_, provider)) = self.subscribed_to.take() {
            let _ = mailbox::cast(
                &self.shared.metrics,
                &provider,
                ProviderMsg::Unsubscribe(self.key.clone()),
            );
        }
    }
}
