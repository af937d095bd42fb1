//! Objects tenants write, decoded into only what CAPOV reads (issue 35). A size cap on bytes is not a memory bound:
//! an OVirtMachine with 1.4 MiB of tiny labels decodes into tens of MB of map entries, and trimming after the decode
//! (what `slim` did alone) still keeps every label and annotation. Here the metadata is filtered while it is decoded:
//! a label or annotation CAPOV does not read is skipped without being allocated, a kept annotation's value is cut to
//! [`MAX_ANNOTATION_VALUE`], finalizers and owner references are counted and kept up to a bound, and everything else
//! (managedFields, generateName, …) is skipped. What one object can cost after decoding is then fixed by the
//! policy, whatever the tenant wrote: docs/decisions.md, "What a tenant's input can cost".
//!
//! [`Slim`] wraps a CAPOV kind for the watches and writes: the same API resource, decoded through its
//! [`SlimKind`] policy. The CAPI and IPAM types CAPOV decodes itself use [`deserialize_meta`] directly.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::de::{self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// Finalizers kept of one object: CAPOV adds and removes its own with a patch that tests the whole list, so the list
/// is kept whole as long as it is this long; past it the patch's test fails and the object is read afresh.
pub const MAX_FINALIZERS: usize = 16;
/// Owner references kept of one object (only those of the kinds the policy names).
pub const MAX_OWNERS: usize = 4;
/// The longest annotation value kept (CAPOV's own are ids and names; the system-disks list of 16 disks is 600 bytes).
pub const MAX_ANNOTATION_VALUE: usize = 8 * 1024;

/// What CAPOV keeps of one kind's metadata.
#[derive(Debug)]
pub struct MetaPolicy {
    /// Label keys read; every other label is skipped.
    pub labels: &'static [&'static str],
    /// Annotation keys read; every other annotation is skipped.
    pub annotations: &'static [&'static str],
    /// Kinds of the owner references read (e.g. `Machine`); none: no owner reference is kept.
    pub owner_kinds: &'static [&'static str],
    /// Also keep the controller owner reference, whatever its kind.
    pub controller_owner: bool,
}

impl MetaPolicy {
    fn keeps_owner(&self, owner: &OwnerReference) -> bool {
        self.owner_kinds.contains(&owner.kind.as_str()) || (self.controller_owner && owner.controller == Some(true))
    }
}

/// Decodes an object's `metadata` keeping only what `policy` names (and its identity: name, namespace, uid,
/// resourceVersion, generation, creation and deletion times).
pub fn deserialize_meta<'de, D: Deserializer<'de>>(
    deserializer: D,
    policy: &'static MetaPolicy,
) -> Result<ObjectMeta, D::Error> {
    deserializer.deserialize_map(MetaVisitor { policy })
}

/// Trims metadata decoded in full (an object a write returned) to what `policy` keeps.
pub fn trim_meta(meta: &mut ObjectMeta, policy: &MetaPolicy) {
    let kept = |map: Option<BTreeMap<String, String>>, keys: &[&str], cut: Option<usize>| {
        let kept: BTreeMap<String, String> = map
            .into_iter()
            .flatten()
            .filter(|(key, _)| keys.contains(&key.as_str()))
            .map(|(key, value)| match cut {
                Some(limit) => (key, capov_core::trust::bounded_text::cut(&value, limit)),
                None => (key, value),
            })
            .collect();
        (!kept.is_empty()).then_some(kept)
    };
    meta.labels = kept(meta.labels.take(), policy.labels, None);
    meta.annotations = kept(meta.annotations.take(), policy.annotations, Some(MAX_ANNOTATION_VALUE));
    if let Some(finalizers) = meta.finalizers.as_mut() {
        finalizers.truncate(MAX_FINALIZERS);
    }
    meta.owner_references = meta.owner_references.take().and_then(|owners| {
        let kept: Vec<OwnerReference> = owners
            .into_iter()
            .filter(|owner| policy.keeps_owner(owner))
            .take(MAX_OWNERS)
            .collect();
        (!kept.is_empty()).then_some(kept)
    });
    meta.managed_fields = None;
    meta.generate_name = None;
    meta.self_link = None;
    meta.deletion_grace_period_seconds = None;
}

