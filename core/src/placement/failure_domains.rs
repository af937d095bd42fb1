//! Failure domains (issue #25): the OVirtCluster's spec.failureDomains become its status.failureDomains, which CAPI
//! copies to the Cluster and spreads machines over; a machine placed in one (its Machine's spec.failureDomain) gets
//! its VM in the domain's oVirt cluster and, with a host label, on the hosts carrying it.

use std::collections::BTreeMap;

use capov_crds::{FailureDomainSpec, FailureDomainStatus};

/// The attribute keys of a published failure domain.
pub const OVIRT_CLUSTER_ATTRIBUTE: &str = "ovirtcluster";
pub const HOST_LABEL_ATTRIBUTE: &str = "hostlabel";

/// status.failureDomains for spec.failureDomains: every domain, control-plane eligible unless it says otherwise,
/// with where it is in oVirt as attributes.
pub fn published(spec: &[FailureDomainSpec]) -> Vec<FailureDomainStatus> {
    spec.iter()
        .map(|domain| {
            let mut attributes = BTreeMap::new();
            if let Some(cluster) = &domain.ovirtcluster {
                attributes.insert(OVIRT_CLUSTER_ATTRIBUTE.to_string(), cluster.clone());
            }
            if let Some(label) = &domain.hostlabel {
                attributes.insert(HOST_LABEL_ATTRIBUTE.to_string(), label.clone());
            }
            FailureDomainStatus {
                name: domain.name.clone(),
                control_plane: domain.control_plane.unwrap_or(true),
                attributes,
            }
        })
        .collect()
}

/// Where a machine's failure domain puts its VM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailureDomainChoice {
    /// The Machine names no failure domain.
    None,
    Found(FailureDomainPlacement),
    /// The Machine names a domain the OVirtCluster does not define (or no OVirtCluster was found).
    Unknown {
        name: String,
        known: Vec<String>,
    },
}

/// A failure domain a machine is placed in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailureDomainPlacement {
    pub name: String,
    /// The oVirt cluster the VM goes to instead of spec.ovirtcluster.
    pub ovirtcluster: Option<String>,
    /// The affinity label of the hosts the VM may run on.
    pub hostlabel: Option<String>,
}

/// The machine's failure domain (`Machine.spec.failureDomain`) looked up among the OVirtCluster's domains.
pub fn resolve(machine_domain: Option<&str>, spec: &[FailureDomainSpec]) -> FailureDomainChoice {
    let Some(name) = machine_domain.map(str::trim).filter(|name| !name.is_empty()) else {
        return FailureDomainChoice::None;
    };
    match spec.iter().find(|domain| domain.name == name) {
        Some(domain) => FailureDomainChoice::Found(FailureDomainPlacement {
            name: name.to_string(),
            ovirtcluster: domain.ovirtcluster.clone(),
            hostlabel: domain.hostlabel.clone(),
        }),
        None => FailureDomainChoice::Unknown {
            name: name.to_string(),
            known: spec.iter().map(|domain| domain.name.clone()).collect(),
        },
    }
}

impl FailureDomainChoice {
    /// The oVirt cluster a new VM goes to: the domain's, else spec.ovirtcluster.
    pub fn ovirt_cluster<'a>(&'a self, spec_cluster: &'a str) -> &'a str {
        match self {
            FailureDomainChoice::Found(FailureDomainPlacement {
                ovirtcluster: Some(cluster),
                ..
            }) => cluster,
            _ => spec_cluster,
        }
    }

    /// The domain's name when its `ovirtcluster` is the one a new VM goes to (not spec.ovirtcluster).
    pub fn ovirt_cluster_domain(&self) -> Option<&str> {
        match self {
            FailureDomainChoice::Found(FailureDomainPlacement {
                name,
                ovirtcluster: Some(_),
                ..
            }) => Some(name),
            _ => None,
        }
    }

    /// The domain's name when the machine is in one CAPOV knows.
    pub fn name(&self) -> Option<&str> {
        match self {
            FailureDomainChoice::Found(placement) => Some(&placement.name),
            _ => None,
        }
    }
}

