//! SSO session handling, TLS modes, transport errors, rate limiting, observer hook, correlation
//! ids and secret hygiene, against the simulator.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capov_ovirt::{Client, ClientConfig, Credentials, Error, Outcome, RequestEvent, TlsMode, reason};
use capov_ovirt_sim::{Simulator, SsoErrorStyle};
use capov_testkit::eventually;
use common::{PASSWORD, USER, WAIT, config, setup, simulator};

#[tokio::test]
async fn api_root_carries_product_version() {
    let (_sim, client) = setup().await;
    let api = client.api().await.unwrap();
    let version = api.product_info.unwrap().version.unwrap();
    assert_eq!((version.major, version.minor), (Some(4), Some(4)));
    assert!(version.full_version.unwrap().starts_with("4.4."));
    assert_eq!(
        api.special_objects.unwrap().blank_template.unwrap().id.as_deref(),
        Some(capov_ovirt::model::BLANK_TEMPLATE_ID)
    );
}

#[tokio::test]
async fn inventory_listings() {
    let (_sim, client) = setup().await;
    let cluster = client.find_cluster_by_name("Default").await.unwrap().unwrap();
    assert_eq!(
        client
            .cluster(cluster.id.as_deref().unwrap())
            .await
            .unwrap()
            .name
            .as_deref(),
        Some("Default")
    );
    assert!(client.find_cluster_by_name("Defaul").await.unwrap().is_none());
    assert_eq!(client.clusters().await.unwrap().len(), 1);

    let dc_id = cluster.data_center.unwrap().id.unwrap();
    assert_eq!(
        client.data_center(&dc_id).await.unwrap().name.as_deref(),
        Some("Default")
    );
    assert_eq!(client.data_centers().await.unwrap().len(), 1);
    let attached = client.data_center_storage_domains(&dc_id).await.unwrap();
    assert_eq!(attached.len(), 2);
    assert!(
        attached
            .iter()
            .all(|sd| sd.status == Some(capov_ovirt::model::StorageDomainStatus::Active))
    );
    let sd_id = attached[0].id.clone().unwrap();
    assert_eq!(
        client.data_center_storage_domain(&dc_id, &sd_id).await.unwrap().id,
        Some(sd_id.clone())
    );

    // /storagedomains omits the status of attached domains, as the engine does.
    let global = client.storage_domain(&sd_id).await.unwrap();
    assert_eq!(global.status, None);
    assert_eq!(global.external_status.as_deref(), Some("ok"));
    assert!(global.available.unwrap() > 0);
    assert_eq!(client.storage_domains().await.unwrap().len(), 2);

    let networks = client.networks().await.unwrap();
    assert_eq!(networks[0].name.as_deref(), Some("ovirtmgmt"));
    let network_id = networks[0].id.clone().unwrap();
    assert_eq!(
        client.network(&network_id).await.unwrap().id.as_deref(),
        Some(network_id.as_str())
    );
    let profiles = client.network_vnic_profiles(&network_id).await.unwrap();
    assert_eq!(profiles[0].name.as_deref(), Some("ovirtmgmt"));
    assert_eq!(
        client.vnic_profiles().await.unwrap()[0].network.as_ref().unwrap().id,
        Some(network_id)
    );

    let templates = client.find_templates_by_name("rhcos-4.14", None).await.unwrap();
    assert_eq!(templates.len(), 1);
    assert!(
        client
            .find_templates_by_name("rhcos-4.1", None)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        client
            .find_templates_by_name("rhcos-4.14", Some("Other"))
            .await
            .unwrap()
            .is_empty()
    );
    let template_id = templates[0].id.clone().unwrap();
    assert_eq!(
        client.template(&template_id).await.unwrap().status,
        Some(capov_ovirt::model::TemplateStatus::Ok)
    );
    let disk_id = client.template_disk_attachments(&template_id).await.unwrap()[0]
        .id
        .clone()
        .unwrap();
    let disk = client.disk(&disk_id).await.unwrap();
    assert_eq!(disk.alias.as_deref(), Some("rhcos-4.14_Disk1"));
    assert_eq!(disk.provisioned_size, Some(20 << 30));
}

