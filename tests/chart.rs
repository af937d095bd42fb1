//! The Helm charts: `helm lint`, `helm template` (helm built from Go modules by `tools/build-go-tools.sh --helm`),
//! what the rendered objects say (SPEC §5), and a server-side dry-run apply of everything rendered against a real
//! API server, with and without the Prometheus Operator's ServiceMonitor CRD; with `watchNamespace`, a real install
//! whose RBAC the API server enforces for the chart's service account.

use std::process::Command;
use std::time::Duration;

use capov_crds::{OVirtMachine, OVirtProvider};
use capov_harness::{ControlPlane, Options};
use capov_testkit::{eventually, manifests, stdout_of};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

/// Helm, kept away from the user's own configuration and caches ([`capov_harness::helm`]).
fn helm() -> Command {
    capov_harness::helm().unwrap_or_else(|err| panic!("{err}"))
}

/// `helm template` of `chart` into `namespace` with extra arguments; the rendered YAML.
fn template(chart: &str, namespace: &str, args: &[&str]) -> Result<String, String> {
    let mut command = helm();
    command
        .args(["template", "capov", chart, "--namespace", namespace])
        .args(args);
    stdout_of(&mut command)
}

fn manager_container(documents: &[Value]) -> &Value {
    let deployment = manifests::find(documents, "Deployment", "capov-controller-manager");
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    assert_eq!(containers.len(), 1);
    &containers[0]
}

fn args(container: &Value) -> Vec<&str> {
    container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect()
}

#[test]
fn both_charts_lint_cleanly() {
    for (chart, values) in [
        ("chart/capov", "replicas=1"),
        ("chart/capov", "networkPolicy.enabled=true"),
        ("chart/capov-crds", "unused=1"),
    ] {
        let mut command = helm();
        command.args(["lint", "--strict", chart, "--set", values]);
        let output = stdout_of(&mut command).unwrap_or_else(|err| panic!("{err}"));
        assert!(output.contains("0 chart(s) failed"), "{output}");
    }
}

#[test]
fn default_render_matches_the_spec() {
    let documents = manifests::documents(&template("chart/capov", "capov-system", &[]).unwrap());
    let mut rendered = manifests::kinds_and_names(&documents);
    rendered.sort();
    assert_eq!(
        rendered,
        [
            "ClusterRole/capov-manager-role",
            "ClusterRole/capov-metrics-reader",
            "ClusterRoleBinding/capov-manager-rolebinding",
            "Deployment/capov-controller-manager",
            "Role/capov-manager-role",
            "RoleBinding/capov-manager-rolebinding",
            "Service/capov-metrics-service",
            "ServiceAccount/capov-controller-manager",
        ]
    );
    for document in &documents {
        if document["kind"] != "ClusterRole" && document["kind"] != "ClusterRoleBinding" {
            assert_eq!(
                document["metadata"]["namespace"], "capov-system",
                "{}",
                document["kind"]
            );
        }
    }

    let deployment = manifests::find(&documents, "Deployment", "capov-controller-manager");
    let pod = &deployment["spec"]["template"];
    assert_eq!(pod["metadata"]["labels"]["control-plane"], "controller-manager");
    assert_eq!(
        deployment["spec"]["selector"]["matchLabels"]["control-plane"],
        "controller-manager"
    );
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(pod["spec"]["serviceAccountName"], "capov-controller-manager");
    assert_eq!(pod["spec"]["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["spec"]["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    assert_eq!(
        pod["spec"]["affinity"],
        json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100,
            "preference": {"matchExpressions": [{"key": "node-role.kubernetes.io/infra", "operator": "Exists"}]}
        }]}})
    );

    let container = manager_container(&documents);
    assert_eq!(container["name"], "manager");
    assert_eq!(container["image"], "capov-manager:0.1.0");
    assert_eq!(container["command"], json!(["/manager"]));
    assert_eq!(args(container), ["--metrics-bind-address=:8443", "--leader-elect"]);
    let ports: Vec<(i64, &str)> = container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["containerPort"].as_i64().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    assert_eq!(ports, [(8443, "metrics"), (8081, "health")]);
    assert_eq!(
        container["livenessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": 8081})
    );
    assert_eq!(
        container["readinessProbe"]["httpGet"],
        json!({"path": "/readyz", "port": 8081})
    );
    assert_eq!(
        container["securityContext"],
        json!({"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true,
               "capabilities": {"drop": ["ALL"]}})
    );
    assert_eq!(
        container["resources"],
        json!({"limits": {"cpu": "1000m", "memory": "256Mi"}, "requests": {"cpu": "50m", "memory": "128Mi"}})
    );
    assert_eq!(
        container["env"],
        json!([
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ])
    );

    let service = manifests::find(&documents, "Service", "capov-metrics-service");
    assert_eq!(
        service["spec"]["selector"],
        json!({"control-plane": "controller-manager"})
    );
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "https", "port": 8443, "protocol": "TCP", "targetPort": 8443}])
    );

    let reader = manifests::find(&documents, "ClusterRole", "capov-metrics-reader");
    assert_eq!(
        reader["rules"],
        json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])
    );
}

/// The rules of one rendered Role or ClusterRole.
fn rules(documents: &[Value], kind: &str, name: &str) -> Vec<Value> {
    manifests::find(documents, kind, name)["rules"]
        .as_array()
        .unwrap()
        .clone()
}

