//! Making the VM's NICs match `spec.nics` (SPEC §2 step 5), before the first start.
//!
//! vNIC profile names are unique only per network and the engine's `/vnicprofiles` has no search, so the caller
//! passes the profiles of the data center's networks and the name is resolved here: none → VnicProfileNotFound,
//! several → VnicProfileAmbiguous (naming the networks). An empty `spec.nics` keeps the template's NICs.
//! NICs are matched by name (default `nic1`, `nic2`, … by position).

use capov_crds::Nic;

use crate::conditions::reasons;

/// One NIC the VM has now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentNic {
    pub id: String,
    pub name: String,
    /// None: the NIC has no profile ("empty" network).
    pub vnic_profile_id: Option<String>,
}

/// One vNIC profile of a network of the VM's data center.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VnicProfileFact {
    pub id: String,
    pub name: String,
    pub network_name: String,
}

/// One change to send to the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NicChange {
    Update { nic_id: String, vnic_profile_id: String },
    Add { name: String, vnic_profile_id: String },
    Remove { nic_id: String },
}

/// How the VM's NICs compare with the spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NicAssessment {
    InSync,
    /// Apply these, in order (updates and adds first, removals last).
    Changes(Vec<NicChange>),
    ProfileNotFound {
        profile: String,
    },
    ProfileAmbiguous {
        profile: String,
        networks: Vec<String>,
    },
}

impl NicAssessment {
    /// The MachineNetworkSet reason and message for the two failures; None otherwise.
    pub fn failure(&self) -> Option<(&'static str, String)> {
        match self {
            NicAssessment::ProfileNotFound { profile } => Some((
                reasons::VNIC_PROFILE_NOT_FOUND,
                format!("vNIC profile {profile:?} not found on the networks of the VM's data center"),
            )),
            NicAssessment::ProfileAmbiguous { profile, networks } => Some((
                reasons::VNIC_PROFILE_AMBIGUOUS,
                format!(
                    "vNIC profile {profile:?} exists on several networks: {}",
                    networks.join(", ")
                ),
            )),
            _ => None,
        }
    }
}

