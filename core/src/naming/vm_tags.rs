//! The engine tags a machine's VM carries, so that engine administrators see what a VM belongs to: `capov` on every
//! VM CAPOV creates, `capov-ns-<namespace>`, and `capov.cluster.<namespace>.<cluster>` (cluster names are unique only
//! per namespace). Tags are engine-wide and unique by name, and the engine takes at most 50 characters
//! (`TAG_NAME_SIZE`).
//!
//! The cluster's tag is written by [`crate::naming::engine_names`] (issue #35): its older name,
//! `capov-cluster-<namespace>-<cluster>`, was one tag for namespace `team` with cluster `a-prod` and namespace
//! `team-a` with cluster `prod`. The namespace's tag keeps its name when it fits (a namespace name holds no `.` or
//! `_` and the prefix is fixed, so that name belongs to one namespace); a longer one is written by the same rule,
//! cut with a hash, which no namespace's uncut tag can equal (the older rule's cut, `<prefix>-<hash>`, could be the
//! uncut tag of a 41-character namespace).
//!
//! CAPOV creates a missing tag with [`TAG_DESCRIPTION`] and assigns existing tags by name; it never edits, moves or
//! removes a tag, its own included (a VM's assignments go with the VM). Tags of the older names stay on the VMs that
//! carry them.

use crate::naming::engine_names::engine_wide;

/// The engine's `TAG_NAME_SIZE`.
pub const TAG_NAME_LIMIT: usize = 50;

/// The tag every VM CAPOV creates carries.
pub const CAPOV_TAG: &str = "capov";

/// The description of the tags CAPOV creates.
pub const TAG_DESCRIPTION: &str = "Created by CAPOV (Cluster API provider for oVirt) for the VMs it manages";

/// The tags of a machine's VM, in the order they are assigned. `cluster` is None when the machine names none.
pub fn wanted_tags(namespace: &str, cluster: Option<&str>) -> Vec<String> {
    let mut tags = vec![CAPOV_TAG.to_string(), namespace_tag(namespace)];
    if let Some(cluster) = cluster.filter(|c| !c.is_empty()) {
        tags.push(engine_wide(&["cluster", namespace, cluster], TAG_NAME_LIMIT));
    }
    tags
}

/// `capov-ns-<namespace>` when it fits, else `capov.ns.<namespace>` cut with its hash.
fn namespace_tag(namespace: &str) -> String {
    let tag = format!("capov-ns-{namespace}");
    if tag.len() <= TAG_NAME_LIMIT && crate::naming::engine_names::engine_safe(&tag) {
        return tag;
    }
    engine_wide(&["ns", namespace], TAG_NAME_LIMIT)
}

/// The wanted tags the VM does not carry yet.
pub fn missing_tags(wanted: &[String], assigned: &[String]) -> Vec<String> {
    wanted.iter().filter(|tag| !assigned.contains(tag)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::naming::vm_name::engine_length;

    #[test]
    fn a_machine_gets_capov_its_namespace_and_its_cluster() {
        assert_eq!(
            wanted_tags("team-a", Some("prod")),
            ["capov", "capov-ns-team-a", "capov.cluster.team-a.prod"]
        );
        assert_eq!(wanted_tags("team-a", None), ["capov", "capov-ns-team-a"]);
    }

    /// Issue #35: the cluster tags of look-alike tenants were one tag.
    #[test]
    fn look_alike_tenants_get_cluster_tags_of_their_own() {
        let cluster_tag = |namespace: &str, cluster: &str| wanted_tags(namespace, Some(cluster))[2].clone();
        assert_ne!(cluster_tag("team", "a-prod"), cluster_tag("team-a", "prod"));
        assert_ne!(cluster_tag("a-b", "c"), cluster_tag("a", "b-c"));
        // Long ones too: the cut keeps the difference in the hash.
        let ns = "n".repeat(40);
        assert_ne!(cluster_tag(&format!("{ns}-x"), "prod"), cluster_tag(&ns, "x-prod"));
    }

    #[test]
    fn long_names_fit_the_engines_tag_limit_and_stay_distinct() {
        let ns = "n".repeat(63);
        let a = wanted_tags(&ns, Some(&"c".repeat(63)));
        let b = wanted_tags(&ns, Some(&format!("{}d", "c".repeat(62))));
        assert!(a.iter().all(|t| engine_length(t) <= TAG_NAME_LIMIT), "{a:?}");
        assert_ne!(a[2], b[2]);
        // Only letters, digits, '.', '_' and '-', as the engine's tag name rule admits.
        assert!(a.iter().all(|t| crate::naming::engine_names::engine_safe(t)), "{a:?}");
    }

    #[test]
    fn a_namespace_tag_is_kept_when_it_fits_and_a_cut_one_equals_no_namespaces_tag() {
        let fits = "n".repeat(41);
        assert_eq!(namespace_tag(&fits), format!("capov-ns-{fits}"));
        let long = format!("{}-{}", "n".repeat(29), "m".repeat(30));
        let cut = namespace_tag(&long);
        assert_eq!(engine_length(&cut), TAG_NAME_LIMIT);
        assert!(cut.starts_with("capov.ns."), "{cut}");
        // The older cut, `capov-ns-<29 characters>-<10 hex digits>`, was also the tag of a namespace of that name.
        let older_cut = crate::naming::vm_name::shortened(&format!("capov-ns-{long}"), TAG_NAME_LIMIT);
        let namesake = older_cut.trim_start_matches("capov-ns-").to_string();
        assert_eq!(namespace_tag(&namesake), older_cut);
        assert_ne!(cut, namespace_tag(&namesake));
    }

    #[test]
    fn only_tags_not_assigned_yet_are_missing() {
        let wanted = wanted_tags("ns", Some("c"));
        let assigned = vec!["capov".to_string(), "someone-elses".to_string()];
        assert_eq!(missing_tags(&wanted, &assigned), ["capov-ns-ns", "capov.cluster.ns.c"]);
        assert!(missing_tags(&wanted, &wanted).is_empty());
    }
}