/// The verbs `rules` grant on `resource` of the API group `group`.
fn verbs_on(rules: &[Value], group: &str, resource: &str) -> Vec<String> {
    rules
        .iter()
        .filter(|r| {
            r["apiGroups"].as_array().is_some_and(|g| g.iter().any(|g| g == group))
                && r["resources"]
                    .as_array()
                    .is_some_and(|rs| rs.iter().any(|rs| rs == resource))
        })
        .flat_map(|r| {
            r["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
        })
        .collect()
}

/// Least privilege: what the manager may do with Secrets, Leases and reviews.
#[test]
fn rbac_is_least_privilege() {
    let documents = manifests::documents(&template("chart/capov", "capov-system", &[]).unwrap());
    let cluster = rules(&documents, "ClusterRole", "capov-manager-role");
    let namespaced = rules(&documents, "Role", "capov-manager-role");
    // Cluster-wide: Secrets by name only (bootstrap data, workload kubeconfigs); no list/watch of every Secret.
    assert_eq!(verbs_on(&cluster, "", "secrets"), ["get"]);
    assert_eq!(verbs_on(&namespaced, "", "secrets"), ["get", "list", "watch"]);
    assert!(verbs_on(&cluster, "coordination.k8s.io", "leases").is_empty());
    // What kube-lease-manager needs: get, create when missing, patch to take, renew and release.
    assert_eq!(
        verbs_on(&namespaced, "coordination.k8s.io", "leases"),
        ["get", "create", "patch"]
    );
    assert_eq!(verbs_on(&cluster, "authentication.k8s.io", "tokenreviews"), ["create"]);
    assert_eq!(
        verbs_on(&cluster, "authorization.k8s.io", "subjectaccessreviews"),
        ["create"]
    );
    assert_eq!(
        verbs_on(&cluster, "cluster.x-k8s.io", "machines"),
        ["get", "list", "watch"]
    );
    // What workload kubeconfigs may not point at: the service networks, and the apiserver's own EndpointSlice only.
    assert_eq!(verbs_on(&cluster, "networking.k8s.io", "servicecidrs"), ["list"]);
    assert_eq!(verbs_on(&cluster, "discovery.k8s.io", "endpointslices"), ["get"]);
    let slices = cluster
        .iter()
        .find(|rule| rule["resources"] == json!(["endpointslices"]))
        .expect("the EndpointSlice rule");
    assert_eq!(slices["resourceNames"], json!(["kubernetes"]));
    for kind in ["ovirtproviders", "ovirtclusters", "ovirtmachines"] {
        let group = "infrastructure.cluster.x-k8s.io";
        assert!(verbs_on(&cluster, group, kind).contains(&"patch".to_string()), "{kind}");
        assert!(verbs_on(&cluster, group, &format!("{kind}/status")).contains(&"patch".to_string()));
        assert_eq!(verbs_on(&cluster, group, &format!("{kind}/finalizers")), ["update"]);
    }
    for rule in cluster.iter().chain(&namespaced) {
        for field in ["apiGroups", "resources", "verbs"] {
            let values = rule[field].as_array().map(Vec::as_slice).unwrap_or_default();
            assert!(!values.iter().any(|v| v == "*"), "wildcard in {rule}");
        }
        let verbs = rule["verbs"].as_array().unwrap();
        // The one delete: the IPAddressClaims CAPOV itself created for static addresses, released with the machine.
        let own_claims = rule["resources"] == json!(["ipaddressclaims"]);
        assert!(
            !verbs
                .iter()
                .any(|v| v == "deletecollection" || (v == "delete" && !own_claims)),
            "{rule}"
        );
    }
}

/// (API group, resource) of every namespaced object the operator reads where it watches — OVirtClusters,
/// OVirtMachines, their templates (+ status), CAPI Clusters and Machines, Secrets (bootstrap data,
/// `<cluster>-kubeconfig`), and IPAM's claims and addresses.
const WATCHED_RESOURCES: [(&str, &str); 13] = [
    ("infrastructure.cluster.x-k8s.io", "ovirtclusters"),
    ("infrastructure.cluster.x-k8s.io", "ovirtclusters/status"),
    ("infrastructure.cluster.x-k8s.io", "ovirtclusters/finalizers"),
    ("infrastructure.cluster.x-k8s.io", "ovirtmachines"),
    ("infrastructure.cluster.x-k8s.io", "ovirtmachines/status"),
    ("infrastructure.cluster.x-k8s.io", "ovirtmachines/finalizers"),
    ("infrastructure.cluster.x-k8s.io", "ovirtmachinetemplates"),
    ("infrastructure.cluster.x-k8s.io", "ovirtmachinetemplates/status"),
    ("cluster.x-k8s.io", "clusters"),
    ("cluster.x-k8s.io", "machines"),
    ("", "secrets"),
    ("ipam.cluster.x-k8s.io", "ipaddressclaims"),
    ("ipam.cluster.x-k8s.io", "ipaddresses"),
];

/// Every (API group, resource) a list of rules names (a rule on nonResourceURLs names none).
fn granted(rules: &[Value]) -> Vec<(String, String)> {
    let strings = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let mut pairs: Vec<(String, String)> = rules
        .iter()
        .flat_map(|rule| {
            let resources = strings(&rule["resources"]);
            strings(&rule["apiGroups"]).into_iter().flat_map(move |group| {
                resources
                    .clone()
                    .into_iter()
                    .map(move |resource| (group.clone(), resource))
            })
        })
        .collect();
    pairs.sort();
    pairs.dedup();
    pairs
}

fn is_watched(group: &str, resource: &str) -> bool {
    WATCHED_RESOURCES.contains(&(group, resource))
}

/// `managementClusterId` becomes `--management-cluster-id`, quoted as one argument; empty, the flag is not passed
/// (the operator then uses the UID of `kube-system`).
#[test]
fn management_cluster_id_becomes_the_flag() {
    let documents = manifests::documents(
        &template(
            "chart/capov",
            "capov-system",
            &["--set", "managementClusterId=prod-mgmt"],
        )
        .unwrap(),
    );
    assert_eq!(
        args(manager_container(&documents)),
        [
            "--metrics-bind-address=:8443",
            "--leader-elect",
            "--management-cluster-id=prod-mgmt"
        ]
    );
    let default = manifests::documents(&template("chart/capov", "capov-system", &[]).unwrap());
    assert!(
        !args(manager_container(&default))
            .iter()
            .any(|arg| arg.starts_with("--management-cluster-id")),
        "the default passes no id"
    );
}

/// `watchNamespace`: the manager gets `--namespace`, and what the default ClusterRole grants on namespaced objects —
/// Secrets among them — a Role in that namespace grants instead, with the same verbs; only what has no namespace to
/// narrow to stays cluster-wide.
#[test]
fn watch_namespace_moves_the_namespaced_rules_into_a_role_there() {
    let default = manifests::documents(&template("chart/capov", "capov-system", &[]).unwrap());
    let documents =
        manifests::documents(&template("chart/capov", "capov-system", &["--set", "watchNamespace=tenant-a"]).unwrap());

    assert_eq!(
        args(manager_container(&documents)),
        ["--metrics-bind-address=:8443", "--leader-elect", "--namespace=tenant-a"]
    );

    // The default is cluster-wide: its ClusterRole grants every watched resource, Secrets by name only.
    let default_cluster = rules(&default, "ClusterRole", "capov-manager-role");
    assert_eq!(verbs_on(&default_cluster, "", "secrets"), ["get"]);
    for (group, resource) in WATCHED_RESOURCES {
        assert!(
            !verbs_on(&default_cluster, group, resource).is_empty(),
            "default: {resource}"
        );
    }

    // No ClusterRole grants a watched resource, Secrets included.
    for role in documents.iter().filter(|d| d["kind"] == "ClusterRole") {
        for (group, resource) in granted(role["rules"].as_array().unwrap()) {
            assert!(
                !is_watched(&group, &resource),
                "{} grants {resource}",
                role["metadata"]["name"]
            );
        }
    }

    // Each rule of the default ClusterRole is either in the watched namespace's Role or still cluster-wide (the
    // OVirtProviders, Events and the reviews of /metrics), with the same verbs.
    let watch_role = manifests::find(&documents, "Role", "capov-manager-watch-role");
    assert_eq!(watch_role["metadata"]["namespace"], "tenant-a");
    let watched = rules(&documents, "Role", "capov-manager-watch-role");
    let cluster = rules(&documents, "ClusterRole", "capov-manager-role");
    for (group, resource) in granted(&default_cluster) {
        let now = if is_watched(&group, &resource) {
            &watched
        } else {
            &cluster
        };
        assert_eq!(
            verbs_on(now, &group, &resource),
            verbs_on(&default_cluster, &group, &resource),
            "{group}/{resource}"
        );
    }
    assert!(
        granted(&watched)
            .iter()
            .all(|(group, resource)| is_watched(group, resource))
    );
    assert_eq!(verbs_on(&watched, "", "secrets"), ["get"]);

    let binding = manifests::find(&documents, "RoleBinding", "capov-manager-watch-rolebinding");
    assert_eq!(binding["metadata"]["namespace"], "tenant-a");
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "capov-manager-watch-role"})
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "capov-controller-manager", "namespace": "capov-system"}])
    );
    // The credentials namespace's Role (credential Secrets, the Lease) is the same either way.
    assert_eq!(
        manifests::find(&documents, "Role", "capov-manager-role"),
        manifests::find(&default, "Role", "capov-manager-role")
    );

    // A second --namespace in extraArgs would stop the manager at start: the chart refuses it.
    let error = template(
        "chart/capov",
        "capov-system",
        &[
            "--set",
            "watchNamespace=tenant-a",
            "--set",
            "extraArgs={--namespace=tenant-b}",
        ],
    )
    .unwrap_err();
    assert!(error.contains("do not also pass --namespace in extraArgs"), "{error}");
}

