//! Disk alias renaming (SPEC §3). A VM created from a template inherits the template disks' aliases (e.g.
//! `rhcos-4.14_Disk1` on every VM); the gates decide whether the VM name goes into the alias so that the engine's
//! global disk list shows which VM owns a disk.
//!
//! | keep-template-name | add-vm-name | `rhcos-4.14_Disk1` on `worker-abc123` | alias without `_Disk<N>` |
//! |---|---|---|---|
//! | true  | false | unchanged | unchanged |
//! | true  | true  | `rhcos-4.14_worker-abc123_Disk1` | `<alias>_<vm>` |
//! | false | true  | `worker-abc123_Disk1` | `<vm>_Disk<i>` (i = 1-based position, bootable first) |
//! | false | false | unchanged | unchanged |
//!
//! An alias that already holds the VM name as a whole `_`-delimited token is never renamed, which also makes the
//! rule idempotent: applying it to its own output changes nothing.

use crate::policy::feature_gates::FeatureGates;

/// One VM disk as the renaming needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskAliasFact {
    pub disk_id: String,
    pub alias: String,
    pub bootable: bool,
}

/// One alias change to send to the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AliasChange {
    pub disk_id: String,
    pub new_alias: String,
}

/// The new alias of one disk, or None when it stays as it is. `position` is the disk's 1-based position among the
/// VM's disks, bootable first; it is used only for an alias without a `_Disk<N>` suffix.
pub fn renamed_alias(vm_name: &str, alias: &str, position: usize, gates: &FeatureGates) -> Option<String> {
    if !gates.disk_add_vm_name || vm_name.is_empty() || holds_token(alias, vm_name) {
        return None;
    }
    let new_alias = match (split_disk_suffix(alias), gates.disk_keep_template_name) {
        // `Disk1` alone, or keep=false: only the VM name and the suffix.
        (Some(("", suffix)), _) | (Some((_, suffix)), false) => format!("{vm_name}_{suffix}"),
        (Some((template_part, suffix)), true) => format!("{template_part}_{vm_name}_{suffix}"),
        (None, true) if !alias.is_empty() => format!("{alias}_{vm_name}"),
        (None, _) => format!("{vm_name}_Disk{position}"),
    };
    (new_alias != alias).then_some(new_alias)
}

/// All renames for a VM's disks, in the order the engine lists them, with positions counted bootable first.
pub fn alias_changes(vm_name: &str, disks: &[DiskAliasFact], gates: &FeatureGates) -> Vec<AliasChange> {
    let bootable_first: Vec<&DiskAliasFact> = disks
        .iter()
        .filter(|d| d.bootable)
        .chain(disks.iter().filter(|d| !d.bootable))
        .collect();
    disks
        .iter()
        .filter_map(|disk| {
            let position = 1 + bootable_first.iter().position(|d| std::ptr::eq(*d, disk))?;
            let new_alias = renamed_alias(vm_name, &disk.alias, position, gates)?;
            Some(AliasChange {
                disk_id: disk.disk_id.clone(),
                new_alias,
            })
        })
        .collect()
}

/// Splits `template_Disk3` into (`template`, `Disk3`) and `Disk3` into (``, `Disk3`). The suffix is
/// case-sensitive, as the engine writes it, and needs at least one digit.
fn split_disk_suffix(alias: &str) -> Option<(&str, &str)> {
    let (template_part, suffix) = match alias.rfind("_Disk") {
        Some(at) => (&alias[..at], &alias[at + 1..]),
        None => ("", alias),
    };
    let digits = suffix.strip_prefix("Disk")?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some((template_part, suffix))
}

