//! How a VM is tied to its OVirtMachine: `spec.providerID` = `ovirt://<vm-id>`, and the ownership marker in the
//! VM's description. CAPOV changes a VM (start, resize, rename, re-NIC, stop, delete) only when the marker proves
//! that the VM was made for this very object by this management cluster, however the VM was found — a tenant can
//! write any providerID into an OVirtMachine it creates.
//!
//! Marker (one line, at most [`DESCRIPTION_LIMIT`] characters, the engine's limit):
//! `capov:<namespace>/<name> uid:<OVirtMachine UID> mc:<management cluster id>`. An object part that would make the
//! line too long is cut and ends in `~`; the UID and the management cluster id are the proof, the object part is
//! for people reading the engine's UI.
//!
//! Markers written before this format (`capov:<namespace>/<name>` alone) are *legacy*: they are trusted only for
//! the VM that the OVirtMachine already records in spec.providerID (and are then rewritten in the new format), never
//! for adoption by name, where a same-named object re-created after a deletion would take over an orphan.
//!
//! `clusterctl move` re-creates the object with a new UID and keeps its annotations: a marker naming the UID of
//! the `owner-uid` annotation is *moved*, and trusted by the same rule as a legacy one (only for the VM
//! spec.providerID names, then rewritten), since a tenant can write that annotation. The management cluster a
//! marker may name is not the tenant's to say: see [`crate::trust::management_clusters`].

/// Prefix of every provider ID this operator writes.
pub const PROVIDER_ID_PREFIX: &str = "ovirt://";

/// The engine refuses longer VM descriptions.
pub const DESCRIPTION_LIMIT: usize = 255;

/// Longest `--management-cluster-id` accepted, so that a marker always leaves room for the object part.
pub const MANAGEMENT_CLUSTER_ID_LIMIT: usize = 64;

const OBJECT_PREFIX: &str = "capov:";
const UID_PREFIX: &str = "uid:";
const MC_PREFIX: &str = "mc:";

/// `ovirt://<vm-id>`.
pub fn format_provider_id(vm_id: &str) -> String {
    format!("{PROVIDER_ID_PREFIX}{vm_id}")
}

/// The VM id of `ovirt://<vm-id>`; None for anything else. The engine's ids are UUIDs (`Guid`), and only a UUID is
/// taken: anything else would be pasted into a request path, where `..` or `.` turn `GET /vms/{id}` into a listing
/// of every VM (issue 23). The CRD refuses the same values (`OVirtMachineSpec.provider_id`).
pub fn parse_provider_id(provider_id: &str) -> Option<&str> {
    let id = provider_id.strip_prefix(PROVIDER_ID_PREFIX)?;
    is_engine_id(id).then_some(id)
}

/// `8-4-4-4-12` hexadecimal digits, as the engine writes its ids.
pub fn is_engine_id(id: &str) -> bool {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let mut groups = id.split('-');
    let fits = GROUPS.iter().all(|&len| {
        groups
            .next()
            .is_some_and(|group| group.len() == len && group.bytes().all(|b| b.is_ascii_hexdigit()))
    });
    fits && groups.next().is_none()
}

/// Who a VM must belong to: the OVirtMachine (namespace, name, UID) and the management cluster running CAPOV.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerIdentity {
    pub namespace: String,
    pub name: String,
    /// The OVirtMachine's `metadata.uid`.
    pub uid: String,
    /// The UID the VM was created under when it differs from `uid`: `clusterctl move` re-creates objects with new
    /// UIDs and carries this annotation along ([`capov_crds::labels::OWNER_UID_ANNOTATION`]). Tenant-writable, so
    /// a marker naming it only makes the VM [`Ownership::Moved`].
    pub previous_uid: Option<String>,
    /// The management cluster id new markers name (the provider's, [`crate::trust::management_clusters`]).
    pub management_cluster: String,
    /// Further management cluster ids whose markers count as this cluster's (this cluster's own id, and those the
    /// provider lists).
    pub accepted_management_clusters: Vec<String>,
}

