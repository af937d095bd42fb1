//! Starting, using and stopping one etcd + kube-apiserver (+ kube-controller-manager).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::capi::{self, CapiManager};
use crate::certs::{self, write_file};
use crate::{HarnessError, assets, crds, free_port, launcher};

const START_ATTEMPTS: usize = 3;
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// The first address of `--service-cluster-ip-range`: the `kubernetes` Service's.
const SERVICE_IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
/// Controllers a node's pods need besides the ones every control plane runs: Deployments, Services' endpoints,
/// the `kube-root-ca.crt` ConfigMap that service-account volumes project, and the node taints.
const NODE_CONTROLLERS: &str = ",deployment-controller,replicaset-controller,endpointslice-controller,\
                                root-ca-certificate-publisher-controller,node-lifecycle-controller,\
                                pod-garbage-collector-controller";

/// What to start besides etcd and kube-apiserver.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Run kube-controller-manager with the namespace, garbage-collector and service-account controllers, so that
    /// namespaces finish deleting, ownerReferences cascade and service accounts get their tokens.
    pub controller_manager: bool,
    /// Install CAPOV's CRDs from `chart/capov-crds` once the apiserver is ready.
    pub crds: bool,
    /// Install Cluster API core's CRDs (Cluster, Machine, …) from the module `tools/capi` pins.
    pub capi_crds: bool,
    /// Run the Cluster API core manager with its webhooks registered (implies `capi_crds`).
    pub capi_manager: bool,
}

struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