struct MetaVisitor {
    policy: &'static MetaPolicy,
}

impl<'de> Visitor<'de> for MetaVisitor {
    type Value = ObjectMeta;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("object metadata")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ObjectMeta, A::Error> {
        let policy = self.policy;
        let mut meta = ObjectMeta::default();
        while let Some(field) = map.next_key::<Cow<'de, str>>()? {
            match field.as_ref() {
                "name" => meta.name = map.next_value()?,
                "namespace" => meta.namespace = map.next_value()?,
                "uid" => meta.uid = map.next_value()?,
                "resourceVersion" => meta.resource_version = map.next_value()?,
                "generation" => meta.generation = map.next_value()?,
                "creationTimestamp" => meta.creation_timestamp = map.next_value::<Option<Time>>()?,
                "deletionTimestamp" => meta.deletion_timestamp = map.next_value::<Option<Time>>()?,
                "labels" => {
                    meta.labels = map.next_value_seed(FilteredMap {
                        keys: policy.labels,
                        cut: None,
                    })?
                }
                "annotations" => {
                    meta.annotations = map.next_value_seed(FilteredMap {
                        keys: policy.annotations,
                        cut: Some(MAX_ANNOTATION_VALUE),
                    })?
                }
                "finalizers" => {
                    meta.finalizers = map.next_value_seed(Bounded::<String>::new(MAX_FINALIZERS, |_| true))?
                }
                "ownerReferences" => {
                    meta.owner_references = map
                        .next_value_seed(Bounded::<OwnerReference>::new(MAX_OWNERS, |owner| {
                            policy.keeps_owner(owner)
                        }))?
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(meta)
    }
}

/// A string map of which only `keys` are kept (values cut to `cut`); None when none is.
struct FilteredMap {
    keys: &'static [&'static str],
    cut: Option<usize>,
}

impl<'de> DeserializeSeed<'de> for FilteredMap {
    type Value = Option<BTreeMap<String, String>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for FilteredMap {
    type Value = Option<BTreeMap<String, String>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map of strings")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept = BTreeMap::new();
        while let Some(key) = map.next_key_seed(KnownKey(self.keys))? {
            match key {
                Some(key) => {
                    let value: String = map.next_value()?;
                    let value = match self.cut {
                        Some(limit) if value.len() > limit => capov_core::trust::bounded_text::cut(&value, limit),
                        _ => value,
                    };
                    kept.insert(key.to_string(), value);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((!kept.is_empty()).then_some(kept))
    }
}

/// A map key: the matching entry of the list when it is one of them, else None; nothing is allocated either way.
struct KnownKey(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for KnownKey {
    type Value = Option<&'static str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KnownKey {
    type Value = Option<&'static str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().find(|known| **known == key).copied())
    }
}

/// A list of which at most `limit` items that `keep` accepts are kept; every item is read and counted, none beyond
/// the limit is held.
struct Bounded<T> {
    limit: usize,
    keep: Box<dyn Fn(&T) -> bool>,
}

impl<T> Bounded<T> {
    fn new(limit: usize, keep: impl Fn(&T) -> bool + 'static) -> Bounded<T> {
        Bounded {
            limit,
            keep: Box::new(keep),
        }
    }
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Bounded<T> {
    type Value = Option<Vec<T>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Bounded<T> {
    type Value = Option<Vec<T>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut kept = Vec::new();
        while kept.len() < self.limit {
            match seq.next_element::<T>()? {
                Some(item) if (self.keep)(&item) => kept.push(item),
                Some(_) => {}
                None => break,
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        // Held with the object for its life: a list grown to room for four holding one owner reference wastes
        // 300 bytes a machine.
        kept.shrink_to_fit();
        Ok((!kept.is_empty()).then_some(kept))
    }
}

/// A kind CAPOV decodes through a [`MetaPolicy`]: its spec and status are decoded as usual (their schema bounds
/// them), its metadata by the policy.
pub trait SlimKind: kube::Resource<DynamicType = ()> + Sized {
    const POLICY: &'static MetaPolicy;
    type Spec: DeserializeOwned;
    type Status: DeserializeOwned;
    fn assemble(metadata: ObjectMeta, spec: Self::Spec, status: Option<Self::Status>) -> Self;
}

/// `K` decoded through its policy (and, as a resource, the same as `K`).
#[derive(Clone, Debug)]
pub struct Slim<K>(pub K);

impl<K> Slim<K> {
    pub fn into_inner(self) -> K {
        self.0
    }
}

impl<K: kube::Resource<DynamicType = ()>> kube::Resource for Slim<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

impl<'de, K: SlimKind> Deserialize<'de> for Slim<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(SlimVisitor(PhantomData))
    }
}

struct SlimVisitor<K>(PhantomData<K>);

/// The metadata of `K`, decoded by its policy.
struct MetaOf<K>(PhantomData<K>);

impl<'de, K: SlimKind> DeserializeSeed<'de> for MetaOf<K> {
    type Value = ObjectMeta;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<ObjectMeta, D::Error> {
        deserialize_meta(deserializer, K::POLICY)
    }
}

impl<'de, K: SlimKind> Visitor<'de> for SlimVisitor<K> {
    type Value = Slim<K>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a {}", K::kind(&()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Slim<K>, A::Error> {
        let (mut metadata, mut spec, mut status) = (None, None, None);
        while let Some(field) = map.next_key::<Cow<'de, str>>()? {
            match field.as_ref() {
                "metadata" => metadata = Some(map.next_value_seed(MetaOf::<K>(PhantomData))?),
                "spec" => spec = Some(map.next_value::<K::Spec>()?),
                "status" => status = map.next_value::<Option<K::Status>>()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let spec = spec.ok_or_else(|| de::Error::missing_field("spec"))?;
        Ok(Slim(K::assemble(metadata.unwrap_or_default(), spec, status)))
    }
}

/// The labels CAPI puts on a Machine (and copies to its infrastructure machine) that CAPOV reads: the cluster, the
/// watch filter, and the labels naming the machine's group (affinity groups).
const MACHINE_LABELS: &[&str] = &[
    capov_crds::labels::CLUSTER_NAME_LABEL,
    capov_crds::labels::WATCH_FILTER_LABEL,
    capov_crds::labels::CONTROL_PLANE_LABEL,
    capov_core::placement::affinity_groups::DEPLOYMENT_LABEL,
    capov_core::placement::affinity_groups::MACHINE_SET_LABEL,
];

/// An OVirtMachine: the labels above, CAPOV's own annotations and the ones users set on it, the owner Machine.
pub static OVIRT_MACHINE: MetaPolicy = MetaPolicy {
    labels: MACHINE_LABELS,
    annotations: &[
        capov_crds::labels::PAUSED_ANNOTATION,
        capov_crds::labels::CREATED_VM_ANNOTATION,
        capov_crds::labels::VM_NAME_ANNOTATION,
        capov_crds::labels::RELEASE_VM_ANNOTATION,
        capov_crds::labels::ENGINE_ANNOTATION,
        capov_crds::labels::SYSTEM_DISKS_ANNOTATION,
        capov_crds::labels::OWNER_UID_ANNOTATION,
        capov_crds::labels::DELETE_FOR_MOVE_ANNOTATION,
        capov_crds::labels::RECONCILE_REQUESTED_ANNOTATION,
    ],
    owner_kinds: &["Machine"],
    controller_owner: false,
};

/// An OVirtCluster: its cluster and watch filter, whether it is paused or managed by someone else.
pub static OVIRT_CLUSTER: MetaPolicy = MetaPolicy {
    labels: &[
        capov_crds::labels::CLUSTER_NAME_LABEL,
        capov_crds::labels::WATCH_FILTER_LABEL,
    ],
    annotations: &[
        capov_crds::labels::PAUSED_ANNOTATION,
        capov_crds::labels::MANAGED_BY_ANNOTATION,
    ],
    owner_kinds: &[],
    controller_owner: false,
};

/// An OVirtMachineTemplate: its spec alone is read (its status is computed from it).
pub static OVIRT_MACHINE_TEMPLATE: MetaPolicy = MetaPolicy {
    labels: &[],
    annotations: &[],
    owner_kinds: &[],
    controller_owner: false,
};

/// A CAPI Machine or Cluster: the Machine's group labels; the controller owner (a Machine's control plane or
/// MachineSet).
pub static CAPI_OBJECT: MetaPolicy = MetaPolicy {
    labels: MACHINE_LABELS,
    annotations: &[],
    owner_kinds: &[],
    controller_owner: true,
};

/// An IPAddressClaim: who owns it (CAPOV's kinds), and nothing else beyond its identity and finalizers.
pub static IP_ADDRESS_CLAIM: MetaPolicy = MetaPolicy {
    labels: &[],
    annotations: &[],
    owner_kinds: &["OVirtMachine", "OVirtCluster"],
    controller_owner: false,
};

/// An IPAddress: its identity.
pub static IP_ADDRESS: MetaPolicy = MetaPolicy {
    labels: &[],
    annotations: &[],
    owner_kinds: &[],
    controller_owner: false,
};

impl SlimKind for capov_crds::OVirtMachine {
    const POLICY: &'static MetaPolicy = &OVIRT_MACHINE;
    type Spec = capov_crds::OVirtMachineSpec;
    type Status = capov_crds::OVirtMachineStatus;

    fn assemble(metadata: ObjectMeta, spec: Self::Spec, status: Option<Self::Status>) -> Self {
        capov_crds::OVirtMachine { metadata, spec, status }
    }
}

impl SlimKind for capov_crds::OVirtCluster {
    const POLICY: &'static MetaPolicy = &OVIRT_CLUSTER;
    type Spec = capov_crds::OVirtClusterSpec;
    type Status = capov_crds::OVirtClusterStatus;

    fn assemble(metadata: ObjectMeta, spec: Self::Spec, status: Option<Self::Status>) -> Self {
        capov_crds::OVirtCluster { metadata, spec, status }
    }
}

impl SlimKind for capov_crds::OVirtMachineTemplate {
    const POLICY: &'static MetaPolicy = &OVIRT_MACHINE_TEMPLATE;
    type Spec = capov_crds::OVirtMachineTemplateSpec;
    type Status = capov_crds::OVirtMachineTemplateStatus;

    fn assemble(metadata: ObjectMeta, spec: Self::Spec, status: Option<Self::Status>) -> Self {
        capov_crds::OVirtMachineTemplate { metadata, spec, status }
    }
}

/// `deserialize_with` for the CAPI types' metadata.
pub fn capi_meta<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    deserialize_meta(deserializer, &CAPI_OBJECT)
}

/// `deserialize_with` for an IPAddressClaim's metadata.
pub fn claim_meta<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    deserialize_meta(deserializer, &IP_ADDRESS_CLAIM)
}

/// `deserialize_with` for an IPAddress's metadata.
pub fn address_meta<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    deserialize_meta(deserializer, &IP_ADDRESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use capov_crds::OVirtMachine;
    use serde_json::{Map, Value, json};

    fn machine_json(labels: Map<String, Value>, annotations: Value) -> Value {
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachine",
            "metadata": {
                "name": "m", "namespace": "ns", "uid": "u", "resourceVersion": "7", "generation": 3,
                "creationTimestamp": "2026-12-06T00:00:00Z",
                "labels": labels, "annotations": annotations,
                "finalizers": (0..40).map(|n| format!("f{n}")).collect::<Vec<_>>(),
                "ownerReferences": [
                    {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "name": "ms", "uid": "1"},
                    {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": "m", "uid": "2"}
                ],
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:metadata": {}}}]
            },
            "spec": {"provider": "p", "ovirtcluster": "Default", "template": "t"},
            "status": {"ready": true}
        })
    }

    #[test]
    fn a_machine_keeps_only_the_labels_annotations_and_owners_capov_reads() {
        let mut labels: Map<String, Value> = (0..5000).map(|n| (format!("k{n}"), json!(""))).collect();
        labels.insert(capov_crds::labels::CLUSTER_NAME_LABEL.into(), json!("c"));
        let annotations = json!({
            capov_crds::labels::SYSTEM_DISKS_ANNOTATION: "d".repeat(100_000),
            capov_crds::labels::RECONCILE_REQUESTED_ANNOTATION: "1733400000",
            "someone.else/annotation": "x"
        });
        let Slim(machine): Slim<OVirtMachine> =
            serde_json::from_value(machine_json(labels, annotations)).expect("decodes");
        let meta = &machine.metadata;
        assert_eq!(
            (meta.name.as_deref(), meta.namespace.as_deref(), meta.uid.as_deref()),
            (Some("m"), Some("ns"), Some("u"))
        );
        assert_eq!(
            (meta.resource_version.as_deref(), meta.generation),
            (Some("7"), Some(3))
        );
        assert!(meta.creation_timestamp.is_some() && meta.managed_fields.is_none());
        let labels = meta.labels.as_ref().expect("labels");
        assert_eq!(
            labels.keys().collect::<Vec<_>>(),
            [capov_crds::labels::CLUSTER_NAME_LABEL]
        );
        let annotations = meta.annotations.as_ref().expect("annotations");
        assert_eq!(
            annotations.len(),
            2,
            "the system disks and the reconcile request: {annotations:?}"
        );
        assert_eq!(
            annotations[capov_crds::labels::SYSTEM_DISKS_ANNOTATION].len(),
            MAX_ANNOTATION_VALUE
        );
        assert_eq!(meta.finalizers.as_ref().map(Vec::len), Some(MAX_FINALIZERS));
        let owners = meta.owner_references.as_ref().expect("owners");
        assert_eq!(owners.iter().map(|o| o.kind.as_str()).collect::<Vec<_>>(), ["Machine"]);
        assert_eq!(machine.spec.settings.provider, "p");
        assert_eq!(machine.status.map(|s| s.ready), Some(true));
    }

    #[test]
    fn an_ordinary_machine_decodes_as_a_full_decode_trimmed_does() {
        let labels: Map<String, Value> = [
            (capov_crds::labels::CLUSTER_NAME_LABEL.to_string(), json!("c")),
            (capov_crds::labels::WATCH_FILTER_LABEL.to_string(), json!("w")),
            ("team".to_string(), json!("a")),
        ]
        .into_iter()
        .collect();
        let annotations = json!({capov_crds::labels::CREATED_VM_ANNOTATION: "vm", "kubectl/last-applied": "{}"});
        let value = machine_json(labels, annotations);
        let Slim(slim): Slim<OVirtMachine> = serde_json::from_value(value.clone()).expect("slim");
        let mut full: OVirtMachine = serde_json::from_value(value).expect("full");
        trim_meta(&mut full.metadata, &OVIRT_MACHINE);
        assert_eq!(slim.metadata, full.metadata);
        assert_eq!((slim.spec, slim.status), (full.spec, full.status));
    }

    #[test]
    fn absent_or_null_lists_and_maps_decode_as_absent() {
        let value = json!({
            "metadata": {"name": "m", "labels": null, "annotations": {}, "finalizers": null},
            "spec": {"provider": "p", "ovirtcluster": "Default", "template": "t"}
        });
        let Slim(machine): Slim<OVirtMachine> = serde_json::from_value(value).expect("decodes");
        let meta = &machine.metadata;
        assert!(meta.labels.is_none() && meta.annotations.is_none() && meta.finalizers.is_none());
        assert!(machine.status.is_none());
        let no_spec = json!({"metadata": {"name": "m"}});
        assert!(serde_json::from_value::<Slim<OVirtMachine>>(no_spec).is_err());
    }

    #[test]
    fn a_claim_keeps_only_owners_of_capovs_kinds() {
        #[derive(Deserialize)]
        struct Claim {
            #[serde(deserialize_with = "claim_meta")]
            metadata: ObjectMeta,
        }
        let claim: Claim = serde_json::from_value(json!({"metadata": {
            "name": "c",
            "ownerReferences": (0..1000).map(|n| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": n.to_string(),
                                                         "uid": n.to_string()}))
                .chain([json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachine",
                               "name": "m", "uid": "u"})])
                .collect::<Vec<_>>()
        }}))
        .expect("claim");
        let owners = claim.metadata.owner_references.expect("owners");
        assert_eq!(
            owners.iter().map(|o| o.kind.as_str()).collect::<Vec<_>>(),
            ["OVirtMachine"]
        );
    }
}
