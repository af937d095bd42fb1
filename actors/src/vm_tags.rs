//! The engine tags a machine's VM carries, so that engine administrators see what a VM belongs to: `capov` on every
//! VM CAPOV creates, `capov-ns-<namespace>`, and `capov-cluster-<namespace>-<cluster>` (cluster names are unique only
//! per namespace). Tags are engine-wide and unique by name; a name longer than the engine's 50 characters
//! (`TAG_NAME_SIZE`) is shortened as VM names are ([`crate::vm_name::shortened`]).
//!
//! CAPOV creates a missing tag with [`TAG_DESCRIPTION`] and assigns existing tags by name; it never edits, moves or
//! removes a tag, its own included (a VM's assignments go with the VM).

use crate::vm_name::shortened;

/// The engine's `TAG_NAME_SIZE`.
pub const TAG_NAME_LIMIT: usize = 50;

/// The tag every VM CAPOV creates carries.
pub const CAPOV_TAG: &str = "capov";

/// The description of the tags CAPOV creates.
pub const TAG_DESCRIPTION: &str = "Created by CAPOV (Cluster API provider for oVirt) for the VMs it manages";

/// The tags of a machine's VM, in the order they are assigned. `cluster` is None when the machine names none.
pub fn wanted_tags(namespace: &str, cluster: Option<&str>) -> Vec<String> {
    let mut tags = vec![
        CAPOV_TAG.to_string(),
        shortened(&format!("capov-ns-{namespace}"), TAG_NAME_LIMIT),
    ];
    if let Some(cluster) = cluster.filter(|c| !c.is_empty()) {
        tags.push(shortened(
            &format!("capov-cluster-{namespace}-{cluster}"),
            TAG_NAME_LIMIT,
        ));
    }
    tags
}

/// The wanted tags the VM does not carry yet.
pub fn missing_tags(wanted: &[String], assigned: &[String]) -> Vec<String> {
    wanted.iter().filter(|tag| !assigned.contains(tag)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm_name::engine_length;

    #[test]
    fn a_machine_gets_capov_its_namespace_and_its_cluster() {
        assert_eq!(
            wanted_tags("team-a", Some("prod")),
            ["capov", "capov-ns-team-a", "capov-cluster-team-a-prod"]
        );
        assert_eq!(wanted_tags("team-a", None), ["capov", "capov-ns-team-a"]);
    }

    #[test]
    fn long_names_fit_the_engines_tag_limit_and_stay_distinct() {
        let ns = "n".repeat(63);
        let a = wanted_tags(&ns, Some(&"c".repeat(63)));
        let b = wanted_tags(&ns, Some(&format!("{}d", "c".repeat(62))));
        assert!(a.iter().all(|t| engine_length(t) <= TAG_NAME_LIMIT), "{a:?}");
        assert_ne!(a[2], b[2]);
        // Only letters, digits, '.', '_' and '-', as the engine's tag name rule admits.
        assert!(
            a.iter()
                .flat_map(|t| t.chars())
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        );
    }

    #[test]
    fn only_tags_not_assigned_yet_are_missing() {
        let wanted = wanted_tags("ns", Some("c"));
        let assigned = vec!["capov".to_string(), "someone-elses".to_string()];
        assert_eq!(missing_tags(&wanted, &assigned), ["capov-ns-ns", "capov-cluster-ns-c"]);
        assert!(missing_tags(&wanted, &wanted).is_empty());
    }
}