#[tokio::test]
async fn token_is_reused_and_expired_token_causes_one_relogin() {
    let (sim, client) = setup().await;
    client.api().await.unwrap();
    client.api().await.unwrap();
    assert_eq!(sim.control().counter("POST /ovirt-engine/sso/oauth/token"), 1);

    sim.control().expire_tokens();
    client.clusters().await.unwrap();
    assert_eq!(sim.control().counter("POST /ovirt-engine/sso/oauth/token"), 2);
    assert_eq!(sim.control().counter("GET /clusters"), 2, "the 401 and the retry");
}

#[tokio::test]
async fn wrong_password_is_authentication_failed_in_both_sso_shapes() {
    let sim = simulator().await;
    let client = Client::new(config(&sim).clone_with_password("wrong")).unwrap();
    // ByScope is the engine's (and the default): `{"error_code", "error"}` for the `ovirt-app-api` scope CAPOV asks for.
    for style in [SsoErrorStyle::ByScope, SsoErrorStyle::Oauth, SsoErrorStyle::Session] {
        sim.control().set_sso_error_style(style);
        let err = client.api().await.unwrap_err();
        assert!(
            matches!(&err, Error::AuthenticationFailed { code, .. } if code == "access_denied"),
            "{style:?}: {err:?}"
        );
        assert_eq!(err.reason(), reason::AUTHENTICATION_FAILED);
    }
}

#[tokio::test]
async fn a_401_right_after_a_fresh_token_is_authentication_failed() {
    // Tokens that are already expired when issued: the engine rejects every fresh token.
    let sim = Simulator::builder()
        .user(USER, PASSWORD)
        .token_ttl(Duration::ZERO)
        .start()
        .await
        .unwrap();
    let client = Client::new(config(&sim)).unwrap();
    let err = client.api().await.unwrap_err();
    assert_eq!(err.reason(), reason::AUTHENTICATION_FAILED, "{err:?}");
    assert_eq!(
        sim.control().counter("POST /ovirt-engine/sso/oauth/token"),
        1,
        "no retry loop"
    );
}

#[tokio::test]
async fn credential_change_revokes_old_token_and_logs_in_anew() {
    let (sim, client) = setup().await;
    client.api().await.unwrap();
    assert_eq!(sim.control().token_count(), 1);
    sim.control().set_user("robot@internal", "other");
    client
        .set_credentials(Credentials::new("robot@internal", "other"))
        .await;
    assert_eq!(sim.control().token_count(), 0, "old token revoked");
    client.api().await.unwrap();
    assert_eq!(sim.control().token_count(), 1);
}

