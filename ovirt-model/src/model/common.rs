//! Building blocks every engine object uses: links, references, faults and action bodies.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// `<link href="…" rel="…"/>`: a sub-collection or an action of an object.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Link {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@rel")]
    pub rel: Option<String>,
}

impl Link {
    pub fn new(href: impl Into<String>, rel: impl Into<String>) -> Self {
        Self {
            href: Some(href.into()),
            rel: Some(rel.into()),
        }
    }
}

/// `<actions><link …/>…</actions>`.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Actions {
    #[serde(rename = "link", default, deserialize_with = "crate::decode_budget::items")]
    pub links: Vec<Link>,
}

/// A reference to another object: by id in responses, by id or name in requests.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ref {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub name: Option<String>,
}

impl Ref {
    pub fn id(id: impl Into<String>) -> Self {
        Self {
            id: Some(id.into()),
            ..Self::default()
        }
    }

    pub fn name(name: impl Into<String>) -> Self {
        Self {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// A response-style reference carrying both the id and its href.
    pub fn linked(href: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            href: Some(href.into()),
            id: Some(id.into()),
            name: None,
        }
    }
}

/// `<fault><reason/><detail/></fault>`: the engine's error body.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "fault")]
pub struct Fault {
    pub reason: Option<String>,
    pub detail: Option<String>,
}

/// `<action>`: the body of `POST …/start|stop|shutdown` and of their answers (including failed ones,
/// which nest a [`Fault`] and carry `status` `failed`).
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "action")]
pub struct Action {
    #[serde(rename = "async")]
    pub is_async: Option<bool>,
    pub force: Option<bool>,
    pub use_cloud_init: Option<bool>,
    pub use_ignition: Option<bool>,
    pub use_initialization: Option<bool>,
    pub reason: Option<String>,
    pub fault: Option<Fault>,
    pub status: Option<String>,
    pub job: Option<Ref>,
    pub vm: Option<Ref>,
}

/// `<version>` of the product and of clusters / data centers.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Version {
    pub build: Option<u32>,
    pub full_version: Option<String>,
    pub major: Option<u32>,
    pub minor: Option<u32>,
    pub revision: Option<u32>,
}

/// `<mac><address/></mac>`.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mac {
    pub address: Option<String>,
}

/// `<hosts><host id/></hosts>`: the hosts of an affinity group or label, or those a VM may run on.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostRefs {
    #[serde(rename = "host", default, deserialize_with = "crate::decode_budget::items")]
    pub items: Vec<Ref>,
}
