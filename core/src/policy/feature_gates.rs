//! The operator's feature gates (`--feature-gates=key=bool,…`, Helm `featureGates` map), SPEC §3.
//!
//! The product documents say unknown keys and invalid values are silently ignored; we ignore them too but hand
//! them back as [`IgnoredGate`]s so that the caller can log each at debug level.
//!
//! Values are read like Go's `strconv.ParseBool`, the convention of Kubernetes' own `--feature-gates`:
//! `1`, `t`, `T`, `TRUE`, `true`, `True` and `0`, `f`, `F`, `FALSE`, `false`, `False`. Anything else (`yes`, `on`,
//! `TrUe`, an empty value) is invalid and ignored. Keys are case-sensitive, as in Kubernetes; surrounding
//! whitespace around keys and values is trimmed. A key given twice: the last valid value wins.

use std::fmt;

/// Key of the gate that keeps the template part of disk aliases when renaming.
pub const DISK_KEEP_TEMPLATE_NAME: &str = "disk-keep-template-name";
/// Key of the gate that puts the VM name into each disk alias.
pub const DISK_ADD_VM_NAME: &str = "disk-add-vm-name";
/// Key of the gate that is the last fallback for disk cloning.
pub const DISK_CLONE: &str = "disk-clone";
/// Key of the gate that lets the deletion of a machine detach the disks CAPOV did not create (CSI volumes) once its
/// Node is gone from the workload cluster and no VolumeAttachment names it (issue 27; docs/decisions.md).
pub const DISK_DETACH_WHEN_NODE_GONE: &str = "disk-detach-when-node-gone";

/// The effective feature gates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    /// Keep the template part of disk aliases when renaming (default true).
    pub disk_keep_template_name: bool,
    /// Put the VM name into each disk alias (default false).
    pub disk_add_vm_name: bool,
    /// Clone disks when neither the OVirtMachine nor its OVirtProvider says (default false).
    pub disk_clone: bool,
    /// A machine being deleted detaches (never deletes) the disks CAPOV did not create once its Node is gone and no
    /// VolumeAttachment names it, then deletes the VM (default false: the documents' deletion waits until the disks
    /// are detached by someone else).
    pub disk_detach_when_node_gone: bool,
}

impl Default for FeatureGates {
    fn default() -> Self {
        FeatureGates {
            disk_keep_template_name: true,
            disk_add_vm_name: false,
            disk_clone: false,
            disk_detach_when_node_gone: false,
        }
    }
}

/// One `key=value` entry that was not applied, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IgnoredGate {
    /// The key names no known gate.
    UnknownKey { key: String },
    /// The key is known but the value is not a boolean.
    InvalidValue { key: String, value: String },
    /// The entry has no `=`.
    MissingValue { entry: String },
}

impl fmt::Display for IgnoredGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IgnoredGate::UnknownKey { key } => write!(f, "ignoring unknown feature gate {key:?}"),
            IgnoredGate::InvalidValue { key, value } => {
                write!(f, "ignoring feature gate {key:?}: {value:?} is not true or false")
            }
            IgnoredGate::MissingValue { entry } => write!(f, "ignoring feature gate entry {entry:?}: no =value"),
        }
    }
}

/// The result of parsing: the gates to use and the entries that were ignored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedGates {
    pub gates: FeatureGates,
    pub ignored: Vec<IgnoredGate>,
}

impl FeatureGates {
    /// Parses the value of `--feature-gates` (without the flag name), e.g.
    /// `disk-keep-template-name=true,disk-add-vm-name=false`. Empty entries (`a=true,,b=false`, a trailing comma,
    /// an empty string) are skipped without a note.
    pub fn parse(flag_value: &str) -> ParsedGates {
        let mut gates = FeatureGates::default();
        let mut ignored = Vec::new();
        for entry in flag_value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match entry.split_once('=') {
                Some((key, value)) => gates.apply(key.trim(), value.trim(), &mut ignored),
                None => ignored.push(IgnoredGate::MissingValue {
                    entry: entry.to_string(),
                }),
            }
        }
        ParsedGates { gates, ignored }
    }

    /// Builds the gates from key/value pairs, e.g. a Helm `featureGates` map rendered as strings. Same rules as
    /// [`FeatureGates::parse`].
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> ParsedGates {
        let mut gates = FeatureGates::default();
        let mut ignored = Vec::new();
        for (key, value) in pairs {
            gates.apply(key.trim(), value.trim(), &mut ignored);
        }
        ParsedGates { gates, ignored }
    }

    fn apply(&mut self, key: &str, value: &str, ignored: &mut Vec<IgnoredGate>) {
        let slot = match key {
            DISK_KEEP_TEMPLATE_NAME => &mut self.disk_keep_template_name,
            DISK_ADD_VM_NAME => &mut self.disk_add_vm_name,
            DISK_CLONE => &mut self.disk_clone,
            DISK_DETACH_WHEN_NODE_GONE => &mut self.disk_detach_when_node_gone,
            _ => {
                ignored.push(IgnoredGate::UnknownKey { key: key.to_string() });
                return;
            }
        };
        match parse_bool(value) {
            Some(v) => *slot = v,
            None => ignored.push(IgnoredGate::InvalidValue {
                key: key.to_string(),
                value: value.to_string(),
            }),
        }
    }
}

