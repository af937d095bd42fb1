//! Work the engine finishes later: what changes, on which object, after how long.

use std::time::Duration;

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
    /// A guest that ignores ACPI did not shut down: the engine gives up and the VM is `up` again.
    VmShutdownFailed,
    VmRemoved,
    DiskJobDone,
    /// A cloned VM's disk copy joins its storage domain's pool (after `image_locked_ms`).
    VmCopyStarts,
    /// The engine restarts a highly available VM with a lease whose host it lost, elsewhere (`VdsManager`
    /// `restartVmsWithLeaseIfNeeded`).
    VmLeaseRestart,
    /// A live migration lands: the VM is up on the host it was migrating to.
    VmMigrated,
    /// A storage domain's copy pool: the copy that ends first is done (`target` is the domain, `generation` the
    /// pool's epoch).
    CopyProgress,
}

pub fn later(ms: u64, target: &str, generation: u64, transition: Transition) -> Scheduled {
    Scheduled {
        after: Duration::from_millis(ms),
        target: target.to_string(),
        generation,
        transition,
    }
}
