//! The topology labels CAPOV keeps on a machine's Node (issue #27; docs/decisions.md, "Node labels"): the oVirt
//! cluster and the host its VM runs on under CAPOV's own prefix (kept current when the VM migrates), and the
//! well-known zone label for its failure domain, set only where no one else has set it.

use std::collections::BTreeMap;

pub const OVIRT_CLUSTER_LABEL: &str = "capov.infrastructure.cluster.x-k8s.io/ovirt-cluster";
pub const OVIRT_HOST_LABEL: &str = "capov.infrastructure.cluster.x-k8s.io/ovirt-host";
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The label keys CAPOV looks at on a Node.
pub const KEYS: [&str; 3] = [OVIRT_CLUSTER_LABEL, OVIRT_HOST_LABEL, ZONE_LABEL];

/// Whether `value` can be a label value (at most 63 characters of `[A-Za-z0-9._-]`, alphanumeric at both ends).
pub fn valid_value(value: &str) -> bool {
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && value.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && value.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
}

/// The labels to set on a Node that carries `current` (its labels of [`KEYS`]), for a VM in `ovirt_cluster` on
/// `host` (None: not running, the label is left as it is) in `failure_domain`. A value that cannot be a label
/// value is left out; the zone label is never changed once present, whoever set it.
pub fn changes(
    current: &BTreeMap<String, String>,
    ovirt_cluster: &str,
    host: Option<&str>,
    failure_domain: Option<&str>,
) -> BTreeMap<String, String> {
    let mut wanted = vec![(OVIRT_CLUSTER_LABEL, Some(ovirt_cluster)), (OVIRT_HOST_LABEL, host)];
    if !current.contains_key(ZONE_LABEL) {
        wanted.push((ZONE_LABEL, failure_domain));
    }
    wanted
        .into_iter()
        .filter_map(|(key, value)| {
            let value = value.filter(|v| valid_value(v))?;
            (current.get(key).map(String::as_str) != Some(value)).then(|| (key.to_string(), value.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_node_gets_its_cluster_host_and_zone_and_follows_a_migration() {
        let first = changes(&BTreeMap::new(), "Default", Some("host-1"), Some("rack-a"));
        assert_eq!(
            first,
            labels(&[
                (OVIRT_CLUSTER_LABEL, "Default"),
                (OVIRT_HOST_LABEL, "host-1"),
                (ZONE_LABEL, "rack-a")
            ])
        );
        assert!(changes(&first, "Default", Some("host-1"), Some("rack-a")).is_empty());
        assert_eq!(
            changes(&first, "Default", Some("host-2"), Some("rack-a")),
            labels(&[(OVIRT_HOST_LABEL, "host-2")])
        );
        // Not running: the host label stays as it was.
        assert!(changes(&first, "Default", None, Some("rack-a")).is_empty());
    }

    #[test]
    fn a_zone_set_by_someone_else_stays_and_unfit_values_are_left_out() {
        let current = labels(&[(ZONE_LABEL, "from-the-ccm")]);
        let wanted = changes(&current, "Cluster 1", Some("host_1.example.com"), Some("rack-a"));
        assert_eq!(wanted, labels(&[(OVIRT_HOST_LABEL, "host_1.example.com")]));
        assert!(!valid_value("-x") && !valid_value(&"a".repeat(64)) && valid_value("a.b_c-1"));
    }
}
