//! Static addresses in step 3 ([`crate::machine_steps::static_addresses`]): claims before the VM, a condition while
//! waiting, the addresses in the create request and in status.addresses, and the claims released on deletion.

use crate::machine_steps::{Action, BookkeepingAction, Observed, Requeue, VmAction, decide};
use capov_crds::{Dns, IpPoolRef, MachineSettings, Nic, Severity};

use super::fixtures::{deleting, ready_to_create, running, state_of};
use crate::conditions::{State, reasons, types};
use crate::network::ip_claims::{AddressFact, ClaimFact};

fn pool(name: &str) -> IpPoolRef {
    IpPoolRef {
        api_group: "ipam.cluster.x-k8s.io".into(),
        kind: "InClusterIPPool".into(),
        name: name.into(),
    }
}

fn with_pools(o: Observed) -> Observed {
    Observed {
        settings: MachineSettings {
            nics: vec![Nic {
                vnicprofile: "ovirtmgmt".into(),
                addresses_from_pools: vec![pool("v4"), pool("v6")],
                ..Nic::default()
            }],
            dns: Some(Dns {
                servers: vec!["192.0.2.53".into()],
                search_domains: vec!["example.com".into()],
            }),
            ..o.settings.clone()
        },
        ..o
    }
}

fn claim(suffix: &str, pool_name: &str, address: Option<(&str, i32, Option<&str>)>) -> ClaimFact {
    ClaimFact {
        name: format!("worker-abc123-{suffix}"),
        owned: true,
        pool: pool(pool_name),
        deleting: false,
        protected: true,
        address: address.map(|(address, prefix, gateway)| AddressFact {
            name: format!("worker-abc123-{suffix}"),
            address: address.into(),
            prefix,
            gateway: gateway.map(String::from),
        }),
        overdue: false,
    }
}

fn bound() -> Vec<ClaimFact> {
    vec![
        claim("0-0", "v4", Some(("192.0.2.10", 24, Some("192.0.2.1")))),
        claim("0-1", "v6", Some(("2001:db8::10", 64, Some("2001:db8::1")))),
    ]
}

#[test]
fn a_machine_with_pools_creates_its_claims_before_its_vm() {
    let d = decide(&with_pools(ready_to_create()));
    let Action::Bookkeeping(BookkeepingAction::CreateIpClaims(claims)) = &d.action else {
        panic!("expected claims, got {:?}", d.action);
    };
    let names: Vec<&str> = claims.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["worker-abc123-0-0", "worker-abc123-0-1"]);
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::False(Severity::Info), reasons::WAITING_FOR_IP_ADDRESS))
    );
}

#[test]
fn a_machine_waiting_for_its_addresses_says_so_and_turns_warning_when_overdue() {
    let pending = vec![claim("0-0", "v4", None), claim("0-1", "v6", None)];
    let d = decide(&Observed {
        ip_claims: pending.clone(),
        ..with_pools(ready_to_create())
    });
    // Looked at again once the grace is over, so that the Warning comes even if nothing changes.
    assert_eq!(
        d.action,
        Action::Wait(Requeue::After(crate::network::ip_claims::ADDRESS_GRACE))
    );
    let created = d.condition(types::MACHINE_CREATED).expect("MachineCreated");
    assert_eq!(
        (created.reason, created.state),
        (reasons::WAITING_FOR_IP_ADDRESS, State::False(Severity::Info))
    );
    assert!(created.message.contains("worker-abc123-0-0"), "{}", created.message);
    let mut late = pending;
    late[0].overdue = true;
    let d = decide(&Observed {
        ip_claims: late,
        ..with_pools(ready_to_create())
    });
    assert_eq!(
        d.condition(types::MACHINE_CREATED).map(|c| c.state),
        Some(State::False(Severity::Warning))
    );
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
}

#[test]
fn the_addresses_and_dns_go_into_the_create_request() {
    let d = decide(&Observed {
        ip_claims: bound(),
        ..with_pools(ready_to_create())
    });
    let Action::Vm(VmAction::Create(plan)) = &d.action else {
        panic!("expected a create, got {:?}", d.action);
    };
    let addresses: Vec<String> = plan.network.addresses().iter().map(|a| a.to_string()).collect();
    assert_eq!(addresses, ["192.0.2.10", "2001:db8::10"]);
    assert_eq!(plan.network.dns_servers, ["192.0.2.53"]);
    assert_eq!(plan.network.nics[0].name, "eth0");
}

#[test]
fn without_pools_nothing_is_claimed_and_the_create_request_has_no_network() {
    let d = decide(&ready_to_create());
    let Action::Vm(VmAction::Create(plan)) = &d.action else {
        panic!("expected a create, got {:?}", d.action);
    };
    assert!(plan.network.is_empty());
}

#[test]
fn an_unusable_address_is_an_error_and_no_vm_is_created() {
    let d = decide(&Observed {
        ip_claims: vec![
            claim("0-0", "v4", Some(("192.0.2.10", 40, None))),
            claim("0-1", "v6", Some(("2001:db8::10", 64, None))),
        ],
        ..with_pools(ready_to_create())
    });
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    let created = d.condition(types::MACHINE_CREATED).expect("MachineCreated");
    assert_eq!(
        (created.reason, created.state),
        (reasons::INVALID_IP_ADDRESS, State::False(Severity::Error))
    );
}

#[test]
fn a_running_machine_reports_its_static_addresses_first() {
    let d = decide(&Observed {
        ip_claims: bound(),
        ..with_pools(running())
    });
    let addresses: Vec<String> = d
        .status
        .addresses
        .expect("addresses")
        .into_iter()
        .map(|a| a.address)
        .collect();
    assert_eq!(addresses[..2], ["192.0.2.10".to_string(), "10.0.1.11".to_string()]);
    assert!(addresses.contains(&"2001:db8::10".to_string()), "{addresses:?}");
}

#[test]
fn deletion_releases_the_claims_before_the_finalizer_goes() {
    let gone = deleting(Observed {
        ip_claims: bound(),
        ..with_pools(ready_to_create())
    });
    let d = decide(&gone);
    assert_eq!(
        d.action,
        Action::Bookkeeping(BookkeepingAction::ReleaseIpClaims(vec![
            "worker-abc123-0-0".into(),
            "worker-abc123-0-1".into()
        ]))
    );
    assert_eq!(
        state_of(&d, types::MACHINE_DELETED),
        Some((State::False(Severity::Info), reasons::RELEASING_IP_ADDRESSES))
    );
    let mut released = bound();
    for claim in &mut released {
        claim.deleting = true;
        claim.protected = false;
    }
    let d = decide(&Observed {
        ip_claims: released,
        ..gone
    });
    assert_eq!(
        d.action,
        Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: None })
    );
}

#[test]
fn a_running_vm_is_never_deleted_for_its_claims() {
    // Deletion of a machine whose VM still exists: the VM goes first, then the claims.
    let d = decide(&deleting(Observed {
        ip_claims: bound(),
        ..with_pools(running())
    }));
    assert!(
        !matches!(d.action, Action::Bookkeeping(BookkeepingAction::ReleaseIpClaims(_))),
        "{:?}",
        d.action
    );
}
