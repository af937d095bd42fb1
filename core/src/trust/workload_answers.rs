//! What CAPOV decodes of the answers a tenant controls: a workload apiserver's Nodes, VolumeAttachments, list pages
//! and errors, and the `<cluster>-kubeconfig` Secret. A byte cap alone does not bound memory: a 1 MiB page of
//! `{"items":[{},{},…]}` is about 350,000 items, and decoded into k8s-openapi's full types it is hundreds of megabytes
//! (docs/decisions.md, "What a tenant's input can cost"). So answers are decoded here into slim types that hold only
//! what CAPOV reads, every string cut to a bound as it is decoded, everything else skipped without being allocated
//! (`IgnoredAny`), and a list page refused as soon as it holds more items than the `limit` asked for: what one
//! answer decodes to is bounded by constants, not by what the server sends.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use base64::Engine as _;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::placement::node_topology;
use crate::trust::bounded_text;

/// Longest name kept: the longest Kubernetes allows.
pub const NAME: usize = 253;
/// Longest providerID kept; CAPOV's own are `ovirt://` and a UUID.
pub const PROVIDER_ID: usize = 256;
/// Longest systemUUID kept (a UUID is 36).
pub const SYSTEM_UUID: usize = 64;
/// Longest label value kept: a valid one has at most 63 characters, so a longer one is cut (and marked) and never
/// equals a value CAPOV writes.
pub const LABEL_VALUE: usize = 72;
/// How much of a workload apiserver's error message is kept.
pub const ERROR_TEXT: usize = 300;
/// Longest continue token accepted. An apiserver's token is the base64 of a small JSON object (a resourceVersion and
/// the key to start from); a longer one is refused, not sent back in a URL.
pub const CONTINUE_TOKEN: usize = 8 * 1024;

/// A string cut to `N` bytes as it is decoded (`bounded_text::cut`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cut<const N: usize>(pub String);

impl<'de, const N: usize> Deserialize<'de> for Cut<N> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CutVisitor<const N: usize>;
        impl<const N: usize> Visitor<'_> for CutVisitor<N> {
            type Value = Cut<N>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Cut<N>, E> {
                Ok(Cut(bounded_text::cut(text, N)))
            }
        }
        deserializer.deserialize_str(CutVisitor::<N>)
    }
}

fn cut<const N: usize>(text: Option<Cut<N>>) -> Option<String> {
    text.map(|Cut(text)| text)
}

// ---- Nodes ----

/// A Node as CAPOV reads it: its name, providerID, systemUUID, and its labels among [`node_topology::KEYS`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlimNode {
    pub name: String,
    pub provider_id: Option<String>,
    pub system_uuid: Option<String>,
    pub labels: BTreeMap<String, String>,
}

impl<'de> Deserialize<'de> for SlimNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Wire {
            metadata: Meta,
            spec: Spec,
            status: Status,
        }
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Meta {
            name: Option<Cut<NAME>>,
            labels: TopologyLabels,
        }
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Spec {
            #[serde(rename = "providerID")]
            provider_id: Option<Cut<PROVIDER_ID>>,
        }
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Status {
            #[serde(rename = "nodeInfo")]
            node_info: NodeInfo,
        }
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct NodeInfo {
            #[serde(rename = "systemUUID")]
            system_uuid: Option<Cut<SYSTEM_UUID>>,
        }
        let wire = Wire::deserialize(deserializer)?;
        Ok(SlimNode {
            name: cut(wire.metadata.name).unwrap_or_default(),
            provider_id: cut(wire.spec.provider_id),
            system_uuid: cut(wire.status.node_info.system_uuid),
            labels: wire.metadata.labels.0,
        })
    }
}

/// A Node's labels among [`node_topology::KEYS`]; the other keys are compared where they lie in the answer and
/// skipped, never allocated.
#[derive(Default)]
struct TopologyLabels(BTreeMap<String, String>);

