//! The IPAddressClaims behind static addresses (issue 25, CAPI's IPAM contract `ipam.cluster.x-k8s.io`): which
//! claims an object needs, and what the claims and their IPAddresses in the stores say.
//!
//! * An OVirtMachine claims one address from each pool of each NIC's `addressesFromPools`; the claim is named
//!   `<machine>-<nic index>-<pool index>` ([`claim_name`]), owned by the OVirtMachine (controller owner reference, so
//!   the garbage collector takes it should CAPOV not), labelled with the cluster, and carries CAPOV's finalizer: an
//!   address stays the VM's until CAPOV has deleted the VM, whoever deletes the claim.
//! * A claim is this object's only through an owner reference with the object's UID: a claim of the same name
//!   without one is someone else's, and CAPOV neither uses nor changes it.
//! * The IPAM provider answers a claim with an IPAddress (`status.addressRef`) holding the address, its prefix and
//!   the pool's gateway. An address that does not parse, a prefix out of its family's range, or a gateway of the
//!   other family is refused: the guest would get a broken network.
//! * Released: CAPOV removes its finalizer, then deletes the claim; the provider then frees the address.

use std::net::IpAddr;
use std::time::Duration;

use capov_crds::{IpPoolRef, Nic};

use crate::conditions::reasons;
use crate::network::guest_network::{NicAddresses, StaticAddress};

/// How long a claim may wait for its address before the condition turns Warning and asks whether an IPAM provider
/// serves the pool's kind.
pub const ADDRESS_GRACE: Duration = Duration::from_secs(120);

/// CAPOV's finalizer on the IPAddressClaims it creates: the address stays taken until CAPOV let the claim go.
pub const CLAIM_FINALIZER: &str = "ipam.capov.infrastructure.cluster.x-k8s.io";

/// Kubernetes' limit on object names (DNS subdomain).
const NAME_LIMIT: usize = 253;

/// One claim the spec asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WantedClaim {
    pub name: String,
    /// Index of the NIC in spec.nics.
    pub nic: usize,
    pub pool: IpPoolRef,
}

/// The claims an OVirtMachine named `owner` needs for `nics`, in NIC and pool order.
pub fn wanted_claims(owner: &str, nics: &[Nic]) -> Vec<WantedClaim> {
    nics.iter()
        .enumerate()
        .flat_map(|(nic, spec)| {
            spec.addresses_from_pools
                .iter()
                .enumerate()
                .map(move |(index, pool)| WantedClaim {
                    name: claim_name(owner, &format!("{nic}-{index}")),
                    nic,
                    pool: pool.clone(),
                })
        })
        .collect()
}

/// `<owner>-<suffix>`; when that is longer than an object name may be, the owner's name is cut and the first 10
/// hex digits of its SHA-256 keep the name unique.
pub fn claim_name(owner: &str, suffix: &str) -> String {
    let plain = format!("{owner}-{suffix}");
    if plain.len() <= NAME_LIMIT {
        return plain;
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, owner.as_bytes());
    let hash: String = digest.as_ref().iter().take(5).map(|b| format!("{b:02x}")).collect();
    let room = NAME_LIMIT - suffix.len() - hash.len() - 2;
    let prefix = owner[..room.min(owner.len())].trim_end_matches(['-', '.']);
    format!("{prefix}-{hash}-{suffix}")
}

/// What the stores show of a claim that concerns the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimFact {
    pub name: String,
    /// An owner reference names the object's UID.
    pub owned: bool,
    pub pool: IpPoolRef,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// It carries CAPOV's finalizer.
    pub protected: bool,
    /// The IPAddress its `status.addressRef` names, once that is in the store.
    pub address: Option<AddressFact>,
    /// It has waited longer than [`ADDRESS_GRACE`] for its address.
    pub overdue: bool,
}

/// What an IPAddress says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressFact {
    pub name: String,
    pub address: String,
    pub prefix: i32,
    pub gateway: Option<String>,
}

