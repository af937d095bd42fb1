//! A tenant-written `<cluster>-kubeconfig` that would make CAPOV read its own files, run programs or use a proxy
//! is refused before any connection, on a real kube-apiserver with the engine simulator. The kubeconfigs point at a
//! listener on 127.0.0.1 standing in for the attacker's server, which counts every TCP connection it accepts.

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use capov_crds::{ConditionStatus, Severity};
use capov_harness::objects;
use capov_testkit::eventually;
use serde_json::{Value, json};
use support::{World, condition};

const TIMEOUT: Duration = Duration::from_secs(90);
const TENANT_TOKEN: &str = "tenant-s3cr3t-token";

/// A TCP listener that accepts, counts and drops every connection: any request CAPOV sent would be counted here,
/// whatever it carried (TLS hello, proxy CONNECT).
struct Listener {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

impl Listener {
    async fn start() -> Listener {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        Listener { port, accepted }
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// One tenant kubeconfig: a cluster at `server` with an inline CA plus `cluster_extra`, a user made of `user`.
fn kubeconfig(server: &str, ca: &str, cluster_extra: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: attacker\n  cluster:\n    server: {server}\n    \
         certificate-authority-data: {ca}\n{cluster_extra}users:\n- name: tenant\n  user:\n{user}contexts:\n- name: \
         tenant\n  context:\n    cluster: attacker\n    user: tenant\ncurrent-context: tenant\n"
    )
}

/// A hostile form: machine name, kubeconfig, and the entry and field the rejection must name.
struct Form {
    name: &'static str,
    kubeconfig: String,
    entry: &'static str,
    field: &'static str,
}

/// Files the exec and auth-provider forms would create if CAPOV ran their commands.
fn marker(namespace: &str, form: &str) -> PathBuf {
    std::env::temp_dir().join(format!("capov-{namespace}-{form}-ran"))
}

fn hostile_forms(server: &str, ca: &str, namespace: &str) -> Vec<Form> {
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let token = format!("    token: {TENANT_TOKEN}\n");
    let users = r#"users[0] "tenant""#;
    let clusters = r#"clusters[0] "attacker""#;
    let exec_marker = marker(namespace, "exec");
    let provider_marker = marker(namespace, "auth-provider");
    vec![
        Form {
            name: "token-file",
            kubeconfig: kubeconfig(
                server,
                ca,
                "",
                "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n",
            ),
            entry: users,
            field: "tokenFile",
        },
        Form {
            name: "exec",
            kubeconfig: kubeconfig(
                server,
                ca,
                "",
                &format!(
                    "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      \
                     args: [\"-c\", \"touch {}\"]\n",
                    exec_marker.display()
                ),
            ),
            entry: users,
            field: "exec",
        },
        Form {
            name: "auth-provider",
            kubeconfig: kubeconfig(
                server,
                ca,
                "",
                &format!(
                    "    auth-provider:\n      name: gcp\n      config:\n        cmd-path: /bin/sh\n        cmd-args: \
                     \"-c 'touch {}'\"\n",
                    provider_marker.display()
                ),
            ),
            entry: users,
            field: "auth-provider",
        },
        Form {
            name: "ca-file",
            kubeconfig: kubeconfig(
                server,
                ca,
                "    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt\n",
                &token,
            ),
            entry: clusters,
            field: "certificate-authority",
        },
        Form {
            name: "client-certificate-file",
            kubeconfig: kubeconfig(
                server,
                ca,
                "",
                &format!(
                    "    client-certificate: /etc/kubernetes/pki/apiserver-kubelet-client.crt\n    client-key-data: {}\n",
                    b64("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n")
                ),
            ),
            entry: users,
            field: "client-certificate",
        },
        Form {
            name: "client-key-file",
            kubeconfig: kubeconfig(
                server,
                ca,
                "",
                &format!(
                    "    client-certificate-data: {}\n    client-key: /etc/kubernetes/pki/apiserver-kubelet-client.key\n",
                    b64("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
                ),
            ),
            entry: users,
            field: "client-key",
        },
        Form {
            name: "proxy-url",
            kubeconfig: kubeconfig(
                server,
                ca,
                &format!("    proxy-url: {}\n", server.replace("https", "http")),
                &token,
            ),
            entry: clusters,
            field: "proxy-url",
        },
    ]
}

impl World {
    /// A provisioned Cluster `cluster` of its own, its kubeconfig Secret holding `kubeconfig`, and machine `name`.
    async fn machine_in_own_cluster(&self, cluster: &str, kubeconfig: &str, name: &str) {
        let labels = json!({"cluster.x-k8s.io/watch-filter": self.namespace, "cluster.x-k8s.io/cluster-name": cluster});
        objects::create_provisioned_cluster(&self.client, &self.namespace, cluster, labels.clone())
            .await
            .expect("cluster");
        self.create_secret(&format!("{cluster}-kubeconfig"), &[("value", kubeconfig)])
            .await;
        objects::create_machine(
            &self.client,
            &self.namespace,
            cluster,
            name,
            labels,
            spec(&self.provider),
        )
        .await
        .expect("machine");
    }

    /// Waits for `name`'s K8sProviderIDSetup to be WorkloadKubeconfigRejected and checks what it says.
    async fn assert_rejected(&self, name: &str, entry: &str, field: &str) {
        let machine = self
            .wait_reason(TIMEOUT, name, "K8sProviderIDSetup", "WorkloadKubeconfigRejected")
            .await;
        let c = condition(&machine, "K8sProviderIDSetup").expect("condition");
        assert_eq!(
            (c.status, c.severity),
            (ConditionStatus::False, Some(Severity::Error)),
            "{name}"
        );
        assert!(
            c.message.contains(&format!("{entry}: field {field:?}")),
            "{name}: the message names the entry and field: {}",
            c.message
        );
        assert!(c.message.contains("nothing was sent"), "{name}: {}", c.message);
        let status = format!("{:?}", machine.status);
        assert!(
            !status.contains(TENANT_TOKEN),
            "{name}: the token leaked into the status"
        );
    }
}

fn spec(provider: &str) -> Value {
    json!({"ovirtcluster": "Default", "template": "ubuntu-22.04", "provider": provider})
}

fn ca(world: &World) -> String {
    base64::engine::general_purpose::STANDARD.encode(world.workload.ca_pem())
}

#[tokio::test]
async fn hostile_kubeconfigs_are_rejected_before_any_connection() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("hostile").await;
    let attacker = Listener::start().await;
    // The same pipeline with an acceptable kubeconfig does connect: its listener must count CAPOV's attempts.
    let control = Listener::start().await;
    let ca = ca(&world);
    let forms = hostile_forms(&attacker.url(), &ca, &world.namespace);
    for form in &forms {
        world
            .machine_in_own_cluster(&format!("c-{}", form.name), &form.kubeconfig, form.name)
            .await;
    }
    let acceptable = kubeconfig(&control.url(), &ca, "", &format!("    token: {TENANT_TOKEN}\n"));
    world.machine_in_own_cluster("c-control", &acceptable, "control").await;
    world.start_operator().await;

    // The positive events first: every machine reached step 7 and reported what CAPOV made of its kubeconfig.
    for form in &forms {
        world.assert_rejected(form.name, form.entry, form.field).await;
    }
    world
        .wait_reason(TIMEOUT, "control", "K8sProviderIDSetup", "WorkloadClusterUnreachable")
        .await;
    let control_connections = control.accepted();
    assert!(
        control_connections > 0,
        "CAPOV connects to an acceptable kubeconfig's server"
    );

    // Only now is "no connection" meaningful: each hostile machine has finished a pass at step 7.
    assert_eq!(attacker.accepted(), 0, "CAPOV connected to the attacker's server");
    for form in ["exec", "auth-provider"] {
        let path = marker(&world.namespace, form);
        assert!(
            !path.exists(),
            "{form}: CAPOV ran the kubeconfig's command ({})",
            path.display()
        );
    }
    // The listener itself works: a connection of our own is counted.
    let _probe = tokio::net::TcpStream::connect(("127.0.0.1", attacker.port))
        .await
        .expect("connect to the attacker listener");
    eventually(Duration::from_secs(10), "the probe to be counted", || async {
        (attacker.accepted() == 1).then_some(())
    })
    .await;
    world.stop_operator().await;
    let names: Vec<&str> = forms.iter().map(|f| f.field).collect();
    println!(
        "hostile_kubeconfigs_are_rejected_before_any_connection: {} hostile kubeconfigs ({}) each gave \
         K8sProviderIDSetup False/WorkloadKubeconfigRejected naming its field; the attacker listener accepted 0 \
         connections from CAPOV and 1 from this test's probe, no command ran; the control kubeconfig's listener \
         accepted {control_connections}",
        forms.len(),
        names.join(", ")
    );
}

#[tokio::test]
async fn a_cached_client_is_not_used_once_its_kubeconfig_turns_hostile() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("hostile-cache").await;
    let attacker = Listener::start().await;
    world.start_operator().await;
    world.create_machine("worker", spec(&world.provider)).await;
    // The valid kubeconfig World put in place: CAPOV built (and cached) a client and asked for the Node.
    world
        .wait_reason(TIMEOUT, "worker", "K8sProviderIDSetup", "WaitingForNode")
        .await;

