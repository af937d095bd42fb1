//! CAPI's IPAM objects (`ipam.cluster.x-k8s.io/v1beta2`, shipped with CAPI core) as CAPOV reads them: the
//! IPAddressClaims it creates for static addresses and the IPAddresses an IPAM provider answers with. Like
//! [`crate::runtime::capi`], only the fields CAPOV reads are decoded; the stores ([`crate::runtime::watches`]) keep them, and
//! [`claim_facts`] turns what they hold about one object into the plain facts `capov_core::network::ip_claims` decides on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use capov_crds::IpPoolRef;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use serde::Deserialize;

use crate::runtime::kube::resource::namespaced_resource;

use capov_core::network::ip_claims::{ADDRESS_GRACE, AddressFact, CLAIM_FINALIZER, ClaimFact, WantedClaim};

pub const GROUP: &str = "ipam.cluster.x-k8s.io";
pub const VERSION: &str = "v1beta2";

/// An `IPAddressClaim`: what CAPOV reads of it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct IpAddressClaim {
    #[serde(default, deserialize_with = "crate::runtime::kube::slim_meta::claim_meta")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ClaimSpec,
    #[serde(default)]
    pub status: ClaimStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimSpec {
    #[serde(default)]
    pub pool_ref: IpPoolRef,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimStatus {
    #[serde(default)]
    pub address_ref: Option<NameRef>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct NameRef {
    #[serde(default)]
    pub name: String,
}

/// An `IPAddress`: what CAPOV reads of it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct IpAddress {
    #[serde(default, deserialize_with = "crate::runtime::kube::slim_meta::address_meta")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: AddressSpec,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddressSpec {
    #[serde(default)]
    pub claim_ref: NameRef,
    #[serde(default)]
    pub address: String,
    #[serde(default)]
    pub prefix: i32,
    #[serde(default)]
    pub gateway: Option<String>,
}

namespaced_resource!(IpAddressClaim, GROUP, VERSION, "IPAddressClaim", "ipaddressclaims");
namespaced_resource!(IpAddress, GROUP, VERSION, "IPAddress", "ipaddresses");

/// Whether the IPAddressClaims store can be trusted to hold every claim (issue 35): after a restart a deleting
/// machine's first pass may come before the claims are listed; releasing it then would leave its claims holding
/// CAPOV's finalizer, and their addresses, for ever. Release decisions wait until the store has listed once, or
/// until the list showed that CAPI's IPAM API is not served (then no claim can exist).
#[derive(Debug, Default)]
pub struct ClaimsListing {
    listed: AtomicBool,
    not_served: AtomicBool,
}

impl ClaimsListing {
    pub fn known(&self) -> bool {
        self.listed.load(Ordering::Acquire) || self.not_served.load(Ordering::Acquire)
    }

    /// The store has listed its claims once.
    pub fn note_listed(&self) {
        self.listed.store(true, Ordering::Release);
    }

    /// A watch error: a list answered 404 means the IPAM API is not served.
    pub fn note_error(&self, err: &kube::runtime::watcher::Error) {
        use kube::runtime::watcher::Error;
        if let Error::InitialListFailed(kube::Error::Api(status)) = err
            && status.code == 404
        {
            self.not_served.store(true, Ordering::Release);
        }
    }
}

/// The OVirtMachine a claim's change concerns: its owner of that kind.
pub fn claim_owner_machine(claim: &IpAddressClaim) -> Option<String> {
    claim
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|owner| owner.kind == "OVirtMachine")
        .map(|owner| owner.name.clone())
}

/// What the stores hold about the claims of the object with `uid` in `namespace`: those it owns, and any claim of a
/// name it wants (owned or not, so that a foreign one is seen). `age` is how long a claim has existed, for
/// [`ClaimFact::overdue`].
pub fn claim_facts(
    claims: &Store<IpAddressClaim>,
    addresses: &Store<IpAddress>,
    namespace: &str,
    uid: &str,
    wanted: &[WantedClaim],
    age: impl Fn(&ObjectMeta) -> Option<Duration>,
) -> Vec<ClaimFact> {
    let mut facts: Vec<ClaimFact> = claims
        .state()
        .iter()
        .filter(|claim| claim.metadata.namespace.as_deref() == Some(namespace))
        .filter_map(|claim| {
            let name = claim.metadata.name.clone().unwrap_or_default();
            let owned = claim
                .metadata
                .owner_references
                .as_ref()
                .is_some_and(|owners| owners.iter().any(|owner| owner.uid == uid));
            if !owned && !wanted.iter().any(|w| w.name == name) {
                return None;
            }
            let address = claim
                .status
                .address_ref
                .as_ref()
                .filter(|reference| !reference.name.is_empty())
                .and_then(|reference| addresses.get(&ObjectRef::new(&reference.name).within(namespace)))
                .filter(|address| address.spec.claim_ref.name == name)
                .map(|address| AddressFact {
                    name: address.metadata.name.clone().unwrap_or_default(),
                    address: address.spec.address.clone(),
                    prefix: address.spec.prefix,
                    gateway: address.spec.gateway.clone(),
                });
            Some(ClaimFact {
                overdue: address.is_none() && age(&claim.metadata).is_some_and(|age| age > ADDRESS_GRACE),
                name,
                owned,
                pool: claim.spec.pool_ref.clone(),
                deleting: claim.metadata.deletion_timestamp.is_some(),
                protected: claim
                    .metadata
                    .finalizers
                    .as_ref()
                    .is_some_and(|finalizers| finalizers.iter().any(|f| f == CLAIM_FINALIZER)),
                address,
            })
        })
        .collect();
    facts.sort_by(|a, b| a.name.cmp(&b.name));
    facts
}

/// How long ago an object was created, by the local clock (None without a creation time).
pub fn age_now(meta: &ObjectMeta) -> Option<Duration> {
    let created = meta.creation_timestamp.as_ref()?.0;
    let seconds = jiff::Timestamp::now().duration_since(created).as_secs();
    u64::try_from(seconds).ok().map(Duration::from_secs)
}