impl AddressFact {
    /// The address with its network, or why the guest cannot use it.
    pub fn parse(&self) -> Result<StaticAddress, String> {
        let address: IpAddr = self
            .address
            .trim()
            .parse()
            .map_err(|_| format!("its address {:?} is not an IP address", self.address))?;
        let max = if address.is_ipv4() { 32 } else { 128 };
        let prefix = u8::try_from(self.prefix)
            .ok()
            .filter(|p| *p <= max)
            .ok_or_else(|| format!("its prefix {} is not between 0 and {max}", self.prefix))?;
        let gateway = match self.gateway.as_deref().map(str::trim).filter(|g| !g.is_empty()) {
            None => None,
            Some(text) => match text.parse::<IpAddr>() {
                Ok(gateway) if gateway.is_ipv4() == address.is_ipv4() => Some(gateway),
                _ => return Err(format!("its gateway {text:?} is not an address of the same family")),
            },
        };
        Ok(StaticAddress {
            address,
            prefix,
            gateway,
        })
    }
}

/// Where the claims of an object stand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimsAssessment {
    /// Every claim has a usable address: the addresses of each NIC, in spec order (empty without claims).
    Ready(Vec<NicAddresses>),
    /// These claims must be created.
    Create(Vec<WantedClaim>),
    /// These claims of the object are no longer wanted (or were deleted by someone while only CAPOV's finalizer
    /// holds them): release them.
    Release(Vec<String>),
    /// An address is not there yet.
    Waiting { message: String, overdue: bool },
    /// A claim or an address cannot be used; nothing CAPOV does fixes it.
    Refused { reason: &'static str, message: String },
}

/// Where the claims of an object with `nic_count` NICs stand, before its VM (or endpoint) exists: `wanted` from the
/// spec, `facts` from the stores.
pub fn assess(nic_count: usize, wanted: &[WantedClaim], facts: &[ClaimFact]) -> ClaimsAssessment {
    if let Some(refused) = conflict(wanted, facts) {
        return refused;
    }
    // A deleted claim CAPOV still holds, and an unwanted one not deleted yet, held or not (CAPOV may have stopped
    // between the two steps of a release).
    let stale: Vec<String> = facts
        .iter()
        .filter(|fact| fact.owned)
        .filter(|fact| {
            let unwanted = !wanted.iter().any(|w| w.name == fact.name && w.pool == fact.pool);
            if fact.deleting { fact.protected } else { unwanted }
        })
        .map(|fact| fact.name.clone())
        .collect();
    if !stale.is_empty() {
        return ClaimsAssessment::Release(stale);
    }
    let fact_of = |want: &WantedClaim| facts.iter().find(|fact| fact.name == want.name);
    let missing: Vec<WantedClaim> = wanted.iter().filter(|w| fact_of(w).is_none()).cloned().collect();
    if !missing.is_empty() {
        return ClaimsAssessment::Create(missing);
    }
    let mut nics = vec![NicAddresses::default(); nic_count];
    let mut waiting = Vec::new();
    let mut overdue = false;
    for want in wanted {
        let Some(fact) = fact_of(want) else { continue };
        let Some(address) = fact.address.as_ref().filter(|_| !fact.deleting) else {
            let what = if fact.deleting {
                "being released"
            } else {
                "waiting for an address"
            };
            waiting.push(format!("{} ({}, {what})", fact.name, want.pool.describe()));
            overdue |= fact.overdue && !fact.deleting;
            continue;
        };
        let parsed = match address.parse() {
            Ok(parsed) => parsed,
            Err(why) => {
                return ClaimsAssessment::Refused {
                    reason: reasons::INVALID_IP_ADDRESS,
                    message: format!(
                        "the IPAddress {} that {} gave for claim {} cannot be used: {why}; fix the pool",
                        address.name,
                        want.pool.describe(),
                        fact.name
                    ),
                };
            }
        };
        let Some(slot) = nics.get_mut(want.nic) else { continue };
        let family = if parsed.address.is_ipv4() {
            &mut slot.ipv4
        } else {
            &mut slot.ipv6
        };
        if let Some(earlier) = family.replace(parsed) {
            return ClaimsAssessment::Refused {
                reason: reasons::IP_ADDRESS_FAMILY_CONFLICT,
                message: format!(
                    "spec.nics[{}].addressesFromPools gives two {} addresses ({} and {}); a NIC takes one IPv4 and \
                     one IPv6 address: use one pool of each family",
                    want.nic,
                    if earlier.address.is_ipv4() { "IPv4" } else { "IPv6" },
                    earlier.address,
                    address.address
                ),
            };
        }
    }
    if waiting.is_empty() {
        return ClaimsAssessment::Ready(if wanted.is_empty() { Vec::new() } else { nics });
    }
    let mut message = format!("waiting for IPAM to fulfil IPAddressClaim {}", waiting.join(", "));
    if overdue {
        message.push_str(&format!(
            "; no address after {} min: check that an IPAM provider serving the pool's kind runs, that the pool \
             exists and has free addresses (kubectl describe ipaddressclaim)",
            ADDRESS_GRACE.as_secs() / 60
        ));
    }
    ClaimsAssessment::Waiting { message, overdue }
}