impl<'de> Deserialize<'de> for TopologyLabels {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LabelsVisitor;
        impl<'de> Visitor<'de> for LabelsVisitor {
            type Value = TopologyLabels;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of labels")
            }
            fn visit_unit<E: de::Error>(self) -> Result<TopologyLabels, E> {
                Ok(TopologyLabels::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopologyLabels, A::Error> {
                let mut labels = BTreeMap::new();
                while let Some(key) = map.next_key_seed(OneOf(&node_topology::KEYS))? {
                    match key.and_then(|index| node_topology::KEYS.get(index)) {
                        Some(key) => {
                            if let Some(Cut(value)) = map.next_value::<Option<Cut<LABEL_VALUE>>>()? {
                                labels.insert(key.to_string(), value);
                            }
                        }
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(TopologyLabels(labels))
            }
        }
        deserializer.deserialize_any(LabelsVisitor)
    }
}

/// A map key decoded as its index in a list of wanted keys (None: not wanted), without allocating it.
struct OneOf<'k>(&'k [&'k str]);

impl<'de> DeserializeSeed<'de> for OneOf<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<usize>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for OneOf<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|wanted| *wanted == key))
    }
}

// ---- VolumeAttachments ----

/// A VolumeAttachment as CAPOV reads it: its name and the Node it names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlimVolumeAttachment {
    pub name: String,
    pub node_name: String,
}

impl<'de> Deserialize<'de> for SlimVolumeAttachment {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Wire {
            metadata: Meta,
            spec: Spec,
        }
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Meta {
            name: Option<Cut<NAME>>,
        }
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Spec {
            #[serde(rename = "nodeName")]
            node_name: Option<Cut<NAME>>,
        }
        let wire = Wire::deserialize(deserializer)?;
        Ok(SlimVolumeAttachment {
            name: cut(wire.metadata.name).unwrap_or_default(),
            node_name: cut(wire.spec.node_name).unwrap_or_default(),
        })
    }
}

// ---- list pages ----

/// One page of a list: its items (at most the `limit` asked for) and the token of the next page.
#[derive(Debug, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub continue_token: Option<String>,
}

/// Why an answer was not decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// The page held more items than asked for: no Kubernetes apiserver answers so.
    #[error(
        "the answer held more items than the {limit} asked for (limit={limit}), which a Kubernetes apiserver never \
         does; the page was refused"
    )]
    TooManyItems { limit: usize },
    /// The continue token is longer than [`CONTINUE_TOKEN`].
    #[error(
        "the answer's continue token is longer than {CONTINUE_TOKEN} bytes, which a Kubernetes apiserver never writes"
    )]
    LongToken,
    /// Not JSON of the expected shape (serde's message, cut).
    #[error("the answer is not what a Kubernetes apiserver sends: {0}")]
    Malformed(String),
}

impl AnswerError {
    fn malformed(err: serde_json::Error) -> AnswerError {
        AnswerError::Malformed(bounded_text::cut(&err.to_string(), ERROR_TEXT))
    }
}

/// An answer decoded as one `T`.
pub fn decode<T: for<'de> Deserialize<'de>>(answer: &[u8]) -> Result<T, AnswerError> {
    serde_json::from_slice(answer).map_err(AnswerError::malformed)
}

/// A list page, refused as soon as it holds more than `limit` items.
pub fn decode_page<T: for<'de> Deserialize<'de>>(answer: &[u8], limit: usize) -> Result<Page<T>, AnswerError> {
    let refused = Cell::new(None);
    let seed = PageSeed {
        limit,
        refused: &refused,
        item: PhantomData,
    };
    let mut deserializer = serde_json::Deserializer::from_slice(answer);
    let decoded = seed
        .deserialize(&mut deserializer)
        .and_then(|page| deserializer.end().map(|()| page));
    match (decoded, refused.take()) {
        (_, Some(refusal)) => Err(refusal),
        (Ok(page), None) => Ok(page),
        (Err(err), None) => Err(AnswerError::malformed(err)),
    }
}

