//! Failure domains (issue #25): the OVirtCluster's spec.failureDomains become its status.failureDomains, which CAPI
//! copies to the Cluster and spreads machines over; a machine placed in one (its Machine's spec.failureDomain) gets
//! its VM in the domain's oVirt cluster and, with a host label, on the hosts carrying it. A domain may also name an
//! OVirtProvider (issue 39): the VM then goes to that engine, with the domain's overrides of the names that differ
//! there; the machine's spec.provider is set to it before the VM is created, and stays (see [`provider_choice`]).

use std::collections::BTreeMap;

use capov_crds::{FailureDomainOverrides, FailureDomainSpec, FailureDomainStatus, MachineSettings};

/// The attribute keys of a published failure domain.
pub const OVIRT_CLUSTER_ATTRIBUTE: &str = "ovirtcluster";
pub const HOST_LABEL_ATTRIBUTE: &str = "hostlabel";
pub const PROVIDER_ATTRIBUTE: &str = "provider";

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
            if let Some(provider) = &domain.provider {
                attributes.insert(PROVIDER_ATTRIBUTE.to_string(), provider.clone());
            }
            FailureDomainStatus {
                name: domain.name.clone(),
                control_plane: domain.control_plane.unwrap_or(true),
                attributes,
            }
        })
        .collect()
}

/// What the OVirtCluster knows of a domain's provider when it publishes the domain (issue 39).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderHealth {
    /// The provider exists, serves the cluster's namespace and its engine answered (or was not asked yet).
    Usable,
    /// No OVirtProvider of that name.
    NotFound,
    /// The provider's spec.allowedNamespaces does not allow the cluster's namespace.
    NotAllowed,
    /// The provider's last connection check failed: its reason (e.g. EngineUnreachable) and message.
    Failing { reason: String, message: String },
}

/// A domain left out of status.failureDomains, and why: what the OVirtCluster's condition says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftOut {
    pub domain: String,
    pub provider: String,
    pub why: ProviderHealth,
}

impl LeftOut {
    /// One line of the condition's message: the domain, its provider and what to do.
    pub fn explain(&self, namespace: &str) -> String {
        let (domain, provider) = (&self.domain, &self.provider);
        match &self.why {
            ProviderHealth::Usable => format!("failure domain {domain:?} is published"),
            ProviderHealth::NotFound => format!(
                "failure domain {domain:?}: OVirtProvider {provider:?} not found: create it or fix the domain's provider"
            ),
            ProviderHealth::NotAllowed => format!(
                "failure domain {domain:?}: OVirtProvider {provider:?} does not allow namespace {namespace:?} (its \
                 spec.allowedNamespaces): a platform admin allows it there, or drop the domain"
            ),
            ProviderHealth::Failing { reason, message } => format!(
                "failure domain {domain:?}: OVirtProvider {provider:?}'s engine cannot be used ({reason}: {}); it is \
                 published again once the engine answers",
                crate::trust::bounded_text::cut(message, 200)
            ),
        }
    }
}

/// status.failureDomains for spec.failureDomains, without the domains whose provider cannot take machines of the
/// cluster (`health` of each provider named): CAPI then spreads machines over live, allowed engines only. A domain
/// naming no provider is published as before.
pub fn published_where_usable(
    spec: &[FailureDomainSpec],
    health: impl Fn(&str) -> ProviderHealth,
) -> (Vec<FailureDomainStatus>, Vec<LeftOut>) {
    let mut left_out = Vec::new();
    let usable: Vec<FailureDomainSpec> = spec
        .iter()
        .filter(|domain| {
            let Some(provider) = &domain.provider else {
                return true;
            };
            match health(provider) {
                ProviderHealth::Usable => true,
                why => {
                    left_out.push(LeftOut {
                        domain: domain.name.clone(),
                        provider: provider.clone(),
                        why,
                    });
                    false
                }
            }
        })
        .cloned()
        .collect();
    (published(&usable), left_out)
}