/// A claim of a wanted name that is not the object's.
fn conflict(wanted: &[WantedClaim], facts: &[ClaimFact]) -> Option<ClaimsAssessment> {
    let foreign = facts
        .iter()
        .find(|fact| !fact.owned && wanted.iter().any(|w| w.name == fact.name))?;
    Some(ClaimsAssessment::Refused {
        reason: reasons::IP_ADDRESS_CLAIM_CONFLICT,
        message: format!(
            "an IPAddressClaim named {} exists but is not this object's (no owner reference with its UID); CAPOV \
             neither uses nor changes it: delete it, or let CAPI re-create this object under another name",
            foreign.name
        ),
    })
}

/// The claims to release when the object goes: every claim of its own that still carries CAPOV's finalizer or has
/// not been deleted.
pub fn to_release(facts: &[ClaimFact]) -> Vec<String> {
    facts
        .iter()
        .filter(|fact| fact.owned && (fact.protected || !fact.deleting))
        .map(|fact| fact.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str) -> IpPoolRef {
        IpPoolRef {
            api_group: "ipam.cluster.x-k8s.io".into(),
            kind: "InClusterIPPool".into(),
            name: name.into(),
        }
    }

    fn nics() -> Vec<Nic> {
        vec![
            Nic {
                vnicprofile: "ovirtmgmt".into(),
                addresses_from_pools: vec![pool("v4"), pool("v6")],
                ..Nic::default()
            },
            Nic {
                vnicprofile: "storage".into(),
                ..Nic::default()
            },
        ]
    }

    fn fact(name: &str, pool_name: &str, address: Option<(&str, i32, Option<&str>)>) -> ClaimFact {
        ClaimFact {
            name: name.into(),
            owned: true,
            pool: pool(pool_name),
            deleting: false,
            protected: true,
            address: address.map(|(address, prefix, gateway)| AddressFact {
                name: name.into(),
                address: address.into(),
                prefix,
                gateway: gateway.map(String::from),
            }),
            overdue: false,
        }
    }

    #[test]
    fn one_claim_per_pool_of_each_nic() {
        let wanted = wanted_claims("worker-0", &nics());
        let names: Vec<&str> = wanted.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["worker-0-0-0", "worker-0-0-1"]);
        assert_eq!(wanted[1].pool, pool("v6"));
        assert!(wanted_claims("m", &[]).is_empty());
    }

    #[test]
    fn long_owner_names_stay_within_the_name_limit_and_distinct() {
        let a = claim_name(&format!("{}a", "x".repeat(252)), "0-0");
        let b = claim_name(&format!("{}b", "x".repeat(252)), "0-0");
        assert!(a.len() <= NAME_LIMIT && b.len() <= NAME_LIMIT, "{a}");
        assert_ne!(a, b);
        assert!(a.ends_with("-0-0"));
    }

    #[test]
    fn missing_claims_are_created_then_waited_for_then_ready() {
        let wanted = wanted_claims("m", &nics());
        assert_eq!(assess(2, &wanted, &[]), ClaimsAssessment::Create(wanted.clone()));
        let pending = [fact("m-0-0", "v4", None), fact("m-0-1", "v6", None)];
        let ClaimsAssessment::Waiting { message, overdue } = assess(2, &wanted, &pending) else {
            panic!("not waiting");
        };
        assert!(!overdue);
        assert!(message.contains("m-0-0 (InClusterIPPool v4 (ipam.cluster.x-k8s.io), waiting for an address)"));
        let mut late = pending.clone();
        late[1].overdue = true;
        let ClaimsAssessment::Waiting { message, overdue } = assess(2, &wanted, &late) else {
            panic!("not waiting");
        };
        assert!(overdue && message.contains("check that an IPAM provider"), "{message}");
        let bound = [
            fact("m-0-0", "v4", Some(("192.0.2.5", 24, Some("192.0.2.1")))),
            fact("m-0-1", "v6", Some(("2001:db8::5", 64, None))),
        ];
        let ClaimsAssessment::Ready(addresses) = assess(2, &wanted, &bound) else {
            panic!("not ready");
        };
        assert_eq!(addresses.len(), 2);
        assert_eq!(addresses[0].ipv4.as_ref().map(|a| a.prefix), Some(24));
        assert_eq!(
            addresses[0].ipv6.as_ref().map(|a| a.address.to_string()).as_deref(),
            Some("2001:db8::5")
        );
        assert_eq!(addresses[1], NicAddresses::default());
        assert_eq!(assess(2, &[], &[]), ClaimsAssessment::Ready(Vec::new()));
    }

    #[test]
    fn a_claim_of_the_same_name_that_is_not_ours_is_refused() {
        let wanted = wanted_claims("m", &nics());
        let mut foreign = fact("m-0-0", "v4", None);
        foreign.owned = false;
        let ClaimsAssessment::Refused { reason, message } = assess(2, &wanted, &[foreign]) else {
            panic!("not refused");
        };
        assert_eq!(reason, reasons::IP_ADDRESS_CLAIM_CONFLICT);
        assert!(message.contains("m-0-0"));
    }

    #[test]
    fn claims_no_longer_wanted_or_deleted_by_someone_are_released_before_the_vm_exists() {
        let wanted = wanted_claims("m", &nics()[..1]);
        let other_pool = fact("m-0-0", "old-pool", None);
        assert_eq!(
            assess(2, &wanted, &[other_pool]),
            ClaimsAssessment::Release(vec!["m-0-0".into()])
        );
        let mut deleted = fact("m-0-0", "v4", None);
        deleted.deleting = true;
        assert_eq!(
            assess(2, &wanted, &[deleted.clone()]),
            ClaimsAssessment::Release(vec!["m-0-0".into()])
        );
        // A release stopped after CAPOV let go of the claim but before it deleted it: released again.
        let mut let_go = fact("m-0-0", "old-pool", None);
        let_go.protected = false;
        assert_eq!(
            assess(2, &wanted, &[let_go]),
            ClaimsAssessment::Release(vec!["m-0-0".into()])
        );
        // Once CAPOV let go, it waits for the provider to free it, then creates it anew.
        deleted.protected = false;
        assert!(matches!(
            assess(2, &wanted, &[deleted, fact("m-0-1", "v6", None)]),
            ClaimsAssessment::Waiting { message, .. } if message.contains("being released")
        ));
    }

    #[test]
    fn unusable_addresses_and_two_of_one_family_are_refused() {
        let wanted = wanted_claims("m", &nics());
        for (address, prefix, gateway) in [
            ("not-an-ip", 24, None),
            ("192.0.2.5", 33, None),
            ("2001:db8::5", -1, None),
            ("192.0.2.5", 24, Some("2001:db8::1")),
        ] {
            let facts = [
                fact("m-0-0", "v4", Some((address, prefix, gateway))),
                fact("m-0-1", "v6", Some(("2001:db8::5", 64, None))),
            ];
            assert!(
                matches!(assess(2, &wanted, &facts), ClaimsAssessment::Refused { reason, .. } if reason == reasons::INVALID_IP_ADDRESS),
                "{address}/{prefix} via {gateway:?}"
            );
        }
        let both_v4 = [
            fact("m-0-0", "v4", Some(("192.0.2.5", 24, None))),
            fact("m-0-1", "v6", Some(("192.0.2.6", 24, None))),
        ];
        assert!(matches!(
            assess(2, &wanted, &both_v4),
            ClaimsAssessment::Refused { reason, message }
                if reason == reasons::IP_ADDRESS_FAMILY_CONFLICT && message.contains("two IPv4 addresses")
        ));
    }

    #[test]
    fn release_takes_every_own_claim_still_held_or_not_yet_deleted() {
        let mut gone = fact("m-0-1", "v6", None);
        gone.deleting = true;
        gone.protected = false;
        let mut foreign = fact("x-0-0", "v4", None);
        foreign.owned = false;
        assert_eq!(
            to_release(&[fact("m-0-0", "v4", None), gone, foreign]),
            vec!["m-0-0".to_string()]
        );
    }
}
