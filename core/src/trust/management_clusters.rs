//! Which management clusters a provider's VMs may have been marked by. The ownership marker names a management
//! cluster ([`crate::trust::identity`]) so that two management clusters sharing an engine never touch each other's VMs.
//! `clusterctl move` carries a provider's machines to another management cluster, whose own id differs; so the id a
//! marker names is held by the OVirtProvider (annotation [`MANAGEMENT_CLUSTER_ANNOTATION`]), which only platform
//! admins can write and which the move carries along. CAPOV writes it, with this cluster's id, when it is absent.
//!
//! A machine accepts the markers of the provider's ids and of this cluster's own id, and names the provider's
//! first id in new markers. Nothing a tenant writes takes part.

use capov_crds::labels::MANAGEMENT_CLUSTER_ANNOTATION;

use crate::trust::identity::validate_management_cluster_id;

/// At most this many ids in the annotation: a provider moved a few times, or shared after a merge of two
/// management clusters, not a list anyone could grow without bound.
pub const MAX_IDS: usize = 8;

/// The management clusters a provider's VMs answer to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagementClusters {
    /// The id new markers name.
    pub marker: String,
    /// Every id whose markers are accepted, `marker` first; this cluster's own id among them.
    pub accepted: Vec<String>,
}

/// From the provider's annotation (None: not written yet) and this cluster's own id. Err: a message that says how
/// to fix the annotation (it never repeats the value, which may be long).
pub fn from_annotation(annotation: Option<&str>, own: &str) -> Result<ManagementClusters, String> {
    let listed = match annotation {
        None => Vec::new(),
        Some(value) => parse(value)?,
    };
    let marker = listed.first().cloned().unwrap_or_else(|| own.to_string());
    let mut accepted = listed;
    for id in [marker.as_str(), own] {
        if !accepted.iter().any(|known| known == id) {
            accepted.push(id.to_string());
        }
    }
    Ok(ManagementClusters { marker, accepted })
}

fn parse(value: &str) -> Result<Vec<String>, String> {
    let invalid = |why: String| {
        format!(
            "the OVirtProvider's annotation {MANAGEMENT_CLUSTER_ANNOTATION} {why}; it must list 1 to {MAX_IDS} \
             management cluster ids separated by commas, the one new VMs are marked with first (see README, \
             \"clusterctl move\"); CAPOV uses this provider again once it is fixed"
        )
    };
    // One past the limit is enough to refuse: a long value is never split whole.
    let ids: Vec<&str> = value.split(',').map(str::trim).take(MAX_IDS + 1).collect();
    if ids.len() > MAX_IDS {
        return Err(invalid(format!("lists more than {MAX_IDS} ids")));
    }
    let mut unique: Vec<String> = Vec::with_capacity(ids.len());
    for (position, id) in ids.into_iter().enumerate() {
        validate_management_cluster_id(id)
            .map_err(|why| invalid(format!("has an unusable id at position {}: {why}", position + 1)))?;
        if !unique.iter().any(|known| known == id) {
            unique.push(id.to_string());
        }
    }
    Ok(unique)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: &str = "target-kube-system-uid";

    #[test]
    fn without_the_annotation_this_cluster_marks_and_accepts_its_own_id() {
        let clusters = from_annotation(None, OWN).unwrap();
        assert_eq!(clusters.marker, OWN);
        assert_eq!(clusters.accepted, [OWN]);
    }

    #[test]
    fn a_moved_provider_keeps_marking_with_the_id_it_brought_and_this_cluster_accepts_both() {
        let clusters = from_annotation(Some("source-kube-system-uid"), OWN).unwrap();
        assert_eq!(clusters.marker, "source-kube-system-uid");
        assert_eq!(clusters.accepted, ["source-kube-system-uid", OWN]);
    }

    #[test]
    fn a_list_marks_with_its_first_id_and_accepts_all_once() {
        let clusters = from_annotation(Some(" a , b,a,target-kube-system-uid"), OWN).unwrap();
        assert_eq!(clusters.marker, "a");
        assert_eq!(clusters.accepted, ["a", "b", OWN]);
    }

    #[test]
    fn unusable_annotations_are_refused_with_a_message_that_says_what_to_write() {
        let too_many = ["x"; MAX_IDS + 1].join(",");
        let too_long = "y".repeat(65);
        for bad in ["", " ", "a,,b", "two words", "a,", too_many.as_str(), too_long.as_str()] {
            let err = from_annotation(Some(bad), OWN).unwrap_err();
            assert!(err.contains(MANAGEMENT_CLUSTER_ANNOTATION), "{bad:?}: {err}");
            assert!(err.contains("separated by commas"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn the_message_never_repeats_a_long_value() {
        let long = format!("{},b", "z".repeat(4000));
        let err = from_annotation(Some(&long), OWN).unwrap_err();
        assert!(err.len() < 400, "{}", err.len());
    }
}
