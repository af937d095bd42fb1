//! What an engine can still take (issue #27): the facts of the provider's inventory poll (hosts, clusters, storage
//! domains), the capacity an OVirtCluster reports for the oVirt clusters and storage domains its machines use, and
//! the preflight of a clone against the space of its storage domain, with the engine's own sizing rules.

use std::collections::{BTreeMap, BTreeSet};

use capov_crds::{ClusterCapacity, OVirtClusterCapacity, StorageDomainCapacity};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// A host as the inventory poll saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFact {
    pub id: String,
    pub name: String,
    /// The engine's `host_status`: up, maintenance, preparing_for_maintenance, non_responsive, …
    pub status: String,
    pub cluster_id: String,
    /// Logical CPUs; 0 when the engine does not know them yet.
    pub cpus: u64,
    /// What the scheduler may still give VMs (`max_scheduling_memory`), bytes.
    pub free_memory: u64,
    /// Its devices, when the poll read them (only hosts of oVirt clusters whose machines ask for devices).
    pub devices: Option<HostDevicesFact>,
}

/// What a host's devices can still give VMs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostDevicesFact {
    /// vGPU instances its GPUs can still make, by mediated device type.
    pub free_vgpus: BTreeMap<String, u64>,
    /// The devices asked for by name that it has: whether each is free (no running VM holds it).
    pub named: BTreeMap<String, bool>,
}

/// An oVirt cluster as the inventory poll saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterFact {
    pub id: String,
    pub name: String,
    pub data_center_id: String,
}

/// A storage domain as the inventory poll saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomainFact {
    pub id: String,
    pub name: String,
    /// data, iso, export, image, …
    pub kind: String,
    pub data_center_ids: Vec<String>,
    pub available: u64,
    pub used: u64,
    /// Bytes below which the engine refuses new disks (`critical_space_action_blocker` GiB).
    pub critical_space: u64,
    /// NFS, GlusterFS, POSIX or local (file) rather than iSCSI or FC (block): the engine sizes new disks by it.
    pub file_domain: bool,
}

/// One poll's view of an engine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    pub hosts: Vec<HostFact>,
    pub clusters: Vec<ClusterFact>,
    pub domains: Vec<DomainFact>,
}

impl Inventory {
    pub fn host(&self, id: &str) -> Option<&HostFact> {
        self.hosts.iter().find(|h| h.id == id)
    }

    pub fn domain(&self, id: &str) -> Option<&DomainFact> {
        self.domains.iter().find(|d| d.id == id)
    }

    /// The host statuses by id: what the provider compares between polls to tell the machines on a host that
    /// changed.
    pub fn host_statuses(&self) -> BTreeMap<&str, &str> {
        self.hosts.iter().map(|h| (h.id.as_str(), h.status.as_str())).collect()
    }
}

/// Whether a storage type (`<storage><type>`) is a file domain.
pub fn is_file_storage(kind: &str) -> bool {
    matches!(kind, "nfs" | "glusterfs" | "posixfs" | "localfs")
}

/// The capacity of the oVirt clusters named in `used` (by name) in `inventory` (the engine of `provider`), and of
/// the data domains of their data centers.
pub fn capacity_of(provider: &str, inventory: &Inventory, used: &BTreeSet<String>) -> ClusterCapacity {
    let clusters: Vec<&ClusterFact> = inventory.clusters.iter().filter(|c| used.contains(&c.name)).collect();
    let ovirt_clusters = clusters
        .iter()
        .map(|cluster| {
            let hosts: Vec<&HostFact> = inventory.hosts.iter().filter(|h| h.cluster_id == cluster.id).collect();
            let up: Vec<&&HostFact> = hosts.iter().filter(|h| h.status == "up").collect();
            OVirtClusterCapacity {
                provider: provider.to_string(),
                name: cluster.name.clone(),
                hosts: count(hosts.len() as u64),
                hosts_up: count(up.len() as u64),
                cpus: count(up.iter().map(|h| h.cpus).sum()),
                largest_host_cpus: count(up.iter().map(|h| h.cpus).max().unwrap_or(0)),
                free_memory_bytes: count(up.iter().map(|h| h.free_memory).sum()),
                largest_free_memory_bytes: count(up.iter().map(|h| h.free_memory).max().unwrap_or(0)),
                free_vgpus: free_vgpus(&up),
                free_host_devices: free_host_devices(&up),
                // Filled by the OVirtCluster from its spec ([`crate::placement::failure_domains::attribute_domains`]).
                failure_domains: Vec::new(),
            }
        })
        .collect();
    let data_centers: BTreeSet<&str> = clusters.iter().map(|c| c.data_center_id.as_str()).collect();
    let storage_domains = inventory
        .domains
        .iter()
        .filter(|d| d.kind == "data" && d.data_center_ids.iter().any(|dc| data_centers.contains(dc.as_str())))
        .map(|d| StorageDomainCapacity {
            provider: provider.to_string(),
            name: d.name.clone(),
            available_bytes: count(d.available),
            used_bytes: count(d.used),
            critical_space_bytes: count(d.critical_space),
        })
        .collect();
    ClusterCapacity {
        ovirt_clusters,
        storage_domains,
    }
}

