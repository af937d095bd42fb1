//! spec.numa: the VM's vCPUs and memory split evenly over its virtual NUMA nodes, as the engine wants them added
//! (indexes from 0 without gaps, every vCPU in one node, the nodes' memory not above the VM's).

use capov_crds::NumaTuneMode;

/// One virtual NUMA node to add.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumaNodePlan {
    pub index: u32,
    /// The vCPUs (by index) the node holds.
    pub vcpus: Vec<u32>,
    pub memory_mib: u64,
    pub tune_mode: Option<NumaTuneMode>,
}

/// `nodes` nodes over `vcpus` vCPUs and `memory_mib` MiB: consecutive vCPUs per node, the first nodes taking one more
/// when they do not divide; memory in equal parts (what does not divide is left to no node, which the engine allows).
/// Empty when there is nothing to split (no nodes, or fewer vCPUs than nodes: the CRD refuses that).
pub fn layout(nodes: u32, vcpus: u32, memory_mib: u64, tune_mode: Option<NumaTuneMode>) -> Vec<NumaNodePlan> {
    if nodes == 0 || vcpus < nodes {
        return Vec::new();
    }
    let (per_node, extra) = (vcpus / nodes, vcpus % nodes);
    let mut next = 0;
    (0..nodes)
        .map(|index| {
            let count = per_node + u32::from(index < extra);
            let node = NumaNodePlan {
                index,
                vcpus: (next..next + count).collect(),
                memory_mib: memory_mib / u64::from(nodes),
                tune_mode,
            };
            next += count;
            node
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vcpus_and_memory_are_split_evenly_the_first_nodes_taking_what_does_not_divide() {
        let nodes = layout(3, 8, 8192, Some(NumaTuneMode::Strict));
        let shape: Vec<(u32, Vec<u32>, u64)> = nodes.iter().map(|n| (n.index, n.vcpus.clone(), n.memory_mib)).collect();
        assert_eq!(
            shape,
            vec![
                (0, vec![0, 1, 2], 2730),
                (1, vec![3, 4, 5], 2730),
                (2, vec![6, 7], 2730)
            ]
        );
        assert!(nodes.iter().all(|n| n.tune_mode == Some(NumaTuneMode::Strict)));
        assert_eq!(layout(1, 4, 4096, None)[0].vcpus, vec![0, 1, 2, 3]);
    }

    #[test]
    fn nothing_to_split_gives_no_nodes() {
        assert!(layout(0, 4, 4096, None).is_empty());
        assert!(layout(5, 4, 4096, None).is_empty());
    }
}