/// Which oVirt clusters of which provider an OVirtCluster's status.capacity covers: those its machines use (as
/// (provider, oVirt cluster)), and those its failure domains name. A domain naming a provider counts on that
/// provider's engine only, with its oVirt cluster when it names one (issue 39); a domain naming none counts on every
/// provider the machines use, as before.
pub fn capacity_targets<'a>(
    machines: impl IntoIterator<Item = (&'a str, &'a str)>,
    domains: &[FailureDomainSpec],
) -> BTreeMap<String, std::collections::BTreeSet<String>> {
    let mut used: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for (provider, ovirt_cluster) in machines {
        used.entry(provider.to_string())
            .or_default()
            .insert(ovirt_cluster.to_string());
    }
    let everywhere: Vec<&String> = domains
        .iter()
        .filter(|d| d.provider.is_none())
        .filter_map(|d| d.ovirtcluster.as_ref())
        .collect();
    for clusters in used.values_mut() {
        clusters.extend(everywhere.iter().map(|c| c.to_string()));
    }
    for domain in domains {
        if let Some(provider) = &domain.provider {
            let clusters = used.entry(provider.clone()).or_default();
            clusters.extend(domain.ovirtcluster.clone());
        }
    }
    used.retain(|provider, clusters| !provider.is_empty() && !clusters.is_empty());
    used
}

/// Names on each oVirt cluster of `capacity` the failure domains whose VMs go there (issue 39: capacity per
/// domain): a domain naming that oVirt cluster and either that provider or none, or naming that provider and no
/// oVirt cluster. Host-label-only domains are a part of some cluster's hosts, not a cluster: not listed.
pub fn attribute_domains(capacity: &mut capov_crds::ClusterCapacity, domains: &[FailureDomainSpec]) {
    for cluster in &mut capacity.ovirt_clusters {
        cluster.failure_domains = domains
            .iter()
            .filter(|d| d.provider.is_some() || d.ovirtcluster.is_some())
            .filter(|d| d.provider.as_ref().is_none_or(|p| *p == cluster.provider))
            .filter(|d| d.ovirtcluster.as_ref().is_none_or(|c| *c == cluster.name))
            .map(|d| d.name.clone())
            .collect();
    }
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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FailureDomainPlacement {
    pub name: String,
    /// The oVirt cluster the VM goes to instead of spec.ovirtcluster.
    pub ovirtcluster: Option<String>,
    /// The affinity label of the hosts the VM may run on.
    pub hostlabel: Option<String>,
    /// The OVirtProvider whose engine the VM goes to instead of spec.provider's.
    pub provider: Option<String>,
    /// The names on that engine that replace the machine's.
    pub overrides: FailureDomainOverrides,
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
            provider: domain.provider.clone(),
            overrides: domain.overrides.clone().unwrap_or_default(),
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

    /// The OVirtProvider the domain names, if it names one.
    pub fn provider(&self) -> Option<&str> {
        match self {
            FailureDomainChoice::Found(placement) => placement.provider.as_deref(),
            _ => None,
        }
    }

    /// The machine's settings with the domain's overrides in place: what the VM is created from on the domain's
    /// engine. spec.provider is left as it is: [`provider_choice`] decides that one.
    pub fn apply_overrides(&self, mut settings: MachineSettings) -> MachineSettings {
        if let FailureDomainChoice::Found(placement) = self {
            if let Some(template) = &placement.overrides.template {
                settings.template = template.clone();
            }
            if let Some(storage) = &placement.overrides.storagedomainname {
                settings.storagedomainname = Some(storage.clone());
            }
            for nic in &mut settings.nics {
                let renamed = placement
                    .overrides
                    .vnicprofiles
                    .iter()
                    .find(|r| r.from == nic.vnicprofile);
                if let Some(rename) = renamed {
                    nic.vnicprofile = rename.to.clone();
                }
            }
        }
        settings
    }

    /// The domain's name when its overrides set the template (so that TemplateNotFound says where to fix it).
    pub fn template_domain(&self) -> Option<&str> {
        match self {
            FailureDomainChoice::Found(placement) if placement.overrides.template.is_some() => Some(&placement.name),
            _ => None,
        }
    }
}

/// What TemplateNotFound says to fix: the failure domain's overrides.template when the template came from there,
/// naming the provider whose engine lacks it; else spec.template.
pub fn template_fix(domain: &FailureDomainChoice, provider: &str) -> String {
    match domain.template_domain() {
        Some(name) => override_fix("template", name, provider),
        None => "spec.template".to_string(),
    }
}

/// What StorageDomainNotFound says to fix when the storage domain came from the failure domain's overrides; None:
/// the machine's or the provider's spec.storagedomainname, as before.
pub fn storage_domain_fix(domain: &FailureDomainChoice, provider: &str) -> Option<String> {
    match domain {
        FailureDomainChoice::Found(placement) if placement.overrides.storagedomainname.is_some() => {
            Some(override_fix("storagedomainname", &placement.name, provider))
        }
        _ => None,
    }
}

/// What VnicProfileNotFound adds when the failure domain's overrides.vnicprofiles gave the profile's name.
pub fn vnic_profile_fix(domain: &FailureDomainChoice, provider: &str, profile: &str) -> Option<String> {
    match domain {
        FailureDomainChoice::Found(placement) if placement.overrides.vnicprofiles.iter().any(|r| r.to == profile) => {
            Some(override_fix("vnicprofiles", &placement.name, provider))
        }
        _ => None,
    }
}

fn override_fix(field: &str, domain: &str, provider: &str) -> String {
    format!(
        "overrides.{field} of failure domain {domain:?} in the OVirtCluster's spec.failureDomains (the name on \
         OVirtProvider {provider:?}'s engine)"
    )
}

/// Which OVirtProvider a machine's VM lives on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderChoice {
    /// spec.provider, as it stands: the machine goes on with it.
    Spec,
    /// The failure domain names another provider and no VM was created yet: spec.provider is set to it first, so
    /// that the VM is created there and the machine stays there (spec.provider is frozen once spec.providerID is
    /// set).
    Pin(String),
    /// Neither spec.provider nor the failure domain names one: the machine waits, with this message.
    Missing(String),
}