struct PageSeed<'r, T> {
    limit: usize,
    /// Why the page was refused, when it was for a reason of its own (serde's error carries only text).
    refused: &'r Cell<Option<AnswerError>>,
    item: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for PageSeed<'_, T> {
    type Value = Page<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Page<T>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for PageSeed<'_, T> {
    type Value = Page<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Page<T>, A::Error> {
        let mut page = Page {
            items: Vec::new(),
            continue_token: None,
        };
        while let Some(key) = map.next_key_seed(OneOf(&["items", "metadata"]))? {
            match key {
                Some(0) => {
                    page.items = map.next_value_seed(Items {
                        limit: self.limit,
                        refused: self.refused,
                        item: PhantomData,
                    })?;
                }
                Some(_) => {
                    let meta: ListMeta = map.next_value()?;
                    page.continue_token = match meta.continue_token {
                        Some(Token::Kept(token)) => Some(token).filter(|token| !token.is_empty()),
                        Some(Token::TooLong) => {
                            self.refused.set(Some(AnswerError::LongToken));
                            return Err(de::Error::custom(AnswerError::LongToken));
                        }
                        None => None,
                    };
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(page)
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ListMeta {
    #[serde(rename = "continue")]
    continue_token: Option<Token>,
}

/// A continue token, kept whole (a cut one is useless) only when it is not too long.
enum Token {
    Kept(String),
    TooLong,
}

impl<'de> Deserialize<'de> for Token {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TokenVisitor;
        impl Visitor<'_> for TokenVisitor {
            type Value = Token;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a continue token")
            }
            fn visit_str<E: de::Error>(self, token: &str) -> Result<Token, E> {
                Ok(match token.len() <= CONTINUE_TOKEN {
                    true => Token::Kept(token.to_string()),
                    false => Token::TooLong,
                })
            }
        }
        deserializer.deserialize_str(TokenVisitor)
    }
}

/// A page's items, at most `limit`: the first one past it is skipped, not decoded, and refuses the page.
struct Items<'r, T> {
    limit: usize,
    refused: &'r Cell<Option<AnswerError>>,
    item: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Items<'_, T> {
    type Value = Vec<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Vec<T>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Items<'_, T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a list of at most {} items", self.limit)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Vec<T>, E> {
        Ok(Vec::new())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut items = Vec::new();
        loop {
            if items.len() == self.limit {
                if seq.next_element::<IgnoredAny>()?.is_some() {
                    let refusal = AnswerError::TooManyItems { limit: self.limit };
                    self.refused.set(Some(refusal.clone()));
                    return Err(de::Error::custom(refusal));
                }
                return Ok(items);
            }
            match seq.next_element::<T>()? {
                Some(item) => items.push(item),
                None => return Ok(items),
            }
        }
    }
}

// ---- errors ----

/// What CAPOV keeps of an error answer: its reason and message, cut; `details.causes` and the rest are skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlimStatus {
    pub reason: Option<String>,
    pub message: Option<String>,
}

impl SlimStatus {
    /// The status in an error answer's body: a Kubernetes `Status` if it is one, else the start of its text.
    pub fn of(answer: &[u8]) -> SlimStatus {
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Wire {
            reason: Option<Cut<64>>,
            message: Option<Cut<ERROR_TEXT>>,
        }
        match serde_json::from_slice::<Wire>(answer) {
            Ok(wire) => SlimStatus {
                reason: cut(wire.reason).filter(|reason| !reason.is_empty()),
                message: cut(wire.message).filter(|message| !message.is_empty()),
            },
            Err(_) => {
                let start = &answer[..answer.len().min(ERROR_TEXT)];
                let text = String::from_utf8_lossy(start);
                SlimStatus {
                    reason: None,
                    message: Some(bounded_text::cut(text.trim(), ERROR_TEXT)).filter(|text| !text.is_empty()),
                }
            }
        }
    }
}

// ---- the kubeconfig Secret ----

