//! clusterctl installs CAPOV: the release artifacts (`capov-release`, rendered from the charts and `templates/`)
//! served as a local provider repository to the real clusterctl (built from Go modules by
//! `tools/build-go-tools.sh --capi`), offline. Covers `generate provider`, `generate cluster` for every flavor,
//! `generate yaml` of ovirt-provider.yaml, a server-side dry run of everything rendered against a real API server,
//! and that the committed `release/` directory is what the generator writes.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::OnceLock;

use capov_harness::ControlPlane;
use capov_release::Artifact;
use capov_testkit::{manifests, stdout_of};
use serde_json::{Value, json};

const PROVIDER: &str = "ovirt:v0.1.0";

fn root() -> PathBuf {
    capov_release::repo_root()
}

/// The release artifacts, rendered once per test binary.
fn artifacts() -> &'static [Artifact] {
    static ARTIFACTS: OnceLock<Vec<Artifact>> = OnceLock::new();
    ARTIFACTS.get_or_init(|| {
        let helm = capov_release::helm_dir(&root()).unwrap_or_else(|err| panic!("{err}"));
        capov_release::artifacts(&root(), &helm.join("helm")).unwrap_or_else(|err| panic!("{err}"))
    })
}

/// A local provider repository (`repo/infrastructure-ovirt/v0.1.0/…`), a clusterctl config naming it, and an
/// empty HOME, in a temporary directory of one test.
struct Clusterctl {
    dir: tempfile::TempDir,
    release: PathBuf,
}

impl Clusterctl {
    fn new() -> Clusterctl {
        Clusterctl::with_config("")
    }

    /// `extra` is appended to the config file, e.g. an `images:` section.
    fn with_config(extra: &str) -> Clusterctl {
        let dir = tempfile::tempdir().expect("temporary directory");
        let release = capov_release::write(&dir.path().join("repo"), artifacts()).expect("write the repository");
        let config = format!(
            "providers:\n  - name: ovirt\n    url: file://{}\n    type: InfrastructureProvider\n{extra}",
            release.join("infrastructure-components.yaml").display()
        );
        std::fs::write(dir.path().join("clusterctl.yaml"), config).expect("config");
        std::fs::create_dir(dir.path().join("home")).expect("home");
        Clusterctl { dir, release }
    }

    /// Runs clusterctl offline ([`capov_harness::offline_clusterctl`]) with `args` and only the variables in `env`.
    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
        let mut command =
            capov_harness::offline_clusterctl(&self.dir.path().join("home")).unwrap_or_else(|err| panic!("{err}"));
        command
            .args(args)
            .arg("--config")
            .arg(self.dir.path().join("clusterctl.yaml"))
            .envs(env.iter().copied())
            .current_dir(self.dir.path());
        stdout_of(&mut command)
    }
}

const CRDS: [&str; 5] = [
    "ovirtclusters.infrastructure.cluster.x-k8s.io",
    "ovirtclustertemplates.infrastructure.cluster.x-k8s.io",
    "ovirtmachines.infrastructure.cluster.x-k8s.io",
    "ovirtmachinetemplates.infrastructure.cluster.x-k8s.io",
    "ovirtproviders.infrastructure.cluster.x-k8s.io",
];