/// vGPU instances of the hosts that are up, summed by type.
fn free_vgpus(up: &[&&HostFact]) -> BTreeMap<String, i64> {
    let mut free = BTreeMap::new();
    for devices in up.iter().filter_map(|h| h.devices.as_ref()) {
        for (mdev_type, instances) in &devices.free_vgpus {
            *free.entry(mdev_type.clone()).or_insert(0) += count(*instances);
        }
    }
    free
}

/// For each named device the hosts that are up have: how many of them have it free (0: all held).
fn free_host_devices(up: &[&&HostFact]) -> BTreeMap<String, i64> {
    let mut free = BTreeMap::new();
    for devices in up.iter().filter_map(|h| h.devices.as_ref()) {
        for (name, is_free) in &devices.named {
            *free.entry(name.clone()).or_insert(0) += i64::from(*is_free);
        }
    }
    free
}

/// The part of `capacity` a tenant may see (issue #35): `visible(provider, None)` says whether the provider serves the
/// OVirtCluster's namespace (its storage domains go with it), `visible(provider, Some(cluster))` whether the tenant
/// may use that oVirt cluster. None when nothing is left.
pub fn visible_part(
    capacity: ClusterCapacity,
    visible: impl Fn(&str, Option<&str>) -> bool,
) -> Option<ClusterCapacity> {
    let ovirt_clusters: Vec<OVirtClusterCapacity> = capacity
        .ovirt_clusters
        .into_iter()
        .filter(|c| visible(&c.provider, None) && visible(&c.provider, Some(&c.name)))
        .collect();
    let storage_domains: Vec<StorageDomainCapacity> = capacity
        .storage_domains
        .into_iter()
        .filter(|d| visible(&d.provider, None))
        .collect();
    (!ovirt_clusters.is_empty() || !storage_domains.is_empty()).then_some(ClusterCapacity {
        ovirt_clusters,
        storage_domains,
    })
}

/// A figure for the status (i64 in the CRD); engines do not report 8 EiB.
fn count(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A template disk as a clone copies it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskSize {
    pub provisioned: u64,
    /// What the disk allocates on its domain (`actual_size`).
    pub actual: u64,
    /// qcow2 (`cow`) rather than raw.
    pub cow: bool,
    /// Thin (sparse) rather than preallocated.
    pub sparse: bool,
}

/// The space the engine asks a domain to have for a clone of `disks` (`StorageDomainValidator
/// .getTotalSizeForClonedDisk`): what each disk allocates — all of it when preallocated on a file domain or raw on a
/// block domain — plus 10% for qcow2 (`QCOW_OVERHEAD_FACTOR`).
pub fn clone_space_needed(disks: &[DiskSize], file_domain: bool) -> u64 {
    disks
        .iter()
        .map(|disk| {
            let allocated_only = (file_domain && disk.sparse) || (!file_domain && disk.cow);
            let size = if allocated_only {
                disk.provisioned.min(disk.actual)
            } else {
                disk.provisioned
            };
            if disk.cow {
                size.saturating_mul(11).div_ceil(10)
            } else {
                size
            }
        })
        .sum()
}

/// A clone that does not fit its domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shortfall {
    pub domain: String,
    pub available: u64,
    pub needed: u64,
}

