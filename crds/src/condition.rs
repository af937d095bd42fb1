//! Conditions in the CAPI v1beta1 shape that the product documents show (type, status, severity, reason, message,
//! lastTransitionTime), plus `observedGeneration` so that CAPI v1beta2 core reads them as well.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The status of a condition, as Kubernetes writes it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// How bad a False condition is; CAPI v1beta1 summarises Ready by the worst severity.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// One observation of an aspect of the object's state.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The aspect this condition describes, e.g. `MachineCreated` or `Ready`.
    // Type and reason are `Cow`: CAPOV writes them from its own constants, so the conditions every machine holds for
    // its life cost no heap for them (about 0.6 KB a machine with ten conditions); decoded ones are owned.
    #[serde(rename = "type")]
    pub type_: Cow<'static, str>,
    /// True, False or Unknown.
    pub status: ConditionStatus,
    /// Only on False conditions: Error, Warning or Info.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// A CamelCase word for the last transition, stable enough to alert on (e.g. `VMPoweringUp`).
    pub reason: Cow<'static, str>,
    /// Human-readable details; says what to do when action is needed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the status last changed.
    pub last_transition_time: Time,
    /// The metadata.generation this condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Condition {
    pub fn is_true(&self) -> bool {
        self.status == ConditionStatus::True
    }
}

/// Finds a condition by type in a condition list.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}