/// A running control plane. Dropping it kills every process and removes its files.
pub struct ControlPlane {
    processes: Vec<Process>,
    ports: Vec<u16>,
    api_port: u16,
    url: String,
    ca_pem: String,
    kubeconfig: PathBuf,
    /// How kube-apiserver was started, to start it again the same way.
    apiserver: Option<(PathBuf, Vec<String>)>,
    dir: TempDir,
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver (and what `options` asks for) on free loopback ports, retrying with new
    /// ports when a port was taken in the meantime.
    pub async fn start(options: Options) -> Result<ControlPlane, HarnessError> {
        let binaries = assets::binaries_dir()?;
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            match Self::start_once(&binaries, options, None).await {
                Ok(plane) => return Ok(plane),
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| HarnessError::Assets("no start attempt was made".into())))
    }

    /// Starts a control plane that a real node can join (see [`crate::Node`]): kube-apiserver listens on `address`
    /// (routable from the node's pods), advertises it as the `kubernetes` Service's endpoint and names it and the
    /// Service IP `10.0.0.1` in its certificate; the `ServiceAccount` admission plugin mounts tokens into pods;
    /// kube-controller-manager also runs the controllers behind Deployments, Services and node taints, and
    /// kube-scheduler places pods. `options.controller_manager` is implied.
    pub async fn start_for_node(options: Options, address: IpAddr) -> Result<ControlPlane, HarnessError> {
        let binaries = assets::binaries_dir()?;
        let options = Options {
            controller_manager: true,
            ..options
        };
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            match Self::start_once(&binaries, options, Some(address)).await {
                Ok(plane) => return Ok(plane),
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| HarnessError::Assets("no start attempt was made".into())))
    }

    async fn start_once(
        binaries: &Path,
        options: Options,
        node_address: Option<IpAddr>,
    ) -> Result<ControlPlane, HarnessError> {
        let dir = tempfile::Builder::new()
            .prefix("capov-controlplane-")
            .tempdir()
            .map_err(|err| HarnessError::io(std::env::temp_dir(), err))?;
        let extra_ips: Vec<IpAddr> = match node_address {
            Some(address) => vec![address, SERVICE_IP],
            None => Vec::new(),
        };
        let pki = certs::write(dir.path(), &extra_ips)?;
        let (etcd_port, peer_port, api_port) = (free_port(), free_port(), free_port());
        let bind = node_address.map_or_else(|| "127.0.0.1".to_string(), |address| address.to_string());
        let url = format!("https://{}:{api_port}", url_host(&bind));
        let token = format!("capov-admin-{}", std::process::id());
        let tokens = dir.path().join("tokens.csv");
        write_file(&tokens, &format!("{token},admin,admin-uid,\"system:masters\"\n"))?;
        let kubeconfig = dir.path().join("admin.kubeconfig");
        write_file(&kubeconfig, &kubeconfig_yaml(&url, &pki.ca_pem, &token))?;

        let mut plane = ControlPlane {
            processes: Vec::new(),
            ports: vec![etcd_port, peer_port, api_port],
            api_port,
            url,
            ca_pem: pki.ca_pem.clone(),
            kubeconfig,
            apiserver: None,
            dir,
        };

        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let mut etcd = Command::new(binaries.join("etcd"));
        etcd.arg("--name=capov-test")
            .arg(format!("--data-dir={}", plane.dir.path().join("etcd").display()))
            .arg(format!("--listen-client-urls={etcd_url}"))
            .arg(format!("--advertise-client-urls={etcd_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=capov-test={peer_url}"))
            .arg("--unsafe-no-fsync")
            .arg("--log-level=warn");
        plane.spawn("etcd", etcd)?;
        plane.wait_ready("etcd", || etcd_healthy(etcd_port)).await?;

        let mut apiserver_args = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--bind-address={bind}"),
            format!("--advertise-address={bind}"),
            format!("--secure-port={api_port}"),
            format!("--cert-dir={}", plane.dir.path().display()),
            format!("--tls-cert-file={}", pki.serving_cert.display()),
            format!("--tls-private-key-file={}", pki.serving_key.display()),
            format!("--client-ca-file={}", pki.ca_cert.display()),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!(
                "--service-account-key-file={}",
                pki.service_account_public_key.display()
            ),
            format!(
                "--service-account-signing-key-file={}",
                pki.service_account_key.display()
            ),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--authorization-mode=RBAC".into(),
            "--allow-privileged=true".into(),
            "--enable-priority-and-fairness=false".into(),
            format!("--token-auth-file={}", tokens.display()),
            "--v=1".into(),
        ];
        if node_address.is_some() {
            // Pods reach the apiserver through the `kubernetes` Service, whose endpoint the apiserver keeps, with a
            // service-account token the admission plugin mounts; `kubectl logs` goes to the kubelet with the
            // apiserver's client certificate.
            apiserver_args.extend([
                "--endpoint-reconciler-type=lease".into(),
                format!("--kubelet-client-certificate={}", pki.kubelet_client_cert.display()),
                format!("--kubelet-client-key={}", pki.kubelet_client_key.display()),
                "--kubelet-preferred-address-types=InternalIP,Hostname".into(),
            ]);
        } else {
            apiserver_args.extend([
                "--disable-admission-plugins=ServiceAccount".into(),
                "--endpoint-reconciler-type=none".into(),
            ]);
        }
        plane.apiserver = Some((binaries.join("kube-apiserver"), apiserver_args));
        plane.spawn_apiserver()?;
        let client = plane.client().await?;
        plane.wait_ready("kube-apiserver", || apiserver_ready(&client)).await?;

        if options.controller_manager {
            let mut kcm = Command::new(binaries.join("kube-controller-manager"));
            kcm.arg(format!("--kubeconfig={}", plane.kubeconfig.display()))
                .arg("--leader-elect=false")
                .arg(format!(
                    "--controllers=namespace-controller,garbage-collector-controller,serviceaccount-controller,\
                     serviceaccount-token-controller{}",
                    if node_address.is_some() { NODE_CONTROLLERS } else { "" }
                ))
                .arg(format!(
                    "--service-account-private-key-file={}",
                    pki.service_account_key.display()
                ))
                .arg(format!("--root-ca-file={}", pki.ca_cert.display()))
                .arg("--use-service-account-credentials=false")
                .arg("--bind-address=127.0.0.1")
                .arg("--secure-port=0")
                .arg("--v=1");
            plane.spawn("kube-controller-manager", kcm)?;
            // The service-account controller creates `default` in every namespace: seeing it proves the
            // controller manager runs and reaches the apiserver.
            let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
            plane
                .wait_ready("kube-controller-manager", || async {
                    matches!(accounts.get_opt("default").await, Ok(Some(_)))
                })
                .await?;
        }
        if node_address.is_some() {
            let scheduler_binary = assets::node_binaries_dir()?.join("kube-scheduler");
            let mut scheduler = Command::new(scheduler_binary);
            scheduler
                .arg(format!("--kubeconfig={}", plane.kubeconfig.display()))
                .arg(format!("--authentication-kubeconfig={}", plane.kubeconfig.display()))
                .arg(format!("--authorization-kubeconfig={}", plane.kubeconfig.display()))
                .arg("--leader-elect=false")
                .arg("--bind-address=127.0.0.1")
                .arg("--secure-port=0")
                .arg("--v=1");
            plane.spawn("kube-scheduler", scheduler)?;
        }
        if options.crds {
            crds::install_crds(&client).await?;
        }
        if options.capi_crds || options.capi_manager {
            capi::install_capi_crds(&client).await?;
        }
        if options.capi_manager {
            plane.start_capi_manager(&client).await?;
        }
        Ok(plane)
    }

    fn spawn_apiserver(&mut self) -> Result<(), HarnessError> {
        let (binary, args) = self
            .apiserver
            .clone()
            .ok_or_else(|| HarnessError::Assets("kube-apiserver was never started".into()))?;
        let mut apiserver = Command::new(binary);
        apiserver.args(args);
        self.spawn("kube-apiserver", apiserver)
    }

    /// Restarts kube-apiserver as a crash would: SIGKILL, `down` without any, then the same command on the same
    /// port, certificates and etcd (whose data stays). Returns once it is ready again. Clients keep working with it:
    /// the URL, CA and token do not change.
    pub async fn restart_apiserver(&mut self, down: Duration) -> Result<(), HarnessError> {
        let index = self
            .processes
            .iter()
            .position(|p| p.name == "kube-apiserver")
            .ok_or_else(|| HarnessError::Assets("no kube-apiserver runs".into()))?;
        let mut old = self.processes.remove(index);
        let _ = old.child.kill();
        let _ = old.child.wait();
        tokio::time::sleep(down).await;
        self.spawn_apiserver()?;
        let client = self.client().await?;
        self.wait_ready("kube-apiserver", || apiserver_ready(&client)).await
    }

    /// Starts the CAPI core manager against this plane (whose CAPI CRDs are installed), waits until it is ready, then
    /// points the apiserver at its webhooks.
    async fn start_capi_manager(&mut self, client: &kube::Client) -> Result<(), HarnessError> {
        let manager = CapiManager::prepare(self.dir.path())?;
        self.ports.extend_from_slice(&manager.ports());
        self.spawn("capi-manager", manager.command(&self.kubeconfig))?;
        self.wait_ready("capi-manager", || manager.ready()).await?;
        manager.register_webhooks(client).await
    }

    fn spawn(&mut self, name: &'static str, mut command: Command) -> Result<(), HarnessError> {
        let log = self.dir.path().join(format!("{name}.log"));
        // Appended to: a restarted process keeps the log of its earlier life.
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|err| HarnessError::io(&log, err))?;
        let stderr = file.try_clone().map_err(|err| HarnessError::io(&log, err))?;
        command.stdin(Stdio::null()).stdout(file).stderr(stderr);
        let child = launcher::spawn(command).map_err(|err| HarnessError::io(name, err))?;
        self.processes.push(Process { name, child, log });
        Ok(())
    }

    /// Polls `ready` until it holds, failing early when the process named `name` exits.
    async fn wait_ready<F, Fut>(&mut self, name: &'static str, mut ready: F) -> Result<(), HarnessError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if ready().await {
                return Ok(());
            }
            for process in &mut self.processes {
                if let Ok(Some(status)) = process.child.try_wait() {
                    return Err(HarnessError::Exited {
                        process: process.name,
                        status: status.to_string(),
                        log_tail: log_tail(&process.log),
                    });
                }
            }
            if Instant::now() > deadline {
                let log = self.processes.iter().find(|p| p.name == name).map(|p| log_tail(&p.log));
                return Err(HarnessError::NotReady {
                    process: name,
                    seconds: READY_TIMEOUT.as_secs(),
                    log_tail: log.unwrap_or_default(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The apiserver's URL, e.g. `https://127.0.0.1:43121`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The apiserver's port on 127.0.0.1.
    pub fn api_port(&self) -> u16 {
        self.api_port
    }

    /// PEM of the CA that signed the apiserver's certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A kubeconfig file for an admin user (group system:masters) with the CA embedded.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The kubeconfig's contents, e.g. for a `<cluster>-kubeconfig` Secret.
    pub fn kubeconfig_yaml(&self) -> Result<String, HarnessError> {
        std::fs::read_to_string(&self.kubeconfig).map_err(|err| HarnessError::io(&self.kubeconfig, err))
    }

    /// Process ids of everything this control plane started.
    pub fn pids(&self) -> Vec<u32> {
        self.processes.iter().map(|p| p.child.id()).collect()
    }

    /// Loopback ports this control plane listens on.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// A client for the admin user. Make one per test: a client belongs to the tokio runtime that made it.
    pub async fn client(&self) -> Result<kube::Client, HarnessError> {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig).map_err(|err| HarnessError::Kube(err.to_string()))?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|err| HarnessError::Kube(err.to_string()))?;
        kube::Client::try_from(config).map_err(|err| HarnessError::Kube(err.to_string()))
    }

    /// Creates a namespace of its own for one test: `<prefix>-<unique suffix>`.
    pub async fn create_namespace(&self, client: &kube::Client, prefix: &str) -> Result<String, HarnessError> {
        let api: Api<Namespace> = Api::all(client.clone());
        let namespace = Namespace {
            metadata: ObjectMeta {
                generate_name: Some(format!("{prefix}-")),
                ..Default::default()
            },
            ..Default::default()
        };
        let created = api
            .create(&PostParams::default(), &namespace)
            .await
            .map_err(|err| HarnessError::Kube(err.to_string()))?;
        created
            .metadata
            .name
            .ok_or_else(|| HarnessError::Kube("created namespace has no name".into()))
    }

    /// `kubectl` pointed at this control plane.
    pub fn kubectl(&self) -> Result<Command, HarnessError> {
        let mut command = Command::new(assets::binaries_dir()?.join("kubectl"));
        command.arg(format!("--kubeconfig={}", self.kubeconfig.display()));
        Ok(command)
    }

    /// `helm` pointed at this control plane (see [`crate::helm`]).
    pub fn helm(&self) -> Result<Command, HarnessError> {
        let mut command = crate::helm()?;
        command.arg(format!("--kubeconfig={}", self.kubeconfig.display()));
        Ok(command)
    }

    /// Log file of one of the processes (`etcd`, `kube-apiserver`, `kube-controller-manager`).
    pub fn log_path(&self, process: &str) -> Option<&Path> {
        self.processes
            .iter()
            .find(|p| p.name == process)
            .map(|p| p.log.as_path())
    }

    fn kill_all(&mut self) {
        for process in self.processes.iter_mut().rev() {
            let _ = process.child.kill();
            let _ = process.child.wait();
        }
        self.processes.clear();
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// The control plane shared by the tests of one test binary (with the controller manager and CAPOV's CRDs).
/// Tests stay independent by working in a namespace of their own and giving cluster-scoped objects unique names.
pub async fn shared() -> &'static ControlPlane {
    static SHARED: tokio::sync::OnceCell<ControlPlane> = tokio::sync::OnceCell::const_new();
    SHARED
        .get_or_init(|| async {
            let options = Options {
                controller_manager: true,
                crds: true,
                capi_crds: true,
                capi_manager: false,
            };
            let plane = ControlPlane::start(options)
                .await
                .unwrap_or_else(|err| panic!("shared control plane: {err}"));
            cleanup_at_exit(plane.pids(), plane.dir.path().to_path_buf());
            plane
        })
        .await
}

/// A static is never dropped: kill the shared processes and remove their files when the test process exits.
fn cleanup_at_exit(pids: Vec<u32>, dir: PathBuf) {
    static CLEANUP: std::sync::Mutex<Option<(Vec<u32>, PathBuf)>> = std::sync::Mutex::new(None);
    extern "C" fn run() {
        let taken = CLEANUP.lock().ok().and_then(|mut slot| slot.take());
        if let Some((pids, dir)) = taken {
            for pid in pids {
                // SAFETY: plain syscalls on processes this test binary started.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGKILL);
                    libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
                }
            }
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    if let Ok(mut slot) = CLEANUP.lock() {
        *slot = Some((pids, dir));
        // SAFETY: registers a function with C linkage that never unwinds.
        unsafe {
            libc::atexit(run);
        }
    }
}

/// `host` as it goes into a URL (IPv6 in brackets).
fn url_host(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

fn kubeconfig_yaml(url: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: capov-test\n  cluster:\n    server: {url}\n    \
         certificate-authority-data: {ca}\nusers:\n- name: admin\n  user:\n    token: {token}\ncontexts:\n- name: \
         capov-test\n  context:\n    cluster: capov-test\n    user: admin\n    namespace: default\n\
         current-context: capov-test\n"
    )
}

async fn etcd_healthy(port: u16) -> bool {
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    let request = format!("GET /health HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut response = String::new();
    let read = tokio::time::timeout(Duration::from_secs(2), stream.read_to_string(&mut response)).await;
    matches!(read, Ok(Ok(_))) && response.contains("\"health\":\"true\"")
}

async fn apiserver_ready(client: &kube::Client) -> bool {
    let Ok(request) = http::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    let ready = matches!(client.request_text(request).await, Ok(body) if body.trim() == "ok");
    // The apiserver creates the default namespace itself; tests expect it.
    ready
        && matches!(
            Api::<Namespace>::all(client.clone()).get_opt("default").await,
            Ok(Some(_))
        )
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
