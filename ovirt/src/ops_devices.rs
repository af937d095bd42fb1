//! Typed engine operations on what real workloads need: host devices (PCI passthrough), mediated devices (vGPUs),
//! virtual NUMA nodes, instance types and template versions. Paths follow the engine's REST API v4.

use reqwest::Method;

use crate::client::{Call, Client};
use crate::error::Result;
use crate::model::*;
use crate::search;

/// Options of `POST /vms` beyond the body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddVmOptions {
    pub clone: bool,
    /// `auto_pinning_policy` as a parameter of the add (engines 4.4.3 to 4.4.x; 4.5 reads the VM's
    /// `cpu_pinning_policy` instead).
    pub auto_pinning_policy: Option<AutoPinningPolicy>,
}

/// The version of a template to pick among those of one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateVersionSelector {
    Number(u32),
    Name(String),
}

impl TemplateVersionSelector {
    /// Whether `template` is the version this names.
    pub fn matches_template(&self, template: &Template) -> bool {
        let version = template.version.as_ref();
        match self {
            Self::Number(n) => version.and_then(|v| v.version_number) == Some(*n),
            Self::Name(name) => version.and_then(|v| v.version_name.as_deref()) == Some(name.as_str()),
        }
    }
}

impl Client {
    /// `POST /vms` with its query parameters; see [`Client::add_vm`].
    pub async fn add_vm_with(&self, vm: &Vm, options: &AddVmOptions) -> Result<Vm> {
        let mut call = Call::new(Method::POST, "vms", &["vms"]).query("clone", options.clone.to_string());
        if let Some(policy) = &options.auto_pinning_policy {
            call = call.query("auto_pinning_policy", policy.as_str());
        }
        self.fetch(call.xml_body(vm)?).await
    }

    // ---- host devices ----

    /// The devices of a host, with their mediated-device types and, for a device a running VM holds, that VM.
    pub async fn host_devices(&self, host_id: &str) -> Result<Vec<HostDevice>> {
        let call = Call::new(Method::GET, "devices", &["hosts", host_id, "devices"]);
        Ok(self.fetch::<HostDevices>(call).await?.items)
    }

    /// The host devices attached to a VM (placeholders of their IOMMU groups included).
    pub async fn vm_host_devices(&self, vm_id: &str) -> Result<Vec<HostDevice>> {
        let call = Call::new(Method::GET, "hostdevices", &["vms", vm_id, "hostdevices"]);
        Ok(self.fetch::<HostDevices>(call).await?.items)
    }

    /// Attaches the device of this name (of the one host the VM is pinned to) to a VM that is down.
    pub async fn add_vm_host_device(&self, vm_id: &str, device_name: &str) -> Result<HostDevice> {
        let call = Call::new(Method::POST, "hostdevices", &["vms", vm_id, "hostdevices"])
            .xml_body(&HostDevice::named(device_name))?;
        self.fetch(call).await
    }

    /// Detaches a host device (by its id, the hex of its name) from a VM.
    pub async fn remove_vm_host_device(&self, vm_id: &str, device_id: &str) -> Result<()> {
        self.perform(Call::new(
            Method::DELETE,
            "hostdevices",
            &["vms", vm_id, "hostdevices", device_id],
        ))
        .await
    }

    // ---- mediated devices (vGPUs) ----

    /// The mediated devices of a VM (engines 4.5 and later).
    pub async fn vm_mediated_devices(&self, vm_id: &str) -> Result<Vec<VmMediatedDevice>> {
        let call = Call::new(Method::GET, "mediateddevices", &["vms", vm_id, "mediateddevices"]);
        Ok(self.fetch::<VmMediatedDevices>(call).await?.items)
    }

    /// Adds a mediated device of `mdev_type` to a VM; whether a host offers the type is the scheduler's question
    /// when the VM starts.
    pub async fn add_vm_mediated_device(&self, vm_id: &str, mdev_type: &str) -> Result<VmMediatedDevice> {
        let call = Call::new(Method::POST, "mediateddevices", &["vms", vm_id, "mediateddevices"])
            .xml_body(&VmMediatedDevice::of_type(mdev_type))?;
        self.fetch(call).await
    }

