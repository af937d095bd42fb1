//! PCI passthrough (spec.hostdevices): the engine adds a host device only to a VM pinned to the one host that has
//! it, and starts the VM only while the device is free there. So the host is chosen before the create: the first
//! host (by name) of the oVirt cluster that has every device asked for, none of them held.

use crate::conditions::reasons;
use capov_crds::Severity;

/// A host that has some of the devices a machine asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceHostFact {
    pub host_id: String,
    pub host_name: String,
    /// The devices asked for that the host has, each with who holds it.
    pub devices: Vec<HostDeviceFact>,
}

/// One device of a host and who holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostDeviceFact {
    pub name: String,
    /// None: free. Else who holds it, for the message: a running VM (the engine's word) or another machine of this
    /// operator whose VM is being made with it.
    pub held_by: Option<String>,
}

/// The host chosen for a VM's host devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceHost {
    pub host_id: String,
    pub host_name: String,
    pub devices: Vec<String>,
}

/// Why no host can take the devices: MachineCreated's reason, severity and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoDeviceHost {
    pub reason: &'static str,
    pub severity: Severity,
    pub message: String,
}

/// The host for `wanted` among `hosts` of oVirt cluster `cluster`: every device there and free. Devices no host
/// has are an error to fix in the spec; devices that are there but held are a wait (Warning), retried until one
/// is given back.
pub fn choose(wanted: &[String], hosts: &[DeviceHostFact], cluster: &str) -> Result<DeviceHost, NoDeviceHost> {
    let mut candidates: Vec<&DeviceHostFact> = hosts.iter().filter(|host| has_all(host, wanted)).collect();
    candidates.sort_by(|a, b| a.host_name.cmp(&b.host_name));
    if candidates.is_empty() {
        return Err(NoDeviceHost {
            reason: reasons::NO_FREE_HOST_DEVICE,
            severity: Severity::Error,
            message: format!(
                "no host of oVirt cluster {cluster:?} has every device of spec.hostdevices ({}){}: fix the names (a \
                 host's Host Devices in oVirt) or add a host that has them",
                wanted.join(", "),
                partial_hosts(hosts)
            ),
        });
    }
    if let Some(host) = candidates.iter().find(|host| all_free(host, wanted)) {
        return Ok(DeviceHost {
            host_id: host.host_id.clone(),
            host_name: host.host_name.clone(),
            devices: wanted.to_vec(),
        });
    }
    let held: Vec<String> = candidates
        .iter()
        .flat_map(|host| {
            host.devices.iter().filter_map(move |d| {
                d.held_by
                    .as_ref()
                    .map(|by| format!("{} on {} by {by}", d.name, host.host_name))
            })
        })
        .collect();
    Err(NoDeviceHost {
        reason: reasons::NO_FREE_HOST_DEVICE,
        severity: Severity::Warning,
        message: format!(
            "every host of oVirt cluster {cluster:?} with the devices of spec.hostdevices has one of them in use \
             ({}): the VM is created once one is given back",
            held.join("; ")
        ),
    })
}

/// The names of spec.hostdevices, each once, in their order.
pub fn distinct(names: &[String]) -> Vec<String> {
    let mut seen = Vec::with_capacity(names.len());
    for name in names {
        if !seen.contains(name) {
            seen.push(name.clone());
        }
    }
    seen
}

fn has_all(host: &DeviceHostFact, wanted: &[String]) -> bool {
    wanted.iter().all(|name| host.devices.iter().any(|d| &d.name == name))
}

fn all_free(host: &DeviceHostFact, wanted: &[String]) -> bool {
    wanted
        .iter()
        .all(|name| host.devices.iter().any(|d| &d.name == name && d.held_by.is_none()))
}