    // The tenant swaps in a kubeconfig that would send CAPOV's ServiceAccount token to their server. Were the
    // cached client reused, the machine would go on WaitingForNode against the real workload cluster.
    let hostile = kubeconfig(
        &attacker.url(),
        &ca(&world),
        "",
        "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n",
    );
    world
        .create_secret(&format!("{}-kubeconfig", world.cluster), &[("value", &hostile)])
        .await;
    world
        .assert_rejected("worker", r#"users[0] "tenant""#, "tokenFile")
        .await;
    assert_eq!(attacker.accepted(), 0, "CAPOV connected to the attacker's server");
    let _probe = tokio::net::TcpStream::connect(("127.0.0.1", attacker.port))
        .await
        .expect("connect to the attacker listener");
    eventually(Duration::from_secs(10), "the probe to be counted", || async {
        (attacker.accepted() == 1).then_some(())
    })
    .await;
    world.stop_operator().await;
    println!(
        "a_cached_client_is_not_used_once_its_kubeconfig_turns_hostile: a machine WaitingForNode with a cached \
         client turned WorkloadKubeconfigRejected (tokenFile) once its Secret was replaced; the attacker listener \
         accepted 0 connections from CAPOV and 1 from this test's probe"
    );
}

/// Issue 23, item 6: without `--allow-internal-workload-servers`, a kubeconfig whose server is (or resolves to) a
/// loopback or link-local address, or an address of the management cluster's service network, is refused before
/// any connection, with a message that names the address and what to do.
#[tokio::test]
async fn kubeconfigs_pointing_inside_the_management_cluster_are_refused_before_any_connection() {
    use k8s_openapi::api::networking::v1::ServiceCIDR;
    use kube::api::Api;

    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("internal").await;
    let listener = Listener::start().await;
    let port = listener.port;
    let cidrs = Api::<ServiceCIDR>::all(world.client.clone())
        .list(&Default::default())
        .await
        .expect("ServiceCIDRs");
    let network: ipnet::IpNet = cidrs
        .items
        .iter()
        .flat_map(|cidr| cidr.spec.iter().flat_map(|spec| spec.cidrs.iter().flatten()))
        .find_map(|cidr| cidr.parse().ok())
        .expect("the management cluster's service network");
    let in_services = network.hosts().nth(9).expect("an address of the service network");
    let ca = ca(&world);
    let token = format!("    token: {TENANT_TOKEN}\n");
    let cases = [
        ("loopback", format!("https://127.0.0.1:{port}"), "a loopback address"),
        ("localhost", format!("https://localhost:{port}"), "resolves to"),
        (
            "link-local",
            "https://169.254.169.254".to_string(),
            "a link-local address",
        ),
        (
            "service-network",
            format!("https://{in_services}:443"),
            "in the management cluster's service network",
        ),
    ];
    for (name, server, _) in &cases {
        world
            .machine_in_own_cluster(&format!("c-{name}"), &kubeconfig(server, &ca, "", &token), name)
            .await;
    }
    let settings = capov_actors::runtime::RuntimeSettings {
        allow_internal_workload_servers: false,
        ..world.settings()
    };
    world.start_operator_with(settings).await;
    for (name, _, says) in &cases {
        let machine = world
            .wait_reason(TIMEOUT, name, "K8sProviderIDSetup", "WorkloadKubeconfigRejected")
            .await;
        let c = condition(&machine, "K8sProviderIDSetup").expect("condition");
        assert_eq!(c.severity, Some(Severity::Error), "{name}");
        assert!(c.message.contains(says), "{name}: {}", c.message);
        assert!(c.message.contains("nothing was sent"), "{name}: {}", c.message);
        assert!(
            c.message.contains("--allow-internal-workload-servers"),
            "{name}: {}",
            c.message
        );
    }
    // Every machine finished a pass at step 7: only now is "no connection" meaningful.
    assert_eq!(listener.accepted(), 0, "CAPOV connected to a loopback server");
    let _probe = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the listener");
    eventually(Duration::from_secs(10), "the probe to be counted", || async {
        (listener.accepted() == 1).then_some(())
    })
    .await;
    world.stop_operator().await;
    println!(
        "internal targets: kubeconfigs naming 127.0.0.1, localhost, 169.254.169.254 and {in_services} (service \
         network {network}) each gave WorkloadKubeconfigRejected naming the address; 0 connections"
    );
}
