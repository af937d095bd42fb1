//! One test per branch of SPEC §2, named after the behaviour: one file per step, as in the decision code, plus
//! deletion, the pause check, what the actor reads off an action, the hot-loop guard and the whole way through; all
//! start from the shared fixtures.

mod fixtures;

mod actions;
mod connection;
mod creation;
mod creation_targets;
mod deletion;
mod disks;
mod host;
mod host_devices;
mod hot_loop;
mod lifecycle;
mod network;
mod node;
mod pause;
mod placement;
mod power;
mod preconditions;
mod reads;
mod static_addresses;
mod vm_shape;
mod volume_release;
