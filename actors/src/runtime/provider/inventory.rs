//! The provider's inventory poll (issue #27): every [`INVENTORY_EVERY`] polls, one request each for the engine's
//! hosts, clusters and storage domains — whatever the number of machines — and, while machines ask for host devices
//! or vGPUs (issue 38), one per host of their oVirt clusters for its devices. The result is shared
//! ([`crate::runtime::provider::placements`]): machines read their host's name and state from it and check a clone's space
//! against it; the supervisor refreshes the OVirtClusters' capacity after each poll; and a host that changed state
//! makes the next VM search cover every watched VM, so that the machines on it hear of it.

use std::sync::Arc;

use capov_ovirt::Client;
use capov_ovirt::model::{Cluster, Host, HostDevice, StorageDomain};
use ractor::ActorRef;

use crate::metrics::Metrics;
use crate::runtime::mailbox;
use crate::runtime::messages::SupervisorMsg;
use crate::runtime::provider::placements::{DeviceWants, DeviceWantsByCluster, Placements};
use capov_core::placement::capacity::{ClusterFact, DomainFact, HostDevicesFact, HostFact, Inventory, is_file_storage};

/// Polls between two inventory polls: 30 s at the default 5 s poll interval.
pub const INVENTORY_EVERY: u64 = 6;

const GIB: u64 = 1 << 30;

/// Where a provider's inventory goes: the shared placements, and the supervisor's OVirtCluster refresh.
#[derive(Clone)]
pub struct InventorySink {
    pub placements: Arc<Placements>,
    pub metrics: Metrics,
    pub supervisor: ActorRef<SupervisorMsg>,
}

impl InventorySink {
    pub fn new(placements: &Arc<Placements>, metrics: &Metrics, supervisor: &ActorRef<SupervisorMsg>) -> Self {
        InventorySink {
            placements: placements.clone(),
            metrics: metrics.clone(),
            supervisor: supervisor.clone(),
        }
    }
}

/// The inventory poll's state in the provider actor.
pub struct InventoryPoll {
    sink: InventorySink,
    in_flight: bool,
    last: Option<Arc<Inventory>>,
    /// A host changed state since the last VM search: the next one covers every watched VM.
    pub search_all: bool,
}

impl InventoryPoll {
    pub fn new(sink: InventorySink) -> InventoryPoll {
        InventoryPoll {
            sink,
            in_flight: false,
            last: None,
            search_all: false,
        }
    }

    /// The last inventory, for the snapshots of the VM searches.
    pub fn current(&self) -> Option<Arc<Inventory>> {
        self.last.clone()
    }

    /// Starts a poll as a task when one is due (the first at once, then every [`INVENTORY_EVERY`] polls) and none
    /// runs; `report` hands its result (None: it failed) back to the provider actor, which passes it to
    /// [`InventoryPoll::received`].
    pub fn poll_if_due(
        &mut self,
        provider: &str,
        polls: u64,
        client: &Client,
        report: impl FnOnce(Option<Box<Inventory>>) + Send + 'static,
    ) {
        if self.in_flight || (self.last.is_some() && !polls.is_multiple_of(INVENTORY_EVERY)) {
            return;
        }
        self.in_flight = true;
        let client = client.with_correlation_id("capov-inventory-poll");
        let wants = self.sink.placements.device_wants(provider);
        tokio::spawn(async move {
            let inventory = match read(&client, &wants).await {
                Ok(inventory) => Some(inventory),
                Err(err) => {
                    tracing::debug!(error = %err, "inventory poll failed");
                    None
                }
            };
            report(inventory.map(Box::new));
        });
    }

    /// Whether the provider's first poll is still under way. A VM search meanwhile would hand machines their VMs
    /// without their hosts' names and states, and nothing would hand them again before the steady round.
    pub fn awaiting_first(&self) -> bool {
        self.in_flight && self.last.is_none()
    }

    /// Takes a poll's result (None: it failed, the last one stays).
    pub fn received(&mut self, provider: &str, inventory: Option<Box<Inventory>>) {
        self.in_flight = false;
        let Some(inventory) = inventory else {
            return;
        };
        let hosts_changed = self
            .last
            .as_ref()
            .is_some_and(|last| last.host_statuses() != inventory.host_statuses());
        self.search_all |= hosts_changed;
        let inventory: Arc<Inventory> = Arc::from(inventory);
        self.sink.placements.set_inventory(provider, inventory.clone());
        self.last = Some(inventory);
        let _ = mailbox::cast(
            &self.sink.metrics,
            &self.sink.supervisor,
            SupervisorMsg::InventoryPolled,
        );
    }