impl OwnerIdentity {
    /// The description CAPOV writes into the VMs it creates for this object.
    pub fn marker(&self) -> String {
        let tail = format!(" {UID_PREFIX}{} {MC_PREFIX}{}", self.uid, self.management_cluster);
        format!("{}{tail}", object_word(&self.namespace, &self.name, tail.len()))
    }

    fn accepts_management_cluster(&self, id: &str) -> bool {
        id == self.management_cluster || self.accepted_management_clusters.iter().any(|known| known == id)
    }
}

/// `capov:<ns>/<name>`, cut (ending in `~`) so that together with `tail_len` more characters it fits the limit.
fn object_word(namespace: &str, name: &str, tail_len: usize) -> String {
    let full = format!("{OBJECT_PREFIX}{namespace}/{name}");
    let room = DESCRIPTION_LIMIT.saturating_sub(tail_len);
    if full.len() <= room {
        return full;
    }
    let mut cut = room.saturating_sub(1);
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}~", &full[..cut])
}

/// What a VM's description says about its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// The marker names this object, its UID and this management cluster.
    Owned,
    /// A marker of an earlier CAPOV (`capov:<ns>/<name>` only) naming this object.
    Legacy,
    /// The marker names this object and this management cluster under the UID of the `owner-uid` annotation: the
    /// object was re-created (`clusterctl move`, a restore). Trusted only for the VM spec.providerID names.
    Moved,
    NotOwned(NotOwned),
}

impl Ownership {
    /// Whether the VM is this object's when found this way: a legacy or moved marker proves it only for the VM
    /// that spec.providerID (written by CAPOV) names, never for adoption by name.
    pub fn proven(self, through_provider_id: bool) -> bool {
        match self {
            Ownership::Owned => true,
            Ownership::Legacy | Ownership::Moved => through_provider_id,
            Ownership::NotOwned(_) => false,
        }
    }

    /// For condition messages and Events: why a VM found by name is not this object's (never the marker itself).
    pub fn unproven_by_name(self) -> &'static str {
        match self {
            Ownership::NotOwned(why) => why.explain(),
            Ownership::Moved => {
                "its CAPOV marker names the UID of this OVirtMachine's owner-uid annotation, which counts only for \
                 the VM that spec.providerID names"
            }
            Ownership::Legacy | Ownership::Owned => {
                "it carries a marker of an earlier CAPOV version, which cannot tell this OVirtMachine from a deleted \
                 one of the same name"
            }
        }
    }
}

/// Why a VM is not this object's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotOwned {
    /// No CAPOV marker at all: someone else's VM.
    NoMarker,
    /// A marker of another OVirtMachine (another namespace or name).
    OtherObject,
    /// This object's name, but another UID, written by another management cluster sharing the engine.
    OtherManagementCluster,
    /// This very object (its namespace, name, and its UID or the owner-uid annotation's), written by a management
    /// cluster this one does not accept: it came here with `clusterctl move` onto a cluster whose OVirtProvider
    /// already existed, without the provider's management-cluster annotation. Its VM is neither changed nor let go
    /// of silently ([`marker_management_cluster`] says which cluster the marker names).
    ThisObjectOtherManagementCluster,
    /// This namespace and name in this management cluster, but another UID: a deleted OVirtMachine of the same
    /// name left this VM behind.
    EarlierObject,
}

impl NotOwned {
    /// For condition messages and Events: what the marker says, never the marker itself (it would name other
    /// tenants' objects).
    pub fn explain(self) -> &'static str {
        match self {
            NotOwned::NoMarker => "it carries no CAPOV marker in its description",
            NotOwned::OtherObject => "its CAPOV marker names another OVirtMachine",
            NotOwned::OtherManagementCluster => "its CAPOV marker was written by another management cluster",
            NotOwned::ThisObjectOtherManagementCluster => {
                "its CAPOV marker names this very OVirtMachine but was written by another management cluster"
            }
            NotOwned::EarlierObject => {
                "its CAPOV marker names an earlier OVirtMachine of the same name (another UID) that was deleted"
            }
        }
    }
}