/// ClusterNotFound's message: what to fix is where the name came from, the failure domain (`domain`) or the
/// machine's spec.ovirtcluster.
pub fn cluster_not_found_message(cluster: &str, domain: Option<&str>) -> String {
    match domain {
        Some(domain) => format!(
            "cluster {cluster:?} not found in oVirt: it is the ovirtcluster of failure domain {domain:?} in the \
             OVirtCluster's spec.failureDomains: fix it there (or create that cluster in oVirt)"
        ),
        None => format!("cluster {cluster:?} not found in oVirt: fix spec.ovirtcluster"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain(
        name: &str,
        cluster: Option<&str>,
        label: Option<&str>,
        control_plane: Option<bool>,
    ) -> FailureDomainSpec {
        FailureDomainSpec {
            name: name.into(),
            ovirtcluster: cluster.map(String::from),
            hostlabel: label.map(String::from),
            control_plane,
            ..Default::default()
        }
    }

    #[test]
    fn domains_are_published_control_plane_eligible_by_default_with_their_place_as_attributes() {
        let spec = [
            domain("a", Some("Cluster-A"), None, None),
            domain("b", None, Some("rack-b"), Some(false)),
        ];
        let published = published(&spec);
        assert_eq!(published.len(), 2);
        assert!(published[0].control_plane);
        assert_eq!(published[0].attributes[OVIRT_CLUSTER_ATTRIBUTE], "Cluster-A");
        assert!(!published[1].control_plane);
        assert_eq!(published[1].attributes[HOST_LABEL_ATTRIBUTE], "rack-b");
        assert!(!published[1].attributes.contains_key(OVIRT_CLUSTER_ATTRIBUTE));
    }

    #[test]
    fn a_machine_in_a_domain_goes_to_its_cluster_and_an_unknown_domain_is_named_with_the_known_ones() {
        let spec = [
            domain("a", Some("Cluster-A"), None, None),
            domain("b", None, Some("rack-b"), None),
        ];
        let a = resolve(Some("a"), &spec);
        assert_eq!(a.ovirt_cluster("Default"), "Cluster-A");
        assert_eq!(a.name(), Some("a"));
        // A host-label domain keeps the machine's own oVirt cluster.
        assert_eq!(resolve(Some("b"), &spec).ovirt_cluster("Default"), "Default");
        assert_eq!(resolve(None, &spec), FailureDomainChoice::None);
        assert_eq!(resolve(Some(" "), &spec), FailureDomainChoice::None);
        assert_eq!(
            resolve(Some("c"), &spec),
            FailureDomainChoice::Unknown {
                name: "c".into(),
                known: vec!["a".into(), "b".into()]
            }
        );
    }

    #[test]
    fn cluster_not_found_names_the_failure_domain_when_the_cluster_comes_from_one() {
        let spec = [
            domain("site-2", Some("Site2"), None, None),
            domain("rack-b", None, Some("rack-b"), None),
        ];
        let site = resolve(Some("site-2"), &spec);
        assert_eq!(site.ovirt_cluster_domain(), Some("site-2"));
        let message = cluster_not_found_message(site.ovirt_cluster("Default"), site.ovirt_cluster_domain());
        assert!(
            message.contains("\"Site2\"") && message.contains("\"site-2\""),
            "{message}"
        );
        assert!(message.contains("spec.failureDomains"), "{message}");
        assert!(!message.contains("spec.ovirtcluster"), "{message}");

        // A host-label domain, or none: the name is spec.ovirtcluster's, and so is the fix.
        for choice in [resolve(Some("rack-b"), &spec), resolve(None, &spec)] {
            assert_eq!(choice.ovirt_cluster_domain(), None);
            let message = cluster_not_found_message(choice.ovirt_cluster("Default"), choice.ovirt_cluster_domain());
            assert_eq!(message, "cluster \"Default\" not found in oVirt: fix spec.ovirtcluster");
        }
    }
}
