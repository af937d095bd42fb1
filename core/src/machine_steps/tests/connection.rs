//! Step 2, CanConnectToOVirt, and the critical connection errors of §2.4 ([`crate::machine_steps::connection`]),
//! including plain-http engines and engine URLs with userinfo.

use crate::machine_steps::{
    Action, BookkeepingAction, ConnectionFailure, Observed, ProviderConnection, Requeue, decide, provider_settled,
};
use crate::placement::failure_domains::{FailureDomainChoice, FailureDomainPlacement};
use std::time::Duration;

use capov_crds::Severity;

use super::fixtures::{deleting, failed, ready_to_create, running, state_of, with_vm};
use crate::conditions::{State, reasons, types};

fn in_domain(provider: Option<&str>) -> FailureDomainChoice {
    FailureDomainChoice::Found(FailureDomainPlacement {
        name: "site-b".into(),
        provider: provider.map(String::from),
        ..Default::default()
    })
}

#[test]
fn a_machine_in_a_domain_with_a_provider_sets_spec_provider_to_it_before_anything_else() {
    for spec_provider in ["", "ovirt-prod"] {
        let mut o = ready_to_create();
        o.settings.provider = spec_provider.into();
        o.failure_domain = in_domain(Some("engine-b"));
        assert!(!provider_settled(&o));
        let d = decide(&o);
        assert_eq!(
            d.action,
            Action::Bookkeeping(BookkeepingAction::SetProvider("engine-b".into())),
            "spec.provider {spec_provider:?}"
        );
        // Once written, the machine goes on with it.
        o.settings.provider = "engine-b".into();
        assert!(provider_settled(&o));
        assert!(!matches!(
            decide(&o).action,
            Action::Bookkeeping(BookkeepingAction::SetProvider(_))
        ));
    }
}

#[test]
fn a_machine_whose_vm_exists_keeps_its_provider_whatever_its_domain_says_now() {
    for o in [with_vm("down", false), running()] {
        let mut o = o;
        o.failure_domain = in_domain(Some("engine-b"));
        assert!(provider_settled(&o), "{:?}", o.provider_id);
        assert!(!matches!(
            decide(&o).action,
            Action::Bookkeeping(BookkeepingAction::SetProvider(_))
        ));
    }
    // A VM created, its providerID not written yet: the created-VM annotation holds the provider too.
    let mut o = ready_to_create();
    o.created_vm = Some(super::fixtures::VM_ID.into());
    o.failure_domain = in_domain(Some("engine-b"));
    assert!(provider_settled(&o));
}

#[test]
fn a_machine_with_no_provider_anywhere_waits_with_no_provider_saying_where_to_set_one() {
    for domain in [FailureDomainChoice::None, in_domain(None)] {
        let mut o = ready_to_create();
        o.settings.provider = String::new();
        o.failure_domain = domain.clone();
        let d = decide(&o);
        assert_eq!(d.action, Action::Wait(Requeue::Backoff), "{domain:?}");
        let (reason, message) = super::fixtures::reason_and_message(&d, types::CAN_CONNECT_TO_OVIRT);
        assert_eq!(reason, reasons::NO_PROVIDER);
        assert!(message.contains("set spec.provider"), "{message}");
        assert_eq!(
            state_of(&d, types::CAN_CONNECT_TO_OVIRT),
            Some((State::False(Severity::Error), reasons::NO_PROVIDER))
        );
    }
}

#[test]
fn a_machine_never_given_a_provider_is_released_without_asking_an_engine() {
    let mut o = deleting(ready_to_create());
    o.settings.provider = String::new();
    assert!(crate::machine_steps::releasable_without_engine(&o));
    assert_eq!(
        decide(&o).action,
        Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: None })
    );
    // With a provider, deletion looks for the VM by name as before.
    o.settings.provider = "ovirt-prod".into();
    assert!(!crate::machine_steps::releasable_without_engine(&o));
}

#[test]
fn transient_connection_failure_waits_with_backoff() {
    let o = Observed {
        connection: failed(ConnectionFailure::EngineUnreachable, Duration::from_secs(3600)),
        ..ready_to_create()
    };
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::CAN_CONNECT_TO_OVIRT),
        Some((State::False(Severity::Warning), reasons::ENGINE_UNREACHABLE))
    );
}

#[test]
fn authentication_tls_and_ca_failures_are_critical_at_once() {
    for failure in [
        ConnectionFailure::AuthenticationFailed,
        ConnectionFailure::TlsVerificationFailed,
        ConnectionFailure::InvalidCaBundle,
    ] {
        let d = decide(&Observed {
            connection: failed(failure, Duration::ZERO),
            ..ready_to_create()
        });
        match &d.action {
            Action::Bookkeeping(BookkeepingAction::SetFailure { reason, message }) => {
                assert_eq!(*reason, "OVirtEngineConnectionCritical");
                assert!(message.starts_with(failure.reason()), "{message}");
            }
            other => panic!("{failure:?}: {other:?}"),
        }
        assert_eq!(
            state_of(&d, types::CAN_CONNECT_TO_OVIRT),
            Some((State::False(Severity::Error), failure.reason()))
        );
    }
}