/// ", host-a has only pci_…" for the hosts with some of the devices, so that a typo shows.
fn partial_hosts(hosts: &[DeviceHostFact]) -> String {
    let partial: Vec<String> = hosts
        .iter()
        .filter(|host| !host.devices.is_empty())
        .map(|host| {
            let names: Vec<&str> = host.devices.iter().map(|d| d.name.as_str()).collect();
            format!("{} has only {}", host.host_name, names.join(", "))
        })
        .collect();
    if partial.is_empty() {
        String::new()
    } else {
        format!("; {}", partial.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, devices: &[(&str, Option<&str>)]) -> DeviceHostFact {
        DeviceHostFact {
            host_id: format!("id-{name}"),
            host_name: name.into(),
            devices: devices
                .iter()
                .map(|(device, held)| HostDeviceFact {
                    name: (*device).into(),
                    held_by: held.map(String::from),
                })
                .collect(),
        }
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_first_host_by_name_with_every_device_free_is_chosen() {
        let wanted = names(&["pci_0000_3b_00_0", "pci_0000_af_00_0"]);
        let hosts = [
            host("host-c", &[("pci_0000_3b_00_0", None), ("pci_0000_af_00_0", None)]),
            host(
                "host-a",
                &[("pci_0000_3b_00_0", Some("VM gpu-1")), ("pci_0000_af_00_0", None)],
            ),
            host("host-b", &[("pci_0000_3b_00_0", None), ("pci_0000_af_00_0", None)]),
            host("host-0", &[("pci_0000_3b_00_0", None)]),
        ];
        let chosen = choose(&wanted, &hosts, "Default").expect("host-b");
        assert_eq!(
            chosen,
            DeviceHost {
                host_id: "id-host-b".into(),
                host_name: "host-b".into(),
                devices: wanted.clone(),
            }
        );
    }

    #[test]
    fn devices_no_host_has_are_an_error_naming_what_the_hosts_have() {
        // The reader lists only the devices asked for: hosts with some of them are named, so that a typo in one of
        // several names shows.
        let wanted = names(&["pci_0000_3b_00_0", "pci_0000_3b_00_2"]);
        let hosts = [host("host-a", &[("pci_0000_3b_00_0", None)]), host("host-b", &[])];
        let refusal = choose(&wanted, &hosts, "Default").expect_err("no host has both");
        assert_eq!(
            (refusal.reason, refusal.severity),
            (reasons::NO_FREE_HOST_DEVICE, Severity::Error)
        );
        assert_eq!(
            refusal.message,
            "no host of oVirt cluster \"Default\" has every device of spec.hostdevices (pci_0000_3b_00_0, \
             pci_0000_3b_00_2); host-a has only pci_0000_3b_00_0: fix the names (a host's Host Devices in oVirt) or \
             add a host that has them"
        );
        let none = choose(&names(&["pci_0000_3b_00_9"]), &hosts[1..], "Default").expect_err("no host has it");
        assert_eq!(
            none.message,
            "no host of oVirt cluster \"Default\" has every device of spec.hostdevices (pci_0000_3b_00_9): fix the \
             names (a host's Host Devices in oVirt) or add a host that has them"
        );
    }

    #[test]
    fn devices_that_are_all_held_are_a_wait_that_names_the_holders() {
        let wanted = names(&["pci_0000_3b_00_0"]);
        let hosts = [
            host("host-a", &[("pci_0000_3b_00_0", Some("VM gpu-1"))]),
            host(
                "host-b",
                &[("pci_0000_3b_00_0", Some("machine ns/gpu-2, being created"))],
            ),
        ];
        let refusal = choose(&wanted, &hosts, "Default").expect_err("all held");
        assert_eq!(
            (refusal.reason, refusal.severity),
            (reasons::NO_FREE_HOST_DEVICE, Severity::Warning)
        );
        assert_eq!(
            refusal.message,
            "every host of oVirt cluster \"Default\" with the devices of spec.hostdevices has one of them in use \
             (pci_0000_3b_00_0 on host-a by VM gpu-1; pci_0000_3b_00_0 on host-b by machine ns/gpu-2, being \
             created): the VM is created once one is given back"
        );
    }
}