impl Shortfall {
    /// The InsufficientStorage message: the domain, the bytes free and needed, and what to do.
    pub fn message(&self, template: &str) -> String {
        format!(
            "storage domain {:?} has {} bytes ({}) available, the clone of template {template:?} needs {} bytes ({}); \
             CAPOV did not ask the engine to create the VM. Free space on the domain, put the disks on another \
             domain (spec.storagedomainname) or create thin disks (spec.diskclone: false)",
            self.domain,
            self.available,
            gib(self.available),
            self.needed,
            gib(self.needed),
        )
    }
}

fn gib(bytes: u64) -> String {
    if bytes >= GIB {
        format!("{:.1} GiB", bytes as f64 / GIB as f64)
    } else {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    }
}

/// Whether a clone of `disks` fits `domain`.
pub fn check_clone(domain: &DomainFact, disks: &[DiskSize]) -> Result<(), Shortfall> {
    let needed = clone_space_needed(disks, domain.file_domain);
    if domain.available >= needed {
        return Ok(());
    }
    Err(Shortfall {
        domain: domain.name.clone(),
        available: domain.available,
        needed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(id: &str, status: &str, cluster: &str, cpus: u64, free_gib: u64) -> HostFact {
        HostFact {
            id: id.into(),
            name: format!("host-{id}"),
            status: status.into(),
            cluster_id: cluster.into(),
            cpus,
            free_memory: free_gib * GIB,
            devices: None,
        }
    }

    fn domain(name: &str, kind: &str, dc: &str, available_gib: u64) -> DomainFact {
        DomainFact {
            id: format!("sd-{name}"),
            name: name.into(),
            kind: kind.into(),
            data_center_ids: vec![dc.into()],
            available: available_gib * GIB,
            used: GIB,
            critical_space: 5 * GIB,
            file_domain: true,
        }
    }

    #[test]
    fn capacity_counts_only_hosts_that_are_up_and_the_data_domains_of_the_clusters_data_centers() {
        let inventory = Inventory {
            hosts: vec![
                host("1", "up", "c-a", 32, 100),
                host("2", "up", "c-a", 64, 40),
                host("3", "maintenance", "c-a", 64, 0),
                host("4", "up", "c-b", 8, 8),
            ],
            clusters: vec![
                ClusterFact {
                    id: "c-a".into(),
                    name: "A".into(),
                    data_center_id: "dc-1".into(),
                },
                ClusterFact {
                    id: "c-b".into(),
                    name: "B".into(),
                    data_center_id: "dc-2".into(),
                },
            ],
            domains: vec![
                domain("data1", "data", "dc-1", 500),
                domain("iso", "iso", "dc-1", 10),
                domain("elsewhere", "data", "dc-2", 10),
            ],
        };
        let used = BTreeSet::from(["A".to_string()]);
        let capacity = capacity_of("engine", &inventory, &used);
        assert_eq!(
            capacity.ovirt_clusters,
            vec![OVirtClusterCapacity {
                provider: "engine".into(),
                name: "A".into(),
                hosts: 3,
                hosts_up: 2,
                cpus: 96,
                largest_host_cpus: 64,
                free_memory_bytes: (140 * GIB) as i64,
                largest_free_memory_bytes: (100 * GIB) as i64,
                ..OVirtClusterCapacity::default()
            }]
        );
        assert_eq!(capacity.storage_domains.len(), 1);
        assert_eq!(capacity.storage_domains[0].name, "data1");
        assert_eq!(capacity.storage_domains[0].available_bytes, (500 * GIB) as i64);
        assert_eq!(capacity.storage_domains[0].critical_space_bytes, (5 * GIB) as i64);
    }

    #[test]
    fn devices_count_on_hosts_that_are_up_when_the_poll_read_them() {
        let devices = |vgpus: &[(&str, u64)], named: &[(&str, bool)]| HostDevicesFact {
            free_vgpus: vgpus.iter().map(|(t, n)| (t.to_string(), *n)).collect(),
            named: named.iter().map(|(n, free)| (n.to_string(), *free)).collect(),
        };
        let mut hosts = vec![
            host("1", "up", "c-a", 32, 100),
            host("2", "up", "c-a", 32, 100),
            host("3", "maintenance", "c-a", 32, 100),
            host("4", "up", "c-a", 32, 100),
        ];
        let gpu = "pci_0000_3b_00_0";
        hosts[0].devices = Some(devices(&[("nvidia-22", 4), ("nvidia-63", 0)], &[(gpu, true)]));
        hosts[1].devices = Some(devices(
            &[("nvidia-22", 2)],
            &[(gpu, true), ("pci_0000_af_00_0", false)],
        ));
        hosts[2].devices = Some(devices(&[("nvidia-22", 8)], &[(gpu, true)]));
        let inventory = Inventory {
            hosts,
            clusters: vec![ClusterFact {
                id: "c-a".into(),
                name: "A".into(),
                data_center_id: "dc-1".into(),
            }],
            domains: vec![],
        };
        let capacity = capacity_of("engine", &inventory, &BTreeSet::from(["A".to_string()]));
        let cluster = &capacity.ovirt_clusters[0];
        assert_eq!(
            cluster.free_vgpus,
            BTreeMap::from([("nvidia-22".to_string(), 6), ("nvidia-63".to_string(), 0)])
        );
        assert_eq!(
            cluster.free_host_devices,
            BTreeMap::from([(gpu.to_string(), 2), ("pci_0000_af_00_0".to_string(), 0)])
        );
    }

    #[test]
    fn a_tenant_sees_only_the_providers_that_serve_it_and_the_clusters_it_may_use() {
        let cluster = |provider: &str, name: &str| OVirtClusterCapacity {
            provider: provider.into(),
            name: name.into(),
            ..OVirtClusterCapacity::default()
        };
        let storage = |provider: &str, name: &str| StorageDomainCapacity {
            provider: provider.into(),
            name: name.into(),
            ..StorageDomainCapacity::default()
        };
        let all = ClusterCapacity {
            ovirt_clusters: vec![
                cluster("serves", "Default"),
                cluster("serves", "Edge"),
                cluster("refuses", "Default"),
            ],
            storage_domains: vec![storage("serves", "data1"), storage("refuses", "data9")],
        };
        let visible = |provider: &str, cluster: Option<&str>| provider == "serves" && cluster != Some("Edge");
        let seen = visible_part(all.clone(), visible).expect("a part");
        assert_eq!(seen.ovirt_clusters, vec![cluster("serves", "Default")]);
        assert_eq!(seen.storage_domains, vec![storage("serves", "data1")]);
        assert_eq!(visible_part(all.clone(), |_, _| true), Some(all.clone()));
        assert_eq!(
            visible_part(all, |_, _| false),
            None,
            "nothing to show: no capacity at all"
        );
    }

    #[test]
    fn a_clone_needs_what_the_template_allocates_plus_the_qcow_overhead() {
        let thin_cow = DiskSize {
            provisioned: 20 * GIB,
            actual: 2 * GIB + GIB / 2,
            cow: true,
            sparse: true,
        };
        // 2.5 GiB allocated, ×1.1 for qcow2.
        assert_eq!(clone_space_needed(std::slice::from_ref(&thin_cow), true), 2952790016);
        // On a block domain a cow disk also counts what it allocates.
        assert_eq!(clone_space_needed(std::slice::from_ref(&thin_cow), false), 2952790016);
        let preallocated_raw = DiskSize {
            provisioned: 10 * GIB,
            actual: 10 * GIB,
            cow: false,
            sparse: false,
        };
        assert_eq!(
            clone_space_needed(&[preallocated_raw, thin_cow.clone()], true),
            10 * GIB + 2952790016
        );

        let mut data1 = domain("data1", "data", "dc", 3);
        assert_eq!(check_clone(&data1, std::slice::from_ref(&thin_cow)), Ok(()));
        data1.available = 2952790015;
        let shortfall = check_clone(&data1, &[thin_cow]).expect_err("one byte short");
        assert_eq!(shortfall.needed, 2952790016);
        let message = shortfall.message("ubuntu-22.04");
        assert!(message.contains("\"data1\" has 2952790015 bytes"), "{message}");
        assert!(message.contains("needs 2952790016 bytes (2.8 GiB)"), "{message}");
    }
}
