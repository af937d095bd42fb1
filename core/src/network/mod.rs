//! Addressing and the guest's network: the machine's addresses, IPAM claims, what the guest is told, the
//! control-plane endpoint from a pool, and the VM's NICs.

pub mod addresses;
pub mod control_plane_endpoint;
pub mod guest_network;
pub mod ip_claims;
pub mod nics;
