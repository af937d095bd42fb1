//! A VM as one engine answer showed it, reduced to what a machine's decisions read. The provider's batched poll and
//! a machine's own read both make one from the same [`VmFacts`], so that a machine can decide from what the poll
//! delivered instead of reading its VM again, and the poll can tell "changed" from "the same" by a fingerprint.

use std::hash::{DefaultHasher, Hash, Hasher};

use capov_ovirt_model::model::{VmFacts, VmStatus};

use crate::machine_steps::{VmDisk, VmHost};
use crate::network::addresses::ReportedDevice;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VmSnapshot {
    pub id: String,
    pub name: String,
    pub description: String,
    /// The engine's `vm_status`; a VM shown without `<status>` is `image_illegal`.
    pub status: String,
    pub os_type: Option<String>,
    /// The engine reports a start time: the VM ran at least once.
    pub started: bool,
    /// Present when the answer inlined every attachment with its whole disk (`follow=disk_attachments.disk`).
    pub disks: Option<Vec<VmDisk>>,
    /// Present when the answer inlined the NICs (`follow=nics`).
    pub nics: Option<Vec<SnapshotNic>>,
    /// Present when the answer inlined what the guest agent reports (`follow=reported_devices`).
    pub reported_devices: Option<Vec<ReportedDevice>>,
    /// The id of the oVirt cluster the VM is in.
    pub cluster_id: Option<String>,
    /// The host the VM runs on, with its name and status as the provider's last inventory poll saw them
    /// ([`VmSnapshot::with_hosts`]); None while it is not running.
    pub host: Option<VmHost>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SnapshotNic {
    pub id: String,
    pub name: String,
    pub mac: Option<String>,
    pub vnic_profile_id: Option<String>,
}

impl VmSnapshot {
    /// None for an answer without an id (nothing a machine could match it to).
    pub fn from_facts(facts: VmFacts) -> Option<VmSnapshot> {
        let status = VmStatus::of(facts.status.as_ref()).as_str().to_string();
        let disks = facts.disk_attachments.and_then(|attachments| {
            attachments
                .items
                .into_iter()
                .map(|attachment| {
                    let disk = attachment.disk?;
                    Some(VmDisk {
                        attachment_id: attachment.id.unwrap_or_default(),
                        disk_id: disk.id?,
                        alias: disk.alias.unwrap_or_default(),
                        bootable: attachment.bootable == Some(true),
                        provisioned_size: disk.provisioned_size?,
                        status: disk
                            .status
                            .map(|s| s.as_str().to_string())
                            .unwrap_or_else(|| "ok".into()),
                    })
                })
                // An attachment without its whole disk: the engine did not inline disks, so there are none to use.
                .collect::<Option<Vec<_>>>()
                .map(tight)
        });
        let nics = facts.nics.map(|nics| {
            let nics = nics
                .items
                .into_iter()
                .map(|nic| SnapshotNic {
                    id: nic.id.unwrap_or_default(),
                    name: nic.name.unwrap_or_default(),
                    mac: nic.mac.and_then(|m| m.address),
                    vnic_profile_id: nic.vnic_profile.and_then(|p| p.id),
                })
                .collect();
            tight(nics)
        });
        let reported_devices = facts.reported_devices.map(|devices| {
            let devices = devices
                .items
                .into_iter()
                .map(|device| {
                    let mac = device.mac.and_then(|m| m.address);
                    let ips = if on_a_vm_nic(mac.as_deref(), nics.as_deref()) {
                        device
                            .ips
                            .map(|ips| tight(ips.items.into_iter().filter_map(|ip| ip.address).collect()))
                            .unwrap_or_default()
                    } else {
                        Vec::new()
                    };
                    ReportedDevice { mac, ips }
                })
                .collect();
            tight(devices)
        });
        let host = facts.host.and_then(|host| host.id).map(|id| VmHost {
            id,
            name: None,
            status: None,
            inventoried: false,
        });
        Some(VmSnapshot {
            cluster_id: facts.cluster.and_then(|cluster| cluster.id),
            host,
            id: facts.id?,
            name: facts.name.unwrap_or_default(),
            description: facts.description.unwrap_or_default(),
            status,
            os_type: facts.os.and_then(|os| os.kind),
            started: facts.start_time.is_some(),
            disks,
            nics,
            reported_devices,
        })
    }

    /// Equal for two answers a machine would decide the same on. The provider reports a watched VM to its machine
    /// when this differs from the one the machine last saw. `with_disks`: whether the disks count, which they can
    /// only when both answers inlined them (the searches of Ready VMs do not).
    pub fn fingerprint(&self, with_disks: bool) -> u64 {
        let mut hasher = DefaultHasher::new();
        let VmSnapshot {
            id,
            name,
            description,
            status,
            os_type,
            started,
            disks,
            nics,
            reported_devices,
            cluster_id,
            host,
        } = self;
        (id, name, description, status, os_type, started, nics, reported_devices).hash(&mut hasher);
        (cluster_id, host).hash(&mut hasher);
        if with_disks {
            disks.hash(&mut hasher);
        }
        hasher.finish()
    }

    /// Names the VM's host and its status from an inventory poll: a host that goes into maintenance or stops
    /// answering changes the snapshot, and so reaches the machine through the provider's poll.
    pub fn with_hosts(mut self, inventory: Option<&crate::placement::capacity::Inventory>) -> VmSnapshot {
        if let (Some(host), Some(inventory)) = (self.host.as_mut(), inventory) {
            host.inventoried = true;
            if let Some(fact) = inventory.host(&host.id) {
                host.name = Some(fact.name.clone());
                host.status = Some(fact.status.clone());
            }
        }
        self
    }

    /// Both fingerprints, for a watch of either cadence.
    pub fn fingerprints(&self) -> Fingerprints {
        Fingerprints {
            with_disks: self.fingerprint(true),
            without_disks: self.fingerprint(false),
        }
    }
}

/// Whether a guest device's addresses can count for the machine: its MAC is one of the VM's NICs
/// ([`crate::network::addresses`] reads no other device's). A Kubernetes node reports half a dozen more (`docker0`, `cni0`,
/// `flannel.1`, `cali…`), whose addresses every Ready machine would otherwise hold, and whose changes would count
/// as changes of the VM. Without the NICs in the answer nothing can be told apart and every device keeps its own.
/// The devices themselves stay: how many the guest agent reports is part of what a machine says.
fn on_a_vm_nic(mac: Option<&str>, nics: Option<&[SnapshotNic]>) -> bool {
    let Some(nics) = nics else {
        return true;
    };
    mac.is_some_and(|mac| {
        nics.iter().any(|nic| {
            nic.mac
                .as_deref()
                .is_some_and(|own| crate::network::addresses::same_mac(mac, own))
        })
    })
}

/// A collected list at its length. `Vec::into_iter().map(..).collect()` reuses the decoded list's buffer, sized for
/// the engine model's larger items (a `DiskAttachment` is about ten times a `VmDisk`): a snapshot kept by each Ready
/// machine would hold about 7 KB of it (heap profile at 3,000 machines, docs/benchmarks.md).
fn tight<T>(mut items: Vec<T>) -> Vec<T> {
    items.shrink_to_fit();
    items
}

/// What a machine last saw of its VM, as the provider's searches of either kind compare it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprints {
    pub with_disks: u64,
    pub without_disks: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use capov_ovirt_model::model::*;

    fn facts(status: &str) -> VmFacts {
        VmFacts {
            id: Some("vm-1".into()),
            name: Some("worker-1".into()),
            description: Some("capov marker".into()),
            status: Some(VmStatus::parse(status)),
            nics: Some(Nics {
                items: vec![Nic {
                    id: Some("nic-1".into()),
                    name: Some("nic1".into()),
                    mac: Some(Mac {
                        address: Some("56:6f:00:00:00:01".into()),
                    }),
                    ..Nic::default()
                }],
            }),
            reported_devices: Some(ReportedDevices { items: vec![] }),
            ..VmFacts::default()
        }
    }

    #[test]
    fn the_fingerprint_follows_what_decisions_read() {
        let down = VmSnapshot::from_facts(facts("down")).expect("snapshot");
        assert_eq!(
            down.fingerprints(),
            VmSnapshot::from_facts(facts("down")).expect("snapshot").fingerprints()
        );
        let up = VmSnapshot::from_facts(facts("up")).expect("snapshot");
        assert_ne!(down.fingerprint(true), up.fingerprint(true));
        assert_ne!(down.fingerprint(false), up.fingerprint(false));
        let mut with_ip = facts("up");
        with_ip.reported_devices = Some(ReportedDevices {
            items: vec![capov_ovirt_model::model::ReportedDevice {
                mac: Some(Mac {
                    address: Some("56:6f:00:00:00:01".into()),
                }),
                ips: Some(Ips {
                    items: vec![Ip {
                        address: Some("10.0.0.5".into()),
                        ..Ip::default()
                    }],
                }),
                ..capov_ovirt_model::model::ReportedDevice::default()
            }],
        });
        let with_ip = VmSnapshot::from_facts(with_ip).expect("snapshot");
        assert_ne!(
            up.fingerprint(false),
            with_ip.fingerprint(false),
            "an address the guest reports is a change"
        );
    }

    #[test]
    fn a_vm_without_status_is_image_illegal_and_without_id_is_nothing() {
        let mut illegal = facts("down");
        illegal.status = None;
        assert_eq!(
            VmSnapshot::from_facts(illegal).expect("snapshot").status,
            "image_illegal"
        );
        let mut anonymous = facts("down");
        anonymous.id = None;
        assert!(VmSnapshot::from_facts(anonymous).is_none());
    }

    #[test]
    fn disks_count_only_when_every_attachment_came_with_its_whole_disk() {
        let attachment = |size: Option<u64>| DiskAttachment {
            id: Some("att-1".into()),
            bootable: Some(true),
            disk: Some(Disk {
                id: Some("disk-1".into()),
                provisioned_size: size,
                ..Disk::default()
            }),
            ..DiskAttachment::default()
        };
        let mut whole = facts("down");
        whole.disk_attachments = Some(DiskAttachments {
            items: vec![attachment(Some(10 << 30))],
        });
        let disks = VmSnapshot::from_facts(whole).expect("snapshot").disks.expect("disks");
        assert_eq!(disks[0].provisioned_size, 10 << 30);
        assert_eq!(disks[0].status, "ok");
        let mut refs_only = facts("down");
        refs_only.disk_attachments = Some(DiskAttachments {
            items: vec![attachment(Some(1)), attachment(None)],
        });
        assert_eq!(VmSnapshot::from_facts(refs_only).expect("snapshot").disks, None);
        assert_eq!(VmSnapshot::from_facts(facts("down")).expect("snapshot").disks, None);
    }

    #[test]
    fn disks_change_the_fingerprint_only_where_both_answers_carry_them() {
        let mut with_disks = VmSnapshot::from_facts(facts("down")).expect("snapshot");
        let without_disks = with_disks.clone();
        with_disks.disks = Some(vec![VmDisk {
            attachment_id: "a".into(),
            disk_id: "d".into(),
            alias: "x".into(),
            bootable: true,
            provisioned_size: 1,
            status: "locked".into(),
        }]);
        // A search of Ready VMs (no disks) sees the same VM as a read that inlined them.
        assert_eq!(with_disks.fingerprint(false), without_disks.fingerprint(false));
        // A disk that unlocks is a change to a machine waiting on it.
        let mut unlocked = with_disks.clone();
        if let Some(disks) = unlocked.disks.as_mut() {
            disks[0].status = "ok".into();
        }
        assert_ne!(with_disks.fingerprint(true), unlocked.fingerprint(true));
    }

    #[test]
    fn a_snapshot_keeps_no_room_of_the_decoded_answer() {
        let mut answer = facts("up");
        let attachments: Vec<DiskAttachment> = (0..3)
            .map(|n| DiskAttachment {
                id: Some(format!("att-{n}")),
                disk: Some(Disk {
                    id: Some(format!("disk-{n}")),
                    provisioned_size: Some(1 << 30),
                    ..Disk::default()
                }),
                ..DiskAttachment::default()
            })
            .collect();
        answer.disk_attachments = Some(DiskAttachments { items: attachments });
        let ip = |address: &str| Ip {
            address: Some(address.into()),
            ..Ip::default()
        };
        answer.reported_devices = Some(ReportedDevices {
            items: vec![capov_ovirt_model::model::ReportedDevice {
                mac: Some(Mac {
                    address: Some("56:6f:00:00:00:01".into()),
                }),
                ips: Some(Ips {
                    items: vec![ip("10.0.0.5"), ip("fe80::1")],
                }),
                ..capov_ovirt_model::model::ReportedDevice::default()
            }],
        });
        let snapshot = VmSnapshot::from_facts(answer).expect("snapshot");
        let disks = snapshot.disks.as_ref().expect("disks");
        assert_eq!((disks.len(), disks.capacity()), (3, 3));
        let nics = snapshot.nics.as_ref().expect("nics");
        assert_eq!((nics.len(), nics.capacity()), (1, 1));
        let devices = snapshot.reported_devices.as_ref().expect("devices");
        assert_eq!((devices.len(), devices.capacity()), (1, 1));
        assert_eq!((devices[0].ips.len(), devices[0].ips.capacity()), (2, 2));
    }

    #[test]
    fn only_devices_on_a_vm_nic_keep_their_addresses() {
        let device = |mac: &str, ip: &str| capov_ovirt_model::model::ReportedDevice {
            mac: Some(Mac {
                address: Some(mac.into()),
            }),
            ips: Some(Ips {
                items: vec![Ip {
                    address: Some(ip.into()),
                    ..Ip::default()
                }],
            }),
            ..capov_ovirt_model::model::ReportedDevice::default()
        };
        // The node's own NIC (another MAC spelling than the NIC's) and a CNI device, with their addresses.
        let node = |nic_ip: &str, cni_ip: &str| {
            let mut node = facts("up");
            node.reported_devices = Some(ReportedDevices {
                items: vec![device("56-6F-00-00-00-01", nic_ip), device("ee:ee:ee:ee:ee:ee", cni_ip)],
            });
            node
        };
        let kept = VmSnapshot::from_facts(node("10.0.0.5", "10.244.1.1")).expect("snapshot");
        let devices = kept.reported_devices.as_ref().expect("devices");
        assert_eq!(devices.len(), 2, "the guest agent reported two devices");
        assert_eq!(
            devices[0].ips,
            vec!["10.0.0.5".to_string()],
            "the NIC's own device, MAC case and separator aside"
        );
        assert!(devices[1].ips.is_empty(), "a CNI device's address is not held");
        // A CNI address that changes is no change of the VM; one on the NIC is.
        let churned = VmSnapshot::from_facts(node("10.0.0.5", "10.244.9.9")).expect("snapshot");
        assert_eq!(kept.fingerprint(false), churned.fingerprint(false));
        let moved = VmSnapshot::from_facts(node("10.0.0.6", "10.244.1.1")).expect("snapshot");
        assert_ne!(kept.fingerprint(false), moved.fingerprint(false));
        // Without the NICs in the answer every device keeps its addresses.
        let mut without_nics = node("10.0.0.5", "10.244.1.1");
        without_nics.nics = None;
        let all = VmSnapshot::from_facts(without_nics).expect("snapshot");
        assert_eq!(
            all.reported_devices.expect("devices")[1].ips,
            vec!["10.244.1.1".to_string()]
        );
    }
}
