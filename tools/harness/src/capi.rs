//! Cluster API's own CRDs (Cluster, Machine, MachineDeployment, …) from the `sigs.k8s.io/cluster-api` module that
//! `tools/capi` pins, so tests create real CAPI objects on the test apiserver; and the CAPI core manager itself,
//! run the way CAPI's own envtest runs it: its admission and conversion webhooks registered with the apiserver.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{HarnessError, assets, certs, crds, free_port};

/// What `tools/build-go-tools.sh --capi` provides.
const CAPI_TOOLS: [&str; 4] = [
    "capi-manager",
    "clusterctl",
    "capi-config/webhook.yaml",
    "capi-config/crd",
];

/// The directory holding `capi-manager`, `clusterctl` and `capi-config/` (CRD bases and webhook manifests of the
/// same CAPI version): `CAPOV_CAPI_DIR` when it holds them, else the cache `tools/build-go-tools.sh --capi` fills
/// (building on first use).
pub fn capi_tools_dir() -> Result<PathBuf, HarnessError> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("CAPOV_CAPI_DIR").map(PathBuf::from)
            && assets::has_all(&dir, &CAPI_TOOLS)
        {
            return Ok(dir);
        }
        assets::built_by_script(Some("--capi"), &CAPI_TOOLS)
    })
    .clone()
    .map_err(HarnessError::Assets)
}

/// The `clusterctl` binary of the CAPI version `tools/capi` pins.
pub fn clusterctl() -> Result<PathBuf, HarnessError> {
    Ok(capi_tools_dir()?.join("clusterctl"))
}

/// The Cluster API module `tools/capi` pins, as the Go module cache holds it.
#[derive(Clone, Debug)]
pub struct CapiModule {
    /// Its source tree (read-only in the module cache).
    pub dir: PathBuf,
    /// Its version, e.g. `v1.14.2`.
    pub version: String,
}

