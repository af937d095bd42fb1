//! Engine behaviour: validation, error texts and state transitions, independent of HTTP and of
//! timers. Operations return the delayed transitions they start; the server schedules them.

mod add_vm;
mod disks;
mod nics;
mod power;

pub use add_vm::add_vm;
pub use disks::{attach_extra_disk, detach_disk, update_disk};
pub use nics::{add_nic, remove_nic, update_nic};
use power::power_off;
pub use power::{remove_vm, shutdown_vm, start_vm, stop_vm};

use std::time::Duration;

use capov_ovirt::model::{DiskStatus, VmStatus};
use serde::{Deserialize, Serialize};

use crate::state::*;

/// How an operation failed, in the engine's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineError {
    /// 404 with an empty body.
    NotFound,
    /// `<fault>` with this status.
    Fault {
        status: u16,
        reason: String,
        detail: String,
    },
    /// A failed action: `<action><fault/><status>failed</status></action>`.
    ActionFailed { status: u16, detail: String },
}

pub type EngineResult<T> = Result<T, EngineError>;

/// A backend validation failure (reason `Operation Failed`, detail `[message]`).
pub fn operation_failed(status: u16, message: &str) -> EngineError {
    EngineError::Fault {
        status,
        reason: "Operation Failed".into(),
        detail: format!("[{message}]"),
    }
}

pub(super) fn action_failed(status: u16, message: &str) -> EngineError {
    EngineError::ActionFailed {
        status,
        detail: format!("[{message}]"),
    }
}

pub(super) fn incomplete(what: &str) -> EngineError {
    EngineError::Fault {
        status: 400,
        reason: "Incomplete parameters".into(),
        detail: what.into(),
    }
}

/// Durations of the engine's asynchronous work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Timings {
    /// `image_locked` → `down` after add.
    pub image_locked_ms: u64,
    /// `wait_for_launch` → `powering_up` → `up`.
    pub boot_ms: u64,
    /// From `up` until the guest agent reports devices and IPs.
    pub ip_report_delay_ms: u64,
    /// Disk extend (`locked` → `ok`) and VM removal.
    pub disk_operation_ms: u64,
    /// `powering_down` → `down` on shutdown.
    pub shutdown_ms: u64,
}

impl Timings {
    /// Fast timings for tests.
    pub fn fast() -> Self {
        Self {
            image_locked_ms: 200,
            boot_ms: 300,
            ip_report_delay_ms: 300,
            disk_operation_ms: 200,
            shutdown_ms: 200,
        }
    }

    /// Timings closer to a small real engine, for demos.
    pub fn realistic() -> Self {
        Self {
            image_locked_ms: 2000,
            boot_ms: 3000,
            ip_report_delay_ms: 2000,
            disk_operation_ms: 1000,
            shutdown_ms: 1000,
        }
    }
}

impl Default for Timings {
    fn default() -> Self {
        Self::fast()
    }
}

/// A state change that happens later, if the object's generation has not moved on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled {
    pub after: Duration,
    pub target: String,
    pub generation: u64,
    pub transition: Transition,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    VmImagesReady,
    VmPoweringUp,
    VmUp,
    VmDevicesReported,
    VmPoweredDown,
    VmRemoved,
    DiskJobDone,
}

pub(super) fn later(ms: u64, target: &str, generation: u64, transition: Transition) -> Scheduled {
    Scheduled {
        after: Duration::from_millis(ms),
        target: target.to_string(),
        generation,
        transition,
    }
}

/// Running states for the start/stop/remove rules.
pub(super) fn is_running(status: &VmStatus) -> bool {
    matches!(
        status,
        VmStatus::Up
            | VmStatus::PoweringUp
            | VmStatus::WaitForLaunch
            | VmStatus::PoweringDown
            | VmStatus::RebootInProgress
            | VmStatus::Migrating
            | VmStatus::NotResponding
            | VmStatus::Paused
            | VmStatus::SavingState
            | VmStatus::RestoringState
            | VmStatus::Suspended
            | VmStatus::Unknown
    )
}

pub(super) fn vm_mut<'a>(state: &'a mut State, id: &str) -> EngineResult<&'a mut VmRecord> {
    state.vms.get_mut(id).ok_or(EngineError::NotFound)
}

/// Applies a delayed transition; stale ones (the object moved on) are ignored.
pub fn apply(state: &mut State, scheduled: &Scheduled) {
    if scheduled.transition == Transition::DiskJobDone {
        if let Some(disk) = state.disks.get_mut(&scheduled.target)
            && disk.generation == scheduled.generation
        {
            if let Some(size) = disk.pending_size.take() {
                disk.provisioned_size = size;
            }
            disk.status = DiskStatus::Ok;
        }
        return;
    }
    let Some(vm) = state.vms.get_mut(&scheduled.target) else {
        return;
    };
    if vm.generation != scheduled.generation {
        return;
    }
    match scheduled.transition {
        Transition::VmImagesReady => {
            vm.status = VmStatus::Down;
            let disk_ids = vm.disk_ids.clone();
            for disk_id in disk_ids {
                if let Some(disk) = state.disks.get_mut(&disk_id)
                    && disk.pending_size.is_none()
                {
                    disk.status = DiskStatus::Ok;
                }
            }
        }
        Transition::VmPoweringUp => vm.status = VmStatus::PoweringUp,
        Transition::VmUp => vm.status = VmStatus::Up,
        Transition::VmDevicesReported => {
            if vm.status == VmStatus::Up {
                vm.ips_reported = true;
            }
        }
        Transition::VmPoweredDown => power_off(vm),
        Transition::VmRemoved => {
            state.remove_vm(&scheduled.target);
        }
        Transition::DiskJobDone => {}
    }
}
