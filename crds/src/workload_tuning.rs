//! The settings of a machine for real workloads (issue 38): oVirt's high availability with a VM lease, the CPU the
//! guest sees, hugepages, virtual GPUs, and a pinned template version. Each is optional, sent in the VM's create request, and never
//! changed on a VM that exists (a changed OVirtMachineTemplate rolls out new machines).

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// oVirt high availability: the engine restarts the VM on another host when its host fails or is fenced.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = Rule::new("!has(self.leasestoragedomain) || self.enabled").message(
    "spec.highavailability.leasestoragedomain needs spec.highavailability.enabled: true; the engine keeps a VM \
     lease only for a highly available VM"
))]
pub struct HighAvailability {
    /// Restart the VM on another host when its host is lost.
    pub enabled: bool,

    /// The order in which the engine restarts highly available VMs, 0 to 100 (the engine's Low is 1, Medium 50,
    /// High 100). Omitted: the template's.
    #[x_kube(validation = Rule::new("self >= 0 && self <= 100").message(
        "spec.highavailability.priority must be between 0 and 100 (Low 1, Medium 50, High 100)"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,

    /// The active data storage domain, by name, that holds the VM's lease: with a lease the engine never runs the
    /// VM on two hosts at once, even when it cannot reach the lost host. Omitted: no lease.
    #[x_kube(validation = Rule::new("self != ''").message(
        "spec.highavailability.leasestoragedomain must name a data storage domain in oVirt, or be omitted"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leasestoragedomain: Option<String>,
}

/// How the guest sees the host's CPU.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = Rule::new("!has(self.custommodel) || !has(self.mode) || self.mode == 'custom'")
    .message("spec.cputuning.custommodel is used only with spec.cputuning.mode: custom (or mode omitted)"))]
pub struct CpuTuning {
    /// `host_passthrough` (the host's CPU as it is; the VM cannot migrate between hosts of other CPUs),
    /// `host_model` (the host's CPU model), or `custom` (the cluster's CPU type, or custommodel). Omitted: the
    /// template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<CpuMode>,

    /// The CPU model the guest sees, one the cluster's hosts support (e.g. `Skylake-Server,+spec-ctrl`).
    #[x_kube(validation = Rule::new("self.size() >= 1 && self.size() <= 255").message(
        "spec.cputuning.custommodel must be 1 to 255 characters (a CPU model the cluster's hosts support)"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custommodel: Option<String>,

    /// How the engine pins the VM's vCPUs to the host's CPUs when it starts (oVirt 4.5 or later): `dedicated`
    /// (physical CPUs of its own), `isolate_threads` (whole cores of its own, one vCPU each), `resize_and_pin_numa`
    /// (the VM takes the host's topology, pinned NUMA node by NUMA node). Omitted: not pinned. Pinning by hand to
    /// numbered host CPUs is not offered: it names CPUs of one host, and a template makes machines on many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinningpolicy: Option<CpuPinningPolicy>,
}

/// oVirt's CPU pinning policies that need no host chosen in advance.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CpuPinningPolicy {
    Dedicated,
    IsolateThreads,
    ResizeAndPinNuma,
}

impl CpuPinningPolicy {
    /// The value oVirt uses on the wire.
    pub fn as_ovirt(self) -> &'static str {
        match self {
            CpuPinningPolicy::Dedicated => "dedicated",
            CpuPinningPolicy::IsolateThreads => "isolate_threads",
            CpuPinningPolicy::ResizeAndPinNuma => "resize_and_pin_numa",
        }
    }
}

/// oVirt's CPU mode.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CpuMode {
    HostPassthrough,
    HostModel,
    Custom,
}

impl CpuMode {
    /// The value oVirt uses on the wire.
    pub fn as_ovirt(self) -> &'static str {
        match self {
            CpuMode::HostPassthrough => "host_passthrough",
            CpuMode::HostModel => "host_model",
            CpuMode::Custom => "custom",
        }
    }
}

/// Virtual NUMA nodes: the guest sees its CPUs and memory in `nodes` equal parts.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Numa {
    /// How many virtual NUMA nodes, 1 to 16; the VM's vCPUs and memory are split evenly among them (the first nodes
    /// take one vCPU more when they do not divide).
    #[x_kube(validation = Rule::new("self >= 1 && self <= 16").message(
        "spec.numa.nodes must be between 1 and 16"
    ))]
    pub nodes: i32,

    /// How the nodes' memory is placed on the host: `strict`, `interleave` or `preferred`. Omitted: the engine's
    /// default (interleave).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunemode: Option<NumaTuneMode>,
}

/// oVirt's NUMA tune mode.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NumaTuneMode {
    Strict,
    Interleave,
    Preferred,
}

impl NumaTuneMode {
    /// The value oVirt uses on the wire.
    pub fn as_ovirt(self) -> &'static str {
        match self {
            NumaTuneMode::Strict => "strict",
            NumaTuneMode::Interleave => "interleave",
            NumaTuneMode::Preferred => "preferred",
        }
    }
}

/// One version of spec.template, by number or by name.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = Rule::new("has(self.number) != has(self.name)").message(
    "spec.templateversion names a version by number or by name: set exactly one of number and name"
))]
pub struct TemplateVersion {
    /// The template's version number (1 is the base template).
    #[x_kube(validation = Rule::new("self >= 1").message(
        "spec.templateversion.number must be 1 (the base template) or more"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<i32>,

    /// The template version's name (its sub-version name in oVirt).
    #[x_kube(validation = Rule::new("self != ''").message(
        "spec.templateversion.name must not be empty"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Virtual GPUs: mediated devices (NVIDIA vGPU, Intel GVT-g) of the host's GPUs, one per type listed. The engine
/// starts the VM only on a host whose GPU offers each type with an instance free.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Vgpu {
    /// The mediated device types, one vGPU each, as the hosts' GPUs name them (`mdev_types` of
    /// `/hosts/{id}/devices`, e.g. `nvidia-22`).
    #[x_kube(validation = Rule::new("self.all(t, t.matches('^[A-Za-z0-9_-]{1,64}\\\\z'))").message(
        "spec.vgpu.types[] must be mediated device type names such as nvidia-22 (letters, digits, '_' and '-')"
    ))]
    #[schemars(length(min = 1, max = 4))]
    pub types: Vec<String>,

    /// Also use the vGPU as the VM's display. Omitted or false: compute only (the engine's `nodisplay`), as
    /// Kubernetes nodes need.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<bool>,
}

impl Vgpu {
    /// The engine's `mdev_type` custom property: the types, after `nodisplay` unless the display is wanted.
    pub fn mdev_type_property(&self) -> String {
        let mut parts: Vec<&str> = Vec::with_capacity(self.types.len() + 1);
        if self.display != Some(true) {
            parts.push("nodisplay");
        }
        parts.extend(self.types.iter().map(String::as_str));
        parts.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::Vgpu;

    #[test]
    fn vgpus_are_compute_only_unless_the_display_is_asked_for() {
        let mut vgpu = Vgpu {
            types: vec!["nvidia-22".into(), "nvidia-11".into()],
            display: None,
        };
        assert_eq!(vgpu.mdev_type_property(), "nodisplay,nvidia-22,nvidia-11");
        vgpu.display = Some(true);
        assert_eq!(vgpu.mdev_type_property(), "nvidia-22,nvidia-11");
    }
}
