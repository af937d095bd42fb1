//! What [`super::decide`] returns: one action for the actor to execute, the conditions to write, and status
//! fields to update. After a successful action the actor observes and decides again at once; on failure it backs
//! off (crate::policy::backoff). `Wait` and `Done` say when to look again.

use capov_crds::{DataDiskStatus, MachineAddress};

use crate::conditions::ConditionUpdate;

use super::action::Action;

/// One reconcile's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub action: Action,
    /// Conditions to set, in step order; Ready is recomputed from them by the caller
    /// ([`crate::conditions::ready_summary`]).
    pub conditions: Vec<ConditionUpdate>,
    pub status: StatusChange,
}

/// Status fields to update besides the conditions; None / false = leave as is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusChange {
    /// Set `status.ready` and `status.initialization.provisioned` to true (never reset).
    pub mark_provisioned: bool,
    pub addresses: Option<Vec<MachineAddress>>,
    pub vm_status: Option<String>,
    /// `status.dataDisks`: the data disks as created.
    pub data_disks: Option<Vec<DataDiskStatus>>,
    /// `status.host`: Some(None) clears it (the VM is not running).
    pub host: Option<Option<String>>,
    /// `status.failureDomain`.
    pub failure_domain: Option<String>,
}

impl Decision {
    pub fn new(action: Action, conditions: Vec<ConditionUpdate>) -> Self {
        Decision {
            action,
            conditions,
            status: StatusChange::default(),
        }
    }

    /// The condition of one type in this decision, if any.
    pub fn condition(&self, type_: &str) -> Option<&ConditionUpdate> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}
