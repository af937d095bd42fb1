//! The engine's refusals that are about capacity rather than a mistake (issue #27): no host satisfies the scheduling
//! constraints of a start, or a storage domain is low on space for a create. Each becomes a condition whose message
//! keeps the engine's own text (deduplicated and bounded) and says what the user can do.

/// At most this many characters of the engine's text go into a condition message.
const DETAIL_LIMIT: usize = 1500;

/// The engine's fault detail as a condition shows it: its messages (the detail lists them separated by `, ` inside
/// the brackets the client strips), repeated ones once with how often they came, cut at [`DETAIL_LIMIT`]
/// characters. The engine repeats one line per host it filtered out, all naming the first host
/// (`ErrorTranslatorImpl` keeps the first value of each variable), so a cluster of a hundred hosts would otherwise
/// fill the condition with a hundred copies of one sentence.
pub fn summarize(detail: &str) -> String {
    let mut lines: Vec<(&str, usize)> = Vec::new();
    for line in split_messages(detail) {
        match lines.last_mut() {
            Some((last, count)) if *last == line => *count += 1,
            _ => lines.push((line, 1)),
        }
    }
    let text = lines
        .iter()
        .map(|(line, count)| {
            if *count > 1 {
                format!("{line} (×{count})")
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    if text.chars().count() <= DETAIL_LIMIT {
        return text;
    }
    let cut: String = text.chars().take(DETAIL_LIMIT).collect();
    format!("{cut}…")
}

/// The messages of a detail: `, ` separates them, and each sentence of the engine ends before a `, ` followed by an
/// upper-case letter (messages never continue that way).
fn split_messages(detail: &str) -> Vec<&str> {
    let mut messages = Vec::new();
    let mut rest = detail.trim();
    while let Some(at) = rest
        .match_indices(", ")
        .map(|(at, _)| at)
        .find(|at| rest[at + 2..].starts_with(|c: char| c.is_uppercase()))
    {
        messages.push(rest[..at].trim());
        rest = &rest[at + 2..];
    }
    if !rest.is_empty() {
        messages.push(rest);
    }
    messages
}

/// MachineOn's message when the engine found no host to start the VM on. `hard_anti_affinity`: the machine's group
/// keeps its VMs apart strictly (spec.antiaffinity: hard).
pub fn no_host_message(detail: &str, hard_anti_affinity: bool) -> String {
    let what = if detail.contains("VmAffinityGroups") && hard_anti_affinity {
        "every host that could take the VM already runs a VM of its group, which spec.antiaffinity: hard forbids: \
         add a host to the oVirt cluster, or set spec.antiaffinity: soft on a new OVirtMachineTemplate"
    } else if detail.contains("VmToHostsAffinityGroups") {
        "none of the hosts of its failure domain (their affinity label) can take it: bring such a host up or free \
         memory on one"
    } else if detail.contains("required mDev devices are unavailable") {
        "every GPU that offers its vGPU types (spec.vgpu.types) has no instance free: the VM starts once one is \
         free (a VM holding one stops or goes) or a host with such a GPU is added"
    } else if detail.contains("required mDev devices are missing") {
        "no host of the oVirt cluster has a GPU offering its vGPU types (spec.vgpu.types): fix the types on a new \
         OVirtMachineTemplate, or add a host with such a GPU"
    } else if detail.contains("filter Memory") {
        "no host has the memory: free memory on a host, add one, or give the VM less (spec.memory)"
    } else if detail.contains("no hosts to use") {
        "no host of the oVirt cluster is up"
    } else {
        "see the engine's reasons"
    };
    format!(
        "oVirt found no host to start the VM on: {what}; the VM stays down and the start is retried with backoff. \
         oVirt said: {}",
        summarize(detail)
    )
}

/// MachineCreated's message when the engine refused the create for low disk space (its threshold,
/// critical_space_action_blocker, or the room the new disks need).
pub fn low_disk_space_message(detail: &str) -> String {
    format!(
        "oVirt refused to create the VM for lack of space: free space on the storage domain (or lower its Critical \
         Space Action Blocker), or put the disks on another domain (spec.storagedomainname); retried with backoff. \
         oVirt said: {}",
        summarize(detail)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vgpu_refusal_says_whether_to_wait_or_to_fix_the_type() {
        let busy = "Cannot run VM. There is no host that satisfies current scheduling constraints. See below for \
                    details:, The host gpu-1 did not satisfy internal filter MDevice because some of the required \
                    mDev devices are unavailable (nvidia-22).";
        let message = no_host_message(busy, false);
        assert!(
            message.contains("no instance free") && message.contains("spec.vgpu.types"),
            "{message}"
        );
        let missing = busy.replace("unavailable", "missing");
        let message = no_host_message(&missing, false);
        assert!(
            message.contains("fix the types") && message.contains("add a host"),
            "{message}"
        );
    }

    const NO_HOST: &str = "Cannot run VM. There is no host that satisfies current scheduling constraints. See below \
                           for details:, The host h1 did not satisfy internal filter VmAffinityGroups because it \
                           matched negative affinity rules ., The host h1 did not satisfy internal filter \
                           VmAffinityGroups because it matched negative affinity rules .";

    #[test]
    fn repeated_host_lines_appear_once_with_their_count() {
        assert_eq!(
            summarize(NO_HOST),
            "Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details: \
             The host h1 did not satisfy internal filter VmAffinityGroups because it matched negative affinity \
             rules . (×2)"
        );
    }

    #[test]
    fn a_detail_of_a_thousand_hosts_stays_bounded() {
        let lines: Vec<String> = (0..1000)
            .map(|n| format!("The host h{n} did not satisfy internal filter Memory because of {n}"))
            .collect();
        let summary = summarize(&lines.join(", "));
        assert_eq!(summary.chars().count(), DETAIL_LIMIT + 1);
        assert!(summary.ends_with('…'));
    }

    #[test]
    fn the_message_says_what_to_do_for_the_filter_that_refused() {
        let hard = no_host_message(NO_HOST, true);
        assert!(hard.contains("spec.antiaffinity: hard forbids"), "{hard}");
        assert!(hard.contains("oVirt said: Cannot run VM."), "{hard}");
        let memory = no_host_message(
            "Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:, \
             The host h1 did not satisfy internal filter Memory because its available memory is too low (2048 MB) to \
             run the VM.",
            false,
        );
        assert!(memory.contains("no host has the memory"), "{memory}");
        let low = low_disk_space_message("Cannot add VM. Low disk space on Storage Domain data1.");
        assert!(
            low.ends_with("oVirt said: Cannot add VM. Low disk space on Storage Domain data1."),
            "{low}"
        );
    }
}