/// Reads the ownership of a VM from its description.
pub fn ownership(description: &str, owner: &OwnerIdentity) -> Ownership {
    let words: Vec<&str> = description.split_whitespace().collect();
    let Some(object) = words.iter().find(|w| w.starts_with(OBJECT_PREFIX)) else {
        return Ownership::NotOwned(NotOwned::NoMarker);
    };
    let value = |prefix: &str| words.iter().find_map(|w| w.strip_prefix(prefix));
    let (uid, mc) = (value(UID_PREFIX), value(MC_PREFIX));
    let (Some(uid), Some(mc)) = (uid, mc) else {
        let legacy = format!("{OBJECT_PREFIX}{}/{}", owner.namespace, owner.name);
        return if uid.is_none() && mc.is_none() && *object == legacy {
            Ownership::Legacy
        } else {
            Ownership::NotOwned(NotOwned::OtherObject)
        };
    };
    let tail_len = format!(" {UID_PREFIX}{uid} {MC_PREFIX}{mc}").len();
    if *object != object_word(&owner.namespace, &owner.name, tail_len) {
        return Ownership::NotOwned(NotOwned::OtherObject);
    }
    if !owner.accepts_management_cluster(mc) {
        let this_object = uid == owner.uid || owner.previous_uid.as_deref() == Some(uid);
        return Ownership::NotOwned(if this_object {
            NotOwned::ThisObjectOtherManagementCluster
        } else {
            NotOwned::OtherManagementCluster
        });
    }
    if uid == owner.uid {
        Ownership::Owned
    } else if owner.previous_uid.as_deref() == Some(uid) {
        Ownership::Moved
    } else {
        Ownership::NotOwned(NotOwned::EarlierObject)
    }
}

/// The management cluster id a CAPOV marker names (its `mc:` word); None without one.
pub fn marker_management_cluster(description: &str) -> Option<&str> {
    description
        .split_whitespace()
        .find_map(|word| word.strip_prefix(MC_PREFIX))
        .filter(|id| !id.is_empty())
}

/// Checks a `--management-cluster-id`: non-empty, at most [`MANAGEMENT_CLUSTER_ID_LIMIT`] characters, no whitespace
/// (it is one word of the marker).
pub fn validate_management_cluster_id(id: &str) -> Result<(), String> {
    if id.is_empty()
        || id.len() > MANAGEMENT_CLUSTER_ID_LIMIT
        || id.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "the management cluster id must be 1 to {MANAGEMENT_CLUSTER_ID_LIMIT} characters without spaces"
        ));
    }
    Ok(())
}

/// Where a VM lives: the engine API URL and the engine user CAPOV reached it with. Recorded on the OVirtMachine
/// next to spec.providerID, so that a provider repointed to another engine (or a user that cannot see the VM) is
/// never taken for "the VM is gone".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineIdentity {
    pub url: String,
    pub user: String,
}

impl EngineIdentity {
    /// `user@internal at https://engine/ovirt-engine/api`: the annotation value.
    pub fn annotation(&self) -> String {
        format!("{} at {}", self.user, normalize_url(&self.url))
    }

    /// The same engine and user as an annotation value written earlier (URLs compared without a trailing slash
    /// and with a case-insensitive scheme and host).
    pub fn matches_annotation(&self, recorded: &str) -> bool {
        match recorded.rsplit_once(" at ") {
            Some((user, url)) => user == self.user && normalize_url(url) == normalize_url(&self.url),
            None => false,
        }
    }
}

