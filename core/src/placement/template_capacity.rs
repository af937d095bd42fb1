//! What one machine of an OVirtMachineTemplate offers (its status.capacity and status.nodeInfo), computed from the
//! template's spec alone: the cluster autoscaler reads it to scale a MachineDeployment up from zero nodes.

use std::collections::BTreeMap;

use capov_crds::{MachineSettings, NodeInfo, OVirtMachineTemplateStatus, OperatingSystem};

/// The status CAPOV reports for a template with these settings. A value the spec leaves to the oVirt template
/// (a CPU topology not fully given, no memory size, no disk size) is left out rather than guessed: the autoscaler
/// then falls back to the MachineDeployment's capacity annotations.
pub fn template_status(settings: &MachineSettings) -> OVirtMachineTemplateStatus {
    let mut capacity = BTreeMap::new();
    if let Some(cpus) = cpu_count(settings) {
        capacity.insert("cpu".to_string(), cpus.to_string());
    }
    if let Some(mib) = settings.memory.as_ref().and_then(|memory| memory.sizemb) {
        capacity.insert("memory".to_string(), format!("{mib}Mi"));
    }
    if let Some(gib) = settings.osdisksizegb {
        capacity.insert("ephemeral-storage".to_string(), format!("{gib}Gi"));
    }
    for (resource, count) in vgpu_resources(settings) {
        capacity.insert(resource.to_string(), count.to_string());
    }
    OVirtMachineTemplateStatus {
        capacity,
        // CAPOV hands machines cloud-init or Ignition only, both Linux: a Windows template never boots a Node.
        node_info: Some(NodeInfo {
            architecture: None,
            operating_system: Some(OperatingSystem::Linux),
        }),
    }
}

/// The GPUs a machine's vGPUs give its Node, by the extended resource their device plugin registers: NVIDIA's
/// (`nvidia-…` mdev types) as `nvidia.com/gpu`, Intel GVT-g's (`i915-…`) as `gpu.intel.com/i915`, one per type
/// listed (the guest sees one GPU per mediated device). Other vendors' types, and whole devices passed through
/// (`spec.hostdevices`, whose names do not say what they are), are left to the MachineDeployment's annotations.
fn vgpu_resources(settings: &MachineSettings) -> BTreeMap<&'static str, usize> {
    let mut resources = BTreeMap::new();
    for mdev_type in settings.vgpu.iter().flat_map(|vgpu| &vgpu.types) {
        let resource = if mdev_type.starts_with("nvidia-") {
            "nvidia.com/gpu"
        } else if mdev_type.starts_with("i915-") {
            "gpu.intel.com/i915"
        } else {
            continue;
        };
        *resources.entry(resource).or_insert(0) += 1;
    }
    resources
}

/// sockets × cores × threads, when the spec gives all three (else the template's values would complete it).
fn cpu_count(settings: &MachineSettings) -> Option<i64> {
    let cpu = settings.cpu.as_ref()?;
    let product = i64::from(cpu.sockets?) * i64::from(cpu.cores?) * i64::from(cpu.threads?);
    (product > 0).then_some(product)
}

#[cfg(test)]
mod tests {
    use capov_crds::{CpuTopology, Memory};

    use super::*;

    fn settings(
        cpu: Option<(Option<i32>, Option<i32>, Option<i32>)>,
        mib: Option<i64>,
        gib: Option<i64>,
    ) -> MachineSettings {
        MachineSettings {
            cpu: cpu.map(|(sockets, cores, threads)| CpuTopology {
                sockets,
                cores,
                threads,
            }),
            memory: mib.map(|sizemb| Memory {
                sizemb: Some(sizemb),
                guaranteedmb: None,
            }),
            osdisksizegb: gib,
            ..MachineSettings::default()
        }
    }

    fn capacity(status: &OVirtMachineTemplateStatus) -> Vec<(&str, &str)> {
        status.capacity.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }

    #[test]
    fn a_full_spec_gives_cpu_memory_and_disk_as_quantities() {
        let status = template_status(&settings(Some((Some(2), Some(4), Some(2))), Some(8192), Some(40)));
        assert_eq!(
            capacity(&status),
            [("cpu", "16"), ("ephemeral-storage", "40Gi"), ("memory", "8192Mi")]
        );
    }

    #[test]
    fn values_left_to_the_ovirt_template_are_not_guessed() {
        let partial_cpu = template_status(&settings(Some((None, Some(4), Some(1))), None, None));
        assert!(partial_cpu.capacity.is_empty(), "{partial_cpu:?}");
        let memory_only = template_status(&settings(None, Some(2048), None));
        assert_eq!(capacity(&memory_only), [("memory", "2048Mi")]);
    }

    #[test]
    fn vgpus_count_as_the_gpus_their_device_plugins_register() {
        let mut with_vgpus = settings(None, Some(2048), None);
        with_vgpus.vgpu = Some(capov_crds::Vgpu {
            types: vec![
                "nvidia-22".into(),
                "nvidia-63".into(),
                "i915-GVTg_V5_4".into(),
                "mtty-2".into(),
            ],
            display: None,
        });
        with_vgpus.hostdevices = vec!["pci_0000_3b_00_0".into()];
        assert_eq!(
            capacity(&template_status(&with_vgpus)),
            [
                ("gpu.intel.com/i915", "1"),
                ("memory", "2048Mi"),
                ("nvidia.com/gpu", "2")
            ]
        );
    }

    #[test]
    fn node_info_says_linux_and_leaves_the_architecture_out() {
        let status = template_status(&MachineSettings::default());
        assert_eq!(
            status.node_info,
            Some(NodeInfo {
                architecture: None,
                operating_system: Some(OperatingSystem::Linux)
            })
        );
    }

    #[test]
    fn the_status_serializes_as_the_autoscaler_reads_it() {
        let status = template_status(&settings(Some((Some(1), Some(2), Some(1))), Some(4096), None));
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            serde_json::json!({"capacity": {"cpu": "2", "memory": "4096Mi"}, "nodeInfo": {"operatingSystem": "linux"}})
        );
    }
}
