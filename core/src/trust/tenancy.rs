//! Which namespaces may use an OVirtProvider (`spec.allowedNamespaces`): one engine account per tenant, so that
//! tenant A cannot reach engine X; and where on that engine their machines may ask their VMs to go
//! (`spec.tenantPlacement`: host labels and oVirt clusters, which tenants write in failure domains and machine specs
//! and CAPOV's engine user acts on). Pure: the machine actor supplies the namespace's labels.

use std::collections::BTreeMap;

use capov_crds::{AllowedNamespaces, TenantPlacement};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::placement::failure_domains::FailureDomainChoice;

/// Entries of an allowed list a refusal quotes; the rest are counted.
const QUOTED_ENTRIES: usize = 10;

/// True when a machine in `namespace` (with `labels`, None when the namespace is not known) may use a provider
/// with `allowed`: unset allows every namespace, otherwise the namespace is listed by name or matched by the
/// selector.
pub fn namespace_allowed(
    allowed: Option<&AllowedNamespaces>,
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    let Some(allowed) = allowed else {
        return true;
    };
    if allowed.names.iter().any(|name| name == namespace) {
        return true;
    }
    match (&allowed.selector, labels) {
        (Some(selector), Some(labels)) => selector_matches(selector, labels),
        _ => false,
    }
}