fn normalize_url(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            // Annotations are readable by tenants: never a `user:password@` (the CRD refuses one, older objects may
            // still carry it).
            let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
            format!("{}://{}{path}", scheme.to_ascii_lowercase(), host.to_ascii_lowercase())
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(namespace: &str, name: &str) -> OwnerIdentity {
        OwnerIdentity {
            namespace: namespace.into(),
            name: name.into(),
            uid: "6f1c2d3e-0000-4000-8000-000000000001".into(),
            previous_uid: None,
            management_cluster: "3b9a1e52-1111-4111-8111-111111111111".into(),
            accepted_management_clusters: Vec::new(),
        }
    }

    #[test]
    fn provider_id_round_trips() {
        let id = "0a5c3c43-4b4e-4a31-9d0e-1b2f5a7e8c90";
        assert_eq!(parse_provider_id(&format_provider_id(id)), Some(id));
    }

    #[test]
    fn malformed_provider_ids_are_rejected() {
        let uuid = "0a5c3c43-4b4e-4a31-9d0e-1b2f5a7e8c90";
        for bad in [
            "".to_string(),
            "ovirt://".into(),
            "vsphere://abc".into(),
            "abc".into(),
            "ovirt://a/b".into(),
            "ovirt://a b".into(),
            "ovirt://..".into(),
            "ovirt://.".into(),
            "ovirt://1234".into(),
            format!("ovirt://{uuid}/.."),
            format!("ovirt://{uuid}-0"),
            format!("ovirt:// {uuid}"),
            format!("ovirt://{}", uuid.replace('-', "")),
            format!("ovirt://{}", uuid.replacen('a', "g", 1)),
        ] {
            assert_eq!(parse_provider_id(&bad), None, "{bad}");
        }
        assert_eq!(
            parse_provider_id(&format!("ovirt://{}", uuid.to_uppercase())),
            Some(uuid.to_uppercase().as_str())
        );
    }

    #[test]
    fn marker_names_the_object_its_uid_and_the_management_cluster() {
        assert_eq!(
            owner("default", "worker-1").marker(),
            "capov:default/worker-1 uid:6f1c2d3e-0000-4000-8000-000000000001 \
             mc:3b9a1e52-1111-4111-8111-111111111111"
        );
    }

    #[test]
    fn an_own_marker_is_owned() {
        let me = owner("default", "worker-1");
        assert_eq!(ownership(&me.marker(), &me), Ownership::Owned);
        assert_eq!(
            ownership(&format!("made by CAPOV {}", me.marker()), &me),
            Ownership::Owned
        );
    }

    #[test]
    fn a_marker_of_a_similar_name_is_not_owned() {
        let me = owner("default", "worker-1");
        let ten = owner("default", "worker-10");
        assert_eq!(
            ownership(&ten.marker(), &me),
            Ownership::NotOwned(NotOwned::OtherObject)
        );
        let other_namespace = owner("other", "worker-1");
        assert_eq!(
            ownership(&other_namespace.marker(), &me),
            Ownership::NotOwned(NotOwned::OtherObject)
        );
    }

    #[test]
    fn another_management_clusters_marker_is_not_owned() {
        let me = owner("default", "worker-1");
        let there = OwnerIdentity {
            management_cluster: "other-management-cluster".into(),
            uid: "00000000-dead-4000-8000-000000000000".into(),
            ..me.clone()
        };
        assert_eq!(
            ownership(&there.marker(), &me),
            Ownership::NotOwned(NotOwned::OtherManagementCluster)
        );
        assert_eq!(
            marker_management_cluster(&there.marker()),
            Some("other-management-cluster")
        );
    }

    #[test]
    fn this_objects_marker_written_by_another_management_cluster_is_told_apart() {
        let before_move = owner("default", "worker-1");
        let source = OwnerIdentity {
            management_cluster: "source-cluster".into(),
            ..before_move.clone()
        };
        // The same object (same UID, e.g. a VM adopted in both places), and its moved copy (new UID, the old one
        // in the owner-uid annotation), in a cluster that does not accept the source's id.
        for here in [before_move.clone(), moved(&before_move)] {
            let here = OwnerIdentity {
                accepted_management_clusters: Vec::new(),
                ..here
            };
            let found = ownership(&source.marker(), &here);
            assert_eq!(found, Ownership::NotOwned(NotOwned::ThisObjectOtherManagementCluster));
            assert!(!found.proven(true), "never trusted for a change");
        }
        assert_eq!(marker_management_cluster(&source.marker()), Some("source-cluster"));
        assert_eq!(marker_management_cluster("capov:default/worker-1"), None);
    }

    #[test]
    fn a_deleted_same_named_objects_marker_is_not_owned() {
        let me = owner("default", "worker-1");
        let earlier = OwnerIdentity {
            uid: "00000000-dead-4000-8000-000000000000".into(),
            ..me.clone()
        };
        assert_eq!(
            ownership(&earlier.marker(), &me),
            Ownership::NotOwned(NotOwned::EarlierObject)
        );
    }

    /// The target of a `clusterctl move`: a new UID with the old one in the owner-uid annotation, its own cluster id
    /// and the id the provider brought along.
    fn moved(before_move: &OwnerIdentity) -> OwnerIdentity {
        OwnerIdentity {
            uid: "99999999-0000-4000-8000-000000000009".into(),
            previous_uid: Some(before_move.uid.clone()),
            accepted_management_clusters: vec!["target-cluster".into()],
            ..before_move.clone()
        }
    }

    #[test]
    fn a_moved_object_recognises_the_vms_made_under_its_previous_uid_as_moved() {
        let before_move = owner("default", "worker-1");
        let after_move = moved(&before_move);
        assert_eq!(ownership(&before_move.marker(), &after_move), Ownership::Moved);
        assert_eq!(ownership(&after_move.marker(), &after_move), Ownership::Owned);
    }

    #[test]
    fn a_moved_or_legacy_marker_proves_ownership_only_through_the_provider_id() {
        assert!(Ownership::Owned.proven(false));
        for recorded_only in [Ownership::Moved, Ownership::Legacy] {
            assert!(recorded_only.proven(true), "{recorded_only:?}");
            assert!(!recorded_only.proven(false), "{recorded_only:?}");
        }
        for why in [
            NotOwned::NoMarker,
            NotOwned::OtherManagementCluster,
            NotOwned::ThisObjectOtherManagementCluster,
            NotOwned::EarlierObject,
        ] {
            assert!(!Ownership::NotOwned(why).proven(true), "{why:?}");
        }
    }

    #[test]
    fn markers_of_every_accepted_management_cluster_are_owned_and_others_are_not() {
        let me = OwnerIdentity {
            accepted_management_clusters: vec!["own-cluster".into(), "merged-cluster".into()],
            ..owner("default", "worker-1")
        };
        for accepted in [me.management_cluster.as_str(), "own-cluster", "merged-cluster"] {
            let marked = OwnerIdentity {
                management_cluster: accepted.into(),
                ..me.clone()
            };
            assert_eq!(ownership(&marked.marker(), &me), Ownership::Owned, "{accepted}");
        }
        let elsewhere = OwnerIdentity {
            management_cluster: "another-cluster".into(),
            ..me.clone()
        };
        assert_eq!(
            ownership(&elsewhere.marker(), &me),
            Ownership::NotOwned(NotOwned::ThisObjectOtherManagementCluster)
        );
    }

    /// Hostile: a tenant writes the owner-uid annotation of another object (its UID read from anywhere) into its
    /// own OVirtMachine. The marker still has to name this namespace and name, and a management cluster this one
    /// accepts; and a moved marker counts only for the VM spec.providerID names ([`Ownership::proven`]).
    #[test]
    fn a_forged_owner_uid_does_not_reach_another_tenants_or_another_clusters_vm() {
        let victim = owner("team-a", "worker-1");
        let forger = OwnerIdentity {
            previous_uid: Some(victim.uid.clone()),
            ..owner("team-b", "worker-1")
        };
        assert_eq!(
            ownership(&victim.marker(), &forger),
            Ownership::NotOwned(NotOwned::OtherObject)
        );
        let other_cluster = OwnerIdentity {
            management_cluster: "another-management-cluster".into(),
            ..victim.clone()
        };
        let same_name_here = OwnerIdentity {
            uid: "77777777-0000-4000-8000-000000000007".into(),
            previous_uid: Some(victim.uid.clone()),
            ..victim.clone()
        };
        // Its own namespace and name, and the forged UID: at most a held deletion, never a change.
        assert_eq!(
            ownership(&other_cluster.marker(), &same_name_here),
            Ownership::NotOwned(NotOwned::ThisObjectOtherManagementCluster)
        );
        assert!(!ownership(&other_cluster.marker(), &same_name_here).proven(true));
        // The same namespace and name here, after the victim's deletion: the old VM is at most Moved, never Owned.
        assert_eq!(ownership(&victim.marker(), &same_name_here), Ownership::Moved);
        assert!(!ownership(&victim.marker(), &same_name_here).proven(false));
    }

    #[test]
    fn a_legacy_marker_is_recognised_only_for_its_own_object() {
        let me = owner("default", "worker-1");
        assert_eq!(ownership("capov:default/worker-1", &me), Ownership::Legacy);
        assert_eq!(
            ownership("capov:default/worker-10", &me),
            Ownership::NotOwned(NotOwned::OtherObject)
        );
    }

    #[test]
    fn no_marker_is_not_owned() {
        let me = owner("default", "worker-1");
        for description in ["", "production database", "uid:x mc:y"] {
            assert_eq!(
                ownership(description, &me),
                Ownership::NotOwned(NotOwned::NoMarker),
                "{description}"
            );
        }
    }

    #[test]
    fn a_half_marker_is_not_owned() {
        let me = owner("default", "worker-1");
        let only_uid = format!("capov:default/worker-1 uid:{}", me.uid);
        assert_eq!(ownership(&only_uid, &me), Ownership::NotOwned(NotOwned::OtherObject));
    }

    #[test]
    fn long_names_are_cut_to_fit_the_engines_description_limit_and_still_match() {
        let me = owner(&"n".repeat(63), &"m".repeat(253));
        let marker = me.marker();
        assert!(marker.len() <= DESCRIPTION_LIMIT, "{}", marker.len());
        assert!(marker.split_whitespace().next().is_some_and(|w| w.ends_with('~')));
        assert_eq!(ownership(&marker, &me), Ownership::Owned);
    }

    #[test]
    fn management_cluster_ids_are_one_short_word() {
        assert!(validate_management_cluster_id("prod-mgmt").is_ok());
        assert!(validate_management_cluster_id("").is_err());
        assert!(validate_management_cluster_id("two words").is_err());
        assert!(validate_management_cluster_id(&"x".repeat(65)).is_err());
    }

    #[test]
    fn engine_identity_survives_trailing_slashes_and_host_case() {
        let engine = EngineIdentity {
            url: "https://Engine.example.com/ovirt-engine/api".into(),
            user: "admin@internal".into(),
        };
        let recorded = engine.annotation();
        assert_eq!(
            recorded,
            "admin@internal at https://engine.example.com/ovirt-engine/api"
        );
        let same = EngineIdentity {
            url: "https://engine.example.com/ovirt-engine/api/".into(),
            ..engine.clone()
        };
        assert!(same.matches_annotation(&recorded));
        let other_host = EngineIdentity {
            url: "https://other.example.com/ovirt-engine/api".into(),
            ..engine.clone()
        };
        assert!(!other_host.matches_annotation(&recorded));
        let other_user = EngineIdentity {
            user: "capov@internal".into(),
            ..engine
        };
        assert!(!other_user.matches_annotation(&recorded));
        assert!(!same.matches_annotation("garbage"));
        let with_userinfo = EngineIdentity {
            url: "https://admin:s3cret@engine.example.com/ovirt-engine/api".into(),
            user: "admin@internal".into(),
        };
        assert!(!with_userinfo.annotation().contains("s3cret"));
    }
}