/// The Cluster API module of `tools/capi` (downloaded on first use).
pub fn capi_module() -> Result<CapiModule, HarnessError> {
    static MODULE: OnceLock<Result<CapiModule, String>> = OnceLock::new();
    MODULE
        .get_or_init(|| {
            let module_dir = assets::repo_root().join("tools/capi");
            let output = Command::new("go")
                .args(["mod", "download", "-json", "sigs.k8s.io/cluster-api"])
                .current_dir(&module_dir)
                .env("GOWORK", "off")
                .env("GOTOOLCHAIN", "local")
                .env("GOFLAGS", "-modcacherw")
                .env(
                    "GOPROXY",
                    std::env::var("GOPROXY_OVERRIDE").unwrap_or_else(|_| "https://proxy.golang.org,off".into()),
                )
                .output()
                .map_err(|err| format!("cannot run go in {}: {err}", module_dir.display()))?;
            if !output.status.success() {
                return Err(format!(
                    "go mod download failed: {}",
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
            let info: serde_json::Value = serde_json::from_slice(&output.stdout).map_err(|err| err.to_string())?;
            let dir = info["Dir"].as_str().ok_or("go mod download printed no Dir")?;
            let version = info["Version"].as_str().ok_or("go mod download printed no Version")?;
            Ok(CapiModule {
                dir: PathBuf::from(dir),
                version: version.to_string(),
            })
        })
        .clone()
        .map_err(HarnessError::Assets)
}

/// The directory of CAPI core's CRD manifests in the Go module cache (downloaded on first use).
pub fn capi_crd_dir() -> Result<PathBuf, HarnessError> {
    Ok(capi_module()?.dir.join("core/config/crd/bases"))
}

/// `clusterctl`, offline and on its own: the environment cleared (a KUBECONFIG or OVIRT_* of the caller's shell
/// cannot change the result), `home` as its HOME, no version check (it would only warn, after a minute of retries),
/// and proxies at a closed port, so that anything that tries GitHub or the Go proxy fails at once instead of quietly
/// depending on the network. Loopback is never proxied; give another apiserver address in NO_PROXY.
pub fn offline_clusterctl(home: &Path) -> Result<Command, HarnessError> {
    let mut command = Command::new(clusterctl()?);
    command
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("CLUSTERCTL_DISABLE_VERSIONCHECK", "true")
        .env("HTTPS_PROXY", "http://127.0.0.1:1")
        .env("HTTP_PROXY", "http://127.0.0.1:1");
    Ok(command)
}

/// Installs CAPI core's CRDs and waits until they are Established.
pub async fn install_capi_crds(client: &kube::Client) -> Result<Vec<String>, HarnessError> {
    crds::apply_manifests(client, &capi_crd_dir()?).await
}

/// The CAPI core manager, run the way CAPI's own envtest runs it: what it needs (a serving certificate, two ports),
/// its command line, its readiness, and its webhooks registered with the apiserver. The control plane that runs it
/// spawns it and waits for it.
pub(crate) struct CapiManager {
    tools: PathBuf,
    cert_dir: PathBuf,
    ca_pem: String,
    webhook_port: u16,
    health_port: u16,
}

impl CapiManager {
    /// Writes its webhook serving certificate and CA under `dir` and picks its ports.
    pub(crate) fn prepare(dir: &Path) -> Result<CapiManager, HarnessError> {
        let tools = capi_tools_dir()?;
        let cert_dir = dir.join("capi-webhook");
        let ca_pem = certs::write_serving_pair(&cert_dir, "capi-webhook")?;
        let (webhook_port, health_port) = (free_port(), free_port());
        Ok(CapiManager {
            tools,
            cert_dir,
            ca_pem,
            webhook_port,
            health_port,
        })
    }

    /// The ports it listens on.
    pub(crate) fn ports(&self) -> [u16; 2] {
        [self.webhook_port, self.health_port]
    }

    /// The manager against the apiserver of `kubeconfig` (whose CAPI CRDs are installed).
    pub(crate) fn command(&self, kubeconfig: &Path) -> Command {
        let mut manager = Command::new(self.tools.join("capi-manager"));
        manager
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--leader-elect=false")
            .arg(format!("--webhook-port={}", self.webhook_port))
            .arg(format!("--webhook-cert-dir={}", self.cert_dir.display()))
            .arg(format!("--health-addr=127.0.0.1:{}", self.health_port))
            .arg("--diagnostics-address=0")
            // ClusterClass and managed topologies (alpha in CAPI, off by default), for tests/management/topology.rs; Clusters
            // without spec.topology are unaffected.
            .arg("--feature-gates=ClusterTopology=true")
            // The storage-version migration is for upgrades; on a fresh apiserver it only races the CRD patches below.
            .arg("--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields")
            // Short resyncs: tests wait on CAPI's reactions.
            .arg("--sync-period=30s")
            .arg("--v=2");
        manager
    }

    /// Whether it answers ready.
    pub(crate) async fn ready(&self) -> bool {
        http_ok(self.health_port, "/readyz").await
    }

    /// Points the apiserver at its webhooks: the admission webhooks of `webhook.yaml` and the conversion webhook of
    /// every multi-version CAPI CRD, all at `https://127.0.0.1:<port>` with the CA made for it. Only once it is ready,
    /// since the webhooks fail closed.
    pub(crate) async fn register_webhooks(&self, client: &kube::Client) -> Result<(), HarnessError> {
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        let base = format!("https://127.0.0.1:{}", self.webhook_port);
        register_admission_webhooks(client, &self.tools.join("capi-config/webhook.yaml"), &base, &ca_bundle).await?;
        register_conversion_webhook(client, &self.tools.join("capi-config/crd"), &base, &ca_bundle).await
    }
}

async fn register_admission_webhooks(
    client: &kube::Client,
    manifest: &Path,
    base: &str,
    ca_bundle: &str,
) -> Result<(), HarnessError> {
    let invalid = |message: String| HarnessError::Crd {
        path: manifest.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(manifest).map_err(|err| HarnessError::io(manifest, err))?;
    let documents: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|err| invalid(err.to_string()))?;
    let params = PatchParams::apply("capov-harness").force();
    for mut document in documents {
        let kind = document["kind"].as_str().unwrap_or_default().to_string();
        let plural = match kind.as_str() {
            "MutatingWebhookConfiguration" => "mutatingwebhookconfigurations",
            "ValidatingWebhookConfiguration" => "validatingwebhookconfigurations",
            _ => continue,
        };
        let Some(webhooks) = document["webhooks"].as_array_mut() else {
            continue;
        };
        for webhook in webhooks {
            let path = webhook["clientConfig"]["service"]["path"]
                .as_str()
                .ok_or_else(|| invalid(format!("a webhook of {kind} has no service path")))?
                .to_string();
            webhook["clientConfig"] = json!({"url": format!("{base}{path}"), "caBundle": ca_bundle});
        }
        let name = document["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", &kind);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, plural));
        api.patch(&name, &params, &Patch::Apply(&document))
            .await
            .map_err(|err| invalid(format!("{kind} {name}: {err}")))?;
    }
    Ok(())
}

async fn register_conversion_webhook(
    client: &kube::Client,
    crd_dir: &Path,
    base: &str,
    ca_bundle: &str,
) -> Result<(), HarnessError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let conversion = json!({"spec": {"conversion": {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1", "v1beta1"],
            "clientConfig": {"url": format!("{base}/convert"), "caBundle": ca_bundle}
        }
    }}});
    for name in crds::manifest_crd_names(crd_dir)? {
        let crd = crds
            .get(&name)
            .await
            .map_err(|err| HarnessError::Kube(format!("CRD {name}: {err}")))?;
        if crd.spec.versions.len() < 2 {
            continue;
        }
        crds.patch(&name, &PatchParams::default(), &Patch::Merge(&conversion))
            .await
            .map_err(|err| HarnessError::Kube(format!("CRD {name}: {err}")))?;
    }
    Ok(())
}

/// Whether `GET path` on a plain-HTTP loopback port answers 200.
pub(crate) async fn http_ok(port: u16, path: &str) -> bool {
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut response = String::new();
    let read = tokio::time::timeout(Duration::from_secs(2), stream.read_to_string(&mut response)).await;
    matches!(read, Ok(Ok(_))) && response.starts_with("HTTP/1.") && response.split_whitespace().nth(1) == Some("200")
}
