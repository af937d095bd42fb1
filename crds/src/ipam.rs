//! References to IPAM pools (CAPI's `ipam.cluster.x-k8s.io` contract): where an OVirtMachine's NICs and an
//! OVirtCluster's control-plane endpoint take their addresses from. CAPOV asks for an address with an
//! `IPAddressClaim` on the pool; an IPAM provider (e.g. cluster-api-ipam-provider-in-cluster) answers with an
//! `IPAddress`.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// A pool of an IPAM provider in the object's namespace (or a cluster-wide one), as an `IPAddressClaim`'s
/// `spec.poolRef` names it. The rules are the claim's own, so a bad reference is refused here, not when CAPOV
/// creates the claim.
// Regular expressions end in `\z`, not `$`: clusterctl would take `$` for a variable in the release's manifests.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpPoolRef {
    /// API group of the pool's kind, e.g. ipam.cluster.x-k8s.io (the in-cluster IPAM provider).
    #[serde(rename = "apiGroup")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new(
        "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\\\\z')"
    ).message(
        "apiGroup must be the API group of an IPAM pool kind, a DNS name such as ipam.cluster.x-k8s.io"
    ))]
    pub api_group: String,

    /// Kind of the pool, e.g. InClusterIPPool or GlobalInClusterIPPool.
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new(
        "self.matches('^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?\\\\z')"
    ).message("kind must be the kind of an IPAM pool, e.g. InClusterIPPool"))]
    pub kind: String,

    /// Name of the pool.
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new(
        "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\\\\z')"
    ).message(
        "name must name the IPAM pool: lower-case letters, digits, '-' and '.', starting and ending with a letter or \
         digit"
    ))]
    pub name: String,
}

impl IpPoolRef {
    /// `kind/name (apiGroup)`, for messages.
    pub fn describe(&self) -> String {
        format!("{} {} ({})", self.kind, self.name, self.api_group)
    }
}
