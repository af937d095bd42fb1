//! The memory this process may use before the kernel's OOM killer ends it: its cgroup's limit (the container's
//! `resources.limits.memory`), or the machine's memory when no limit is set. `capov_process_memory_limit_bytes`
//! serves it next to the resident memory, so an alert can compare the two without another exporter.

/// The lower of the cgroup's limit and the machine's memory; None where neither can be read (not Linux).
pub(super) fn read() -> Option<i64> {
    let machine = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| parse_mem_total(&text));
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|text| cgroup_limit(&text, |path| std::fs::read_to_string(path).ok()));
    match (cgroup, machine) {
        (Some(cgroup), Some(machine)) => Some(cgroup.min(machine)),
        (limit, None) | (None, limit) => limit,
    }
}

/// `MemTotal:` of /proc/meminfo, in bytes.
fn parse_mem_total(meminfo: &str) -> Option<i64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The memory limit of this process's cgroup (v2 `memory.max`, or v1 `memory.limit_in_bytes`), from the files
/// `read` returns; None when the cgroup sets none. The path of /proc/self/cgroup is tried below /sys/fs/cgroup, and
/// then the root: inside a container with its own cgroup namespace the path is `/` and the root is its cgroup.
fn cgroup_limit(proc_self_cgroup: &str, read: impl Fn(&str) -> Option<String>) -> Option<i64> {
    for line in proc_self_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let path = path.trim_end_matches('/');
        let file = if controllers.is_empty() {
            ["/sys/fs/cgroup", "memory.max"]
        } else if controllers.split(',').any(|controller| controller == "memory") {
            ["/sys/fs/cgroup/memory", "memory.limit_in_bytes"]
        } else {
            continue;
        };
        let [root, name] = file;
        for candidate in [format!("{root}{path}/{name}"), format!("{root}/{name}")] {
            if let Some(text) = read(&candidate) {
                return parse_limit(&text);
            }
        }
    }
    None
}

/// A limit file's value: `max` (v2) or a number at or near `i64::MAX` rounded to pages (v1) mean no limit.
fn parse_limit(text: &str) -> Option<i64> {
    let value: i64 = text.trim().parse().ok()?;
    (value < 1 << 62).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(entries: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let entries: Vec<(String, String)> = entries.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect();
        move |path| entries.iter().find(|(p, _)| p == path).map(|(_, c)| c.clone())
    }

    #[test]
    fn cgroup_v2_limit_of_the_process_cgroup() {
        let cgroup = "0::/kubepods/burstable/pod1/abc\n";
        let read = files(&[("/sys/fs/cgroup/kubepods/burstable/pod1/abc/memory.max", "268435456\n")]);
        assert_eq!(cgroup_limit(cgroup, read), Some(268_435_456));
    }

    #[test]
    fn cgroup_v2_in_its_own_namespace_reads_the_root() {
        let read = files(&[("/sys/fs/cgroup/memory.max", "134217728\n")]);
        assert_eq!(cgroup_limit("0::/\n", read), Some(134_217_728));
    }

    #[test]
    fn no_limit_is_none() {
        assert_eq!(
            cgroup_limit("0::/\n", files(&[("/sys/fs/cgroup/memory.max", "max\n")])),
            None
        );
        let v1 = "12:cpu,cpuacct:/x\n4:memory:/x\n";
        let read = files(&[("/sys/fs/cgroup/memory/x/memory.limit_in_bytes", "9223372036854771712\n")]);
        assert_eq!(cgroup_limit(v1, read), None);
    }

    #[test]
    fn cgroup_v1_memory_controller_line() {
        let v1 = "12:cpu,cpuacct:/pod\n4:memory:/pod\n1:name=systemd:/pod\n0::/\n";
        let read = files(&[("/sys/fs/cgroup/memory/pod/memory.limit_in_bytes", "536870912")]);
        assert_eq!(cgroup_limit(v1, read), Some(536_870_912));
    }

    #[test]
    fn machine_memory_from_meminfo() {
        let meminfo = "MemTotal:       24568328 kB\nMemFree:         3000000 kB\n";
        assert_eq!(parse_mem_total(meminfo), Some(24_568_328 * 1024));
    }

    #[test]
    fn this_process_has_a_limit() {
        let limit = read().expect("a Linux machine has /proc/meminfo");
        assert!(limit > 1 << 20, "{limit}");
    }
}