#[test]
fn feature_gates_extra_args_and_customvalues() {
    let values = "
manager:
  image: registry.example.com/capov/manager
  tag: \"2.14.0\"
replicas: 2
resources:
  limits: {cpu: 500m, memory: 512Mi}
  requests: {cpu: 100m, memory: 256Mi}
nodeSelector:
  node-role.kubernetes.io/infra: \"\"
tolerations:
  - {key: node-role.kubernetes.io/infra, operator: Exists, effect: NoSchedule}
featureGates:
  disk-keep-template-name: true
  disk-clone: false
  disk-add-vm-name: true
extraArgs: [\"--debug=true\", \"--sync-period=5m\"]
";
    let file = tempfile::NamedTempFile::new().expect("values file");
    std::fs::write(file.path(), values).expect("write values");
    let documents =
        manifests::documents(&template("chart/capov", "capov-system", &["-f", file.path().to_str().unwrap()]).unwrap());
    let container = manager_container(&documents);
    assert_eq!(
        args(container),
        [
            "--metrics-bind-address=:8443",
            "--leader-elect",
            "--feature-gates=disk-add-vm-name=true,disk-clone=false,disk-keep-template-name=true",
            "--debug=true",
            "--sync-period=5m",
        ]
    );
    assert_eq!(container["image"], "registry.example.com/capov/manager:2.14.0");
    assert_eq!(container["resources"]["limits"]["memory"], "512Mi");
    let pod = &manifests::find(&documents, "Deployment", "capov-controller-manager")["spec"];
    assert_eq!(pod["replicas"], 2);
    assert_eq!(
        pod["template"]["spec"]["nodeSelector"],
        json!({"node-role.kubernetes.io/infra": ""})
    );
    assert_eq!(pod["template"]["spec"]["tolerations"][0]["effect"], "NoSchedule");

    // The documents' SSP form: --set of single gates.
    let single = manifests::documents(
        &template(
            "chart/capov",
            "capov-system",
            &["--set", "featureGates.disk-clone=true"],
        )
        .unwrap(),
    );
    assert_eq!(args(manager_container(&single))[2], "--feature-gates=disk-clone=true");
}

/// What a platform sets in `networkPolicy`: where its Prometheus runs and which pods there, an external Prometheus,
/// a blackbox exporter for the probes, the control-plane nodes' and the engines' addresses, an engine on another
/// port, NodeLocal DNSCache, a proxy.
const PLATFORM_NETWORK_POLICY: &str = "
networkPolicy:
  enabled: true
  metrics:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: shturval-metrics}}
    podSelector: {matchLabels: {app.kubernetes.io/name: prometheus}}
    extraFrom: [{ipBlock: {cidr: 10.20.0.5/32}}]
  probes:
    extraFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: blackbox}}}]
  egress:
    apiServer: {to: [{ipBlock: {cidr: 10.0.0.0/28}}]}
    engines: {to: [{ipBlock: {cidr: 192.0.2.0/24, except: [192.0.2.128/25]}}], ports: [443, 8443]}
    dns:
      to:
        - {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}, podSelector: {matchLabels: {k8s-app: kube-dns}}}
        - {ipBlock: {cidr: 169.254.20.10/32}}
    extraRules: [{to: [{ipBlock: {cidr: 10.9.9.9/32}}], ports: [{port: 3128, protocol: TCP}]}]
