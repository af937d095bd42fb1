//! The API root (`GET /ovirt-engine/api`): product information and the connection test.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{Link, Ref, Version};

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "api")]
pub struct Api {
    #[serde(
        rename = "link",
        default,
        deserialize_with = "crate::decode_budget::items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub links: Vec<Link>,
    pub product_info: Option<ProductInfo>,
    pub special_objects: Option<SpecialObjects>,
    pub summary: Option<ApiSummary>,
    pub time: Option<String>,
    pub authenticated_user: Option<Ref>,
    pub effective_user: Option<Ref>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProductInfo {
    pub instance_id: Option<String>,
    pub name: Option<String>,
    pub vendor: Option<String>,
    pub version: Option<Version>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpecialObjects {
    pub blank_template: Option<Ref>,
    pub root_tag: Option<Ref>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApiSummary {
    pub hosts: Option<SummaryCount>,
    pub storage_domains: Option<SummaryCount>,
    pub users: Option<SummaryCount>,
    pub vms: Option<SummaryCount>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryCount {
    pub active: Option<u64>,
    pub total: Option<u64>,
}

impl Api {
    /// The engine's full version (`4.4.10.6-1.el8`), else `major.minor`.
    pub fn engine_version(&self) -> Option<String> {
        let version = self.product_info.as_ref()?.version.as_ref()?;
        version
            .full_version
            .clone()
            .or_else(|| match (version.major, version.minor) {
                (Some(major), Some(minor)) => Some(format!("{major}.{minor}")),
                _ => None,
            })
    }
}
