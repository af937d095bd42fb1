//! What the tests of every step start from: an observed machine at each stage (ready to create, with its VM,
//! running, being deleted), its VM and disks, and a short way to read a decision's conditions.

use crate::machine_steps::{
    Bootstrap, BootstrapFormat, ConnectionFailure, CreationFacts, Decision, Fact, FailureState, FoundBy,
    NodeObservation, Observed, ObservedVm, OvirtClusterFact, PlacementFacts, ProviderConnection, ProviderDefaults,
    TemplateFact, VmDisk,
};
use crate::placement::capacity::DiskSize;
use crate::placement::{StorageDomainFact, TemplateDisk};
use std::time::Duration;

use capov_crds::MachineSettings;

use crate::conditions::State;
use crate::network::addresses::{ReportedDevice, VmNic};
use crate::network::nics::NicAssessment;
use crate::placement::affinity_groups::GroupOwner;
use crate::placement::failure_domains::FailureDomainChoice;
use crate::policy::feature_gates::FeatureGates;
use crate::trust::identity::{EngineIdentity, OwnerIdentity, Ownership};

pub(super) const VM_ID: &str = "11111111-2222-3333-4444-555555555555";
pub(super) const GIB: u64 = 1 << 30;

pub(super) fn owner() -> OwnerIdentity {
    OwnerIdentity {
        namespace: "default".into(),
        name: "worker-abc123".into(),
        uid: "0000aaaa-0000-4000-8000-00000000000a".into(),
        previous_uid: None,
        management_cluster: "mgmt-1".into(),
        accepted_management_clusters: Vec::new(),
    }
}

pub(super) fn engine() -> EngineIdentity {
    EngineIdentity {
        url: "https://engine.example.com/ovirt-engine/api".into(),
        user: "admin@internal".into(),
    }
}

/// A machine with every precondition met, connected, bootstrap data ready, no VM yet.
pub(super) fn ready_to_create() -> Observed {
    Observed {
        namespace: "default".into(),
        name: "worker-abc123".into(),
        owner: owner(),
        paused: false,
        deletion_requested: false,
        deletion_requested_for: None,
        cluster_name: Some("cluster-1".into()),
        deleted_for_move: false,
        has_finalizer: true,
        owner_machine_found: true,
        cluster_found: true,
        cluster_infrastructure_provisioned: true,
        bootstrap: Bootstrap::Ready(BootstrapFormat::CloudConfig),
        connection: ProviderConnection::Ready {
            insecure_transport: false,
        },
        provider_id: None,
        created_vm: None,
        recorded_vm_name: None,
        release_vm_requested: false,
        failure: FailureState::Clear,
        provisioned: false,
        vm: None,
        recorded_engine: Some(engine().annotation()),
        current_engine: Some(engine()),
        system_disks: None,
        settings: MachineSettings {
            provider: "ovirt-prod".into(),
            ovirtcluster: "Default".into(),
            template: "rhcos-4.14".into(),
            ..MachineSettings::default()
        },
        provider_defaults: ProviderDefaults::default(),
        gates: FeatureGates::default(),
        nics: Fact::Read(NicAssessment::InSync),
        node: Fact::Read(NodeObservation::NotFound),
        node_release: Fact::NotRead,
        detached_disks: Vec::new(),
        control_plane_host: Some("10.0.1.100".into()),
        ip_claims: Vec::new(),
        ip_claims_known: true,
        failure_domain: FailureDomainChoice::None,
        tenant_placement: None,
        groups_wanted: Vec::new(),
        group_owner: GroupOwner {
            namespace: "default".into(),
            cluster: "prod".into(),
            management_cluster: "mgmt-1".into(),
        },
        groups: Fact::NotRead,
        placement_skipped: None,
        creation: found_for_creation(),
        data_disk_target: Fact::NotRead,
        vm_host_devices: Fact::NotRead,
        vm_numa_nodes: Fact::NotRead,
    }
}

/// The creation lookups of a machine of [`ready_to_create`] as the engine answers them when all is well: the
/// cluster, a template version of a cloud-init OS on one disk, no storage domain chosen, room for a clone.
pub(super) fn found_for_creation() -> CreationFacts {
    CreationFacts {
        cluster: Fact::Read(Ok(Some(OvirtClusterFact {
            id: "cluster-default".into(),
            data_center_id: "dc-1".into(),
        }))),
        template: Fact::Read(Ok(vec![TemplateFact {
            id: "template-1".into(),
            version_number: 1,
            version_name: None,
            locked: false,
            os_type: Some("other_linux".into()),
        }])),
        placement: Fact::Read(Ok(PlacementFacts {
            storage_domain: None,
            lease_domain: None,
            template_disks: vec![(
                TemplateDisk {
                    id: "template-disk-1".into(),
                    alias: "rhcos_Disk1".into(),
                    storage_domain_ids: vec!["sd-1".into()],
                },
                DiskSize {
                    provisioned: 10 * GIB,
                    actual: 2 * GIB,
                    cow: true,
                    sparse: true,
                },
            )],
        })),
        clone_domains: Fact::Read(Ok(Vec::new())),
        device_hosts: Fact::NotRead,
        instance_type: Fact::NotRead,
    }
}

