//! Building blocks every engine object uses: links, references, faults and action bodies.

use serde::{Deserialize, Serialize};

/// `<link href="…" rel="…"/>`: a sub-collection or an action of an object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Link {
    #[serde(rename = "@href", default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(rename = "@rel", default, skip_serializing_if = "Option::is_none")]
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Actions {
    #[serde(rename = "link", default)]
    pub links: Vec<Link>,
}

/// A reference to another object: by id in responses, by id or name in requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ref {
    #[serde(rename = "@href", default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(rename = "@id", default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "fault")]
pub struct Fault {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// `<action>`: the body of `POST …/start|stop|shutdown` and of their answers (including failed ones,
/// which nest a [`Fault`] and carry `status` `failed`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "action")]
pub struct Action {
    #[serde(rename = "async", default, skip_serializing_if = "Option::is_none")]
    pub is_async: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_cloud_init: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_ignition: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_initialization: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<Fault>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<Ref>,
}

/// `<version>` of the product and of clusters / data centers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Version {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minor: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u32>,
}

/// `<mac><address/></mac>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mac {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

/// `<hosts><host id/></hosts>`: the hosts of an affinity group or label, or those a VM may run on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostRefs {
    #[serde(rename = "host", default)]
    pub items: Vec<Ref>,
}
