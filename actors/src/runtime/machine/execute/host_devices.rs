//! spec.hostdevices and spec.numa: adding the devices, or the virtual NUMA nodes, to a VM pinned to their hosts,
//! before its first start.

use capov_core::vm::numa_layout::NumaNodePlan;
use capov_ovirt::Client;
use capov_ovirt::model::{Core, Cores, NumaNodeCpu, NumaTuneMode, VirtualNumaNode};

use crate::runtime::machine::outcome::Executed;

/// Adds each device by name; the first failure stops the rest (the next pass reads what is there and adds the rest).
pub async fn attach(client: &Client, vm_id: &str, names: &[String]) -> capov_ovirt::Result<Executed> {
    for name in names {
        client.add_vm_host_device(vm_id, name).await?;
        tracing::info!(vm = %vm_id, device = %name, "host device added");
    }
    Ok(Executed::Continue)
}

/// Adds each node in order; the first failure stops the rest (the next pass reads which are there).
pub async fn add_numa_nodes(client: &Client, vm_id: &str, nodes: &[NumaNodePlan]) -> capov_ovirt::Result<Executed> {
    for node in nodes {
        let request = VirtualNumaNode {
            index: Some(node.index),
            memory: Some(node.memory_mib),
            cpu: Some(NumaNodeCpu {
                cores: Some(Cores {
                    items: node.vcpus.iter().map(|&index| Core { index: Some(index) }).collect(),
                }),
            }),
            numa_tune_mode: node.tune_mode.map(|mode| NumaTuneMode::parse(mode.as_ovirt())),
            ..VirtualNumaNode::default()
        };
        client.add_vm_numa_node(vm_id, &request).await?;
        tracing::info!(vm = %vm_id, node = node.index, "virtual NUMA node added");
    }
    Ok(Executed::Continue)
}
