//! OVirtProvider: the connection to one oVirt Engine, shared by machines of every namespace.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;

/// Connection parameters of one oVirt Engine (a "provider instance"). Machines of any namespace can use it.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "OVirtProvider",
    plural = "ovirtproviders",
    shortname = "capovp",
    category = "cluster-api",
    status = "OVirtProviderStatus",
    printcolumn(name = "Ready", type_ = "boolean", json_path = ".status.ready"),
    printcolumn(name = "Engine", type_ = "string", json_path = ".spec.engine", priority = 1),
    printcolumn(name = "Version", type_ = "string", json_path = ".status.engineVersion", priority = 1),
    validation = Rule::new(
        "self.spec == oldSelf.spec || (has(self.spec.credentialsSecretName) && self.spec.credentialsSecretName != '')"
    )
    .message(
        "spec.credentialsSecretName must be set before this OVirtProvider can be changed: put the username and \
         password into a Secret (keys username and password) in the operator namespace and name it here; \
         spec.user and spec.pass are deprecated"
    )
)]
#[x_kube(validation = Rule::new(
    "(has(self.credentialsSecretName) && self.credentialsSecretName != '') || \
     (has(self.user) && self.user != '' && has(self.pass) && self.pass != '')"
).message(
    "no credentials: set spec.credentialsSecretName to a Secret with keys username and password in the operator \
     namespace (or the deprecated spec.user and spec.pass)"
))]
#[serde(rename_all = "camelCase")]
pub struct OVirtProviderSpec {
    /// URL of the oVirt Engine API, e.g. https://ovirt.example.com/ovirt-engine/api. Without user:password@: the
    /// credentials belong in the Secret named by credentialsSecretName.
    #[x_kube(
        // Both rules report Forbidden, not Invalid: the apiserver quotes the value of an Invalid string field, and
        // a URL may carry a password.
        validation = Rule::new("self.matches('^https?://[^/?#\\\\s]+')")
            .message(
                "spec.engine must be an http(s) URL of the engine API, e.g. https://ovirt.example.com/ovirt-engine/api"
            )
            .reason(Reason::FieldValueForbidden),
        // An `@` before the first `/`, `?` or `#` after the scheme is userinfo (capov_ovirt::has_userinfo).
        validation = Rule::new("!self.matches('^[^:/?#]+://[^/?#]*@')")
            .message(
                "spec.engine must not contain a username or password (user:password@): remove them from the URL and \
                 put the credentials into a Secret (keys username and password) in the operator namespace named by \
                 spec.credentialsSecretName"
            )
            .reason(Reason::FieldValueForbidden)
    )]
    pub engine: String,

    /// Name of a Secret in the operator's credentials namespace (capov-system by default) with the keys
    /// `username` (e.g. admin@internal) and `password`. When it is empty or the Secret does not exist,
    /// spec.user and spec.pass are used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_name: Option<String>,

    /// Deprecated: put the username into the Secret named by spec.credentialsSecretName. Used only when that
    /// field is empty or its Secret is not found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,

    /// Deprecated: put the password into the Secret named by spec.credentialsSecretName. Used only when that
    /// field is empty or its Secret is not found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<String>,

    /// How the engine's TLS certificate is verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ProviderTls>,

    /// Default for disk cloning of machines that leave spec.diskclone empty: true clones the template disks
    /// (needed to place them on another storage domain), false creates thin copy-on-write disks. Empty: the
    /// operator's disk-clone feature gate decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diskclone: Option<bool>,

    /// Default storage domain for the disks of new VMs whose OVirtMachine leaves spec.storagedomainname empty.
    /// Empty: the disks go where the template's disks are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storagedomainname: Option<String>,

    /// Tag new VMs in oVirt with `capov`, their namespace and their cluster, creating the tags CAPOV needs, so that
    /// engine administrators see what a VM belongs to. The engine lets only users with tag management on the system
    /// (e.g. the TagManager role) create and assign tags. Default: false (no tags; one request per tag and VM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmtags: Option<bool>,

    /// Namespaces whose OVirtMachines may use this provider: those listed in `names` and those whose labels match
    /// `selector`. Unset: every namespace (single-tenant management clusters). Set but empty: none. Machines of
    /// other namespaces get CanConnectToOVirt False, reason NamespaceNotAllowed, and cause no engine request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_namespaces: Option<AllowedNamespaces>,

    /// Which host labels and oVirt clusters the machines using this provider may ask for (through failure domains'
    /// hostlabel and ovirtcluster, and spec.ovirtcluster): tenants write those, and CAPOV's engine user acts on them.
    /// Unset: any (single-tenant management clusters). A machine asking for another gets MachineCreated False,
    /// reason PlacementNotAllowed, and no VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_placement: Option<TenantPlacement>,
}

/// The host labels and oVirt clusters machines may ask for. Each list unset: any; set but empty: none.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TenantPlacement {
    /// oVirt affinity labels a failure domain's hostlabel may name (the domain's VMs run only on hosts carrying it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    #[schemars(inner(length(max = 50)))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    #[x_kube(validation = Rule::new("self.all(label, label != '' && !label.matches('[^\\\\p{L}0-9._-]'))").message(
        "spec.tenantPlacement.hostLabels must name oVirt affinity labels: letters, digits, '.', '_' and '-', at most \
         50 characters, e.g. rack-a"
    ))]
    pub host_labels: Option<Vec<String>>,

    /// oVirt clusters a machine's VM may be put in (spec.ovirtcluster, or its failure domain's ovirtcluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    #[schemars(inner(length(max = 40)))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    #[x_kube(validation = Rule::new("self.all(cluster, cluster != '' && !cluster.matches('[^\\\\p{L}0-9._-]'))").message(
        "spec.tenantPlacement.ovirtClusters must name oVirt clusters: letters, digits, '.', '_' and '-', at most 40 \
         characters, e.g. Default"
    ))]
    pub ovirt_clusters: Option<Vec<String>>,
}

/// Which namespaces may use an OVirtProvider.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AllowedNamespaces {
    /// Namespaces allowed by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,

    /// Namespaces allowed by their labels (an empty selector matches every namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
}

/// TLS verification of the engine's certificate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ProviderTls {
    /// Skip certificate verification entirely. For development and diagnosis only.
    #[serde(default)]
    pub insecure: bool,

    /// Trust the system's CA bundle (also the case when spec.tls.certs is empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<bool>,

    /// Base64-encoded PEM bundle of CA certificates to trust, e.g. the engine's own CA
    /// (https://ENGINE/ovirt-engine/services/pki-resource?resource=ca-certificate&format=X509-PEM-CA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certs: Option<String>,
}

/// Observed state of the engine connection.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OVirtProviderStatus {
    /// True when the engine is reachable and accepted the credentials.
    #[serde(default)]
    pub ready: bool,

    /// CanConnectToOVirt, Ready and Paused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// Engine version from the API root's product info, e.g. 4.5.5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_version: Option<String>,
}