/// [`found_for_creation`] with an active data domain `domain` (id `sd-<domain>`) in the data center and a template
/// of OS type `os_type`.
pub(super) fn found_for_creation_on(domain: &str, os_type: &str) -> CreationFacts {
    let mut facts = found_for_creation();
    if let Fact::Read(Ok(versions)) = &mut facts.template {
        versions[0].os_type = Some(os_type.into());
    }
    if let Fact::Read(Ok(placement)) = &mut facts.placement {
        placement.storage_domain = Some(StorageDomainFact {
            id: format!("sd-{domain}"),
            name: domain.into(),
            kind: "data".into(),
            status: "active".into(),
            in_data_center: true,
        });
    }
    facts
}

/// The labels CAPOV keeps on the Node of a machine of [`ready_to_create`] whose VM runs on no known host.
pub(super) fn node_labels() -> std::collections::BTreeMap<String, String> {
    [(
        crate::placement::node_topology::OVIRT_CLUSTER_LABEL.to_string(),
        "Default".to_string(),
    )]
    .into()
}

pub(super) fn disk(id: &str, alias: &str, bootable: bool, gib: u64) -> VmDisk {
    VmDisk {
        attachment_id: format!("att-{id}"),
        disk_id: id.into(),
        alias: alias.into(),
        bootable,
        provisioned_size: gib * GIB,
        status: "ok".into(),
    }
}

pub(super) fn vm(status: &str, ever_started: bool) -> ObservedVm {
    ObservedVm {
        id: VM_ID.into(),
        status: status.into(),
        ownership: Ownership::Owned,
        found_by: FoundBy::ProviderId,
        foreign_management_cluster: None,
        ever_started,
        os_type: None,
        disks: vec![disk("d-boot", "rhcos-4.14_Disk1", true, 20)],
        cluster_id: Some("cluster-1".into()),
        host: None,
        nics: vec![VmNic {
            name: "nic1".into(),
            mac: "56:6f:00:00:00:01".into(),
        }],
        reported_devices: vec![ReportedDevice {
            mac: Some("56:6f:00:00:00:01".into()),
            ips: vec!["10.0.1.11".into(), "fe80::1".into()],
        }],
        tags: None,
    }
}

/// The VM exists and is recorded (providerID written, system disks recorded).
pub(super) fn with_vm(status: &str, ever_started: bool) -> Observed {
    Observed {
        provider_id: Some(format!("ovirt://{VM_ID}")),
        vm: Some(vm(status, ever_started)),
        system_disks: Some(vec!["d-boot".into()]),
        ..ready_to_create()
    }
}

pub(super) fn running() -> Observed {
    Observed {
        provisioned: true,
        node: Fact::Read(NodeObservation::Found {
            name: "worker-abc123".into(),
            provider_id: Some(format!("ovirt://{VM_ID}")),
            labels: node_labels(),
        }),
        ..with_vm("up", true)
    }
}

pub(super) fn deleting(o: Observed) -> Observed {
    Observed {
        deletion_requested: true,
        deletion_requested_for: Some(Duration::ZERO),
        ..o
    }
}

pub(super) fn state_of(d: &Decision, type_: &str) -> Option<(State, &'static str)> {
    d.condition(type_).map(|c| (c.state, c.reason))
}

/// The reason and message of the decision's condition `type_` (panics when it reports none).
pub(super) fn reason_and_message(d: &Decision, type_: &str) -> (&'static str, String) {
    let condition = d.condition(type_).unwrap_or_else(|| panic!("no {type_} in {d:?}"));
    (condition.reason, condition.message.clone())
}

pub(super) fn failed(failure: ConnectionFailure, persisted_for: Duration) -> ProviderConnection {
    ProviderConnection::Failed {
        failure,
        message: "details".into(),
        persisted_for,
    }
}

pub(super) fn wants_disk_gb(gb: i64, o: Observed) -> Observed {
    Observed {
        settings: MachineSettings {
            osdisksizegb: Some(gb),
            ..o.settings.clone()
        },
        ..o
    }
}
