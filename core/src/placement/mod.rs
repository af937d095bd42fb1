//! Where a new VM's disks go and whether they are cloned (SPEC §3).
//!
//! Precedence, the most specific level first: clone = OVirtMachine `spec.diskclone` → OVirtProvider
//! `spec.diskclone` → gate `disk-clone`; storage domain = OVirtMachine `spec.storagedomainname` → OVirtProvider
//! `spec.storagedomainname` → none (the engine puts the disks where the template's are). An empty string counts as
//! not set, as the CRD documentation says ("empty = OVirtProvider's").
//!
//! The engine facts are plain structs of this crate, so that this logic does not depend on the oVirt client.

pub mod affinity_groups;
pub mod capacity;
pub mod engine_refusals;
pub mod failure_domains;
pub mod host_devices;
pub mod node_topology;
pub mod template_capacity;

use crate::conditions::reasons;
use crate::policy::feature_gates::FeatureGates;

/// What the specs and gates ask for, before looking at the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacementChoice {
    /// The create request's `clone=` parameter.
    pub clone: bool,
    /// The storage domain to put the disks on, by name; None = the engine's choice.
    pub storage_domain_name: Option<String>,
}

/// Resolves clone and storage domain from the machine, its provider and the gates.
pub fn choose_placement(
    machine_diskclone: Option<bool>,
    machine_storage_domain: Option<&str>,
    provider_diskclone: Option<bool>,
    provider_storage_domain: Option<&str>,
    gates: &FeatureGates,
) -> PlacementChoice {
    PlacementChoice {
        clone: machine_diskclone.or(provider_diskclone).unwrap_or(gates.disk_clone),
        storage_domain_name: non_empty(machine_storage_domain)
            .or(non_empty(provider_storage_domain))
            .map(String::from),
    }
}

fn non_empty(name: Option<&str>) -> Option<&str> {
    name.map(str::trim).filter(|n| !n.is_empty())
}

/// One disk of the template the VM is created from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateDisk {
    pub id: String,
    pub alias: String,
    /// The storage domains holding a copy of this disk.
    pub storage_domain_ids: Vec<String>,
}

/// What the engine says about the storage domain named by [`PlacementChoice::storage_domain_name`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageDomainFact {
    pub id: String,
    pub name: String,
    /// The domain type: `data`, `iso`, `export`, `image`, …
    pub kind: String,
    /// The domain's status in the cluster's data center (`active`, `maintenance`, …); from
    /// `/datacenters/{dc}/storagedomains/{sd}`, because `/storagedomains` omits it for attached domains.
    pub status: String,
    /// Whether the domain is attached to the data center of the VM's oVirt cluster.
    pub in_data_center: bool,
}

/// The resolved placement for the create request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreatePlacement {
    pub clone: bool,
    /// None: no `disk_attachments` in the request; the engine places disks with the template's.
    pub target_domain: Option<TargetDomain>,
    /// One entry per template disk, only when a target domain is resolved.
    pub disk_attachments: Vec<DiskPlacement>,
}

/// The storage domain the disks go to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetDomain {
    pub id: String,
    pub name: String,
}

/// One `disk_attachment` of the create request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskPlacement {
    pub template_disk_id: String,
    pub storage_domain_id: String,
    /// `format cow` is sent when the disks are not cloned (thin copy-on-write disks must be cow).
    pub format_cow: bool,
}

/// Why the VM cannot be created with the requested placement. Each is a MachineCreated reason, severity Error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlacementError {
    StorageDomainNotFound {
        name: String,
    },
    StorageDomainNotAvailable {
        name: String,
        kind: String,
        status: String,
        in_data_center: bool,
    },
    StorageDomainRequiresClone {
        name: String,
    },
}