    pub async fn remove_vm_mediated_device(&self, vm_id: &str, device_id: &str) -> Result<()> {
        self.perform(Call::new(
            Method::DELETE,
            "mediateddevices",
            &["vms", vm_id, "mediateddevices", device_id],
        ))
        .await
    }

    // ---- virtual NUMA nodes ----

    pub async fn vm_numa_nodes(&self, vm_id: &str) -> Result<Vec<VirtualNumaNode>> {
        let call = Call::new(Method::GET, "numanodes", &["vms", vm_id, "numanodes"]);
        Ok(self.fetch::<VirtualNumaNodes>(call).await?.items)
    }

    /// Adds a virtual NUMA node; the engine wants the VM pinned to at least one host.
    pub async fn add_vm_numa_node(&self, vm_id: &str, node: &VirtualNumaNode) -> Result<VirtualNumaNode> {
        let call = Call::new(Method::POST, "numanodes", &["vms", vm_id, "numanodes"]).xml_body(node)?;
        self.fetch(call).await
    }

    // ---- instance types ----

    pub async fn instance_types(&self) -> Result<Vec<InstanceType>> {
        let call = Call::new(Method::GET, "instancetypes", &["instancetypes"]);
        Ok(self.fetch::<InstanceTypes>(call).await?.items)
    }

    /// The instance type named exactly `name`, if any. A VM names its instance type by id: the engine's add looks
    /// instance types up by id only.
    pub async fn find_instance_type_by_name(&self, name: &str) -> Result<Option<InstanceType>> {
        let call = Call::new(Method::GET, "instancetypes", &["instancetypes"]).query("search", search::name_is(name)?);
        let found = self.fetch::<InstanceTypes>(call).await?.items;
        Ok(found.into_iter().find(|t| t.name.as_deref() == Some(name)))
    }

    // ---- template versions ----

    /// Every version of the templates named exactly `name` (optionally of a cluster), oldest version first.
    pub async fn template_versions(&self, name: &str, cluster_name: Option<&str>) -> Result<Vec<Template>> {
        let mut versions = self.find_templates_by_name(name, cluster_name).await?;
        versions.sort_by_key(|t| t.version.as_ref().and_then(|v| v.version_number).unwrap_or_default());
        Ok(versions)
    }

    /// The version of template `name` that `selector` names; None when no version has that number or name. A VM
    /// made from it names its id as `template`: by name the engine takes the newest version.
    pub async fn find_template_version(
        &self,
        name: &str,
        cluster_name: Option<&str>,
        selector: &TemplateVersionSelector,
    ) -> Result<Option<Template>> {
        let versions = self.template_versions(name, cluster_name).await?;
        Ok(versions.into_iter().find(|t| selector.matches_template(t)))
    }
}

/// A host device's REST id: the hex of its name's bytes (the engine's `HexUtils.string2hex`).
pub fn host_device_id(name: &str) -> String {
    name.bytes().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_ids_are_the_hex_of_their_names() {
        assert_eq!(host_device_id("pci_0000_3b_00_0"), "7063695f303030305f33625f30305f30");
    }

    #[test]
    fn version_selectors_match_number_or_name() {
        let v2 = Template {
            version: Some(TemplateVersion {
                version_number: Some(2),
                version_name: Some("hardened".into()),
                base_template: None,
            }),
            ..Template::default()
        };
        assert!(TemplateVersionSelector::Number(2).matches_template(&v2));
        assert!(TemplateVersionSelector::Name("hardened".into()).matches_template(&v2));
        assert!(!TemplateVersionSelector::Number(1).matches_template(&v2));
        assert!(!TemplateVersionSelector::Name("base".into()).matches_template(&v2));
    }
}