#[test]
fn missing_provider_or_credentials_become_critical_after_ten_minutes() {
    for failure in [
        ConnectionFailure::ProviderNotFound,
        ConnectionFailure::CredentialsNotFound,
    ] {
        let early = decide(&Observed {
            connection: failed(failure, Duration::from_secs(599)),
            ..ready_to_create()
        });
        assert_eq!(early.action, Action::Wait(Requeue::Backoff), "{failure:?}");
        assert_eq!(
            state_of(&early, types::CAN_CONNECT_TO_OVIRT),
            Some((State::False(Severity::Warning), failure.reason()))
        );
        let late = decide(&Observed {
            connection: failed(failure, Duration::from_secs(600)),
            ..ready_to_create()
        });
        assert!(
            matches!(late.action, Action::Bookkeeping(BookkeepingAction::SetFailure { .. })),
            "{failure:?}"
        );
    }
}

#[test]
fn other_permanent_connection_errors_are_not_failure_reasons() {
    for failure in [
        ConnectionFailure::CredentialsInvalid,
        ConnectionFailure::PermissionDenied,
    ] {
        let d = decide(&Observed {
            connection: failed(failure, Duration::from_secs(86400)),
            ..ready_to_create()
        });
        assert_eq!(d.action, Action::Wait(Requeue::Backoff));
        assert_eq!(
            state_of(&d, types::CAN_CONNECT_TO_OVIRT),
            Some((State::False(Severity::Error), failure.reason()))
        );
    }
}

#[test]
fn provisioned_machines_never_get_a_failure_reason() {
    let o = Observed {
        connection: failed(ConnectionFailure::AuthenticationFailed, Duration::ZERO),
        ..running()
    };
    assert_eq!(decide(&o).action, Action::Wait(Requeue::Backoff));
}

#[test]
fn connection_failure_during_deletion_is_never_critical() {
    let o = Observed {
        connection: failed(ConnectionFailure::AuthenticationFailed, Duration::ZERO),
        ..deleting(with_vm("up", true))
    };
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
}

#[test]
fn an_engine_url_with_userinfo_is_an_error_that_never_fails_the_machine() {
    let d = decide(&Observed {
        connection: failed(ConnectionFailure::InvalidEngineUrl, Duration::from_secs(86400)),
        ..ready_to_create()
    });
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::CAN_CONNECT_TO_OVIRT),
        Some((State::False(Severity::Error), reasons::INVALID_ENGINE_URL))
    );
}

#[test]
fn connection_failure_reasons_round_trip() {
    for failure in ConnectionFailure::ALL {
        assert_eq!(ConnectionFailure::from_reason(failure.reason()), Some(failure));
    }
    assert_eq!(ConnectionFailure::from_reason("Connected"), None);
}

fn over_plain_http(o: Observed) -> Observed {
    Observed {
        connection: ProviderConnection::Ready {
            insecure_transport: true,
        },
        ..o
    }
}

#[test]
fn plain_http_connection_is_true_with_reason_insecure_transport() {
    for (what, o) in [
        ("create", ready_to_create()),
        ("running", running()),
        ("deleting", deleting(running())),
        ("deleting, VM gone", deleting(Observed { vm: None, ..running() })),
    ] {
        let d = decide(&over_plain_http(o));
        let condition = d.condition(types::CAN_CONNECT_TO_OVIRT).expect(what);
        assert_eq!(
            (condition.state, condition.reason),
            (State::True, reasons::INSECURE_TRANSPORT),
            "{what}"
        );
        assert!(
            condition.message.contains("unencrypted"),
            "{what}: {}",
            condition.message
        );
    }
    let https = decide(&running());
    assert_eq!(
        state_of(&https, types::CAN_CONNECT_TO_OVIRT),
        Some((State::True, reasons::CONNECTED))
    );
}

#[test]
fn plain_http_changes_nothing_but_the_reason_and_leaves_the_machine_ready() {
    let secure = decide(&running());
    let insecure = decide(&over_plain_http(running()));
    assert_eq!(insecure.action, secure.action);
    let mut conditions = Vec::new();
    let now = k8s_openapi::jiff::Timestamp::from_second(1).expect("time");
    for update in &insecure.conditions {
        crate::conditions::set_condition(&mut conditions, update, now, Some(1));
    }
    let ready = crate::conditions::ready_summary(&conditions, crate::conditions::MACHINE_READY_INPUTS);
    assert_eq!((ready.state, ready.reason), (State::True, reasons::READY));
}
