//! Which host devices (PCI passthrough, spec.hostdevices) a machine of this process is creating its VM with. The
//! engine marks a device taken only while a VM that has it runs, so between a create and the first start two
//! machines could pick the same device; a claim taken when the create is sent, held until the machine's actor
//! stops, closes that window for machines of this process.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::runtime::keys::ObjectKey;

/// Devices of one host of one engine (by OVirtProvider).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Claim {
    provider: String,
    host_id: String,
    devices: Vec<String>,
}

#[derive(Default)]
pub struct DeviceClaims {
    claims: Mutex<HashMap<ObjectKey, Claim>>,
}

impl DeviceClaims {
    /// The machine other than `asking` that claims `device` of the host, if any.
    pub fn holder(&self, provider: &str, host_id: &str, device: &str, asking: &ObjectKey) -> Option<ObjectKey> {
        let claims = self.claims.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        claims
            .iter()
            .find(|(key, claim)| *key != asking && claim.covers(provider, host_id, device))
            .map(|(key, _)| key.clone())
    }

    /// Claims `devices` of the host for `key` (in place of what it claimed before), unless another machine claims
    /// one of them: then that machine.
    pub fn claim(&self, key: &ObjectKey, provider: &str, host_id: &str, devices: &[String]) -> Result<(), ObjectKey> {
        let mut claims = self.claims.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let taken = claims.iter().find(|(other, claim)| {
            *other != key && devices.iter().any(|device| claim.covers(provider, host_id, device))
        });
        if let Some((other, _)) = taken {
            return Err(other.clone());
        }
        let claim = Claim {
            provider: provider.to_string(),
            host_id: host_id.to_string(),
            devices: devices.to_vec(),
        };
        claims.insert(key.clone(), claim);
        Ok(())
    }

    pub fn release(&self, key: &ObjectKey) {
        self.claims
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(key);
    }
}

impl Claim {
    fn covers(&self, provider: &str, host_id: &str, device: &str) -> bool {
        self.provider == provider && self.host_id == host_id && self.devices.iter().any(|d| d == device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::keys::Kind;

    fn machine(name: &str) -> ObjectKey {
        ObjectKey {
            kind: Kind::Machine,
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    #[test]
    fn a_device_is_claimed_by_one_machine_at_a_time_per_host_and_engine() {
        let claims = DeviceClaims::default();
        let gpu = vec!["pci_0000_3b_00_0".to_string()];
        let (a, b) = (machine("a"), machine("b"));
        claims.claim(&a, "engine-1", "host-1", &gpu).expect("free");
        assert_eq!(claims.claim(&b, "engine-1", "host-1", &gpu), Err(a.clone()));
        assert_eq!(claims.holder("engine-1", "host-1", &gpu[0], &b), Some(a.clone()));
        assert_eq!(
            claims.holder("engine-1", "host-1", &gpu[0], &a),
            None,
            "not held against itself"
        );
        // The same name on another host, or on another engine, is another device.
        claims.claim(&b, "engine-1", "host-2", &gpu).expect("another host");
        claims
            .claim(&b, "engine-2", "host-1", &gpu)
            .expect("another engine, in place of host-2");
        assert_eq!(
            claims.holder("engine-1", "host-2", &gpu[0], &a),
            None,
            "b's earlier claim was replaced"
        );
        claims.release(&a);
        claims.claim(&b, "engine-1", "host-1", &gpu).expect("released");
    }
}