#[test]
fn generate_provider_prints_the_components() {
    let clusterctl = Clusterctl::new();
    let yaml = clusterctl
        .run(&["generate", "provider", "--infrastructure", PROVIDER], &[])
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(!yaml.contains("${"), "a variable was left unsubstituted:\n{yaml}");
    let documents = manifests::documents(&yaml);

    let namespaces: Vec<&Value> = documents.iter().filter(|d| d["kind"] == "Namespace").collect();
    assert_eq!(namespaces.len(), 1, "the contract allows exactly one Namespace");
    assert_eq!(namespaces[0]["metadata"]["name"], "capov-system");

    let mut crds: Vec<&str> = documents
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    crds.sort();
    assert_eq!(crds, CRDS);
    for name in CRDS {
        let labels = &manifests::find(&documents, "CustomResourceDefinition", name)["metadata"]["labels"];
        // The contract CAPI core reads (v1beta2) and the older one, both served by our v1beta1 API.
        assert_eq!(labels["cluster.x-k8s.io/v1beta2"], "v1beta1", "{name}");
        assert_eq!(labels["cluster.x-k8s.io/v1beta1"], "v1beta1", "{name}");
    }
    let provider_crd = manifests::find(&documents, "CustomResourceDefinition", CRDS[4]);
    assert_eq!(
        provider_crd["metadata"]["labels"]["clusterctl.cluster.x-k8s.io/move-hierarchy"], "",
        "clusterctl move must carry OVirtProviders and what they own"
    );

    // clusterctl finds, upgrades and deletes a provider's objects by these labels.
    for document in &documents {
        let labels = &document["metadata"]["labels"];
        let what = format!("{} {}", document["kind"], document["metadata"]["name"]);
        assert_eq!(labels["cluster.x-k8s.io/provider"], "infrastructure-ovirt", "{what}");
        assert_eq!(labels["clusterctl.cluster.x-k8s.io"], "", "{what}");
        assert!(labels["helm.sh/chart"].is_null(), "{what} keeps a helm label");
    }

    let deployment = manifests::find(&documents, "Deployment", "capov-controller-manager");
    assert_eq!(deployment["metadata"]["namespace"], "capov-system");
    let containers = deployment["spec"]["template"]["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0]["name"], "manager");
    assert_eq!(containers[0]["image"], "docker.io/library/capov-manager:0.1.0");
    assert_eq!(
        containers[0]["args"],
        json!(["--metrics-bind-address=:8443", "--leader-elect"]),
        "no --namespace: the manager watches every namespace, as clusterctl expects"
    );
    assert!(
        documents.iter().all(|d| d["kind"] != "ServiceMonitor"),
        "a ServiceMonitor would fail where the Prometheus Operator is missing"
    );

    let mut rendered = manifests::kinds_and_names(&documents);
    rendered.sort();
    assert_eq!(
        rendered,
        [
            "ClusterRole/capov-manager-role",
            "ClusterRole/capov-metrics-reader",
            "ClusterRoleBinding/capov-manager-rolebinding",
            "CustomResourceDefinition/ovirtclusters.infrastructure.cluster.x-k8s.io",
            "CustomResourceDefinition/ovirtclustertemplates.infrastructure.cluster.x-k8s.io",
            "CustomResourceDefinition/ovirtmachines.infrastructure.cluster.x-k8s.io",
            "CustomResourceDefinition/ovirtmachinetemplates.infrastructure.cluster.x-k8s.io",
            "CustomResourceDefinition/ovirtproviders.infrastructure.cluster.x-k8s.io",
            "Deployment/capov-controller-manager",
            "Namespace/capov-system",
            "Role/capov-manager-role",
            "RoleBinding/capov-manager-rolebinding",
            "Service/capov-metrics-service",
            "ServiceAccount/capov-controller-manager",
            "ValidatingAdmissionPolicy/capov-ovirtprovider-deprecated-credentials",
            "ValidatingAdmissionPolicyBinding/capov-ovirtprovider-deprecated-credentials",
        ]
    );
}

/// `--target-namespace` moves every namespaced object, and the RBAC subjects with them; the manager finds its
/// credentials namespace through POD_NAMESPACE, so it follows too.
#[test]
fn generate_provider_into_another_namespace() {
    let clusterctl = Clusterctl::new();
    let yaml = clusterctl
        .run(
            &[
                "generate",
                "provider",
                "--infrastructure",
                PROVIDER,
                "--target-namespace",
                "ovirt-infra",
            ],
            &[],
        )
        .unwrap_or_else(|err| panic!("{err}"));
    let documents = manifests::documents(&yaml);
    manifests::find(&documents, "Namespace", "ovirt-infra");
    for document in &documents {
        let namespace = &document["metadata"]["namespace"];
        assert!(
            namespace.is_null() || namespace == "ovirt-infra",
            "{} {} in {namespace}",
            document["kind"],
            document["metadata"]["name"]
        );
    }
    assert_eq!(
        manifests::find(&documents, "Deployment", "capov-controller-manager")["metadata"]["namespace"],
        "ovirt-infra"
    );
    for (kind, name) in [
        ("RoleBinding", "capov-manager-rolebinding"),
        ("ClusterRoleBinding", "capov-manager-rolebinding"),
    ] {
        assert_eq!(
            manifests::find(&documents, kind, name)["subjects"][0]["namespace"],
            "ovirt-infra",
            "{kind}"
        );
    }
}

/// No variables in the components (so `--describe`, `--raw` and `init --list-images`, which parse the images
/// before substitution, work); the image is changed with clusterctl's `images:` setting.
#[test]
fn describe_lists_no_variables_and_images_can_be_overridden() {
    let clusterctl = Clusterctl::new();
    let described = clusterctl
        .run(
            &["generate", "provider", "--infrastructure", PROVIDER, "--describe"],
            &[],
        )
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(described.contains("TargetNamespace:    capov-system"), "{described}");
    assert!(
        described.contains("- docker.io/library/capov-manager:0.1.0"),
        "{described}"
    );
    assert!(!described.contains("Variables"), "{described}");

    let overridden = Clusterctl::with_config(
        "images:\n  infrastructure-ovirt:\n    repository: registry.example.com/capov\n    tag: v0.1.0-rc1\n",
    );
    let yaml = overridden
        .run(&["generate", "provider", "--infrastructure", PROVIDER], &[])
        .unwrap_or_else(|err| panic!("{err}"));
    let documents = manifests::documents(&yaml);
    assert_eq!(
        manifests::find(&documents, "Deployment", "capov-controller-manager")["spec"]["template"]["spec"]["containers"]
            [0]["image"],
        "registry.example.com/capov/capov-manager:v0.1.0-rc1"
    );
}

/// The variables clusterctl reports for a template: (required, optional).
fn listed_variables(output: &str) -> (Vec<String>, Vec<String>) {
    let mut required = Vec::new();
    let mut optional = Vec::new();
    let mut section = None;
    for line in output.lines() {
        match line.trim() {
            "Required Variables:" => section = Some(&mut required),
            "Optional Variables:" => section = Some(&mut optional),
            "" => {}
            item => {
                if let (Some(list), Some(name)) = (section.as_mut(), item.strip_prefix("- ")) {
                    list.push(name.split_whitespace().next().unwrap().to_string());
                }
            }
        }
    }
    (required, optional)
}

#[test]
fn list_variables_of_every_flavor() {
    let clusterctl = Clusterctl::new();
    let list = |flavor: &[&str]| {
        let mut args = vec![
            "generate",
            "cluster",
            "demo",
            "--infrastructure",
            PROVIDER,
            "--target-namespace",
            "x",
        ];
        args.extend_from_slice(flavor);
        args.push("--list-variables");
        listed_variables(&clusterctl.run(&args, &[]).unwrap_or_else(|err| panic!("{err}")))
    };
    let required = ["CONTROL_PLANE_ENDPOINT_IP", "KUBERNETES_VERSION", "OVIRT_TEMPLATE"];

    let (default_required, default_optional) = list(&[]);
    assert_eq!(default_required, required);
    // The topology flavor sets the ClusterClass's variables from the same environment as the default flavor.
    assert_eq!(
        list(&["--flavor", "topology"]),
        (default_required.clone(), default_optional.clone())
    );
    assert_eq!(
        default_optional,
        [
            "CLUSTER_NAME",
            "CONTROL_PLANE_ENDPOINT_PORT",
            "CONTROL_PLANE_MACHINE_COUNT",
            "NAMESPACE",
            "OVIRT_CLUSTER",
            "OVIRT_CONTROL_PLANE_CPU_CORES",
            "OVIRT_CONTROL_PLANE_DISK_GB",
            "OVIRT_CONTROL_PLANE_MEMORY_MB",
            "OVIRT_PROVIDER",
            "OVIRT_VNIC_PROFILE",
            "OVIRT_WORKER_CPU_CORES",
            "OVIRT_WORKER_DISK_GB",
            "OVIRT_WORKER_MEMORY_MB",
            "POD_CIDR",
            "SERVICE_CIDR",
            "WORKER_MACHINE_COUNT",
        ]
    );

    // The failure-domains flavor is the default one with its domains and the control plane's anti-affinity.
    let (domains_required, domains_optional) = list(&["--flavor", "failure-domains"]);
    assert_eq!(domains_required, required);
    let mut expected_optional = default_optional.clone();
    expected_optional.extend(
        [
            "FAILURE_DOMAIN_1",
            "FAILURE_DOMAIN_2",
            "FAILURE_DOMAIN_3",
            "OVIRT_CONTROL_PLANE_ANTIAFFINITY",
        ]
        .map(String::from),
    );
    expected_optional.sort();
    assert_eq!(domains_optional, expected_optional);

    let (no_kcp_required, no_kcp_optional) = list(&["--flavor", "no-kcp"]);
    assert_eq!(no_kcp_required, required);
    assert_eq!(
        no_kcp_optional,
        [
            "BOOTSTRAP_DATA_SECRET",
            "CLUSTER_NAME",
            "CONTROL_PLANE_ENDPOINT_PORT",
            "NAMESPACE",
            "OVIRT_CLUSTER",
            "OVIRT_PROVIDER",
            "OVIRT_VNIC_PROFILE",
            "OVIRT_WORKER_CPU_CORES",
            "OVIRT_WORKER_DISK_GB",
            "OVIRT_WORKER_MEMORY_MB",
            "WORKER_MACHINE_COUNT",
        ]
    );

    // kube-vip: the default flavor with the endpoint from a pool instead of CONTROL_PLANE_ENDPOINT_IP.
    let (kube_vip_required, kube_vip_optional) = list(&["--flavor", "kube-vip"]);
    assert_eq!(
        kube_vip_required,
        ["KUBERNETES_VERSION", "OVIRT_TEMPLATE", "VIP_POOL_NAME"]
    );
    let mut expected: Vec<String> = default_optional.clone();
    expected.extend(
        [
            "KUBE_VIP_IMAGE",
            "KUBE_VIP_INTERFACE",
            "VIP_POOL_API_GROUP",
            "VIP_POOL_KIND",
        ]
        .map(String::from),
    );
    expected.sort();
    assert_eq!(kube_vip_optional, expected);
}

/// Every variable of every template and of ovirt-provider.yaml is documented in templates/README.md.
#[test]
fn every_variable_is_documented() {
    let clusterctl = Clusterctl::new();
    let mut variables = BTreeSet::new();
    for flavor in [
        &[][..],
        &["--flavor", "no-kcp"][..],
        &["--flavor", "kube-vip"][..],
        &["--flavor", "data-disks"][..],
        &["--flavor", "failure-domains"][..],
        &["--flavor", "gpu"][..],
        &["--flavor", "topology"][..],
    ] {
        let mut args = vec![
            "generate",
            "cluster",
            "demo",
            "--infrastructure",
            PROVIDER,
            "--target-namespace",
            "x",
        ];
        args.extend_from_slice(flavor);
        args.push("--list-variables");
        let (required, optional) = listed_variables(&clusterctl.run(&args, &[]).unwrap_or_else(|err| panic!("{err}")));
        variables.extend(required.into_iter().chain(optional));
    }
    let provider_file = clusterctl.release.join("ovirt-provider.yaml");
    let listed = clusterctl
        .run(
            &[
                "generate",
                "yaml",
                "--from",
                provider_file.to_str().unwrap(),
                "--list-variables",
            ],
            &[],
        )
        .unwrap_or_else(|err| panic!("{err}"));
    let provider_variables: Vec<String> = listed
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- "))
        .map(str::to_string)
        .collect();
    assert!(provider_variables.contains(&"OVIRT_PASSWORD".to_string()), "{listed}");
    variables.extend(provider_variables);

    let readme = std::fs::read_to_string(root().join("templates/README.md")).expect("templates/README.md");
    let undocumented: Vec<&String> = variables
        .iter()
        .filter(|name| !readme.contains(&format!("`{name}`")))
        .collect();
    assert!(undocumented.is_empty(), "not in templates/README.md: {undocumented:?}");
}

/// The values a user sets for the templates in these tests.
const OVIRT_ENV: [(&str, &str); 4] = [
    ("OVIRT_TEMPLATE", "ubuntu-2404-kube-v1.34.0"),
    ("CONTROL_PLANE_ENDPOINT_IP", "10.0.1.100"),
    ("OVIRT_CLUSTER", "Production"),
    ("OVIRT_PROVIDER", "ovirt-prod"),
];

#[test]
fn no_kcp_flavor_renders_the_given_values() {
    let clusterctl = Clusterctl::new();
    let mut env = OVIRT_ENV.to_vec();
    env.extend([
        ("OVIRT_VNIC_PROFILE", "vlan42"),
        ("OVIRT_WORKER_CPU_CORES", "4"),
        ("OVIRT_WORKER_MEMORY_MB", "8192"),
        ("OVIRT_WORKER_DISK_GB", "80"),
        ("BOOTSTRAP_DATA_SECRET", "workers-join"),
    ]);
    let yaml = clusterctl
        .run(
            &[
                "generate",
                "cluster",
                "demo",
                "--infrastructure",
                PROVIDER,
                "--flavor",
                "no-kcp",
                "--target-namespace",
                "team-a",
                "--kubernetes-version",
                "v1.34.0",
                "--worker-machine-count",
                "3",
            ],
            &env,
        )
        .unwrap_or_else(|err| panic!("{err}"));
    let documents = manifests::documents(&yaml);
    assert_eq!(
        manifests::kinds_and_names(&documents),
        [
            "Cluster/demo",
            "OVirtCluster/demo",
            "OVirtMachineTemplate/demo-md-0",
            "MachineDeployment/demo-md-0"
        ]
    );
    for document in &documents {
        assert_eq!(document["metadata"]["namespace"], "team-a", "{}", document["kind"]);
    }
    assert_eq!(
        manifests::find(&documents, "Cluster", "demo")["apiVersion"],
        "cluster.x-k8s.io/v1beta2"
    );
    assert_eq!(
        manifests::find(&documents, "Cluster", "demo")["spec"],
        json!({"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "OVirtCluster",
                                     "name": "demo"}})
    );
    assert_eq!(
        manifests::find(&documents, "OVirtCluster", "demo")["spec"],
        json!({"controlPlaneEndpoint": {"host": "10.0.1.100", "port": 6443}})
    );
    assert_eq!(
        manifests::find(&documents, "OVirtMachineTemplate", "demo-md-0")["spec"],
        json!({"template": {"spec": {
            "provider": "ovirt-prod", "ovirtcluster": "Production", "template": "ubuntu-2404-kube-v1.34.0",
            "vmtype": "server", "cpu": {"sockets": 1, "cores": 4, "threads": 1}, "memory": {"sizemb": 8192},
            "osdisksizegb": 80, "nics": [{"vnicprofile": "vlan42"}]
        }}})
    );
    assert_eq!(
        manifests::find(&documents, "MachineDeployment", "demo-md-0")["spec"],
        json!({
            "clusterName": "demo",
            "replicas": 3,
            "selector": {"matchLabels": {}},
            "template": {"spec": {
                "clusterName": "demo",
                "version": "v1.34.0",
                "bootstrap": {"dataSecretName": "workers-join"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "OVirtMachineTemplate",
                                      "name": "demo-md-0"}
            }}
        })
    );
}