";

/// The NetworkPolicy of `args`, if one is rendered.
fn network_policy(args: &[&str]) -> Option<Value> {
    let documents = manifests::documents(&template("chart/capov", "capov-system", args).unwrap());
    documents.into_iter().find(|d| d["kind"] == "NetworkPolicy")
}

/// The ports (number, protocol) a NetworkPolicy rule names.
fn rule_ports(rule: &Value) -> Vec<(i64, String)> {
    rule["ports"]
        .as_array()
        .expect("a rule without ports allows every port")
        .iter()
        .map(|port| {
            (
                port["port"].as_i64().unwrap(),
                port["protocol"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn tcp(ports: &[i64]) -> Vec<(i64, String)> {
    ports.iter().map(|port| (*port, "TCP".to_string())).collect()
}

/// Issue 35, §4: the NetworkPolicy docs/decisions.md names as the remedy for clients that hold the probes and metrics
/// ports. Off by default; `networkPolicy.enabled=true` selects the manager pods, admits on 8443 only pods that match
/// both the scrapers' namespace and pod selectors (one peer, so both must match), has no rule for 8081 (the kubelet
/// comes from the pod's node, which NetworkPolicy always allows), and lets the pods reach DNS, the apiserver, the
/// engines and the workload apiservers on their ports only.
#[test]
fn network_policy_is_off_by_default_and_admits_the_node_and_the_chosen_scrapers_only() {
    assert!(network_policy(&[]).is_none(), "rendered by default");
    let policy = network_policy(&["--set", "networkPolicy.enabled=true"]).expect("the NetworkPolicy");
    assert_eq!(policy["apiVersion"], "networking.k8s.io/v1");
    assert_eq!(policy["metadata"]["name"], "capov-controller-manager");
    assert_eq!(policy["metadata"]["namespace"], "capov-system");

    // It selects the Deployment's pods, and the ports it names are the container's.
    let documents = manifests::documents(&template("chart/capov", "capov-system", &[]).unwrap());
    let pod_labels = &manifests::find(&documents, "Deployment", "capov-controller-manager")["spec"]["template"]["metadata"]
        ["labels"];
    let selector = policy["spec"]["podSelector"]["matchLabels"]
        .as_object()
        .expect("matchLabels");
    assert!(!selector.is_empty());
    for (key, value) in selector {
        assert_eq!(
            &pod_labels[key], value,
            "the policy selects {key}={value}, the pods do not carry it"
        );
    }
    let container_ports: Vec<i64> = manager_container(&documents)["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|port| port["containerPort"].as_i64().unwrap())
        .collect();
    assert_eq!(container_ports, [8443, 8081]);

    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    let ingress = policy["spec"]["ingress"].as_array().expect("ingress rules");
    assert_eq!(ingress.len(), 1, "{ingress:?}");
    assert_eq!(rule_ports(&ingress[0]), tcp(&[8443]));
    assert_eq!(
        ingress[0]["from"],
        json!([{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {}
        }])
    );

    let egress = policy["spec"]["egress"].as_array().expect("egress rules");
    let dns = &egress[0];
    assert_eq!(rule_ports(dns), [(53, "UDP".to_string()), (53, "TCP".to_string())]);
    assert_eq!(
        dns["to"],
        json!([{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}
        }])
    );
    let others: Vec<Vec<(i64, String)>> = egress[1..].iter().map(rule_ports).collect();
    assert_eq!(others, [tcp(&[443, 6443]), tcp(&[443]), tcp(&[6443])]);
    assert!(
        egress[1..].iter().all(|rule| rule["to"].is_null()),
        "any address by default"
    );

    // What a platform sets.
    let file = tempfile::NamedTempFile::new().expect("values file");
    std::fs::write(file.path(), PLATFORM_NETWORK_POLICY).expect("write values");
    let policy = network_policy(&["-f", file.path().to_str().unwrap()]).expect("the NetworkPolicy");
    let ingress = policy["spec"]["ingress"].as_array().unwrap();
    assert_eq!(
        ingress[0]["from"],
        json!([
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "shturval-metrics"}},
             "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}},
            {"ipBlock": {"cidr": "10.20.0.5/32"}}
        ])
    );
    assert_eq!(rule_ports(&ingress[1]), tcp(&[8081]));
    assert_eq!(
        ingress[1]["from"],
        json!([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "blackbox"}}}])
    );
    let egress = policy["spec"]["egress"].as_array().unwrap();
    assert_eq!(egress[1]["to"], json!([{"ipBlock": {"cidr": "10.0.0.0/28"}}]));
    assert_eq!(
        rule_ports(&egress[1]),
        tcp(&[443, 6443]),
        "the apiserver keeps its default ports"
    );
    assert_eq!(
        egress[2]["to"],
        json!([{"ipBlock": {"cidr": "192.0.2.0/24", "except": ["192.0.2.128/25"]}}])
    );
    assert_eq!(egress[0]["to"][1], json!({"ipBlock": {"cidr": "169.254.20.10/32"}}));
    assert_eq!(
        rule_ports(&egress[0]),
        [(53, "UDP".to_string()), (53, "TCP".to_string())]
    );
    assert_eq!(rule_ports(&egress[2]), tcp(&[443, 8443]));
    assert_eq!(rule_ports(&egress[4]), tcp(&[3128]));
    assert_eq!(egress.len(), 5);

    // Egress left open: incoming connections only.
    let ingress_only = network_policy(&[
        "--set",
        "networkPolicy.enabled=true",
        "--set",
        "networkPolicy.egress.enabled=false",
    ])
    .unwrap();
    assert_eq!(ingress_only["spec"]["policyTypes"], json!(["Ingress"]));
    assert!(ingress_only["spec"]["egress"].is_null());

    // A rule without ports would open every port; a switch that is not a boolean is a typo.
    for (args, expected) in [
        (
            vec![
                "--set",
                "networkPolicy.enabled=true",
                "--set",
                "networkPolicy.egress.engines.ports=null",
            ],
            "networkPolicy.egress.engines.ports is empty",
        ),
        (
            vec![
                "--set",
                "networkPolicy.enabled=true",
                "--set",
                "networkPolicy.egress.dns.ports=null",
            ],
            "networkPolicy.egress.dns.ports is empty",
        ),
        (
            vec!["--set", "networkPolicy.enabled=yes"],
            "networkPolicy.enabled must be true or false",
        ),
    ] {
        let error = template("chart/capov", "capov-system", &args).unwrap_err();
        assert!(error.contains(expected), "{args:?}: {error}");
    }
}