/// Kubernetes label-selector semantics: every matchLabels pair and every expression must hold; an empty selector
/// matches everything; an unknown operator matches nothing.
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let pairs_hold = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    let expressions_hold = selector.match_expressions.iter().flatten().all(|expression| {
        let value = labels.get(&expression.key);
        let values = expression.values.as_deref().unwrap_or_default();
        match expression.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    pairs_hold && expressions_hold
}

/// The condition message for a machine whose namespace is not allowed.
pub fn not_allowed_message(provider: &str, namespace: &str) -> String {
    format!(
        "OVirtProvider {provider:?} does not allow namespace {namespace:?} (spec.allowedNamespaces): ask the \
         platform administrator to add it, or use an OVirtProvider meant for this namespace"
    )
}

/// Whether machines may ask for host label `label` (`spec.tenantPlacement.hostLabels`; unset: any).
pub fn host_label_allowed(policy: Option<&TenantPlacement>, label: &str) -> bool {
    listed_or_unrestricted(policy.and_then(|p| p.host_labels.as_deref()), label)
}

/// Whether machines may put their VMs in oVirt cluster `cluster` (`spec.tenantPlacement.ovirtClusters`; unset: any).
pub fn ovirt_cluster_allowed(policy: Option<&TenantPlacement>, cluster: &str) -> bool {
    listed_or_unrestricted(policy.and_then(|p| p.ovirt_clusters.as_deref()), cluster)
}

fn listed_or_unrestricted(list: Option<&[String]>, name: &str) -> bool {
    list.is_none_or(|list| list.iter().any(|entry| entry == name))
}

/// What a machine asks for that `provider`'s `spec.tenantPlacement` does not allow, and how to fix it (None: all
/// allowed): the oVirt cluster its VM would be created in (its failure domain's, else `spec_cluster`), then its
/// failure domain's host label. The caller says what is held back.
pub fn placement_refusal(
    policy: Option<&TenantPlacement>,
    provider: &str,
    failure_domain: &FailureDomainChoice,
    spec_cluster: &str,
) -> Option<String> {
    let policy = policy?;
    let domain = match failure_domain {
        FailureDomainChoice::Found(domain) => Some(domain),
        _ => None,
    };
    match domain.and_then(|d| d.ovirtcluster.as_deref().map(|cluster| (&d.name, cluster))) {
        Some((name, cluster)) if !ovirt_cluster_allowed(Some(policy), cluster) => {
            return Some(format!(
                "failure domain {name:?} puts the VM in oVirt cluster {cluster:?} (spec.failureDomains[].ovirtcluster \
                 of failure domain {name:?} of the OVirtCluster), which OVirtProvider {provider:?} does not let \
                 tenants use (its spec.tenantPlacement.ovirtClusters allows {}): place the Machine in another failure \
                 domain, or ask the platform administrator to add {cluster:?} to spec.tenantPlacement.ovirtClusters \
                 of OVirtProvider {provider:?}",
                quoted(policy.ovirt_clusters.as_deref())
            ));
        }
        None if !ovirt_cluster_allowed(Some(policy), spec_cluster) => {
            return Some(format!(
                "spec.ovirtcluster {spec_cluster:?} is an oVirt cluster OVirtProvider {provider:?} does not let \
                 tenants use (its spec.tenantPlacement.ovirtClusters allows {}): set spec.ovirtcluster (of the \
                 machine template, for machines made from one) to an allowed cluster, or ask the platform \
                 administrator to add {spec_cluster:?} to spec.tenantPlacement.ovirtClusters of OVirtProvider \
                 {provider:?}",
                quoted(policy.ovirt_clusters.as_deref())
            ));
        }
        _ => {}
    }
    let domain = domain?;
    let label = domain.hostlabel.as_deref()?;
    host_label_refusal(Some(policy), provider, &domain.name, label)
}

/// [`placement_refusal`] for the host label of failure domain `domain` alone.
pub fn host_label_refusal(
    policy: Option<&TenantPlacement>,
    provider: &str,
    domain: &str,
    label: &str,
) -> Option<String> {
    let policy = policy?;
    if host_label_allowed(Some(policy), label) {
        return None;
    }
    Some(format!(
        "failure domain {domain:?} pins the VM to hosts labelled {label:?} (spec.failureDomains[].hostlabel of \
         failure domain {domain:?} of the OVirtCluster), a host label OVirtProvider {provider:?} does not let tenants \
         use (its spec.tenantPlacement.hostLabels allows {}): place the Machine in another failure domain, or ask the \
         platform administrator to add {label:?} to spec.tenantPlacement.hostLabels of OVirtProvider {provider:?}",
        quoted(policy.host_labels.as_deref())
    ))
}

/// An allowed list as a refusal quotes it: `none`, or its first entries and how many more there are.
fn quoted(list: Option<&[String]>) -> String {
    let list = list.unwrap_or_default();
    if list.is_empty() {
        return "none".into();
    }
    let shown: Vec<String> = list.iter().take(QUOTED_ENTRIES).map(|e| format!("{e:?}")).collect();
    match list.len().saturating_sub(QUOTED_ENTRIES) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use crate::placement::failure_domains::FailureDomainPlacement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn requirement(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn unset_allows_every_namespace() {
        assert!(namespace_allowed(None, "anything", None));
    }

    #[test]
    fn set_but_empty_allows_none() {
        let allowed = AllowedNamespaces::default();
        assert!(!namespace_allowed(Some(&allowed), "team-a", Some(&labels(&[]))));
    }

    #[test]
    fn names_allow_exactly_those_namespaces() {
        let allowed = AllowedNamespaces {
            names: vec!["team-a".into()],
            selector: None,
        };
        assert!(namespace_allowed(Some(&allowed), "team-a", None));
        assert!(!namespace_allowed(Some(&allowed), "team-b", Some(&labels(&[]))));
        assert!(!namespace_allowed(Some(&allowed), "team-a-2", None));
    }

    #[test]
    fn a_selector_allows_namespaces_by_label() {
        let allowed = AllowedNamespaces {
            names: vec![],
            selector: Some(LabelSelector {
                match_labels: Some(labels(&[("tenant", "a")])),
                match_expressions: None,
            }),
        };
        assert!(namespace_allowed(
            Some(&allowed),
            "x",
            Some(&labels(&[("tenant", "a")]))
        ));
        assert!(!namespace_allowed(
            Some(&allowed),
            "x",
            Some(&labels(&[("tenant", "b")]))
        ));
        assert!(
            !namespace_allowed(Some(&allowed), "x", None),
            "an unknown namespace matches no selector"
        );
    }

    #[test]
    fn an_empty_selector_matches_every_known_namespace() {
        let allowed = AllowedNamespaces {
            names: vec![],
            selector: Some(LabelSelector::default()),
        };
        assert!(namespace_allowed(Some(&allowed), "x", Some(&labels(&[]))));
    }

    #[test]
    fn expressions_follow_kubernetes_semantics() {
        let with = |expression| LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![expression]),
        };
        let ns = labels(&[("tier", "prod")]);
        assert!(selector_matches(
            &with(requirement("tier", "In", &["prod", "stage"])),
            &ns
        ));
        assert!(!selector_matches(&with(requirement("tier", "NotIn", &["prod"])), &ns));
        assert!(selector_matches(&with(requirement("team", "NotIn", &["a"])), &ns));
        assert!(selector_matches(&with(requirement("tier", "Exists", &[])), &ns));
        assert!(!selector_matches(&with(requirement("tier", "DoesNotExist", &[])), &ns));
        assert!(!selector_matches(&with(requirement("tier", "Sometimes", &[])), &ns));
    }

    fn policy(labels: Option<&[&str]>, clusters: Option<&[&str]>) -> TenantPlacement {
        let list = |l: Option<&[&str]>| l.map(|l| l.iter().map(|s| s.to_string()).collect());
        TenantPlacement {
            host_labels: list(labels),
            ovirt_clusters: list(clusters),
        }
    }

    fn domain(name: &str, cluster: Option<&str>, label: Option<&str>) -> FailureDomainChoice {
        FailureDomainChoice::Found(FailureDomainPlacement {
            name: name.into(),
            ovirtcluster: cluster.map(String::from),
            hostlabel: label.map(String::from),
            ..Default::default()
        })
    }

    #[test]
    fn without_tenant_placement_any_label_and_cluster_is_allowed() {
        assert!(host_label_allowed(None, "anything"));
        assert!(ovirt_cluster_allowed(None, "Anywhere"));
        let rack = domain("r", Some("Edge"), Some("rack"));
        assert_eq!(placement_refusal(None, "p", &rack, "Default"), None);
        // Each list unset: that part unrestricted.
        let only_labels = policy(Some(&["rack"]), None);
        assert_eq!(placement_refusal(Some(&only_labels), "p", &rack, "Default"), None);
    }

    #[test]
    fn a_list_allows_exactly_its_entries_and_an_empty_one_none() {
        let listed = policy(Some(&["rack-a"]), Some(&["Default"]));
        assert!(host_label_allowed(Some(&listed), "rack-a"));
        assert!(!host_label_allowed(Some(&listed), "rack-b"));
        assert!(
            !host_label_allowed(Some(&listed), "Rack-A"),
            "names are compared as the engine keeps them"
        );
        assert!(ovirt_cluster_allowed(Some(&listed), "Default"));
        assert!(!ovirt_cluster_allowed(Some(&listed), "Edge"));
        let empty = policy(Some(&[]), Some(&[]));
        assert!(!host_label_allowed(Some(&empty), "rack-a"));
        assert!(!ovirt_cluster_allowed(Some(&empty), "Default"));
    }

    #[test]
    fn a_refusal_names_the_field_to_fix_and_the_provider_field_that_allows_it() {
        let listed = policy(Some(&["rack-a"]), Some(&["Default"]));
        let allowed = placement_refusal(Some(&listed), "p", &domain("a", None, Some("rack-a")), "Default");
        assert_eq!(allowed, None);

        let label = placement_refusal(Some(&listed), "p", &domain("b", None, Some("rack-b")), "Default")
            .expect("a refused host label");
        for part in [
            "\"rack-b\"",
            "spec.failureDomains[].hostlabel of failure domain \"b\" of the OVirtCluster",
            "spec.tenantPlacement.hostLabels allows \"rack-a\"",
            "OVirtProvider \"p\"",
        ] {
            assert!(label.contains(part), "{part} not in: {label}");
        }

        let in_domain = placement_refusal(Some(&listed), "p", &domain("edge", Some("Edge"), None), "Default")
            .expect("a refused domain cluster");
        assert!(in_domain.contains("spec.failureDomains[].ovirtcluster"), "{in_domain}");
        assert!(
            in_domain.contains("spec.tenantPlacement.ovirtClusters allows \"Default\""),
            "{in_domain}"
        );

        let in_spec = placement_refusal(Some(&listed), "p", &FailureDomainChoice::None, "Edge")
            .expect("a refused spec.ovirtcluster");
        assert!(in_spec.starts_with("spec.ovirtcluster \"Edge\""), "{in_spec}");
        assert!(in_spec.contains("spec.tenantPlacement.ovirtClusters"), "{in_spec}");

        // A domain's own cluster decides; the machine's spec.ovirtcluster is not used then.
        assert_eq!(
            placement_refusal(Some(&listed), "p", &domain("d", Some("Default"), None), "Edge"),
            None
        );
        // An unknown domain is FailureDomainNotFound's business; the spec's cluster is what would be used.
        let unknown = FailureDomainChoice::Unknown {
            name: "x".into(),
            known: vec![],
        };
        assert!(placement_refusal(Some(&listed), "p", &unknown, "Edge").is_some());
    }

    #[test]
    fn a_long_allowed_list_is_quoted_in_part() {
        let many: Vec<String> = (0..300).map(|n| format!("c{n}")).collect();
        let policy = TenantPlacement {
            host_labels: None,
            ovirt_clusters: Some(many),
        };
        let message = placement_refusal(Some(&policy), "p", &FailureDomainChoice::None, "Edge").expect("refused");
        assert!(message.contains("\"c9\" and 290 more"), "{message}");
        assert!(!message.contains("\"c10\""), "{message}");
        let none = policy_none();
        let message = placement_refusal(Some(&none), "p", &FailureDomainChoice::None, "Default").expect("refused");
        assert!(message.contains("allows none"), "{message}");
    }

    fn policy_none() -> TenantPlacement {
        policy(None, Some(&[]))
    }
}
