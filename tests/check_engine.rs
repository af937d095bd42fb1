//! `manager check-engine PROVIDER` as a user runs it, against the real apiserver and the engine simulator: a good
//! provider passes every step; a wrong password fails at auth, a foreign CA at TLS, a closed port at connect, an
//! unknown host at DNS, a missing provider at the first step — each with exit code 1, a hint, and never the
//! password.

use std::process::Command;

use capov_harness::{ProviderSpec, objects, trusting};
use capov_ovirt_sim::{Simulator, SimulatorHandle};
use capov_testkit::TextOutput;
use serde_json::json;

const USER: &str = "capov@internal";
const PASSWORD: &str = "Sup3r-S3cret-Pw";

struct Setup {
    kubeconfig: String,
    namespace: String,
    client: kube::Client,
}

impl Setup {
    async fn new() -> Setup {
        let plane = capov_harness::shared().await;
        let client = plane.client().await.expect("client");
        let namespace = plane
            .create_namespace(&client, "check-engine")
            .await
            .expect("namespace");
        Setup {
            kubeconfig: plane.kubeconfig_path().display().to_string(),
            namespace,
            client,
        }
    }

    /// A provider named `<namespace>-<suffix>` with a Secret of its own, `<suffix>-credentials`, holding `password`.
    async fn provider(&self, suffix: &str, engine: &str, ca_pem: Option<&str>, password: &str) -> String {
        let provider = ProviderSpec {
            name: format!("{}-{suffix}", self.namespace),
            namespace: &self.namespace,
            secret: format!("{suffix}-credentials"),
            engine: engine.to_string(),
            user: USER,
            password,
            tls: ca_pem.map(trusting),
        };
        provider.apply(&self.client).await.expect("provider");
        provider.name
    }

    async fn check(&self, provider: &str) -> TextOutput {
        let mut command = Command::new(env!("CARGO_BIN_EXE_manager"));
        command
            .arg(format!("--kubeconfig={}", self.kubeconfig))
            .arg(format!("--credentials-namespace={}", self.namespace))
            .arg("check-engine")
            .arg(provider)
            .env_remove("CAPOV_CREDENTIALS_NAMESPACE");
        // Off the test's runtime thread: the simulator runs on it and must keep answering meanwhile.
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .expect("join")
            .expect("run manager check-engine");
        TextOutput::from(output)
    }
}

/// Reading the check's report: a line per step, `VERDICT step …`.
trait Report {
    fn verdict(&self, step: &str) -> &str;
    fn line(&self, step: &str) -> &str;
    fn assert_fails_at(&self, step: &str);
    fn assert_no_secret(&self);
}

impl Report for TextOutput {
    /// The verdict word of `step`'s line.
    fn verdict(&self, step: &str) -> &str {
        self.line(step).split_whitespace().next().unwrap_or_default()
    }

    fn line(&self, step: &str) -> &str {
        self.stdout
            .lines()
            .find(|line| line.split_whitespace().nth(1) == Some(step))
            .unwrap_or_else(|| panic!("no {step} line in:\n{}", self.stdout))
    }

    /// Exit 1, every step before `step` OK, `step` FAIL with a hint, the rest skipped; never the password.
    fn assert_fails_at(&self, step: &str) {
        let steps = ["provider", "settings", "dns", "connect", "tls", "auth", "api"];
        assert_eq!(self.code, Some(1), "{}\n{}", self.stdout, self.stderr);
        let at = steps.iter().position(|s| *s == step).expect("known step");
        for before in &steps[..at] {
            assert_eq!(self.verdict(before), "OK", "{before}:\n{}", self.stdout);
        }
        assert_eq!(self.verdict(step), "FAIL", "{}", self.stdout);
        assert!(self.line(step).contains(" — hint: "), "{}", self.line(step));
        for after in &steps[at + 1..] {
            assert_eq!(self.verdict(after), "SKIP", "{after}:\n{}", self.stdout);
        }
        self.assert_no_secret();
    }

    fn assert_no_secret(&self) {
        assert!(
            !self.stdout.contains(PASSWORD) && !self.stderr.contains(PASSWORD),
            "the password leaked"
        );
    }
}

async fn simulator() -> SimulatorHandle {
    Simulator::builder()
        .user(USER, PASSWORD)
        .start()
        .await
        .expect("simulator")
}