#[test]
fn service_monitor_follows_enabled_and_the_cluster_capabilities() {
    let monitor = |args: &[&str]| -> Option<Value> {
        let documents = manifests::documents(&template("chart/capov", "capov-system", args).unwrap());
        documents.into_iter().find(|d| d["kind"] == "ServiceMonitor")
    };
    let api = ["--api-versions", "monitoring.coreos.com/v1"];
    assert!(monitor(&[]).is_none(), "auto without the Prometheus Operator");
    let found = monitor(&api).expect("auto with monitoring.coreos.com/v1");
    assert_eq!(found["metadata"]["name"], "capov-metrics-monitor");
    assert_eq!(found["metadata"]["namespace"], "capov-system");
    assert_eq!(found["metadata"]["labels"]["release"], "shturval-metrics");
    assert_eq!(
        found["spec"]["selector"]["matchLabels"]["control-plane"],
        "controller-manager"
    );
    let endpoint = &found["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], "https");
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(
        endpoint["bearerTokenFile"],
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    );
    assert_eq!(endpoint["tlsConfig"], json!({"insecureSkipVerify": true}));

    assert!(
        monitor(&["--set", "serviceMonitor.enabled=true"]).is_some(),
        "true without the CRD"
    );
    assert!(
        monitor(&[
            "--api-versions",
            "monitoring.coreos.com/v1",
            "--set",
            "serviceMonitor.enabled=false"
        ])
        .is_none()
    );
    let custom = monitor(&[
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "serviceMonitor.labels.release=kube-prometheus",
        "--set",
        "serviceMonitor.tls.insecureSkipVerify=false",
        "--set",
        "serviceMonitor.tls.serverName=capov-metrics-service.capov-system.svc",
        "--set",
        "serviceMonitor.interval=30s",
    ])
    .unwrap();
    assert_eq!(custom["metadata"]["labels"]["release"], "kube-prometheus");
    assert_eq!(
        custom["spec"]["endpoints"][0]["tlsConfig"],
        json!({"insecureSkipVerify": false, "serverName": "capov-metrics-service.capov-system.svc"})
    );
    assert_eq!(custom["spec"]["endpoints"][0]["interval"], "30s");

    let error = template(
        "chart/capov",
        "capov-system",
        &["--set", "serviceMonitor.enabled=maybe"],
    )
    .unwrap_err();
    assert!(
        error.contains("serviceMonitor.enabled must be auto, true or false"),
        "{error}"
    );
}

/// The PrometheusRule and the dashboard's ConfigMap follow their switches as the ServiceMonitor does (`auto`: only
/// where monitoring.coreos.com/v1 is served), carry the labels Prometheus and Grafana's sidecar select by, and take
/// the thresholds and the runbook address from the values.
#[test]
fn alerts_and_dashboard_follow_enabled_and_the_cluster_capabilities() {
    let find = |args: &[&str], kind: &str| -> Option<Value> {
        let documents = manifests::documents(&template("chart/capov", "capov-system", args).unwrap());
        documents
            .into_iter()
            .find(|d| d["kind"] == kind && (kind != "ConfigMap" || d["metadata"]["name"] == "capov-dashboard"))
    };
    let api = ["--api-versions", "monitoring.coreos.com/v1"];
    for kind in ["PrometheusRule", "ConfigMap"] {
        assert!(
            find(&[], kind).is_none(),
            "{kind}: auto without the Prometheus Operator"
        );
        assert!(find(&api, kind).is_some(), "{kind}: auto with monitoring.coreos.com/v1");
    }
    let off = [
        "--api-versions",
        "monitoring.coreos.com/v1",
        "--set",
        "prometheusRule.enabled=false",
        "--set",
        "grafanaDashboard.enabled=false",
    ];
    assert!(find(&off, "PrometheusRule").is_none());
    assert!(find(&off, "ConfigMap").is_none());
    let error = template(
        "chart/capov",
        "capov-system",
        &["--set", "grafanaDashboard.enabled=yes"],
    )
    .unwrap_err();
    assert!(
        error.contains("grafanaDashboard.enabled must be auto, true or false"),
        "{error}"
    );

    let rule = find(&api, "PrometheusRule").unwrap();
    assert_eq!(rule["metadata"]["name"], "capov-alerts");
    assert_eq!(rule["metadata"]["namespace"], "capov-system");
    assert_eq!(rule["metadata"]["labels"]["release"], "shturval-metrics");
    let rules = rule["spec"]["groups"][0]["rules"].as_array().unwrap();
    let alerts: Vec<&str> = rules.iter().map(|r| r["alert"].as_str().unwrap()).collect();
    assert_eq!(alerts, ALERTS);
    for rule in rules {
        let description = rule["annotations"]["description"].as_str().unwrap();
        let alert = rule["alert"].as_str().unwrap();
        assert!(
            description.ends_with(&format!("(docs/book, Operations → Alerts: {alert}).")),
            "{alert}: {description}"
        );
        assert!(rule["annotations"]["runbook_url"].is_null());
        assert!(["warning", "critical"].contains(&rule["labels"]["severity"].as_str().unwrap()));
    }
    let book = std::fs::read_to_string("docs/book/src/operations/alerts.md").unwrap();
    for alert in ALERTS {
        assert!(
            book.contains(&format!("\n## {alert}\n")),
            "the book's alerts page has no section for {alert}"
        );
    }

    let tuned = find(
        &[
            "--set",
            "prometheusRule.enabled=true",
            "--set",
            "prometheusRule.machineStuckMinutes=45",
            "--set",
            "prometheusRule.runbookURL=https://capov.example.com/operations/alerts.html",
            "--set",
            "prometheusRule.labels.release=kube-prometheus",
        ],
        "PrometheusRule",
    )
    .unwrap();
    assert_eq!(tuned["metadata"]["labels"]["release"], "kube-prometheus");
    let stuck = &tuned["spec"]["groups"][0]["rules"][2];
    assert_eq!(stuck["alert"], "CAPOVMachineStuck");
    assert!(stuck["expr"].as_str().unwrap().ends_with("> 2700"), "{stuck}");
    assert_eq!(
        stuck["annotations"]["runbook_url"],
        "https://capov.example.com/operations/alerts.html#capovmachinestuck"
    );

    let dashboard = find(&api, "ConfigMap").unwrap();
    assert_eq!(dashboard["metadata"]["namespace"], "capov-system");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let json: Value = serde_json::from_str(dashboard["data"]["capov-dashboard.json"].as_str().unwrap()).unwrap();
    assert_eq!(json["uid"], "capov-overview");
    assert!(json["panels"].as_array().unwrap().len() > 10);
    let elsewhere = find(
        &[
            "--set",
            "grafanaDashboard.enabled=true",
            "--set",
            "grafanaDashboard.namespace=monitoring",
            "--set",
            "grafanaDashboard.annotations.grafana_folder=Cluster API",
        ],
        "ConfigMap",
    )
    .unwrap();
    assert_eq!(elsewhere["metadata"]["namespace"], "monitoring");
    assert_eq!(elsewhere["metadata"]["annotations"]["grafana_folder"], "Cluster API");
}

/// The alerts of the chart, in their order.
const ALERTS: [&str; 9] = [
    "CAPOVEngineUnreachable",
    "CAPOVEngineAuthenticationFailing",
    "CAPOVMachineStuck",
    "CAPOVMachineFailed",
    "CAPOVEngineThrottled",
    "CAPOVReconcileErrorsRising",
    "CAPOVActorRestarts",
    "CAPOVNoLeader",
    "CAPOVMemoryNearLimit",
];

/// The rendered rules pass Prometheus' own checker (`promtool check rules`) and the unit tests of
/// tests/fixtures/prometheus/capov-rules.test.yaml (`promtool test rules`), which make each alert fire and not fire.
#[test]
fn alerting_rules_pass_promtool_check_and_unit_tests() {
    let documents = manifests::documents(
        &template("chart/capov", "capov-system", &["--set", "prometheusRule.enabled=true"]).unwrap(),
    );
    let rule = manifests::find(&documents, "PrometheusRule", "capov-alerts");
    let dir = tempfile::tempdir().expect("temp dir");
    // JSON is YAML: the spec (`groups:`) is a Prometheus rule file as it is.
    std::fs::write(dir.path().join("capov-rules.yaml"), rule["spec"].to_string()).expect("rules file");
    let tests = std::fs::read_to_string("tests/fixtures/prometheus/capov-rules.test.yaml").expect("rule tests");
    std::fs::write(dir.path().join("capov-rules.test.yaml"), &tests).expect("rule tests file");

    let promtool = |args: &[&str]| {
        let mut command = capov_harness::promtool().unwrap_or_else(|err| panic!("{err}"));
        command.args(args).current_dir(dir.path());
        stdout_of(&mut command).unwrap_or_else(|err| panic!("promtool {args:?}: {err}"))
    };
    let checked = promtool(&["check", "rules", "capov-rules.yaml"]);
    assert!(
        checked.contains(&format!("SUCCESS: {} rules found", ALERTS.len())),
        "{checked}"
    );
    let tested = promtool(&["test", "rules", "capov-rules.test.yaml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");

    // Every alert has a case where it fires and one where it does not.
    let tests: Value = serde_saphyr::from_str(&tests).expect("rule tests parse");
    let cases: Vec<&Value> = tests["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|group| group["alert_rule_test"].as_array().unwrap())
        .collect();
    for alert in ALERTS {
        let of_alert = || cases.iter().filter(|case| case["alertname"] == alert);
        let fires = |case: &&&Value| case["exp_alerts"].as_array().is_some_and(|alerts| !alerts.is_empty());
        assert!(of_alert().any(|case| fires(&case)), "no case where {alert} fires");
        assert!(
            of_alert().any(|case| !fires(&case)),
            "no case where {alert} stays quiet"
        );
    }
}

/// Both charts, rendered, pass the real API server's validation (server-side dry-run apply) in a fresh namespace.
#[tokio::test]
async fn rendered_charts_pass_a_server_side_dry_run() {
    let plane = capov_harness::shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "chart").await.expect("namespace");

    let crds = template("chart/capov-crds", &namespace, &[]).unwrap();
    let output = plane
        .dry_run_apply(&crds)
        .unwrap_or_else(|err| panic!("capov-crds: {err}"));
    assert!(
        output.contains("ovirtmachines.infrastructure.cluster.x-k8s.io"),
        "{output}"
    );

    let rendered = template("chart/capov", &namespace, &["--set", "featureGates.disk-clone=true"]).unwrap();
    let output = plane
        .dry_run_apply(&rendered)
        .unwrap_or_else(|err| panic!("capov: {err}"));
    for object in [
        "deployment.apps/capov-controller-manager",
        "service/capov-metrics-service",
        "clusterrole.rbac.authorization.k8s.io/capov-metrics-reader",
        "role.rbac.authorization.k8s.io/capov-manager-role",
    ] {
        assert!(output.contains(object), "{object} missing from:\n{output}");
    }

    // The NetworkPolicy, with selectors, peers and addresses of every kind set.
    let file = tempfile::NamedTempFile::new().expect("values file");
    std::fs::write(file.path(), PLATFORM_NETWORK_POLICY).expect("write values");
    let with_policy = template("chart/capov", &namespace, &["-f", file.path().to_str().unwrap()]).unwrap();
    assert!(with_policy.contains("kind: NetworkPolicy"), "{with_policy}");
    let output = plane
        .dry_run_apply(&with_policy)
        .unwrap_or_else(|err| panic!("capov with networkPolicy: {err}"));
    assert!(
        output.contains("networkpolicy.networking.k8s.io/capov-controller-manager"),
        "the NetworkPolicy missing from:\n{output}"
    );
}

const SERVICE_MONITOR_CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
  "spec": {
    "group": "monitoring.coreos.com",
    "scope": "Namespaced",
    "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList", "plural": "servicemonitors",
              "singular": "servicemonitor"},
    "versions": [{"name": "v1", "served": true, "storage": true,
                  "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
  }
}"#;

/// The PrometheusRule CRD with the structural schema of the Prometheus Operator's (monitoring.coreos.com_prometheusrules,
/// v1) for what the chart's rules use: groups with a name and rules; a rule's expr (string or integer), for (a
/// Prometheus duration), labels and annotations (strings). The API server then refuses a rule the operator would.
const PROMETHEUS_RULE_CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "prometheusrules.monitoring.coreos.com"},
  "spec": {
    "group": "monitoring.coreos.com",
    "scope": "Namespaced",
    "names": {"kind": "PrometheusRule", "listKind": "PrometheusRuleList", "plural": "prometheusrules",
              "singular": "prometheusrule"},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
          "groups": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "minLength": 1},
            "interval": {"type": "string", "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"},
            "rules": {"type": "array", "items": {"type": "object", "required": ["expr"], "properties": {
              "alert": {"type": "string"},
              "record": {"type": "string"},
              "expr": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true},
              "for": {"type": "string", "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"},
              "keep_firing_for": {"type": "string", "minLength": 1},
              "labels": {"type": "object", "additionalProperties": {"type": "string"}},
              "annotations": {"type": "object", "additionalProperties": {"type": "string"}}
            }}}
          }}}
        }}
      }}}}
    ]
  }
}"#;