    /// A connection check's outcome (None: working or pending): when the provider starts or stops failing, every
    /// OVirtCluster is reconciled again, so that its failure domains on this engine come and go (issue 39).
    pub fn connection_checked(&self, provider: &str, failing: Option<(String, String)>) {
        if self.sink.placements.set_failing(provider, failing) {
            let _ = mailbox::cast(
                &self.sink.metrics,
                &self.sink.supervisor,
                SupervisorMsg::InventoryPolled,
            );
        }
    }

    /// The provider stops: its inventory is no longer anyone's to read.
    pub fn forget(&self, provider: &str) {
        self.sink.placements.forget_inventory(provider);
    }
}

/// One inventory poll: hosts, clusters and storage domains, a request each; and, only while machines ask for host
/// devices or vGPUs, the devices of the hosts of their oVirt clusters, a request per host.
async fn read(client: &Client, wants: &DeviceWantsByCluster) -> capov_ovirt::Result<Inventory> {
    let hosts = client.hosts().await?;
    let clusters: Vec<ClusterFact> = client.clusters().await?.into_iter().filter_map(cluster_fact).collect();
    let domains = client.storage_domains().await?;
    let mut host_facts: Vec<HostFact> = hosts.into_iter().filter_map(host_fact).collect();
    for host in &mut host_facts {
        let cluster_name = clusters
            .iter()
            .find(|c| c.id == host.cluster_id)
            .map(|c| c.name.as_str());
        if let Some(wanted) = cluster_name.and_then(|name| wants.get(name)) {
            host.devices = Some(devices_fact(client.host_devices(&host.id).await?, wanted));
        }
    }
    Ok(Inventory {
        hosts: host_facts,
        clusters,
        domains: domains.into_iter().filter_map(domain_fact).collect(),
    })
}

/// What a host's devices can still give: the vGPU instances of its GPUs (when vGPUs are asked for) and which of the
/// named devices no running VM holds.
fn devices_fact(devices: Vec<HostDevice>, wanted: &DeviceWants) -> HostDevicesFact {
    let mut fact = HostDevicesFact::default();
    for device in devices {
        if wanted.vgpus {
            for mdev in device.m_dev_types.iter().flat_map(|types| &types.items) {
                if let Some(name) = &mdev.name {
                    *fact.free_vgpus.entry(name.clone()).or_insert(0) +=
                        u64::from(mdev.available_instances.unwrap_or(0));
                }
            }
        }
        if let Some(name) = device.name
            && wanted.host_devices.contains(&name)
        {
            fact.named.insert(name, device.vm.is_none());
        }
    }
    fact
}

fn host_fact(host: Host) -> Option<HostFact> {
    let cpus = host.logical_cpus().unwrap_or(0);
    Some(HostFact {
        id: host.id?,
        name: host.name.unwrap_or_default(),
        status: host.status.map(|s| s.as_str().to_string()).unwrap_or_default(),
        cluster_id: host.cluster.and_then(|c| c.id).unwrap_or_default(),
        cpus,
        free_memory: host.max_scheduling_memory.unwrap_or(0),
        devices: None,
    })
}

fn cluster_fact(cluster: Cluster) -> Option<ClusterFact> {
    Some(ClusterFact {
        id: cluster.id?,
        name: cluster.name.unwrap_or_default(),
        data_center_id: cluster.data_center.and_then(|dc| dc.id).unwrap_or_default(),
    })
}

/// A storage domain as the inventory (and the clone preflight) sees it.
pub fn domain_fact(domain: StorageDomain) -> Option<DomainFact> {
    let storage_kind = domain.storage.as_ref().and_then(|s| s.kind.clone()).unwrap_or_default();
    Some(DomainFact {
        id: domain.id?,
        name: domain.name.unwrap_or_default(),
        kind: domain.kind.unwrap_or_default(),
        data_center_ids: domain
            .data_centers
            .map(|dcs| dcs.items.into_iter().filter_map(|dc| dc.id).collect())
            .unwrap_or_default(),
        available: domain.available.unwrap_or(0),
        used: domain.used.unwrap_or(0),
        critical_space: domain.critical_space_action_blocker.unwrap_or(0).saturating_mul(GIB),
        file_domain: is_file_storage(&storage_kind),
    })
}
