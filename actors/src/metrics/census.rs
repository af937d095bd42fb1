//! What the statuses CAPOV writes say, counted when Prometheus scrapes: OVirtMachines by phase, step and reason, how
//! long the machine waiting longest has been in each step, and whether each OVirtProvider's engine answers.
//!
//! The status writer hands every status it is given (and the one each machine carries when its actor starts) to
//! [`Census::record`], which keeps a few bytes per object; the families are computed at each scrape from what is
//! kept, so a machine that moves on or is deleted leaves no stale series behind. Labels stay bounded: phases,
//! condition types and reasons are CAPOV's own constants, and providers are a handful per cluster.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, IntGaugeVec, Opts};
use serde_json::Value;

use capov_core::conditions::{MACHINE_READY_INPUTS, types};

/// `phase` label values of `capov_machines`, after CAPI's Machine phases.
pub mod phase {
    /// Never up yet: creating the VM, its disks, its NICs, starting it.
    pub const PROVISIONING: &str = "Provisioning";
    /// The VM came up once, but the machine is not Ready now (waiting for its Node, the VM went down, the engine
    /// does not answer).
    pub const PROVISIONED: &str = "Provisioned";
    /// Ready.
    pub const RUNNING: &str = "Running";
    /// Its VM is being stopped and removed.
    pub const DELETING: &str = "Deleting";
    /// `status.failureReason` is set: not retried until it is cleared.
    pub const FAILED: &str = "Failed";
}

/// The `step` of a Ready machine.
const STEP_READY: &str = "Ready";

/// What kind of object a status belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subject {
    Provider,
    Machine,
}

/// One machine, as its latest status shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineSummary {
    pub phase: &'static str,
    /// The condition type of the step it is at (the first of SPEC's steps that is not True), or `Ready`.
    pub step: &'static str,
    /// That condition's reason (`NotYetReported` while it has none), or `Ready`.
    pub reason: Arc<str>,
    /// Since when it is at that step, in Unix seconds: the step condition's last transition, else the latest
    /// transition of any condition. None for Ready, Failed and paused machines, which wait for nobody.
    pub waiting_since: Option<i64>,
}

/// One provider: whether its engine answers, and its Ready condition's reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderSummary {
    pub ready: bool,
    pub reason: Arc<str>,
}

#[derive(Default)]
struct Objects {
    machines: HashMap<(String, String), MachineSummary>,
    providers: HashMap<String, ProviderSummary>,
    /// Every reason seen, held once.
    reasons: HashSet<Arc<str>>,
}

impl Objects {
    fn intern(&mut self, reason: &str) -> Arc<str> {
        if let Some(known) = self.reasons.get(reason) {
            return known.clone();
        }
        let reason: Arc<str> = Arc::from(reason);
        self.reasons.insert(reason.clone());
        reason
    }
}

/// The statuses' census and the collector of its families.
pub struct Census {
    objects: Mutex<Objects>,
    machines: IntGaugeVec,
    longest_in_step: GaugeVec,
    provider_ready: IntGaugeVec,
    descs: Vec<Desc>,
}

impl Default for Census {
    fn default() -> Self {
        Census::new()
    }
}

impl Census {
    pub fn new() -> Census {
        let machines = IntGaugeVec::new(
            Opts::new(
                "capov_machines",
                "OVirtMachines by phase (Provisioning, Provisioned, Running, Deleting, Failed), the step they are at \
                 (the condition type of the first step that is not True, or Ready) and that condition's reason.",
            ),
            &["phase", "step", "reason"],
        )
        .expect("valid metric");
        let longest_in_step = GaugeVec::new(
            Opts::new(
                "capov_machines_longest_in_step_seconds",
                "How long the OVirtMachine waiting longest at a step has been there (since the step's condition last \
                 changed status), by step; machines that are Ready, Failed or paused are not waiting.",
            ),
            &["step"],
        )
        .expect("valid metric");
        let provider_ready = IntGaugeVec::new(
            Opts::new(
                "capov_provider_ready",
                "1 while the OVirtProvider's engine answers with its credentials, else 0; reason: its Ready \
                 condition's reason (e.g. EngineUnreachable, AuthenticationFailed).",
            ),
            &["provider", "reason"],
        )
        .expect("valid metric");
        let mut descs = Vec::new();
        for collector in [&machines as &dyn Collector, &longest_in_step, &provider_ready] {
            descs.extend(collector.desc().into_iter().cloned());
        }
        Census {
            objects: Mutex::default(),
            machines,
            longest_in_step,
            provider_ready,
            descs,
        }
    }

