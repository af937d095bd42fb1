//! Which namespaces may use an OVirtProvider (`spec.allowedNamespaces`): one engine account per tenant, so that
//! tenant A cannot reach engine X. Pure: the machine actor supplies the namespace's labels.

use std::collections::BTreeMap;

use capov_crds::AllowedNamespaces;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

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

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

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
}
