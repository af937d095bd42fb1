//! The API root (`GET /ovirt-engine/api`): product information and the connection test.

use serde::{Deserialize, Serialize};

use super::common::{Link, Ref, Version};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "api")]
pub struct Api {
    #[serde(rename = "link", default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_info: Option<ProductInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub special_objects: Option<SpecialObjects>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<ApiSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authenticated_user: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_user: Option<Ref>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProductInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Version>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpecialObjects {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blank_template: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_tag: Option<Ref>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApiSummary {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<SummaryCount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_domains: Option<SummaryCount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<SummaryCount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vms: Option<SummaryCount>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryCount {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