/// Compares `desired` (spec.nics) with the VM's NICs.
pub fn assess_nics(desired: &[Nic], current: &[CurrentNic], profiles: &[VnicProfileFact]) -> NicAssessment {
    if desired.is_empty() {
        return NicAssessment::InSync;
    }
    let mut wanted: Vec<(String, String)> = Vec::with_capacity(desired.len());
    for (index, nic) in desired.iter().enumerate() {
        let matching: Vec<&VnicProfileFact> = profiles.iter().filter(|p| p.name == nic.vnicprofile).collect();
        let profile = match matching.as_slice() {
            [] => {
                return NicAssessment::ProfileNotFound {
                    profile: nic.vnicprofile.clone(),
                };
            }
            [one] => one,
            several => {
                let mut networks: Vec<String> = several.iter().map(|p| p.network_name.clone()).collect();
                networks.sort();
                return NicAssessment::ProfileAmbiguous {
                    profile: nic.vnicprofile.clone(),
                    networks,
                };
            }
        };
        let name = nic
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("nic{}", index + 1));
        wanted.push((name, profile.id.clone()));
    }

    let mut changes = Vec::new();
    for (name, profile_id) in &wanted {
        match current.iter().find(|c| &c.name == name) {
            Some(c) if c.vnic_profile_id.as_ref() == Some(profile_id) => {}
            Some(c) => changes.push(NicChange::Update {
                nic_id: c.id.clone(),
                vnic_profile_id: profile_id.clone(),
            }),
            None => changes.push(NicChange::Add {
                name: name.clone(),
                vnic_profile_id: profile_id.clone(),
            }),
        }
    }
    for c in current
        .iter()
        .filter(|c| !wanted.iter().any(|(name, _)| name == &c.name))
    {
        changes.push(NicChange::Remove { nic_id: c.id.clone() });
    }
    if changes.is_empty() {
        NicAssessment::InSync
    } else {
        NicAssessment::Changes(changes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(profile: &str, name: Option<&str>) -> Nic {
        Nic {
            vnicprofile: profile.into(),
            name: name.map(String::from),
            ..Nic::default()
        }
    }

    fn have(id: &str, name: &str, profile: Option<&str>) -> CurrentNic {
        CurrentNic {
            id: id.into(),
            name: name.into(),
            vnic_profile_id: profile.map(String::from),
        }
    }

    fn profile(id: &str, name: &str, network: &str) -> VnicProfileFact {
        VnicProfileFact {
            id: id.into(),
            name: name.into(),
            network_name: network.into(),
        }
    }

    #[test]
    fn empty_spec_keeps_the_template_nics() {
        assert_eq!(
            assess_nics(&[], &[have("n1", "nic1", Some("p"))], &[]),
            NicAssessment::InSync
        );
    }

    #[test]
    fn matching_nics_are_in_sync() {
        let profiles = [profile("p1", "ovirtmgmt", "ovirtmgmt")];
        let current = [have("n1", "nic1", Some("p1"))];
        assert_eq!(
            assess_nics(&[want("ovirtmgmt", None)], &current, &profiles),
            NicAssessment::InSync
        );
    }

    #[test]
    fn unknown_profile_is_not_found() {
        let got = assess_nics(
            &[want("missing", None)],
            &[],
            &[profile("p1", "ovirtmgmt", "ovirtmgmt")],
        );
        assert_eq!(
            got,
            NicAssessment::ProfileNotFound {
                profile: "missing".into()
            }
        );
        assert_eq!(got.failure().map(|f| f.0), Some("VnicProfileNotFound"));
    }

    #[test]
    fn profile_name_on_several_networks_is_ambiguous_and_names_them() {
        let profiles = [profile("p1", "prod", "net-b"), profile("p2", "prod", "net-a")];
        let got = assess_nics(&[want("prod", None)], &[], &profiles);
        assert_eq!(
            got,
            NicAssessment::ProfileAmbiguous {
                profile: "prod".into(),
                networks: vec!["net-a".into(), "net-b".into()]
            }
        );
        let (reason, message) = got.failure().unwrap();
        assert_eq!(reason, "VnicProfileAmbiguous");
        assert!(message.contains("net-a, net-b"), "{message}");
    }

    #[test]
    fn nics_are_updated_added_and_removed_by_name() {
        let profiles = [
            profile("p1", "ovirtmgmt", "ovirtmgmt"),
            profile("p2", "storage", "storage"),
        ];
        let current = [have("n1", "nic1", Some("p2")), have("n9", "old", Some("p1"))];
        let got = assess_nics(
            &[want("ovirtmgmt", None), want("storage", Some("san"))],
            &current,
            &profiles,
        );
        assert_eq!(
            got,
            NicAssessment::Changes(vec![
                NicChange::Update {
                    nic_id: "n1".into(),
                    vnic_profile_id: "p1".into()
                },
                NicChange::Add {
                    name: "san".into(),
                    vnic_profile_id: "p2".into()
                },
                NicChange::Remove { nic_id: "n9".into() },
            ])
        );
    }

    #[test]
    fn default_names_follow_position() {
        let profiles = [profile("p1", "a", "a")];
        let got = assess_nics(&[want("a", None), want("a", None)], &[], &profiles);
        assert_eq!(
            got,
            NicAssessment::Changes(vec![
                NicChange::Add {
                    name: "nic1".into(),
                    vnic_profile_id: "p1".into()
                },
                NicChange::Add {
                    name: "nic2".into(),
                    vnic_profile_id: "p1".into()
                },
            ])
        );
    }

    #[test]
    fn nic_without_profile_gets_one() {
        let profiles = [profile("p1", "a", "a")];
        let got = assess_nics(&[want("a", None)], &[have("n1", "nic1", None)], &profiles);
        assert_eq!(
            got,
            NicAssessment::Changes(vec![NicChange::Update {
                nic_id: "n1".into(),
                vnic_profile_id: "p1".into()
            }])
        );
    }
}
