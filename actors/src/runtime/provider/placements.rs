//! What the runtime shares about where machines are (issue #25, #27): each provider's last inventory of its engine,
//! which oVirt cluster each machine uses (for its OVirtCluster's capacity), and one lock per affinity group, so that
//! two machines of this process never create the same group twice or remove it while a sibling joins.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use crate::runtime::keys::ObjectKey;
use capov_core::placement::capacity::Inventory;

/// Where a machine's VM is, as far as its OVirtCluster's capacity is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachinePlacement {
    pub namespace: String,
    /// The CAPI Cluster the machine belongs to.
    pub cluster: String,
    pub provider: String,
    /// The oVirt cluster its VM is (or will be) in.
    pub ovirt_cluster: String,
    /// What it asks of the hosts' devices, for the inventory poll to read them.
    pub devices: DeviceWants,
}

/// The devices a machine asks for: spec.hostdevices by name, and whether it asks for vGPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceWants {
    pub host_devices: Vec<String>,
    pub vgpus: bool,
}

/// What an inventory poll reads of the hosts' devices, by oVirt cluster name: the device names machines there ask
/// for, and whether any asks for vGPUs.
pub type DeviceWantsByCluster = HashMap<String, DeviceWants>;

#[derive(Default)]
pub struct Placements {
    inventories: RwLock<HashMap<String, Arc<Inventory>>>,
    /// Each provider's failing connection (reason, message); absent: connected, or not checked yet.
    failing: RwLock<HashMap<String, (String, String)>>,
    machines: Mutex<HashMap<ObjectKey, MachinePlacement>>,
    group_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Placements {
    /// The last inventory of a provider's engine; None before its first poll.
    pub fn inventory(&self, provider: &str) -> Option<Arc<Inventory>> {
        self.inventories
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(provider)
            .cloned()
    }

    pub fn set_inventory(&self, provider: &str, inventory: Arc<Inventory>) {
        self.inventories
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(provider.to_string(), inventory);
    }

    pub fn forget_inventory(&self, provider: &str) {
        self.inventories
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(provider);
        self.set_failing(provider, None);
    }

    /// Records whether a provider's connection fails (issue 39: its failure domains are not published meanwhile);
    /// returns whether that changed.
    pub fn set_failing(&self, provider: &str, failing: Option<(String, String)>) -> bool {
        let mut all = self.failing.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        let was_failing = all.contains_key(provider);
        match failing {
            Some(failure) => {
                all.insert(provider.to_string(), failure);
            }
            None => {
                all.remove(provider);
            }
        }
        was_failing != all.contains_key(provider)
    }

    /// A provider's failing connection: its reason and message.
    pub fn failing(&self, provider: &str) -> Option<(String, String)> {
        self.failing
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(provider)
            .cloned()
    }

    pub fn note_machine(&self, key: &ObjectKey, placement: MachinePlacement) {
        let mut machines = self.machines.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if machines.get(key) != Some(&placement) {
            machines.insert(key.clone(), placement);
        }
    }

    pub fn forget_machine(&self, key: &ObjectKey) {
        self.machines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(key);
    }

    /// What the machines of `provider` ask of the hosts' devices, by oVirt cluster; empty when none asks for any.
    pub fn device_wants(&self, provider: &str) -> DeviceWantsByCluster {
        let machines = self.machines.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut wants = DeviceWantsByCluster::new();
        for placement in machines.values().filter(|p| p.provider == provider) {
            let asked = &placement.devices;
            if asked.host_devices.is_empty() && !asked.vgpus {
                continue;
            }
            let cluster = wants.entry(placement.ovirt_cluster.clone()).or_default();
            cluster.vgpus |= asked.vgpus;
            for name in &asked.host_devices {
                if !cluster.host_devices.contains(name) {
                    cluster.host_devices.push(name.clone());
                }
            }
        }
        wants
    }

    /// The placements of the machines of a CAPI cluster.
    pub fn machines_of(&self, namespace: &str, cluster: &str) -> Vec<MachinePlacement> {
        self.machines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .values()
            .filter(|p| p.namespace == namespace && p.cluster == cluster)
            .cloned()
            .collect()
    }

    /// Holds the lock of one affinity group (by provider and name) until the guard drops. Locks nobody holds are
    /// forgotten as others are taken.
    pub async fn lock_group(&self, provider: &str, group: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.group_locks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
            locks.entry(format!("{provider}/{group}")).or_default().clone()
        };
        lock.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_group_lock_is_held_by_one_at_a_time_and_forgotten_when_free() {
        let placements = Arc::new(Placements::default());
        let first = placements.lock_group("p", "g").await;
        let other = placements.clone();
        let waiting = tokio::spawn(async move {
            let _second = other.lock_group("p", "g").await;
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "a second holder got the lock");
        let _unrelated = placements.lock_group("p", "h").await;
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the lock was released")
            .expect("task");
        drop(_unrelated);
        let _again = placements.lock_group("p", "x").await;
        assert_eq!(
            placements.group_locks.lock().unwrap().len(),
            1,
            "free locks are forgotten"
        );
    }
}