impl PlacementError {
    /// The MachineCreated reason.
    pub fn reason(&self) -> &'static str {
        match self {
            PlacementError::StorageDomainNotFound { .. } => reasons::STORAGE_DOMAIN_NOT_FOUND,
            PlacementError::StorageDomainNotAvailable { .. } => reasons::STORAGE_DOMAIN_NOT_AVAILABLE,
            PlacementError::StorageDomainRequiresClone { .. } => reasons::STORAGE_DOMAIN_REQUIRES_CLONE,
        }
    }

    /// The condition message: what is wrong and what to do.
    pub fn message(&self) -> String {
        match self {
            PlacementError::StorageDomainNotFound { name } => format!(
                "storage domain {name:?} not found in oVirt; fix spec.storagedomainname on the OVirtMachineTemplate \
                 or the OVirtProvider"
            ),
            PlacementError::StorageDomainNotAvailable {
                name,
                kind,
                status,
                in_data_center,
            } => {
                let why = if !in_data_center {
                    "it is not attached to the data center of the VM's oVirt cluster".to_string()
                } else {
                    format!("it is of type {kind:?} with status {status:?}; an active data domain is needed")
                };
                format!("storage domain {name:?} cannot hold the VM's disks: {why}")
            }
            PlacementError::StorageDomainRequiresClone { name } => format!(
                "storage domain {name:?} does not hold the template's disks, so they must be cloned: set \
                 spec.diskclone: true on the OVirtMachineTemplate or the OVirtProvider, or enable the disk-clone \
                 feature gate"
            ),
        }
    }
}