#[test]
fn defaults_apply_and_missing_required_variables_are_refused() {
    let clusterctl = Clusterctl::new();
    let args = [
        "generate",
        "cluster",
        "demo",
        "--infrastructure",
        PROVIDER,
        "--flavor",
        "no-kcp",
        "--target-namespace",
        "team-a",
        "--kubernetes-version",
        "v1.34.0",
    ];
    let error = clusterctl.run(&args, &[]).unwrap_err();
    assert!(
        error.contains("value for variables [CONTROL_PLANE_ENDPOINT_IP, OVIRT_TEMPLATE] is not set"),
        "{error}"
    );
    let error = clusterctl
        .run(
            &args[..args.len() - 2],
            &[("OVIRT_TEMPLATE", "t"), ("CONTROL_PLANE_ENDPOINT_IP", "10.0.0.1")],
        )
        .unwrap_err();
    assert!(
        error.contains("value for variables [KUBERNETES_VERSION] is not set"),
        "{error}"
    );

    let yaml = clusterctl
        .run(
            &args,
            &[("OVIRT_TEMPLATE", "t"), ("CONTROL_PLANE_ENDPOINT_IP", "10.0.0.1")],
        )
        .unwrap_or_else(|err| panic!("{err}"));
    let documents = manifests::documents(&yaml);
    assert_eq!(
        manifests::find(&documents, "OVirtCluster", "demo")["spec"]["controlPlaneEndpoint"]["port"],
        6443
    );
    assert_eq!(
        manifests::find(&documents, "OVirtMachineTemplate", "demo-md-0")["spec"]["template"]["spec"],
        json!({"provider": "ovirt", "ovirtcluster": "Default", "template": "t", "vmtype": "server",
               "cpu": {"sockets": 1, "cores": 2, "threads": 1}, "memory": {"sizemb": 4096}, "osdisksizegb": 40,
               "nics": [{"vnicprofile": "ovirtmgmt"}]})
    );
    let deployment = &manifests::find(&documents, "MachineDeployment", "demo-md-0")["spec"];
    assert_eq!(deployment["replicas"], 0, "clusterctl's default --worker-machine-count");
    assert_eq!(
        deployment["template"]["spec"]["bootstrap"]["dataSecretName"],
        "demo-bootstrap-data"
    );
}