/// Go's `strconv.ParseBool`.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// The start-up log line: every gate with its effective value, keys in alphabetical order.
impl fmt::Display for FeatureGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "feature gates: {DISK_ADD_VM_NAME}={}, {DISK_CLONE}={}, {DISK_DETACH_WHEN_NODE_GONE}={}, \
             {DISK_KEEP_TEMPLATE_NAME}={}",
            self.disk_add_vm_name, self.disk_clone, self.disk_detach_when_node_gone, self.disk_keep_template_name
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates(s: &str) -> FeatureGates {
        FeatureGates::parse(s).gates
    }

    #[test]
    fn defaults_keep_template_name_only() {
        let g = FeatureGates::default();
        assert!(g.disk_keep_template_name);
        assert!(!g.disk_add_vm_name);
        assert!(!g.disk_clone);
        assert!(!g.disk_detach_when_node_gone);
    }

    #[test]
    fn empty_string_gives_defaults_and_no_notes() {
        assert_eq!(
            FeatureGates::parse(""),
            ParsedGates {
                gates: FeatureGates::default(),
                ignored: vec![]
            }
        );
        assert_eq!(
            FeatureGates::parse("  ,, "),
            ParsedGates {
                gates: FeatureGates::default(),
                ignored: vec![]
            }
        );
    }

    #[test]
    fn each_gate_can_be_set() {
        assert!(!gates("disk-keep-template-name=false").disk_keep_template_name);
        assert!(gates("disk-add-vm-name=true").disk_add_vm_name);
        assert!(gates("disk-clone=true").disk_clone);
        assert!(gates("disk-detach-when-node-gone=true").disk_detach_when_node_gone);
    }

    #[test]
    fn documents_example_parses() {
        let parsed = FeatureGates::parse("disk-keep-template-name=true,disk-add-vm-name=false");
        assert_eq!(parsed.gates, FeatureGates::default());
        assert!(parsed.ignored.is_empty());
    }

    #[test]
    fn whitespace_around_entries_keys_and_values_is_trimmed() {
        let g = gates(" disk-add-vm-name = true , disk-clone=\ttrue ");
        assert!(g.disk_add_vm_name);
        assert!(g.disk_clone);
    }

    #[test]
    fn unknown_keys_are_ignored_and_reported() {
        let parsed = FeatureGates::parse("disk-clone=true,foo=true");
        assert!(parsed.gates.disk_clone);
        assert_eq!(parsed.ignored, vec![IgnoredGate::UnknownKey { key: "foo".into() }]);
    }

    #[test]
    fn keys_are_case_sensitive() {
        let parsed = FeatureGates::parse("Disk-Clone=true");
        assert!(!parsed.gates.disk_clone);
        assert_eq!(
            parsed.ignored,
            vec![IgnoredGate::UnknownKey {
                key: "Disk-Clone".into()
            }]
        );
    }

    #[test]
    fn invalid_values_are_ignored_and_the_default_stays() {
        for bad in ["yes", "on", "TrUe", "", "2"] {
            let parsed = FeatureGates::parse(&format!("disk-add-vm-name={bad}"));
            assert!(!parsed.gates.disk_add_vm_name, "{bad}");
            assert_eq!(
                parsed.ignored,
                vec![IgnoredGate::InvalidValue {
                    key: "disk-add-vm-name".into(),
                    value: bad.into()
                }]
            );
        }
    }

    #[test]
    fn go_parse_bool_spellings_are_accepted() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert!(gates(&format!("disk-clone={t}")).disk_clone, "{t}");
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert!(
                !gates(&format!("disk-keep-template-name={f}")).disk_keep_template_name,
                "{f}"
            );
        }
    }

    #[test]
    fn entry_without_equals_is_ignored() {
        let parsed = FeatureGates::parse("disk-clone");
        assert!(!parsed.gates.disk_clone);
        assert_eq!(
            parsed.ignored,
            vec![IgnoredGate::MissingValue {
                entry: "disk-clone".into()
            }]
        );
    }

    #[test]
    fn repeated_key_last_valid_value_wins() {
        assert!(!gates("disk-clone=true,disk-clone=false").disk_clone);
        assert!(gates("disk-clone=false,disk-clone=true").disk_clone);
        // An invalid later value does not undo an earlier valid one.
        assert!(gates("disk-clone=true,disk-clone=yes").disk_clone);
    }

    #[test]
    fn helm_map_pairs_use_the_same_rules() {
        let parsed = FeatureGates::from_pairs([("disk-add-vm-name", "true"), ("disk-clone", "no"), ("x", "true")]);
        assert!(parsed.gates.disk_add_vm_name);
        assert!(!parsed.gates.disk_clone);
        assert_eq!(parsed.ignored.len(), 2);
    }

    #[test]
    fn display_is_one_line_naming_every_gate() {
        let line = FeatureGates::default().to_string();
        assert_eq!(
            line,
            "feature gates: disk-add-vm-name=false, disk-clone=false, disk-detach-when-node-gone=false, \
             disk-keep-template-name=true"
        );
        assert!(!line.contains('\n'));
    }

    #[test]
    fn ignored_gate_display_names_the_entry() {
        let note = IgnoredGate::InvalidValue {
            key: "disk-clone".into(),
            value: "yes".into(),
        }
        .to_string();
        assert!(note.contains("disk-clone") && note.contains("yes"));
    }
}
