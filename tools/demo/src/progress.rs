//! What the demo shows while the machines come up (the terminal parts shared with the benchmark are
//! `capov_testkit::terminal`). On a terminal: one screen, redrawn in place — an "N of M Ready"
//! line with a bar, the machines' table and the last few things the demo itself did — every line cut to the
//! terminal's width so that nothing wraps. Elsewhere (a pipe, CI): one plain line per change. Everything here is
//! pure: the caller passes the machines, the width and the time.

use std::collections::BTreeMap;
use std::time::Duration;

use capov_crds::{ConditionStatus, OVirtMachine};
use capov_testkit::terminal;

/// What the demo shows of one machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub name: String,
    pub ready: bool,
    /// The engine's VM status as the operator last saw it (`image_locked`, `up`, …), or empty.
    pub vm: String,
    /// The first step condition that is not True, as `Type: Reason`, or `Ready`.
    pub step: String,
    /// That condition's message.
    pub message: String,
}

impl Row {
    pub fn of(machine: &OVirtMachine) -> Row {
        let status = machine.status.clone().unwrap_or_default();
        let ready = status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == ConditionStatus::True);
        let waiting = status
            .conditions
            .iter()
            .find(|c| c.type_ != "Ready" && c.type_ != "Paused" && c.status != ConditionStatus::True);
        let (step, message) = match (waiting, ready) {
            (Some(c), _) => (format!("{}: {}", c.type_, c.reason), c.message.clone()),
            (None, true) => ("Ready".to_string(), String::new()),
            (None, false) => ("starting".to_string(), String::new()),
        };
        Row {
            name: machine.metadata.name.clone().unwrap_or_default(),
            ready,
            vm: status.vm_status.unwrap_or_default(),
            step,
            message,
        }
    }
}

/// The whole screen for a terminal `width` columns wide: the summary, the table and the `notes` (the last few
/// things the demo did), each line at most `width` characters.
pub fn screen(rows: &[Row], expected: usize, elapsed: Duration, notes: &[String], width: usize) -> String {
    let ready = rows.iter().filter(|row| row.ready).count();
    let name_width = rows.iter().map(|row| row.name.len()).max().unwrap_or(4).clamp(4, 40);
    let vm_width = rows.iter().map(|row| row.vm.len()).max().unwrap_or(2).clamp(2, 16);
    let mut lines = vec![
        terminal::summary(ready, expected, elapsed, 20),
        String::new(),
        format!("{:<name_width$}  {:<5}  {:<vm_width$}  STEP", "NAME", "READY", "VM"),
    ];
    for row in rows {
        let step = if row.message.is_empty() {
            row.step.clone()
        } else {
            format!("{} — {}", row.step, row.message)
        };
        let ready = if row.ready { "yes" } else { "no" };
        lines.push(format!(
            "{:<name_width$}  {ready:<5}  {:<vm_width$}  {step}",
            row.name, row.vm
        ));
    }
    if !notes.is_empty() {
        lines.push(String::new());
        lines.extend(notes.iter().cloned());
    }
    terminal::fit_lines(&lines, width)
}

/// The plain lines for what changed between two looks at the machines: one per machine whose state changed, and
/// the summary when the number of Ready machines did.
pub fn changes(before: &BTreeMap<String, Row>, after: &[Row], expected: usize, elapsed: Duration) -> Vec<String> {
    let mut lines = Vec::new();
    let seconds = elapsed.as_secs();
    for row in after {
        let old = before.get(&row.name);
        if old.is_some_and(|old| old.ready == row.ready && old.vm == row.vm && old.step == row.step) {
            continue;
        }
        let vm = if row.vm.is_empty() { "-" } else { &row.vm };
        let message = if row.message.is_empty() {
            String::new()
        } else {
            format!(" — {}", row.message)
        };
        lines.push(format!("{seconds:>4} s  {}: {} (VM {vm}){message}", row.name, row.step));
    }
    let ready_before = before.values().filter(|row| row.ready).count();
    let ready_now = after.iter().filter(|row| row.ready).count();
    if ready_now != ready_before || before.is_empty() {
        lines.push(format!("{seconds:>4} s  {ready_now} of {expected} Ready"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, ready: bool, vm: &str, step: &str, message: &str) -> Row {
        Row {
            name: name.into(),
            ready,
            vm: vm.into(),
            step: step.into(),
            message: message.into(),
        }
    }

    fn sample() -> Vec<Row> {
        vec![
            row("control-plane-0", true, "up", "Ready", ""),
            row(
                "worker-0",
                false,
                "image_locked",
                "MachineCreated: VMImageLocked",
                "the VM's disks are being created (image_locked); waiting for the engine to finish copying them",
            ),
            row("worker-1", false, "", "starting", ""),
        ]
    }

    #[test]
    fn the_screen_starts_with_n_of_m_ready_and_fits_the_terminal() {
        let notes = vec!["(demo) the kubelet of control-plane-0 registered its Node".to_string()];
        let text = screen(&sample(), 3, Duration::from_secs(42), &notes, 80);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "1 of 3 Ready [######--------------] 42 s");
        assert!(
            lines[2].starts_with("NAME             READY  VM            STEP"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("control-plane-0  yes    up            Ready"),
            "{text}"
        );
        assert!(lines[4].starts_with("worker-0         no     image_locked  MachineCreated: VMImageLocked — the VM"));
        assert!(lines[4].ends_with('…'), "a long message is cut: {}", lines[4]);
        assert_eq!(lines[7], "(demo) the kubelet of control-plane-0 registered its Node");
        assert!(lines.iter().all(|line| line.chars().count() <= 80), "{text}");
    }

    #[test]
    fn a_narrow_terminal_cuts_every_line() {
        let text = screen(&sample(), 3, Duration::ZERO, &[], 24);
        assert!(text.lines().all(|line| line.chars().count() <= 24), "{text}");
        assert_eq!(text.lines().next(), Some("1 of 3 Ready [######---…"));
    }

    #[test]
    fn plain_lines_name_only_what_changed() {
        let before: BTreeMap<String, Row> = sample().into_iter().map(|row| (row.name.clone(), row)).collect();
        let mut after = sample();
        after[1] = row("worker-0", false, "down", "MachineOn: VMDown", "");
        let lines = changes(&before, &after, 3, Duration::from_secs(61));
        assert_eq!(lines, ["  61 s  worker-0: MachineOn: VMDown (VM down)"]);

        after[1] = row("worker-0", true, "up", "Ready", "");
        let lines = changes(&before, &after, 3, Duration::from_secs(70));
        assert_eq!(lines, ["  70 s  worker-0: Ready (VM up)", "  70 s  2 of 3 Ready"]);
        assert!(changes(&before, &sample(), 3, Duration::from_secs(80)).is_empty());
    }

    #[test]
    fn the_first_look_lists_every_machine_and_the_count() {
        let lines = changes(&BTreeMap::new(), &sample(), 3, Duration::from_secs(5));
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert_eq!(
            lines[1],
            "   5 s  worker-0: MachineCreated: VMImageLocked (VM image_locked) — the VM's disks are being created (image_locked); waiting for the engine to finish copying them"
        );
        assert_eq!(lines[3], "   5 s  1 of 3 Ready");
    }
}