#[tokio::test]
async fn dropping_the_last_clone_logs_out() {
    let (sim, client) = setup().await;
    let clone = client.clone();
    clone.api().await.unwrap();
    drop(client);
    assert_eq!(sim.control().token_count(), 1, "a clone still holds the session");
    drop(clone);
    eventually(WAIT, "token revoked", || async {
        (sim.control().token_count() == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn explicit_logout_revokes() {
    let (sim, client) = setup().await;
    client.login().await.unwrap();
    client.logout().await;
    assert_eq!(sim.control().token_count(), 0);
    assert_eq!(sim.control().counter("POST /ovirt-engine/services/sso-logout"), 1);
}

#[tokio::test]
async fn outage_and_injected_errors_are_engine_unreachable() {
    let (sim, client) = setup().await;
    sim.control().set_outage(true);
    let err = client.api().await.unwrap_err();
    assert!(matches!(err, Error::Server { status: 503, .. }), "{err:?}");
    assert_eq!(err.reason(), reason::ENGINE_UNREACHABLE);
    assert!(err.is_transient());
    sim.control().set_outage(false);
    client.api().await.unwrap();

    sim.control().set_error_rate(1.0, 500);
    let err = client.clusters().await.unwrap_err();
    assert!(matches!(err, Error::Server { status: 500, .. }), "{err:?}");
    sim.control().set_error_rate(0.0, 500);
    client.clusters().await.unwrap();
}

#[tokio::test]
async fn slow_engine_hits_request_timeout() {
    let sim = simulator().await;
    let client = Client::new(config(&sim).with_timeouts(Duration::from_secs(2), Duration::from_millis(200))).unwrap();
    sim.control().set_latency(Duration::from_millis(1500));
    let started = Instant::now();
    let err = client.api().await.unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err:?}");
    assert_eq!(err.reason(), reason::ENGINE_UNREACHABLE);
    assert!(started.elapsed() < Duration::from_millis(1400));
}

#[tokio::test]
async fn closed_port_is_a_transport_error() {
    let sim = simulator().await;
    let mut cfg = config(&sim);
    cfg.url = "https://127.0.0.1:9/ovirt-engine/api".into();
    let err = Client::new(cfg).unwrap().api().await.unwrap_err();
    assert!(matches!(err, Error::Transport(_)), "{err:?}");
    assert_eq!(err.reason(), reason::ENGINE_UNREACHABLE);
}

#[tokio::test]
async fn tls_modes() {
    let sim = simulator().await;
    let other = simulator().await;

    let insecure = config(&sim).with_tls(TlsMode::Insecure);
    Client::new(insecure).unwrap().api().await.unwrap();

    let custom = config(&sim).with_tls(TlsMode::Verify {
        system_roots: true,
        extra_ca_pem: sim.ca_pem().unwrap().as_bytes().to_vec(),
    });
    Client::new(custom).unwrap().api().await.unwrap();

    let wrong_ca = config(&sim).with_tls(TlsMode::Verify {
        system_roots: false,
        extra_ca_pem: other.ca_pem().unwrap().as_bytes().to_vec(),
    });
    let err = Client::new(wrong_ca).unwrap().api().await.unwrap_err();
    assert!(matches!(err, Error::Tls(_)), "{err:?}");
    assert_eq!(err.reason(), reason::TLS_VERIFICATION_FAILED);

    let system_only = config(&sim).with_tls(TlsMode::Verify {
        system_roots: true,
        extra_ca_pem: Vec::new(),
    });
    // The system roots must load (a client that cannot use them is a failure here, not a reason to skip), and
    // they do not hold the simulator's generated CA.
    let client = Client::new(system_only).expect("a client trusting the system roots");
    let err = client.api().await.unwrap_err();
    assert_eq!(err.reason(), reason::TLS_VERIFICATION_FAILED, "{err:?}");

    for garbage in [
        &b"not a pem"[..],
        b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    ] {
        let bad = config(&sim).with_tls(TlsMode::Verify {
            system_roots: false,
            extra_ca_pem: garbage.to_vec(),
        });
        let err = Client::new(bad).unwrap_err();
        assert_eq!(err.reason(), reason::INVALID_CA_BUNDLE, "{err:?}");
    }
}

#[tokio::test]
async fn probe_checks_transport_and_tls_without_logging_in() {
    let sim = simulator().await;
    let other = simulator().await;
    let mut cfg = config(&sim);
    cfg.credentials = Credentials::new(USER, "wrong password");
    let status = Client::new(cfg).unwrap().probe().await.expect("probe");
    assert!((100..600).contains(&status), "{status}");
    assert_eq!(sim.control().token_count(), 0, "the probe must not log in");

    let wrong_ca = config(&sim).with_tls(TlsMode::Verify {
        system_roots: false,
        extra_ca_pem: other.ca_pem().unwrap().as_bytes().to_vec(),
    });
    let err = Client::new(wrong_ca).unwrap().probe().await.unwrap_err();
    assert!(matches!(err, Error::Tls(_)), "{err:?}");
}

/// method, resource, outcome, correlation id
type SeenRequest = (String, String, Outcome, Option<String>);

#[tokio::test]
async fn observer_sees_every_request_with_resource_status_and_correlation_id() {
    let sim = simulator().await;
    let events: Arc<Mutex<Vec<SeenRequest>>> = Arc::default();
    let sink = events.clone();
    let observer = move |e: &RequestEvent<'_>| {
        sink.lock().unwrap().push((
            e.method.into(),
            e.resource.into(),
            e.outcome,
            e.correlation_id.map(str::to_string),
        ));
    };
    let client = Client::with_observer(config(&sim), Arc::new(observer)).unwrap();
    let op = client.with_correlation_id("create-worker_0!");
    op.clusters().await.unwrap();
    let _ = op.vm("4c1d0000-0000-4000-8000-000000000000").await;

    let events = events.lock().unwrap().clone();
    let expected_id = Some("create-worker_0".to_string());
    assert_eq!(
        events[0],
        ("POST".into(), "sso".into(), Outcome::Status(200), expected_id.clone())
    );
    assert_eq!(
        events[1],
        (
            "GET".into(),
            "clusters".into(),
            Outcome::Status(200),
            expected_id.clone()
        )
    );
    assert_eq!(
        events[2],
        ("GET".into(), "vms".into(), Outcome::Status(404), expected_id)
    );
    // The simulator saw the id on the wire.
    assert!(sim.control().correlation_ids().iter().all(|id| id == "create-worker_0"));
    assert_eq!(sim.control().correlation_ids().len(), 3);
}

#[tokio::test]
async fn rate_limiter_spaces_requests_and_reports_the_wait() {
    let sim = simulator().await;
    let waits: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let sink = waits.clone();
    let observer = move |e: &RequestEvent<'_>| sink.lock().unwrap().push(e.rate_limit_wait);
    let client = Client::with_observer(config(&sim).with_rate_limit(20, 2), Arc::new(observer)).unwrap();
    let started = Instant::now();
    for _ in 0..7 {
        client.clusters().await.unwrap();
    }
    // 8 requests (login included), burst 2, then 20/s: at least 6 × 50 ms.
    assert!(
        started.elapsed() >= Duration::from_millis(280),
        "{:?}",
        started.elapsed()
    );
    assert!(waits.lock().unwrap().iter().any(|w| *w >= Duration::from_millis(20)));
}

#[tokio::test]
async fn secrets_never_show_in_debug_or_errors() {
    let sim = simulator().await;
    let cfg = config(&sim);
    let shown = format!("{cfg:?}");
    assert!(!shown.contains(PASSWORD), "{shown}");
    let client = Client::new(cfg.clone()).unwrap();
    client.login().await.unwrap();
    assert!(!format!("{client:?}").contains(PASSWORD));

    let err = Client::new(cfg.clone_with_password("hunter2-wrong"))
        .unwrap()
        .api()
        .await
        .unwrap_err();
    assert!(!format!("{err} {err:?}").contains("hunter2-wrong"));

    // Tokens never appear either: expire them and provoke an auth failure.
    sim.control().set_user(USER, "changed");
    sim.control().expire_tokens();
    let err = client.api().await.unwrap_err();
    let text = format!("{err} {err:?} {client:?}");
    assert!(!text.contains(PASSWORD));
    assert!(!text.to_lowercase().contains("bearer "), "{text}");
}

trait WithPassword {
    fn clone_with_password(&self, password: &str) -> ClientConfig;
}

impl WithPassword for ClientConfig {
    fn clone_with_password(&self, password: &str) -> ClientConfig {
        let mut cfg = self.clone();
        cfg.credentials = Credentials::new(USER, password);
        cfg
    }
}

/// An engine URL with userinfo and a token in its query, pointing at a loopback port nothing listens on: the probe,
/// the SSO login and an API call each fail with a transport error that names the host and port but neither secret.
#[tokio::test]
async fn userinfo_in_the_engine_url_never_shows_in_transport_errors() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let url = format!("http://admin:s3cr3t@127.0.0.1:{port}/ovirt-engine/api?access_token=t0ken");
    let cfg = ClientConfig::new(url, USER, PASSWORD).with_timeouts(Duration::from_secs(2), Duration::from_secs(5));
    let client = Client::new(cfg).expect("a URL with userinfo still builds a client");
    let errors = [
        client.probe().await.expect_err("probe"),
        client.login().await.expect_err("login"),
        client.api().await.expect_err("api"),
    ];
    for err in errors {
        let shown = format!("{err} | {err:?}");
        assert!(matches!(err, Error::Transport(_)), "{shown}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(!shown.contains("t0ken"), "{shown}");
        assert!(shown.contains(&format!("127.0.0.1:{port}")), "{shown}");
    }
}

/// An engine host that is down refuses connections (unlike a proxy answering 503), kept-alive connections
/// included; the client reports it as unreachable and works again, with the same client, once the engine is back.
#[tokio::test]
async fn refused_connections_are_unreachable_and_the_client_recovers() {
    let (sim, client) = setup().await;
    client.api().await.expect("the engine answers");

    sim.control().set_refusing_connections(true);
    let err = eventually(WAIT, "a refused request", || async { client.api().await.err() }).await;
    assert!(matches!(err, Error::Transport(_)), "{err:?}");
    assert_eq!(err.reason(), reason::ENGINE_UNREACHABLE);
    let direct = std::net::TcpStream::connect_timeout(&sim.addr(), Duration::from_secs(2));
    assert_eq!(
        direct.map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::ConnectionRefused),
        "the port is closed"
    );

    sim.control().set_refusing_connections(false);
    eventually(WAIT, "the engine answers again", || async { client.api().await.ok() }).await;
}
