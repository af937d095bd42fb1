//! The control-plane endpoint from an IPAM pool (issue 25, OVirtCluster `spec.controlPlaneEndpointFromPool`): the
//! OVirtCluster claims one address (claim `<cluster>-vip`, owned by it, `crate::network::ip_claims` rules), writes it to
//! `spec.controlPlaneEndpoint` once the pool gave it, and is ready only then. The address is a VIP that kube-vip
//! (or the like) serves in the workload cluster.

use std::net::IpAddr;

use capov_crds::{ApiEndpoint, EndpointFromPool, Severity};

use crate::conditions::reasons;
use crate::network::ip_claims::{self, ClaimFact, ClaimsAssessment, WantedClaim};

/// What an OVirtCluster with an endpoint from a pool does next.
#[derive(Clone, Debug, PartialEq)]
pub enum EndpointStep {
    /// spec.controlPlaneEndpoint holds the pool's address: the cluster may report ready.
    Ready,
    /// Write spec.controlPlaneEndpoint.
    Write(ApiEndpoint),
    Create(WantedClaim),
    Release(Vec<String>),
    /// Not ready: the Ready condition's reason, severity and message.
    NotReady {
        reason: &'static str,
        severity: Severity,
        message: String,
    },
}

/// The claim's name for the OVirtCluster `cluster`.
pub fn claim_name(cluster: &str) -> String {
    ip_claims::claim_name(cluster, "vip")
}

/// The next step for the OVirtCluster `cluster` taking its endpoint from `from_pool`, with `current` as its
/// spec.controlPlaneEndpoint and `facts` its claims.
pub fn decide(
    cluster: &str,
    from_pool: &EndpointFromPool,
    current: Option<&ApiEndpoint>,
    facts: &[ClaimFact],
) -> EndpointStep {
    let wanted = [WantedClaim {
        name: claim_name(cluster),
        nic: 0,
        pool: from_pool.pool.clone(),
    }];
    let address: IpAddr = match ip_claims::assess(1, &wanted, facts) {
        ClaimsAssessment::Ready(nics) => {
            let nic = nics.into_iter().next().unwrap_or_default();
            match nic.ipv4.or(nic.ipv6) {
                Some(address) => address.address,
                None => return EndpointStep::Create(wanted[0].clone()),
            }
        }
        ClaimsAssessment::Create(mut missing) => return EndpointStep::Create(missing.remove(0)),
        ClaimsAssessment::Release(names) => return EndpointStep::Release(names),
        ClaimsAssessment::Waiting { message, overdue } => {
            return EndpointStep::NotReady {
                reason: reasons::WAITING_FOR_CONTROL_PLANE_ENDPOINT,
                severity: if overdue { Severity::Warning } else { Severity::Info },
                message,
            };
        }
        ClaimsAssessment::Refused { reason, message } => {
            return EndpointStep::NotReady {
                reason,
                severity: Severity::Error,
                message,
            };
        }
    };
    let wanted_endpoint = ApiEndpoint {
        host: address.to_string(),
        port: from_pool.port,
    };
    match current {
        None => EndpointStep::Write(wanted_endpoint),
        Some(endpoint) if endpoint.host.parse::<IpAddr>().ok() == Some(address) && endpoint.port == from_pool.port => {
            EndpointStep::Ready
        }
        Some(endpoint) => EndpointStep::NotReady {
            reason: reasons::CONTROL_PLANE_ENDPOINT_MISMATCH,
            severity: Severity::Error,
            message: format!(
                "spec.controlPlaneEndpoint is {}:{}, but the pool gave {}:{} (spec.controlPlaneEndpointFromPool): \
                 remove spec.controlPlaneEndpoint and CAPOV writes the pool's address",
                endpoint.host, endpoint.port, wanted_endpoint.host, wanted_endpoint.port
            ),
        },
    }
}

/// The claims to release when the OVirtCluster goes.
pub fn to_release(facts: &[ClaimFact]) -> Vec<String> {
    ip_claims::to_release(facts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::ip_claims::AddressFact;
    use capov_crds::IpPoolRef;

    fn from_pool() -> EndpointFromPool {
        EndpointFromPool {
            pool: IpPoolRef {
                api_group: "ipam.cluster.x-k8s.io".into(),
                kind: "InClusterIPPool".into(),
                name: "vips".into(),
            },
            port: 6443,
        }
    }

    fn claim(address: Option<&str>) -> ClaimFact {
        ClaimFact {
            name: "prod-vip".into(),
            owned: true,
            pool: from_pool().pool,
            deleting: false,
            protected: true,
            address: address.map(|address| AddressFact {
                name: "prod-vip".into(),
                address: address.into(),
                prefix: 24,
                gateway: None,
            }),
            overdue: false,
        }
    }

    fn endpoint(host: &str, port: i32) -> ApiEndpoint {
        ApiEndpoint {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn the_claim_is_created_then_waited_for_then_its_address_written_then_ready() {
        let EndpointStep::Create(wanted) = decide("prod", &from_pool(), None, &[]) else {
            panic!("no claim created");
        };
        assert_eq!(wanted.name, "prod-vip");
        assert!(matches!(
            decide("prod", &from_pool(), None, &[claim(None)]),
            EndpointStep::NotReady { reason, severity: Severity::Info, .. }
                if reason == reasons::WAITING_FOR_CONTROL_PLANE_ENDPOINT
        ));
        let bound = [claim(Some("192.0.2.100"))];
        assert_eq!(
            decide("prod", &from_pool(), None, &bound),
            EndpointStep::Write(endpoint("192.0.2.100", 6443))
        );
        assert_eq!(
            decide("prod", &from_pool(), Some(&endpoint("192.0.2.100", 6443)), &bound),
            EndpointStep::Ready
        );
    }

    #[test]
    fn an_ipv6_vip_is_written_as_an_address_and_compared_as_one() {
        let bound = [claim(Some("2001:db8::100"))];
        assert_eq!(
            decide("prod", &from_pool(), None, &bound),
            EndpointStep::Write(endpoint("2001:db8::100", 6443))
        );
        assert_eq!(
            decide("prod", &from_pool(), Some(&endpoint("2001:DB8:0::100", 6443)), &bound),
            EndpointStep::Ready
        );
    }

    #[test]
    fn an_endpoint_set_by_hand_to_another_address_is_reported_not_overwritten() {
        let step = decide(
            "prod",
            &from_pool(),
            Some(&endpoint("10.0.0.1", 6443)),
            &[claim(Some("192.0.2.100"))],
        );
        assert!(matches!(
            step,
            EndpointStep::NotReady { reason, severity: Severity::Error, message }
                if reason == reasons::CONTROL_PLANE_ENDPOINT_MISMATCH && message.contains("192.0.2.100:6443")
        ));
    }

    #[test]
    fn a_foreign_claim_of_the_name_is_refused() {
        let mut foreign = claim(Some("192.0.2.100"));
        foreign.owned = false;
        assert!(matches!(
            decide("prod", &from_pool(), None, &[foreign]),
            EndpointStep::NotReady { reason, .. } if reason == reasons::IP_ADDRESS_CLAIM_CONFLICT
        ));
    }

    #[test]
    fn deletion_releases_the_claim() {
        assert_eq!(to_release(&[claim(Some("192.0.2.100"))]), ["prod-vip"]);
    }
}