/// True when `token` occurs in `alias` delimited by `_` or the ends of the string. Searching for the whole name
/// (not splitting on `_`) keeps this right even for a name that itself contained `_`.
fn holds_token(alias: &str, token: &str) -> bool {
    alias.match_indices(token).any(|(at, _)| {
        let before_ok = at == 0 || alias[..at].ends_with('_');
        let after_ok = at + token.len() == alias.len() || alias[at + token.len()..].starts_with('_');
        before_ok && after_ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const VM: &str = "worker-abc123";

    fn gates(keep: bool, add: bool) -> FeatureGates {
        FeatureGates {
            disk_keep_template_name: keep,
            disk_add_vm_name: add,
            ..FeatureGates::default()
        }
    }

    #[test]
    fn table_of_all_gate_combinations() {
        // (keep, add, alias, position, expected)
        let cases: &[(bool, bool, &str, usize, Option<&str>)] = &[
            (true, false, "rhcos-4.14_Disk1", 1, None),
            (true, false, "data", 2, None),
            (
                true,
                true,
                "rhcos-4.14_Disk1",
                1,
                Some("rhcos-4.14_worker-abc123_Disk1"),
            ),
            (
                true,
                true,
                "rhcos-4.14_Disk12",
                3,
                Some("rhcos-4.14_worker-abc123_Disk12"),
            ),
            (true, true, "data", 2, Some("data_worker-abc123")),
            (false, true, "rhcos-4.14_Disk1", 1, Some("worker-abc123_Disk1")),
            (false, true, "rhcos-4.14_Disk2", 1, Some("worker-abc123_Disk2")),
            (false, true, "data", 2, Some("worker-abc123_Disk2")),
            (false, false, "rhcos-4.14_Disk1", 1, None),
            (false, false, "data", 1, None),
        ];
        for &(keep, add, alias, position, expected) in cases {
            assert_eq!(
                renamed_alias(VM, alias, position, &gates(keep, add)).as_deref(),
                expected,
                "keep={keep} add={add} alias={alias}"
            );
        }
    }

    #[test]
    fn alias_already_holding_the_vm_name_is_left_alone() {
        for keep in [true, false] {
            let g = gates(keep, true);
            assert_eq!(renamed_alias(VM, "rhcos-4.14_worker-abc123_Disk1", 1, &g), None);
            assert_eq!(renamed_alias(VM, "worker-abc123_Disk1", 1, &g), None);
            assert_eq!(renamed_alias(VM, "data_worker-abc123", 2, &g), None);
            assert_eq!(renamed_alias(VM, "worker-abc123", 2, &g), None);
        }
    }

    #[test]
    fn vm_name_as_part_of_a_longer_token_does_not_count() {
        let g = gates(false, true);
        assert_eq!(
            renamed_alias("worker-1", "worker-10_Disk1", 1, &g).as_deref(),
            Some("worker-1_Disk1")
        );
        let g = gates(true, true);
        assert_eq!(
            renamed_alias("worker-1", "xworker-1_Disk1", 1, &g).as_deref(),
            Some("xworker-1_worker-1_Disk1")
        );
    }

    #[test]
    fn template_names_with_underscores_keep_their_template_part() {
        let g = gates(true, true);
        assert_eq!(
            renamed_alias(VM, "rhcos_4_14_base_Disk1", 1, &g).as_deref(),
            Some("rhcos_4_14_base_worker-abc123_Disk1")
        );
        let g = gates(false, true);
        assert_eq!(
            renamed_alias(VM, "rhcos_4_14_base_Disk1", 1, &g).as_deref(),
            Some("worker-abc123_Disk1")
        );
    }

    #[test]
    fn suffix_needs_digits_and_exact_case() {
        let g = gates(true, true);
        assert_eq!(
            renamed_alias(VM, "tpl_Disk", 1, &g).as_deref(),
            Some("tpl_Disk_worker-abc123")
        );
        assert_eq!(
            renamed_alias(VM, "tpl_disk1", 1, &g).as_deref(),
            Some("tpl_disk1_worker-abc123")
        );
        assert_eq!(
            renamed_alias(VM, "tpl_Disk1a", 1, &g).as_deref(),
            Some("tpl_Disk1a_worker-abc123")
        );
    }

    #[test]
    fn bare_disk_suffix_gets_the_vm_name_in_front() {
        for keep in [true, false] {
            assert_eq!(
                renamed_alias(VM, "Disk1", 1, &gates(keep, true)).as_deref(),
                Some("worker-abc123_Disk1")
            );
        }
    }

    #[test]
    fn empty_alias_becomes_vm_name_and_position() {
        for keep in [true, false] {
            assert_eq!(
                renamed_alias(VM, "", 3, &gates(keep, true)).as_deref(),
                Some("worker-abc123_Disk3")
            );
        }
    }

    #[test]
    fn renaming_is_idempotent() {
        for keep in [true, false] {
            let g = gates(keep, true);
            for alias in ["rhcos-4.14_Disk1", "data", "", "Disk2"] {
                let once = renamed_alias(VM, alias, 2, &g).unwrap();
                assert_eq!(renamed_alias(VM, &once, 2, &g), None, "{alias} -> {once}");
            }
        }
    }

    #[test]
    fn alias_changes_count_positions_bootable_first_and_keep_engine_order() {
        let disks = vec![
            DiskAliasFact {
                disk_id: "d-data".into(),
                alias: "data".into(),
                bootable: false,
            },
            DiskAliasFact {
                disk_id: "d-boot".into(),
                alias: "root".into(),
                bootable: true,
            },
            DiskAliasFact {
                disk_id: "d-done".into(),
                alias: "worker-abc123_Disk3".into(),
                bootable: false,
            },
        ];
        let changes = alias_changes(VM, &disks, &gates(false, true));
        assert_eq!(
            changes,
            vec![
                AliasChange {
                    disk_id: "d-data".into(),
                    new_alias: "worker-abc123_Disk2".into()
                },
                AliasChange {
                    disk_id: "d-boot".into(),
                    new_alias: "worker-abc123_Disk1".into()
                },
            ]
        );
    }

    #[test]
    fn alias_changes_are_empty_with_default_gates() {
        let disks = vec![DiskAliasFact {
            disk_id: "d".into(),
            alias: "rhcos_Disk1".into(),
            bootable: true,
        }];
        assert!(alias_changes(VM, &disks, &FeatureGates::default()).is_empty());
    }
}