/// The provider a machine uses: once a VM was created (`vm_recorded`: spec.providerID or the created-VM annotation)
/// always spec.provider, so that a machine never moves between engines; before, the failure domain's provider,
/// else spec.provider (empty: not set).
pub fn provider_choice(spec_provider: &str, domain: &FailureDomainChoice, vm_recorded: bool) -> ProviderChoice {
    let spec = Some(spec_provider).filter(|p| !p.is_empty());
    let wanted = if vm_recorded { spec } else { domain.provider().or(spec) };
    match wanted {
        Some(provider) if spec == Some(provider) => ProviderChoice::Spec,
        Some(provider) => ProviderChoice::Pin(provider.to_string()),
        None => ProviderChoice::Missing(no_provider_message(domain, vm_recorded)),
    }
}

fn no_provider_message(domain: &FailureDomainChoice, vm_recorded: bool) -> String {
    if vm_recorded {
        return "spec.provider is not set, but a VM was recorded for this machine: set spec.provider to the \
                OVirtProvider whose engine holds it"
            .to_string();
    }
    match domain {
        FailureDomainChoice::Found(placement) => format!(
            "spec.provider is not set and failure domain {:?} names no provider: set spec.provider in the \
             OVirtMachineTemplate, or the domain's provider in the OVirtCluster's spec.failureDomains",
            placement.name
        ),
        FailureDomainChoice::Unknown { name, .. } => format!(
            "spec.provider is not set and failure domain {name:?} is not among the OVirtCluster's \
             spec.failureDomains: add it there with a provider, or set spec.provider in the OVirtMachineTemplate"
        ),
        FailureDomainChoice::None => "spec.provider is not set and the machine is in no failure domain: set \
                                      spec.provider in the OVirtMachineTemplate, or place the machine in a failure \
                                      domain that names a provider"
            .to_string(),
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

    fn on_engine(name: &str, provider: &str, template: Option<&str>, storage: Option<&str>) -> FailureDomainSpec {
        FailureDomainSpec {
            name: name.into(),
            provider: Some(provider.into()),
            overrides: (template.is_some() || storage.is_some()).then(|| FailureDomainOverrides {
                template: template.map(String::from),
                storagedomainname: storage.map(String::from),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_domain_on_another_engine_yields_its_provider_its_overrides_and_publishes_the_provider() {
        let spec = [
            on_engine("site-a", "engine-a", None, None),
            on_engine("site-b", "engine-b", Some("ubuntu-b"), Some("data-b")),
            domain("rack-c", None, Some("rack-c"), None),
        ];
        let published = published(&spec);
        assert_eq!(published[0].attributes[PROVIDER_ATTRIBUTE], "engine-a");
        assert!(!published[2].attributes.contains_key(PROVIDER_ATTRIBUTE));

        let settings = MachineSettings {
            provider: "engine-a".into(),
            template: "ubuntu".into(),
            ovirtcluster: "Default".into(),
            ..Default::default()
        };
        let b = resolve(Some("site-b"), &spec);
        assert_eq!(b.provider(), Some("engine-b"));
        assert_eq!(b.template_domain(), Some("site-b"));
        let on_b = b.apply_overrides(settings.clone());
        assert_eq!(on_b.template, "ubuntu-b");
        assert!(on_b.nics.is_empty());
        assert_eq!(on_b.storagedomainname.as_deref(), Some("data-b"));
        // The provider is not an override: provider_choice decides it.
        assert_eq!(on_b.provider, "engine-a");
        assert!(template_fix(&b, "engine-b").contains("failure domain \"site-b\""));
        let storage_fix = storage_domain_fix(&b, "engine-b").expect("the storage domain is the domain's");
        assert!(
            storage_fix.starts_with("overrides.storagedomainname of failure domain \"site-b\""),
            "{storage_fix}"
        );
        assert!(storage_fix.contains("OVirtProvider \"engine-b\""), "{storage_fix}");

        // A domain without overrides, a host-label domain and no domain leave the settings alone.
        for choice in [
            resolve(Some("site-a"), &spec),
            resolve(Some("rack-c"), &spec),
            resolve(None, &spec),
        ] {
            assert_eq!(choice.apply_overrides(settings.clone()), settings, "{choice:?}");
            assert_eq!(template_fix(&choice, "engine-a"), "spec.template");
            assert_eq!(storage_domain_fix(&choice, "engine-a"), None);
        }
        assert_eq!(resolve(Some("rack-c"), &spec).provider(), None);
    }

    #[test]
    fn a_domains_vnic_profiles_rename_only_the_profiles_it_lists() {
        let mut spec = on_engine("site-c", "engine-c", None, None);
        spec.overrides = Some(FailureDomainOverrides {
            vnicprofiles: vec![capov_crds::VnicProfileRename {
                from: "ovirtmgmt".into(),
                to: "vm-net-c".into(),
            }],
            ..Default::default()
        });
        let c = resolve(Some("site-c"), &[spec]);
        let nic = |profile: &str| capov_crds::Nic {
            vnicprofile: profile.into(),
            ..Default::default()
        };
        let settings = MachineSettings {
            nics: vec![nic("ovirtmgmt"), nic("storage")],
            ..Default::default()
        };
        let on_c = c.apply_overrides(settings);
        let profiles: Vec<&str> = on_c.nics.iter().map(|n| n.vnicprofile.as_str()).collect();
        assert_eq!(profiles, ["vm-net-c", "storage"]);
        let fix = vnic_profile_fix(&c, "engine-c", "vm-net-c").expect("the profile is the domain's");
        assert!(
            fix.contains("overrides.vnicprofiles of failure domain \"site-c\""),
            "{fix}"
        );
        assert_eq!(vnic_profile_fix(&c, "engine-c", "storage"), None);
        assert_eq!(
            vnic_profile_fix(&FailureDomainChoice::None, "engine-c", "vm-net-c"),
            None
        );
    }

    #[test]
    fn the_provider_is_the_domains_until_a_vm_exists_and_spec_providers_after() {
        let spec = [
            on_engine("site-b", "engine-b", None, None),
            domain("rack-c", None, Some("rack-c"), None),
        ];
        let b = resolve(Some("site-b"), &spec);
        let c = resolve(Some("rack-c"), &spec);
        // Before any VM: the domain's provider wins over spec.provider, and is written into it first.
        assert_eq!(
            provider_choice("engine-a", &b, false),
            ProviderChoice::Pin("engine-b".into())
        );
        assert_eq!(provider_choice("", &b, false), ProviderChoice::Pin("engine-b".into()));
        assert_eq!(provider_choice("engine-b", &b, false), ProviderChoice::Spec);
        // A domain naming none: spec.provider.
        assert_eq!(provider_choice("engine-a", &c, false), ProviderChoice::Spec);
        assert_eq!(
            provider_choice("engine-a", &FailureDomainChoice::None, false),
            ProviderChoice::Spec
        );
        // Once a VM is recorded, spec.provider stays, whatever the domain says now: no move between engines.
        assert_eq!(provider_choice("engine-a", &b, true), ProviderChoice::Spec);
        // Nowhere a provider: a message that says where to set one.
        for (choice, recorded, wanted) in [
            (&c, false, "failure domain \"rack-c\" names no provider"),
            (&FailureDomainChoice::None, false, "in no failure domain"),
            (&resolve(Some("gone"), &spec), false, "\"gone\" is not among"),
            (&b, true, "a VM was recorded for this machine"),
        ] {
            match provider_choice("", choice, recorded) {
                ProviderChoice::Missing(message) => {
                    assert!(
                        message.contains(wanted) && message.contains("spec.provider"),
                        "{message}"
                    )
                }
                other => panic!("{choice:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn only_domains_whose_provider_is_found_allowed_and_answering_are_published_and_the_others_say_why() {
        let spec = [
            on_engine("site-a", "engine-a", None, None),
            on_engine("site-b", "engine-b", None, None),
            on_engine("site-c", "engine-c", None, None),
            on_engine("site-d", "engine-d", None, None),
            domain("rack-e", None, Some("rack-e"), None),
        ];
        let health = |provider: &str| match provider {
            "engine-a" => ProviderHealth::Usable,
            "engine-b" => ProviderHealth::NotAllowed,
            "engine-c" => ProviderHealth::Failing {
                reason: "EngineUnreachable".into(),
                message: "connection refused".into(),
            },
            _ => ProviderHealth::NotFound,
        };
        let (published, left_out) = published_where_usable(&spec, health);
        let names: Vec<&str> = published.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["site-a", "rack-e"]);
        let left: Vec<(&str, &str)> = left_out
            .iter()
            .map(|l| (l.domain.as_str(), l.provider.as_str()))
            .collect();
        assert_eq!(
            left,
            [("site-b", "engine-b"), ("site-c", "engine-c"), ("site-d", "engine-d")]
        );
        let explained: Vec<String> = left_out.iter().map(|l| l.explain("team-a")).collect();
        assert!(
            explained[0].contains("does not allow namespace \"team-a\""),
            "{}",
            explained[0]
        );
        assert!(
            explained[1].contains("EngineUnreachable: connection refused"),
            "{}",
            explained[1]
        );
        assert!(explained[2].contains("\"engine-d\" not found"), "{}", explained[2]);
        // All usable: the same as before.
        let (all, none) = published_where_usable(&spec, |_| ProviderHealth::Usable);
        assert_eq!(all, super::published(&spec));
        assert!(none.is_empty());
    }

    #[test]
    fn capacity_counts_a_domains_ovirt_cluster_on_its_own_engine_only() {
        let spec = [
            FailureDomainSpec {
                ovirtcluster: Some("Prod-B".into()),
                ..on_engine("site-b", "engine-b", None, None)
            },
            on_engine("site-c", "engine-c", None, None),
            domain("rack", Some("Edge"), None, None),
        ];
        let targets = capacity_targets(
            [("engine-a", "Default"), ("engine-c", "Default"), ("", "Default")],
            &spec,
        );
        let names = |provider: &str| targets[provider].iter().cloned().collect::<Vec<_>>();
        // A's machines' cluster and the provider-less domain's; B's domain's cluster on B only, with no machine there
        // yet; C's machines' cluster (its domain names no oVirt cluster) and the provider-less domain's.
        assert_eq!(names("engine-a"), ["Default", "Edge"]);
        assert_eq!(names("engine-b"), ["Prod-B"]);
        assert_eq!(names("engine-c"), ["Default", "Edge"]);
        // A machine whose provider is still to be set counts nowhere.
        assert_eq!(targets.len(), 3);
    }

    #[test]
    fn each_ovirt_cluster_of_the_capacity_names_the_domains_it_serves() {
        let cluster = |provider: &str, name: &str| capov_crds::OVirtClusterCapacity {
            provider: provider.into(),
            name: name.into(),
            ..Default::default()
        };
        let mut capacity = capov_crds::ClusterCapacity {
            ovirt_clusters: vec![
                cluster("engine-a", "Default"),
                cluster("engine-b", "Prod-B"),
                cluster("engine-b", "Default"),
            ],
            storage_domains: Vec::new(),
        };
        let spec = [
            on_engine("site-a", "engine-a", None, None),
            FailureDomainSpec {
                ovirtcluster: Some("Prod-B".into()),
                ..on_engine("site-b", "engine-b", None, None)
            },
            domain("default-anywhere", Some("Default"), None, None),
            domain("rack", None, Some("rack"), None),
        ];
        attribute_domains(&mut capacity, &spec);
        let listed: Vec<Vec<String>> = capacity
            .ovirt_clusters
            .iter()
            .map(|c| c.failure_domains.clone())
            .collect();
        assert_eq!(
            listed,
            [
                vec!["site-a".to_string(), "default-anywhere".into()],
                vec!["site-b".into()],
                vec!["default-anywhere".into()],
            ]
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