#[tokio::test]
async fn a_good_provider_passes_every_step() {
    let setup = Setup::new().await;
    let sim = simulator().await;
    let provider = setup.provider("good", &sim.api_url(), sim.ca_pem(), PASSWORD).await;
    let report = setup.check(&provider).await;
    assert_eq!(report.code, Some(0), "{}\n{}", report.stdout, report.stderr);
    assert_eq!(report.stdout.lines().count(), 7, "{}", report.stdout);
    for step in ["provider", "settings", "dns", "connect", "tls", "auth", "api"] {
        assert_eq!(report.verdict(step), "OK", "{step}:\n{}", report.stdout);
    }
    assert!(
        report
            .line("settings")
            .contains(&format!("user {USER} from Secret {}/good-credentials", setup.namespace))
    );
    assert!(
        report.line("tls").contains("certificate trusted"),
        "{}",
        report.line("tls")
    );
    assert!(report.line("api").contains("4.4."), "{}", report.line("api"));
    report.assert_no_secret();
    // The token was revoked at the end: the engine holds no session of the check.
    assert_eq!(sim.control().token_count(), 0);

    // Without verification the check passes too, but says so.
    let name = format!("{}-insecure", setup.namespace);
    let spec = json!({"engine": sim.api_url(), "credentialsSecretName": "good-credentials", "tls": {"insecure": true}});
    objects::apply_provider(&setup.client, &name, json!({}), spec)
        .await
        .expect("provider");
    let report = setup.check(&name).await;
    assert_eq!(report.code, Some(0), "{}", report.stdout);
    assert!(
        report.line("tls").contains("certificate NOT verified"),
        "{}",
        report.line("tls")
    );
}

#[tokio::test]
async fn a_wrong_password_fails_at_auth() {
    let setup = Setup::new().await;
    let sim = simulator().await;
    let provider = setup
        .provider("badpass", &sim.api_url(), sim.ca_pem(), "not-the-password")
        .await;
    let report = setup.check(&provider).await;
    report.assert_fails_at("auth");
    assert!(
        report
            .line("auth")
            .contains(&format!("fix Secret {}/badpass-credentials", setup.namespace))
    );
    assert!(!report.stdout.contains("not-the-password"));
}

#[tokio::test]
async fn an_untrusted_certificate_fails_at_tls() {
    let setup = Setup::new().await;
    let sim = simulator().await;
    let other = simulator().await;
    let provider = setup
        .provider("foreign-ca", &sim.api_url(), other.ca_pem(), PASSWORD)
        .await;
    let report = setup.check(&provider).await;
    report.assert_fails_at("tls");
    let line = report.line("tls");
    assert!(line.contains("certificate is not trusted"), "{line}");
    assert!(line.contains("pki-resource?resource=ca-certificate"), "{line}");
    assert_eq!(sim.control().token_count(), 0, "no login was tried");
}

#[tokio::test]
async fn a_closed_port_fails_at_connect_and_an_unknown_host_at_dns() {
    let setup = Setup::new().await;
    let sim = simulator().await;
    let closed = format!("https://127.0.0.1:{}/ovirt-engine/api", capov_harness::free_port());
    let provider = setup.provider("closed-port", &closed, sim.ca_pem(), PASSWORD).await;
    let report = setup.check(&provider).await;
    report.assert_fails_at("connect");
    assert!(
        report.line("connect").contains("cannot connect to 127.0.0.1:"),
        "{}",
        report.line("connect")
    );

    let unknown = "https://no-such-engine.invalid/ovirt-engine/api";
    let provider = setup.provider("unknown-host", unknown, sim.ca_pem(), PASSWORD).await;
    let report = setup.check(&provider).await;
    report.assert_fails_at("dns");
    assert!(
        report.line("dns").contains("no-such-engine.invalid"),
        "{}",
        report.line("dns")
    );
}

#[tokio::test]
async fn a_missing_provider_or_secret_is_named() {
    let setup = Setup::new().await;
    let report = setup.check(&format!("{}-absent", setup.namespace)).await;
    report.assert_fails_at("provider");
    assert!(
        report.line("provider").contains("not found"),
        "{}",
        report.line("provider")
    );

    let sim = simulator().await;
    let name = format!("{}-nosecret", setup.namespace);
    let spec = json!({"engine": sim.api_url(), "credentialsSecretName": "missing-credentials"});
    objects::apply_provider(&setup.client, &name, json!({}), spec)
        .await
        .expect("provider");
    let report = setup.check(&name).await;
    report.assert_fails_at("settings");
    assert!(
        report.line("settings").contains("CredentialsNotFound"),
        "{}",
        report.line("settings")
    );
}
