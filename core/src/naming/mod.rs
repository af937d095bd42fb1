//! The names CAPOV gives engine objects: VMs, engine-wide groups and tags, disk aliases.

pub mod disk_alias;
pub mod engine_names;
pub mod vm_name;
pub mod vm_tags;