#[test]
fn default_flavor_renders_a_kubeadm_cluster() {
    let clusterctl = Clusterctl::new();
    let mut env = OVIRT_ENV.to_vec();
    env.extend([
        ("OVIRT_CONTROL_PLANE_CPU_CORES", "4"),
        ("OVIRT_CONTROL_PLANE_MEMORY_MB", "16384"),
        ("OVIRT_CONTROL_PLANE_DISK_GB", "100"),
        ("POD_CIDR", "172.20.0.0/16"),
    ]);
    let yaml = clusterctl
        .run(
            &[
                "generate",
                "cluster",
                "demo",
                "--infrastructure",
                PROVIDER,
                "--target-namespace",
                "team-a",
                "--kubernetes-version",
                "v1.34.0",
                "--control-plane-machine-count",
                "3",
                "--worker-machine-count",
                "5",
            ],
            &env,
        )
        .unwrap_or_else(|err| panic!("{err}"));
    let documents = manifests::documents(&yaml);
    assert_eq!(
        manifests::kinds_and_names(&documents),
        [
            "Cluster/demo",
            "OVirtCluster/demo",
            "OVirtMachineTemplate/demo-control-plane",
            "KubeadmControlPlane/demo-control-plane",
            "OVirtMachineTemplate/demo-md-0",
            "KubeadmConfigTemplate/demo-md-0",
            "MachineDeployment/demo-md-0",
        ]
    );
    for document in &documents {
        assert_eq!(document["metadata"]["namespace"], "team-a", "{}", document["kind"]);
    }
    let cluster = &manifests::find(&documents, "Cluster", "demo")["spec"];
    assert_eq!(
        cluster["controlPlaneRef"],
        json!({"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "demo-control-plane"})
    );
    assert_eq!(
        cluster["infrastructureRef"],
        json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "OVirtCluster", "name": "demo"})
    );
    assert_eq!(
        cluster["clusterNetwork"],
        json!({"pods": {"cidrBlocks": ["172.20.0.0/16"]}, "services": {"cidrBlocks": ["10.128.0.0/12"]}})
    );

    let control_plane = manifests::find(&documents, "KubeadmControlPlane", "demo-control-plane");
    assert_eq!(control_plane["apiVersion"], "controlplane.cluster.x-k8s.io/v1beta2");
    assert_eq!(control_plane["spec"]["replicas"], 3);
    assert_eq!(control_plane["spec"]["version"], "v1.34.0");
    assert_eq!(
        control_plane["spec"]["machineTemplate"]["spec"]["infrastructureRef"],
        json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "OVirtMachineTemplate",
               "name": "demo-control-plane"})
    );
    let control_plane_machines =
        &manifests::find(&documents, "OVirtMachineTemplate", "demo-control-plane")["spec"]["template"];
    assert_eq!(control_plane_machines["spec"]["cpu"]["cores"], 4);
    assert_eq!(control_plane_machines["spec"]["memory"]["sizemb"], 16384);
    assert_eq!(control_plane_machines["spec"]["osdisksizegb"], 100);
    assert_eq!(control_plane_machines["spec"]["provider"], "ovirt-prod");
    assert_eq!(control_plane_machines["spec"]["ovirtcluster"], "Production");
    let workers = &manifests::find(&documents, "OVirtMachineTemplate", "demo-md-0")["spec"]["template"]["spec"];
    assert_eq!(workers["cpu"]["cores"], 2);
    assert_eq!(workers["template"], "ubuntu-2404-kube-v1.34.0");

    let deployment = &manifests::find(&documents, "MachineDeployment", "demo-md-0")["spec"];
    assert_eq!(deployment["replicas"], 5);
    assert_eq!(deployment["template"]["spec"]["version"], "v1.34.0");
    assert_eq!(
        deployment["template"]["spec"]["bootstrap"],
        json!({"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate",
                             "name": "demo-md-0"}})
    );
    assert_eq!(
        manifests::find(&documents, "KubeadmConfigTemplate", "demo-md-0")["spec"]["template"]["spec"]["format"],
        "cloud-config"
    );
}

