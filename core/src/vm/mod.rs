//! A VM as decisions see it, and the bootstrap data that reaches its guest.

pub mod bootstrap_payload;
pub mod numa_layout;
pub mod vm_snapshot;