    fn objects(&self) -> MutexGuard<'_, Objects> {
        self.objects.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes in the latest status of an object (its namespace: empty for the cluster-scoped OVirtProvider).
    pub fn record(&self, subject: Subject, namespace: &str, name: &str, status: &Value) {
        let mut objects = self.objects();
        match subject {
            Subject::Machine => {
                let summary = summarize_machine(status, &mut objects);
                objects
                    .machines
                    .insert((namespace.to_string(), name.to_string()), summary);
            }
            Subject::Provider => {
                let summary = summarize_provider(status, &mut objects);
                objects.providers.insert(name.to_string(), summary);
            }
        }
    }

    /// Whether a status of this object was recorded.
    pub fn knows(&self, subject: Subject, namespace: &str, name: &str) -> bool {
        let objects = self.objects();
        match subject {
            Subject::Machine => objects
                .machines
                .contains_key(&(namespace.to_string(), name.to_string())),
            Subject::Provider => objects.providers.contains_key(name),
        }
    }

    /// The object is gone.
    pub fn forget(&self, subject: Subject, namespace: &str, name: &str) {
        let mut objects = self.objects();
        match subject {
            Subject::Machine => {
                objects.machines.remove(&(namespace.to_string(), name.to_string()));
            }
            Subject::Provider => {
                objects.providers.remove(name);
            }
        }
    }

    /// What is recorded of a machine (for tests).
    pub fn machine(&self, namespace: &str, name: &str) -> Option<MachineSummary> {
        self.objects()
            .machines
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// The families' values at `now` (Unix seconds).
    fn fill(&self, now: i64) {
        self.machines.reset();
        self.longest_in_step.reset();
        self.provider_ready.reset();
        let objects = self.objects();
        let mut longest: BTreeMap<&'static str, i64> = BTreeMap::new();
        for machine in objects.machines.values() {
            self.machines
                .with_label_values(&[machine.phase, machine.step, &machine.reason])
                .inc();
            if let Some(since) = machine.waiting_since {
                let waited = now.saturating_sub(since).max(0);
                let entry = longest.entry(machine.step).or_default();
                *entry = (*entry).max(waited);
            }
        }
        for (step, waited) in longest {
            self.longest_in_step.with_label_values(&[step]).set(waited as f64);
        }
        for (name, provider) in &objects.providers {
            self.provider_ready
                .with_label_values(&[name.as_str(), &provider.reason])
                .set(i64::from(provider.ready));
        }
    }
}

impl Collector for Census {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self.collect_at(jiff::Timestamp::now().as_second())
    }
}

impl Census {
    /// The families with a series at `now` (Unix seconds); a family without one is left out, as Prometheus wants.
    fn collect_at(&self, now: i64) -> Vec<MetricFamily> {
        self.fill(now);
        let mut families = self.machines.collect();
        families.extend(self.longest_in_step.collect());
        families.extend(self.provider_ready.collect());
        families.retain(|family| !family.get_metric().is_empty());
        families
    }
}

/// A condition of a status as JSON, by type.
fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|condition| condition["type"] == type_)
}

fn is_true(condition: Option<&Value>) -> bool {
    condition.is_some_and(|condition| condition["status"] == "True")
}

fn transition_time(condition: &Value) -> Option<i64> {
    let text = condition["lastTransitionTime"].as_str()?;
    text.parse::<jiff::Timestamp>().ok().map(|time| time.as_second())
}

/// Phase, step, reason and waiting time of a machine's status.
fn summarize_machine(status: &Value, objects: &mut Objects) -> MachineSummary {
    let failed = status["failureReason"]
        .as_str()
        .is_some_and(|reason| !reason.is_empty());
    let deleting = condition(status, types::MACHINE_DELETED).is_some();
    let ready = is_true(condition(status, types::READY));
    let phase = if failed {
        phase::FAILED
    } else if deleting {
        phase::DELETING
    } else if ready {
        phase::RUNNING
    } else if status["ready"] == true {
        phase::PROVISIONED
    } else {
        phase::PROVISIONING
    };
    let step = if deleting {
        Some(types::MACHINE_DELETED)
    } else if ready {
        None
    } else {
        MACHINE_READY_INPUTS
            .iter()
            .copied()
            .find(|type_| !is_true(condition(status, type_)))
    };
    let Some(step) = step else {
        return MachineSummary {
            phase,
            step: STEP_READY,
            reason: objects.intern(STEP_READY),
            waiting_since: None,
        };
    };
    let at_step = condition(status, step);
    let reason = at_step
        .and_then(|condition| condition["reason"].as_str())
        .filter(|reason| !reason.is_empty())
        .unwrap_or(capov_core::conditions::reasons::NOT_YET_REPORTED);
    let paused = is_true(condition(status, types::PAUSED));
    let latest_transition = || {
        status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(transition_time)
            .max()
    };
    let waiting_since = match (failed || paused, at_step) {
        (true, _) => None,
        (false, Some(condition)) => transition_time(condition).or_else(latest_transition),
        (false, None) => latest_transition(),
    };
    MachineSummary {
        phase,
        step,
        reason: objects.intern(reason),
        waiting_since,
    }
}