/// The `<cluster>-kubeconfig` Secret as CAPOV reads it: its identity and version, and its `value` (the kubeconfig),
/// kept only up to `max` bytes. The Secret is the tenant's: its other keys (up to 1 MiB of them) are skipped.
#[derive(Debug, PartialEq, Eq)]
pub struct KubeconfigSecret {
    pub uid: String,
    pub resource_version: String,
    pub value: Option<SecretValue>,
}

/// The Secret's `value`.
#[derive(Debug, PartialEq, Eq)]
pub enum SecretValue {
    Kept(Vec<u8>),
    /// Longer than the bound: only its size (decoded) is kept.
    TooLarge {
        bytes: usize,
    },
}

/// The Secret in `answer` (a Secret's JSON), with its `value` kept if it holds at most `max` bytes.
pub fn decode_kubeconfig_secret(answer: &[u8], max: usize) -> Result<KubeconfigSecret, AnswerError> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Meta {
        uid: Option<Cut<64>>,
        #[serde(rename = "resourceVersion")]
        resource_version: Option<Cut<64>>,
    }
    struct SecretSeed(usize);
    impl<'de> DeserializeSeed<'de> for SecretSeed {
        type Value = KubeconfigSecret;
        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<KubeconfigSecret, D::Error> {
            deserializer.deserialize_map(self)
        }
    }
    impl<'de> Visitor<'de> for SecretSeed {
        type Value = KubeconfigSecret;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a Secret")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KubeconfigSecret, A::Error> {
            let mut secret = KubeconfigSecret {
                uid: String::new(),
                resource_version: String::new(),
                value: None,
            };
            while let Some(key) = map.next_key_seed(OneOf(&["metadata", "data"]))? {
                match key {
                    Some(0) => {
                        let meta: Meta = map.next_value()?;
                        secret.uid = cut(meta.uid).unwrap_or_default();
                        secret.resource_version = cut(meta.resource_version).unwrap_or_default();
                    }
                    Some(_) => secret.value = map.next_value_seed(DataValue(self.0))?,
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(secret)
        }
    }
    let mut deserializer = serde_json::Deserializer::from_slice(answer);
    SecretSeed(max)
        .deserialize(&mut deserializer)
        .and_then(|secret| deserializer.end().map(|()| secret))
        .map_err(AnswerError::malformed)
}

/// A Secret's `data`, of which only `value` is decoded (from base64), and only if it holds at most `.0` bytes.
struct DataValue(usize);

impl<'de> DeserializeSeed<'de> for DataValue {
    type Value = Option<SecretValue>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<SecretValue>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DataValue {
    type Value = Option<SecretValue>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Secret's data")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<SecretValue>, E> {
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<SecretValue>, A::Error> {
        let mut value = None;
        while let Some(key) = map.next_key_seed(OneOf(&["value"]))? {
            match key {
                Some(_) => value = map.next_value_seed(Base64Value(self.0))?,
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(value)
    }
}

/// A base64 value decoded if it holds at most `.0` bytes; else only its size.
struct Base64Value(usize);

impl<'de> DeserializeSeed<'de> for Base64Value {
    type Value = Option<SecretValue>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<SecretValue>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Visitor<'_> for Base64Value {
    type Value = Option<SecretValue>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("base64 data")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<SecretValue>, E> {
        Ok(None)
    }

    fn visit_str<E: de::Error>(self, encoded: &str) -> Result<Option<SecretValue>, E> {
        let bytes = base64::decoded_len_estimate(encoded.len());
        // The estimate can be up to two bytes over: only a value clearly over the bound is refused unread.
        if bytes > self.0 + 2 {
            return Ok(Some(SecretValue::TooLarge { bytes }));
        }
        let decoded = (base64::engine::general_purpose::STANDARD.decode(encoded))
            .map_err(|_| E::custom("the Secret's value is not base64"))?;
        Ok(Some(match decoded.len() <= self.0 {
            true => SecretValue::Kept(decoded),
            false => SecretValue::TooLarge { bytes: decoded.len() },
        }))
    }
}

#[cfg(test)]
mod tests;