/// ovirt-provider.yaml through `clusterctl generate yaml` keeps its namespace (a cluster template would not), and
/// carries the move labels but not the provider label.
#[test]
fn ovirt_provider_yaml_renders_the_connection() {
    let clusterctl = Clusterctl::new();
    let file = clusterctl.release.join("ovirt-provider.yaml");
    let env = [
        ("OVIRT_URL", "https://ovirt.example.com/ovirt-engine/api"),
        ("OVIRT_USERNAME", "admin@internal"),
        ("OVIRT_PASSWORD", "it''s \"secret\" \\ #1"),
        ("OVIRT_CA_BUNDLE", "LS0tLS1CRUdJTi=="),
        ("OVIRT_PROVIDER", "ovirt-prod"),
    ];
    let yaml = clusterctl
        .run(&["generate", "yaml", "--from", file.to_str().unwrap()], &env)
        .unwrap_or_else(|err| panic!("{err}"));
    let documents = manifests::documents(&yaml);
    let secret = manifests::find(&documents, "Secret", "ovirt-prod-capov-provider-secret");
    assert_eq!(secret["metadata"]["namespace"], "capov-system");
    assert_eq!(
        secret["stringData"],
        json!({"username": "admin@internal", "password": "it's \"secret\" \\ #1"})
    );
    assert_eq!(
        secret["metadata"]["labels"],
        json!({"clusterctl.cluster.x-k8s.io/move": ""})
    );
    let provider = manifests::find(&documents, "OVirtProvider", "ovirt-prod");
    assert!(provider["metadata"]["namespace"].is_null());
    assert_eq!(
        provider["metadata"]["labels"],
        json!({"clusterctl.cluster.x-k8s.io/move-hierarchy": ""})
    );
    assert_eq!(
        provider["spec"],
        json!({"engine": "https://ovirt.example.com/ovirt-engine/api",
               "credentialsSecretName": "ovirt-prod-capov-provider-secret",
               "tls": {"insecure": false, "certs": "LS0tLS1CRUdJTi=="}})
    );

    let elsewhere = clusterctl
        .run(
            &["generate", "yaml", "--from", file.to_str().unwrap()],
            &[
                &env[..3],
                &[("CAPOV_NAMESPACE", "ovirt-infra"), ("OVIRT_INSECURE", "true")],
            ]
            .concat(),
        )
        .unwrap_or_else(|err| panic!("{err}"));
    let documents = manifests::documents(&elsewhere);
    assert_eq!(
        manifests::find(&documents, "Secret", "ovirt-capov-provider-secret")["metadata"]["namespace"],
        "ovirt-infra"
    );
    assert_eq!(
        manifests::find(&documents, "OVirtProvider", "ovirt")["spec"]["tls"],
        json!({"insecure": true, "certs": ""})
    );
}