/// With the Prometheus Operator's CRDs served, `auto` renders the ServiceMonitor, the PrometheusRule and the
/// dashboard's ConfigMap — both with `--api-versions` and with helm asking the cluster itself (`--validate`) — and
/// the API server accepts them.
#[tokio::test]
async fn service_monitor_applies_where_the_crd_exists() {
    let plane = ControlPlane::start(Options::default()).await.expect("control plane");
    let client = plane.client().await.expect("client");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (name, json) in [
        ("servicemonitors.monitoring.coreos.com", SERVICE_MONITOR_CRD),
        ("prometheusrules.monitoring.coreos.com", PROMETHEUS_RULE_CRD),
    ] {
        let crd: CustomResourceDefinition = serde_json::from_str(json).unwrap();
        crds.create(&PostParams::default(), &crd).await.expect(name);
        eventually(
            Duration::from_secs(30),
            format!("the CRD {name} Established"),
            || async {
                let crd = crds.get(name).await.expect("CRD");
                let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
                if conditions
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
                {
                    Ok(())
                } else {
                    Err(format!("{conditions:?}"))
                }
            },
        )
        .await;
    }
    let namespace = plane
        .create_namespace(&client, "chart-monitor")
        .await
        .expect("namespace");

    let rendered = template(
        "chart/capov",
        &namespace,
        &["--api-versions", "monitoring.coreos.com/v1"],
    )
    .unwrap();
    assert!(rendered.contains("kind: ServiceMonitor"));
    let output = plane
        .dry_run_apply(&rendered)
        .unwrap_or_else(|err| panic!("capov: {err}"));
    for object in [
        "servicemonitor.monitoring.coreos.com/capov-metrics-monitor",
        "prometheusrule.monitoring.coreos.com/capov-alerts",
        "configmap/capov-dashboard",
    ] {
        assert!(output.contains(object), "{object} missing from:\n{output}");
    }

    // helm discovers the API itself when it talks to the cluster.
    let kubeconfig = plane.kubeconfig_path().to_str().unwrap().to_string();
    let discovered = template("chart/capov", &namespace, &["--validate", "--kubeconfig", &kubeconfig])
        .unwrap_or_else(|err| panic!("{err}"));
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        assert!(
            discovered.contains(&format!("kind: {kind}")),
            "auto did not see monitoring.coreos.com/v1 for the {kind}"
        );
    }
    assert!(discovered.contains("name: capov-dashboard"));
}