/// Checks the chosen placement against the engine. `domain` is the engine's answer for the chosen domain name
/// (None = no domain of that name); it is ignored when no domain was chosen. Nothing here calls the engine, so a
/// placement that would fail (a thin copy onto a domain without the template) is refused before any request.
pub fn plan_placement(
    choice: &PlacementChoice,
    domain: Option<&StorageDomainFact>,
    template_disks: &[TemplateDisk],
) -> Result<CreatePlacement, PlacementError> {
    let Some(name) = &choice.storage_domain_name else {
        return Ok(CreatePlacement {
            clone: choice.clone,
            target_domain: None,
            disk_attachments: vec![],
        });
    };
    let domain = domain.ok_or_else(|| PlacementError::StorageDomainNotFound { name: name.clone() })?;
    if !(domain.in_data_center && domain.kind == "data" && domain.status == "active") {
        return Err(PlacementError::StorageDomainNotAvailable {
            name: name.clone(),
            kind: domain.kind.clone(),
            status: domain.status.clone(),
            in_data_center: domain.in_data_center,
        });
    }
    let holds_all_template_disks = template_disks.iter().all(|d| d.storage_domain_ids.contains(&domain.id));
    if !choice.clone && !holds_all_template_disks {
        return Err(PlacementError::StorageDomainRequiresClone { name: name.clone() });
    }
    let disk_attachments = template_disks
        .iter()
        .map(|disk| DiskPlacement {
            template_disk_id: disk.id.clone(),
            storage_domain_id: domain.id.clone(),
            format_cow: !choice.clone,
        })
        .collect();
    Ok(CreatePlacement {
        clone: choice.clone,
        target_domain: Some(TargetDomain {
            id: domain.id.clone(),
            name: domain.name.clone(),
        }),
        disk_attachments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate_clone(disk_clone: bool) -> FeatureGates {
        FeatureGates {
            disk_clone,
            ..FeatureGates::default()
        }
    }

    fn domain(id: &str, kind: &str, status: &str, in_dc: bool) -> StorageDomainFact {
        StorageDomainFact {
            id: id.into(),
            name: format!("{id}-name"),
            kind: kind.into(),
            status: status.into(),
            in_data_center: in_dc,
        }
    }

    fn disk(id: &str, domains: &[&str]) -> TemplateDisk {
        TemplateDisk {
            id: id.into(),
            alias: format!("{id}_Disk1"),
            storage_domain_ids: domains.iter().map(|d| d.to_string()).collect(),
        }
    }

    fn choice(clone: bool, sd: Option<&str>) -> PlacementChoice {
        PlacementChoice {
            clone,
            storage_domain_name: sd.map(String::from),
        }
    }

    #[test]
    fn clone_machine_wins_over_provider_and_gate() {
        assert!(choose_placement(Some(true), None, Some(false), None, &gate_clone(false)).clone);
        assert!(!choose_placement(Some(false), None, Some(true), None, &gate_clone(true)).clone);
    }

    #[test]
    fn clone_provider_wins_over_gate() {
        assert!(choose_placement(None, None, Some(true), None, &gate_clone(false)).clone);
        assert!(!choose_placement(None, None, Some(false), None, &gate_clone(true)).clone);
    }

    #[test]
    fn clone_falls_back_to_the_gate() {
        assert!(choose_placement(None, None, None, None, &gate_clone(true)).clone);
        assert!(!choose_placement(None, None, None, None, &gate_clone(false)).clone);
    }

    #[test]
    fn storage_domain_machine_then_provider_then_none() {
        let g = FeatureGates::default();
        let c = |m, p| choose_placement(None, m, None, p, &g).storage_domain_name;
        assert_eq!(c(Some("fast"), Some("slow")).as_deref(), Some("fast"));
        assert_eq!(c(None, Some("slow")).as_deref(), Some("slow"));
        assert_eq!(c(None, None), None);
    }

    #[test]
    fn empty_storage_domain_name_counts_as_unset() {
        let g = FeatureGates::default();
        assert_eq!(
            choose_placement(None, Some(""), None, Some("slow"), &g)
                .storage_domain_name
                .as_deref(),
            Some("slow")
        );
        assert_eq!(
            choose_placement(None, Some(" "), None, Some(""), &g).storage_domain_name,
            None
        );
    }

    #[test]
    fn no_domain_chosen_means_no_disk_attachments_and_no_engine_check() {
        let placed = plan_placement(&choice(false, None), None, &[disk("t1", &["sd-a"])]).unwrap();
        assert_eq!(
            placed,
            CreatePlacement {
                clone: false,
                target_domain: None,
                disk_attachments: vec![]
            }
        );
    }

    #[test]
    fn unknown_domain_is_storage_domain_not_found() {
        let err = plan_placement(&choice(true, Some("nope")), None, &[]).unwrap_err();
        assert_eq!(err, PlacementError::StorageDomainNotFound { name: "nope".into() });
        assert_eq!(err.reason(), "StorageDomainNotFound");
    }

    #[test]
    fn domain_outside_the_data_center_or_inactive_or_not_data_is_not_available() {
        for d in [
            domain("sd-b", "data", "active", false),
            domain("sd-b", "data", "maintenance", true),
            domain("sd-b", "iso", "active", true),
        ] {
            let err = plan_placement(&choice(true, Some("b")), Some(&d), &[]).unwrap_err();
            assert_eq!(err.reason(), "StorageDomainNotAvailable", "{d:?}");
        }
    }

    #[test]
    fn thin_copy_onto_domain_without_template_disks_requires_clone() {
        let d = domain("sd-b", "data", "active", true);
        let disks = [disk("t1", &["sd-a", "sd-b"]), disk("t2", &["sd-a"])];
        let err = plan_placement(&choice(false, Some("b")), Some(&d), &disks).unwrap_err();
        assert_eq!(err, PlacementError::StorageDomainRequiresClone { name: "b".into() });
        let message = err.message();
        assert!(message.contains("spec.diskclone: true"), "{message}");
        assert!(
            message.contains("OVirtMachineTemplate") && message.contains("OVirtProvider"),
            "{message}"
        );
        assert!(message.contains("disk-clone feature gate"), "{message}");
    }

    #[test]
    fn cloned_disks_go_to_the_target_domain_without_cow() {
        let d = domain("sd-b", "data", "active", true);
        let disks = [disk("t1", &["sd-a"]), disk("t2", &["sd-a"])];
        let placed = plan_placement(&choice(true, Some("b")), Some(&d), &disks).unwrap();
        assert!(placed.clone);
        assert_eq!(
            placed.target_domain,
            Some(TargetDomain {
                id: "sd-b".into(),
                name: "sd-b-name".into()
            })
        );
        assert_eq!(
            placed.disk_attachments,
            vec![
                DiskPlacement {
                    template_disk_id: "t1".into(),
                    storage_domain_id: "sd-b".into(),
                    format_cow: false
                },
                DiskPlacement {
                    template_disk_id: "t2".into(),
                    storage_domain_id: "sd-b".into(),
                    format_cow: false
                },
            ]
        );
    }

    #[test]
    fn thin_disks_on_a_domain_holding_the_template_are_cow() {
        let d = domain("sd-a", "data", "active", true);
        let placed = plan_placement(&choice(false, Some("a")), Some(&d), &[disk("t1", &["sd-a"])]).unwrap();
        assert!(!placed.clone);
        assert_eq!(
            placed.disk_attachments,
            vec![DiskPlacement {
                template_disk_id: "t1".into(),
                storage_domain_id: "sd-a".into(),
                format_cow: true
            }]
        );
    }

    #[test]
    fn messages_name_the_domain() {
        let d = domain("sd-b", "data", "active", false);
        let err = plan_placement(&choice(true, Some("b")), Some(&d), &[]).unwrap_err();
        assert!(err.message().contains("\"b\"") && err.message().contains("data center"));
    }
}