/// Installs the kubeadm control-plane and bootstrap CRDs of the CAPI module that tools/capi pins (the harness
/// installs only CAPI core's), so the default flavor's KubeadmControlPlane and KubeadmConfigTemplate validate.
fn install_kubeadm_crds(plane: &ControlPlane) {
    // capi_crd_dir() is <module>/core/config/crd/bases.
    let module = capov_harness::capi_crd_dir().expect("CAPI module").join("../../../..");
    let dirs = [
        "controlplane/kubeadm/config/crd/bases",
        "bootstrap/kubeadm/config/crd/bases",
    ];
    for dir in dirs {
        let mut command = plane.kubectl().expect("kubectl");
        command.args([
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=capov-clusterctl-test",
            "-f",
        ]);
        command.arg(module.join(dir));
        let output = command.output().expect("kubectl apply");
        assert!(
            output.status.success(),
            "{dir}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let mut wait = plane.kubectl().expect("kubectl");
    wait.args([
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
        "crd/kubeadmcontrolplanetemplates.controlplane.cluster.x-k8s.io",
        "crd/kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io",
    ]);
    let output = wait.output().expect("kubectl wait");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

/// Everything clusterctl renders passes the real API server's validation (CRD schemas and CEL rules included):
/// the provider components, ovirt-provider.yaml and every cluster flavor (topology: with its ClusterClass), in a
/// fresh namespace.
#[tokio::test]
async fn rendered_objects_pass_a_server_side_dry_run() {
    let plane = capov_harness::shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "clusterctl").await.expect("namespace");
    install_kubeadm_crds(plane);
    let clusterctl = Clusterctl::new();

    // Into the test's namespace: a dry run cannot create capov-system for the objects that go there.
    let components = clusterctl
        .run(
            &[
                "generate",
                "provider",
                "--infrastructure",
                PROVIDER,
                "--target-namespace",
                &namespace,
            ],
            &[],
        )
        .unwrap_or_else(|err| panic!("{err}"));
    let output = plane
        .dry_run_apply(&components)
        .unwrap_or_else(|err| panic!("components: {err}"));
    for object in [
        format!("namespace/{namespace}"),
        "customresourcedefinition.apiextensions.k8s.io/ovirtproviders.infrastructure.cluster.x-k8s.io".into(),
        "validatingadmissionpolicy.admissionregistration.k8s.io/capov-ovirtprovider-deprecated-credentials".into(),
        "clusterrolebinding.rbac.authorization.k8s.io/capov-manager-rolebinding".into(),
        "rolebinding.rbac.authorization.k8s.io/capov-manager-rolebinding".into(),
        "deployment.apps/capov-controller-manager".into(),
    ] {
        assert!(
            output.contains(&format!("{object} serverside-applied")),
            "{object} missing from:\n{output}"
        );
    }

    // A unique OVirtProvider name: the shared control plane is cluster-wide for cluster-scoped objects.
    let provider_name = format!("{namespace}-engine");
    let provider_file = clusterctl.release.join("ovirt-provider.yaml");
    let connection = clusterctl
        .run(
            &["generate", "yaml", "--from", provider_file.to_str().unwrap()],
            &[
                ("OVIRT_URL", "https://ovirt.example.com/ovirt-engine/api"),
                ("OVIRT_USERNAME", "admin@internal"),
                ("OVIRT_PASSWORD", "secret"),
                ("OVIRT_PROVIDER", &provider_name),
                ("CAPOV_NAMESPACE", &namespace),
            ],
        )
        .unwrap_or_else(|err| panic!("{err}"));
    let output = plane
        .dry_run_apply(&connection)
        .unwrap_or_else(|err| panic!("ovirt-provider.yaml: {err}"));
    for object in [
        format!("secret/{provider_name}-capov-provider-secret"),
        format!("ovirtprovider.infrastructure.cluster.x-k8s.io/{provider_name}"),
    ] {
        assert!(
            output.contains(&format!("{object} serverside-applied")),
            "{object} missing from:\n{output}"
        );
    }

    let env = [
        ("OVIRT_TEMPLATE", "ubuntu"),
        ("CONTROL_PLANE_ENDPOINT_IP", "10.0.1.100"),
        ("VIP_POOL_NAME", "vips"),
        ("OVIRT_DATA_STORAGE_DOMAIN", "data1"),
        ("OVIRT_VGPU_TYPE", "nvidia-22"),
    ];
    for flavor in [
        "",
        "no-kcp",
        "kube-vip",
        "data-disks",
        "failure-domains",
        "gpu",
        "topology",
    ] {
        let mut args = vec![
            "generate",
            "cluster",
            "demo",
            "--infrastructure",
            PROVIDER,
            "--target-namespace",
            &namespace,
            "--kubernetes-version",
            "v1.34.0",
            "--worker-machine-count",
            "3",
        ];
        if !flavor.is_empty() {
            args.extend(["--flavor", flavor]);
        }
        let cluster = clusterctl.run(&args, &env).unwrap_or_else(|err| panic!("{err}"));
        let expected = manifests::documents(&cluster).len();
        let output = plane
            .dry_run_apply(&cluster)
            .unwrap_or_else(|err| panic!("flavor {flavor:?}: {err}"));
        let applied = output
            .lines()
            .filter(|line| line.contains("serverside-applied (server dry run)"))
            .count();
        assert_eq!(applied, expected, "flavor {flavor:?}:\n{output}");
        let objects: &[&str] = if flavor == "topology" {
            // The topology controller makes the rest from the class; clusterctl added the class and its templates.
            &[
                "cluster.cluster.x-k8s.io/demo",
                "clusterclass.cluster.x-k8s.io/ovirt",
                "ovirtclustertemplate.infrastructure.cluster.x-k8s.io/ovirt",
                "ovirtmachinetemplate.infrastructure.cluster.x-k8s.io/ovirt-default-worker",
                "kubeadmcontrolplanetemplate.controlplane.cluster.x-k8s.io/ovirt-control-plane",
            ]
        } else {
            &[
                "cluster.cluster.x-k8s.io/demo",
                "ovirtcluster.infrastructure.cluster.x-k8s.io/demo",
                "ovirtmachinetemplate.infrastructure.cluster.x-k8s.io/demo-md-0",
                "machinedeployment.cluster.x-k8s.io/demo-md-0",
            ]
        };
        for object in objects {
            assert!(
                output.contains(object),
                "flavor {flavor:?}: {object} missing from:\n{output}"
            );
        }
    }
}

/// `release/` holds exactly what `cargo run -p capov-release --bin release-artifacts` writes.
#[test]
fn committed_release_matches_the_generated_one() {
    let committed = root().join("release");
    let dir = capov_release::release_dir(&committed);
    let hint = "run `cargo run -p capov-release --bin release-artifacts` and commit the result";
    for artifact in artifacts() {
        let path = dir.join(&artifact.file_name);
        let content = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}; {hint}", path.display()));
        assert!(
            content == artifact.content,
            "{} differs from the generated file; {hint}",
            path.display()
        );
    }
    let mut expected: Vec<PathBuf> = artifacts().iter().map(|a| dir.join(&a.file_name)).collect();
    expected.sort();
    let mut found = Vec::new();
    let mut pending = vec![committed.clone()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap_or_else(|err| panic!("{}: {err}", next.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found.sort();
    assert_eq!(
        found,
        expected,
        "stale or missing files in {}; {hint}",
        committed.display()
    );
}

/// The `data-disks` flavor: the default flavor's objects, with a data disk, the namespace in the VM name and a
/// graceful shutdown on both machine templates.
#[test]
fn data_disks_flavor_adds_disks_names_and_graceful_shutdown() {
    let clusterctl = Clusterctl::new();
    let args = [
        "generate",
        "cluster",
        "demo",
        "--infrastructure",
        PROVIDER,
        "--flavor",
        "data-disks",
        "--target-namespace",
        "team-a",
        "--kubernetes-version",
        "v1.34.0",
        "--list-variables",
    ];
    let (required, _) = listed_variables(&clusterctl.run(&args, &[]).unwrap_or_else(|err| panic!("{err}")));
    assert_eq!(
        required,
        // KUBERNETES_VERSION is given by --kubernetes-version.
        [
            "CONTROL_PLANE_ENDPOINT_IP",
            "OVIRT_DATA_STORAGE_DOMAIN",
            "OVIRT_TEMPLATE"
        ]
    );
    let mut env = OVIRT_ENV.to_vec();
    env.extend([
        ("OVIRT_DATA_STORAGE_DOMAIN", "fast-ssd"),
        ("OVIRT_WORKER_DATA_DISK_GB", "250"),
    ]);
    let yaml = clusterctl
        .run(&args[..args.len() - 1], &env)
        .unwrap_or_else(|err| panic!("{err}"));
    let documents = manifests::documents(&yaml);
    let default = clusterctl
        .run(
            &[
                "generate",
                "cluster",
                "demo",
                "--infrastructure",
                PROVIDER,
                "--target-namespace",
                "team-a",
                "--kubernetes-version",
                "v1.34.0",
            ],
            &env,
        )
        .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(
        manifests::kinds_and_names(&documents),
        manifests::kinds_and_names(&manifests::documents(&default)),
        "the default flavor's objects"
    );
    let spec =
        |name: &str| manifests::find(&documents, "OVirtMachineTemplate", name)["spec"]["template"]["spec"].clone();
    let (control_plane, workers) = (spec("demo-control-plane"), spec("demo-md-0"));
    assert_eq!(
        control_plane["datadisks"],
        json!([{"name": "etcd", "sizegb": 20, "storagedomainname": "fast-ssd"}])
    );
    assert_eq!(
        workers["datadisks"],
        json!([{"name": "data", "sizegb": 250, "storagedomainname": "fast-ssd"}])
    );
    for spec in [&control_plane, &workers] {
        assert_eq!(spec["vmnametemplate"], "{namespace}-{name}");
        assert_eq!(spec["gracefulshutdowntimeoutseconds"], 120);
    }
}

/// The `gpu` flavor: the default flavor's objects, with a vGPU of the required type on every worker and highly
/// available control-plane VMs.
#[test]
fn gpu_flavor_gives_workers_a_vgpu_and_the_control_plane_high_availability() {
    let clusterctl = Clusterctl::new();
    let args = [
        "generate",
        "cluster",
        "demo",
        "--infrastructure",
        PROVIDER,
        "--flavor",
        "gpu",
        "--target-namespace",
        "team-a",
        "--kubernetes-version",
        "v1.34.0",
        "--list-variables",
    ];
    let (required, _) = listed_variables(&clusterctl.run(&args, &[]).unwrap_or_else(|err| panic!("{err}")));
    assert_eq!(
        required,
        ["CONTROL_PLANE_ENDPOINT_IP", "OVIRT_TEMPLATE", "OVIRT_VGPU_TYPE"]
    );
    let mut env = OVIRT_ENV.to_vec();
    env.push(("OVIRT_VGPU_TYPE", "nvidia-22"));
    let yaml = clusterctl
        .run(&args[..args.len() - 1], &env)
        .unwrap_or_else(|err| panic!("{err}"));
    let documents = manifests::documents(&yaml);
    let spec =
        |name: &str| manifests::find(&documents, "OVirtMachineTemplate", name)["spec"]["template"]["spec"].clone();
    let (control_plane, workers) = (spec("demo-control-plane"), spec("demo-md-0"));
    assert_eq!(workers["vgpu"], json!({"types": ["nvidia-22"]}));
    assert_eq!(
        control_plane["highavailability"],
        json!({"enabled": true, "priority": 100})
    );
    assert!(control_plane.get("vgpu").is_none() && workers.get("highavailability").is_none());
}