/// A client of `plane`'s admin that impersonates `user`, as `kubectl --as` does: the API server authorizes each
/// request as that user (a service account's groups are added by the server).
async fn impersonating(plane: &ControlPlane, user: &str) -> kube::Client {
    let kubeconfig = Kubeconfig::read_from(plane.kubeconfig_path()).expect("kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    config.auth_info.impersonate = Some(user.into());
    kube::Client::try_from(config).expect("client")
}

fn is_forbidden(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 403)
}

/// Retries `request` while the API server answers 403: RBAC bindings reach the authorizer's cache a moment after
/// they are created.
async fn once_allowed<T, F, R>(what: &str, mut request: R) -> T
where
    R: FnMut() -> F,
    F: Future<Output = Result<T, kube::Error>>,
{
    eventually(Duration::from_secs(30), format!("RBAC to allow {what}"), || {
        let answer = request();
        async move {
            match answer.await {
                Err(err) if is_forbidden(&err) => Err(err.to_string()),
                Err(err) => panic!("{what}: {err}"),
                Ok(value) => Ok(value),
            }
        }
    })
    .await
}

fn assert_forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) {
    match result {
        Err(err) if is_forbidden(&err) => {}
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

/// The chart installed (`helm install`) with `watchNamespace=tenant-a` on a real API server: its service account —
/// impersonated, so the server's RBAC decides as for the running operator — reads a bootstrap data Secret by name in
/// tenant-a but not the same Secret in tenant-b, cannot list Secrets, sees OVirtMachines only in tenant-a, and still
/// sees the cluster-scoped OVirtProviders.
#[tokio::test]
async fn restricted_rbac_reads_bootstrap_secrets_only_in_the_watched_namespace() {
    // A control plane of its own: the chart's ClusterRole names are fixed, and this install is real, not a dry run.
    let plane = ControlPlane::start(Options {
        crds: true,
        ..Options::default()
    })
    .await
    .expect("control plane");
    let admin = plane.client().await.expect("client");
    const BOOTSTRAP: &str = "worker-0-bootstrap";
    for tenant in ["tenant-a", "tenant-b"] {
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(tenant.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .expect("namespace");
        // What a bootstrap provider writes for Machine.spec.bootstrap.dataSecretName.
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(BOOTSTRAP.into()),
                ..Default::default()
            },
            string_data: Some([("value".to_string(), format!("#cloud-config {tenant}"))].into()),
            ..Default::default()
        };
        Api::<Secret>::namespaced(admin.clone(), tenant)
            .create(&PostParams::default(), &secret)
            .await
            .expect("bootstrap Secret");
    }

    let kubeconfig = plane.kubeconfig_path().to_str().unwrap().to_string();
    let mut install = helm();
    install.args([
        "install",
        "capov",
        "chart/capov",
        "--namespace",
        "capov-system",
        "--create-namespace",
        "--set",
        "watchNamespace=tenant-a",
        "--kubeconfig",
        &kubeconfig,
    ]);
    stdout_of(&mut install).unwrap_or_else(|err| panic!("{err}"));

    let operator = impersonating(&plane, "system:serviceaccount:capov-system:capov-controller-manager").await;
    let secrets = |namespace: &str| Api::<Secret>::namespaced(operator.clone(), namespace);
    let params = ListParams::default();
    let tenant_a = secrets("tenant-a");
    let secret = once_allowed("get the bootstrap Secret in tenant-a", || tenant_a.get(BOOTSTRAP)).await;
    assert_eq!(secret.data.unwrap()["value"].0, b"#cloud-config tenant-a");
    // The ClusterRoleBinding is in effect too, so the denials below are the rules', not a cache's.
    let providers = Api::<OVirtProvider>::all(operator.clone());
    once_allowed("list OVirtProviders", || providers.list(&params)).await;

    assert_forbidden(
        secrets("tenant-b").get(BOOTSTRAP).await,
        "get the bootstrap Secret in tenant-b",
    );
    assert_forbidden(secrets("tenant-a").list(&params).await, "list Secrets in tenant-a");
    let machines = |namespace: &str| Api::<OVirtMachine>::namespaced(operator.clone(), namespace);
    machines("tenant-a")
        .list(&params)
        .await
        .expect("list OVirtMachines in tenant-a");
    assert_forbidden(
        machines("tenant-b").list(&params).await,
        "list OVirtMachines in tenant-b",
    );
    assert_forbidden(
        Api::<OVirtMachine>::all(operator.clone()).list(&params).await,
        "list OVirtMachines in every namespace",
    );
}