fn summarize_provider(status: &Value, objects: &mut Objects) -> ProviderSummary {
    let ready = condition(status, types::READY);
    let reason = ready
        .and_then(|condition| condition["reason"].as_str())
        .filter(|reason| !reason.is_empty())
        .unwrap_or(capov_core::conditions::reasons::NOT_YET_REPORTED);
    ProviderSummary {
        ready: is_true(ready),
        reason: objects.intern(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn condition(type_: &str, status: &str, reason: &str, at: &str) -> Value {
        json!({"type": type_, "status": status, "reason": reason, "lastTransitionTime": at})
    }

    const T0: &str = "2026-12-01T10:00:00Z";
    const T1: &str = "2026-12-01T10:05:00Z";
    const T1_SECONDS: i64 = 1_796_119_500;

    fn render(census: &Census, now: i64) -> String {
        let families = census.collect_at(now);
        let mut buffer = Vec::new();
        prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &families, &mut buffer).expect("encode");
        String::from_utf8(buffer).expect("utf-8")
    }

    #[test]
    fn a_machine_waiting_for_its_image_is_provisioning_at_machine_created() {
        let census = Census::new();
        let status = json!({"conditions": [
            condition("CanConnectToOVirt", "True", "Connected", T0),
            condition("MachineCreated", "False", "VMImageLocked", T1),
            condition("Ready", "False", "VMImageLocked", T1),
        ]});
        census.record(Subject::Machine, "team-a", "worker-0", &status);
        let summary = census.machine("team-a", "worker-0").expect("recorded");
        assert_eq!(summary.phase, phase::PROVISIONING);
        assert_eq!(summary.step, "MachineCreated");
        assert_eq!(&*summary.reason, "VMImageLocked");
        assert_eq!(summary.waiting_since, Some(T1_SECONDS));
        let text = render(&census, T1_SECONDS + 90);
        assert!(
            text.contains("capov_machines{phase=\"Provisioning\",reason=\"VMImageLocked\",step=\"MachineCreated\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("capov_machines_longest_in_step_seconds{step=\"MachineCreated\"} 90"),
            "{text}"
        );
    }

    #[test]
    fn a_step_not_reported_yet_waits_since_the_latest_transition() {
        let census = Census::new();
        let status = json!({"conditions": [
            condition("CanConnectToOVirt", "True", "Connected", T0),
            condition("MachineCreated", "True", "VMCreated", T1),
        ]});
        census.record(Subject::Machine, "ns", "m", &status);
        let summary = census.machine("ns", "m").expect("recorded");
        assert_eq!(summary.step, "MachineDiskResized");
        assert_eq!(&*summary.reason, "NotYetReported");
        assert_eq!(summary.waiting_since, Some(T1_SECONDS));
    }

    #[test]
    fn phases_follow_ready_provisioned_deletion_and_failure() {
        let census = Census::new();
        let all_true: Vec<Value> = MACHINE_READY_INPUTS
            .iter()
            .chain([&types::READY])
            .map(|type_| condition(type_, "True", "Done", T0))
            .collect();
        census.record(
            Subject::Machine,
            "ns",
            "ready",
            &json!({"ready": true, "conditions": all_true}),
        );
        let node_gone = json!({"ready": true, "conditions": [
            condition("CanConnectToOVirt", "True", "Connected", T0),
            condition("MachineCreated", "True", "VMCreated", T0),
            condition("MachineDiskResized", "True", "DisksReady", T0),
            condition("MachineNetworkSet", "True", "NetworkSet", T0),
            condition("MachinePlacementSet", "True", "PlacementSet", T0),
            condition("MachineOn", "False", "VMDown", T1),
            condition("Ready", "False", "VMDown", T1),
        ]});
        census.record(Subject::Machine, "ns", "down", &node_gone);
        let deleting = json!({"ready": true, "conditions": [
            condition("MachineDeleted", "False", "VMStopping", T1),
            condition("Ready", "False", "VMStopping", T1),
        ]});
        census.record(Subject::Machine, "ns", "deleting", &deleting);
        let failed = json!({"failureReason": "OVirtEngineConnectionCritical", "conditions": [
            condition("CanConnectToOVirt", "False", "AuthenticationFailed", T0),
        ]});
        census.record(Subject::Machine, "ns", "failed", &failed);

        let ready = census.machine("ns", "ready").expect("ready");
        assert_eq!(
            (ready.phase, ready.step, &*ready.reason),
            (phase::RUNNING, "Ready", "Ready")
        );
        assert_eq!(ready.waiting_since, None);
        let down = census.machine("ns", "down").expect("down");
        assert_eq!(
            (down.phase, down.step, &*down.reason),
            (phase::PROVISIONED, "MachineOn", "VMDown")
        );
        let deleting = census.machine("ns", "deleting").expect("deleting");
        assert_eq!((deleting.phase, deleting.step), (phase::DELETING, "MachineDeleted"));
        assert_eq!(deleting.waiting_since, Some(T1_SECONDS));
        let failed = census.machine("ns", "failed").expect("failed");
        assert_eq!(
            (failed.phase, failed.step, &*failed.reason),
            (phase::FAILED, "CanConnectToOVirt", "AuthenticationFailed")
        );
        assert_eq!(
            failed.waiting_since, None,
            "a failed machine waits for a person, not a step"
        );
        let text = render(&census, T1_SECONDS + 10);
        assert!(
            text.contains("capov_machines_longest_in_step_seconds{step=\"MachineOn\"} 10"),
            "{text}"
        );
        assert!(
            !text.contains("longest_in_step_seconds{step=\"CanConnectToOVirt\"}"),
            "{text}"
        );
    }

    #[test]
    fn a_paused_machine_is_counted_but_not_waiting() {
        let census = Census::new();
        let status = json!({"conditions": [
            condition("Paused", "True", "Paused", T0),
            condition("CanConnectToOVirt", "False", "EngineUnreachable", T0),
        ]});
        census.record(Subject::Machine, "ns", "m", &status);
        let text = render(&census, T1_SECONDS);
        assert!(text.contains("step=\"CanConnectToOVirt\"} 1"), "{text}");
        assert!(!text.contains("capov_machines_longest_in_step_seconds"), "{text}");
    }

    #[test]
    fn series_follow_the_latest_status_and_leave_with_the_object() {
        let census = Census::new();
        let waiting = json!({"conditions": [condition("CanConnectToOVirt", "False", "EngineUnreachable", T0)]});
        census.record(Subject::Machine, "ns", "m", &waiting);
        let connected = json!({"conditions": [
            condition("CanConnectToOVirt", "True", "Connected", T1),
            condition("MachineCreated", "False", "WaitingForBootstrapData", T1),
        ]});
        census.record(Subject::Machine, "ns", "m", &connected);
        let text = render(&census, T1_SECONDS);
        assert!(!text.contains("EngineUnreachable"), "a stale series stayed:\n{text}");
        assert!(text.contains("reason=\"WaitingForBootstrapData\""), "{text}");
        assert!(census.knows(Subject::Machine, "ns", "m"));
        census.forget(Subject::Machine, "ns", "m");
        assert!(!census.knows(Subject::Machine, "ns", "m"));
        assert!(!render(&census, T1_SECONDS).contains("capov_machines{"));
    }

    #[test]
    fn providers_report_ready_and_the_reason() {
        let census = Census::new();
        let up = json!({"ready": true, "conditions": [condition("Ready", "True", "Connected", T0)]});
        let down = json!({"ready": false, "conditions": [condition("Ready", "False", "AuthenticationFailed", T0)]});
        census.record(Subject::Provider, "", "prod", &up);
        census.record(Subject::Provider, "", "lab", &down);
        let text = render(&census, T1_SECONDS);
        assert!(
            text.contains("capov_provider_ready{provider=\"prod\",reason=\"Connected\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("capov_provider_ready{provider=\"lab\",reason=\"AuthenticationFailed\"} 0"),
            "{text}"
        );
        census.forget(Subject::Provider, "", "lab");
        assert!(!render(&census, T1_SECONDS).contains("lab"));
    }

    #[test]
    fn reasons_are_held_once() {
        let census = Census::new();
        let status = json!({"conditions": [condition("CanConnectToOVirt", "False", "EngineUnreachable", T0)]});
        for index in 0..3 {
            census.record(Subject::Machine, "ns", &format!("m{index}"), &status);
        }
        let first = census.machine("ns", "m0").expect("m0").reason;
        let third = census.machine("ns", "m2").expect("m2").reason;
        assert!(Arc::ptr_eq(&first, &third));
    }
}
