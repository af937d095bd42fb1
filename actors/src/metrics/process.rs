//! `capov_process_*`: resident memory, virtual memory, CPU seconds, open and maximum file descriptors, threads and
//! start time of this process, read from `/proc/self` at each scrape (Linux; elsewhere the families are absent), and
//! the memory limit it runs under (`memory_limit.rs`).

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Counter, Gauge, IntGauge, Opts};

pub(super) struct ProcessCollector {
    descs: Vec<Desc>,
    cpu_seconds: Counter,
    resident_memory: IntGauge,
    memory_limit: IntGauge,
    virtual_memory: IntGauge,
    open_fds: IntGauge,
    max_fds: IntGauge,
    threads: IntGauge,
    start_time: Gauge,
}

impl ProcessCollector {
    pub(super) fn new() -> ProcessCollector {
        let cpu_seconds = Counter::with_opts(Opts::new(
            "capov_process_cpu_seconds_total",
            "User and system CPU time spent, in seconds.",
        ))
        .expect("valid metric");
        let gauge = |name: &str, help: &str| IntGauge::with_opts(Opts::new(name, help)).expect("valid metric");
        let resident_memory = gauge("capov_process_resident_memory_bytes", "Resident memory size in bytes.");
        let memory_limit = gauge(
            "capov_process_memory_limit_bytes",
            "Memory the process may use before the OOM killer ends it: its cgroup's limit, else the machine's memory.",
        );
        let virtual_memory = gauge("capov_process_virtual_memory_bytes", "Virtual memory size in bytes.");
        let open_fds = gauge("capov_process_open_fds", "Open file descriptors.");
        let max_fds = gauge("capov_process_max_fds", "Maximum number of open file descriptors.");
        let threads = gauge("capov_process_threads", "OS threads.");
        let start_time = Gauge::with_opts(Opts::new(
            "capov_process_start_time_seconds",
            "Start time of the process since the Unix epoch, in seconds.",
        ))
        .expect("valid metric");
        let mut descs = Vec::new();
        descs.extend(cpu_seconds.desc().into_iter().cloned());
        for metric in [
            &resident_memory,
            &memory_limit,
            &virtual_memory,
            &open_fds,
            &max_fds,
            &threads,
        ] {
            descs.extend(metric.desc().into_iter().cloned());
        }
        descs.extend(start_time.desc().into_iter().cloned());
        ProcessCollector {
            descs,
            cpu_seconds,
            resident_memory,
            memory_limit,
            virtual_memory,
            open_fds,
            max_fds,
            threads,
            start_time,
        }
    }
}

/// What one read of `/proc/self` gives.
#[derive(Debug, Default, PartialEq)]
struct Sample {
    cpu_seconds: f64,
    resident_bytes: i64,
    virtual_bytes: i64,
    threads: i64,
    start_time_seconds: f64,
}

impl Collector for ProcessCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Some(sample) = read_stat() else {
            return Vec::new();
        };
        // A counter only goes up: add the difference since the previous scrape.
        let delta = sample.cpu_seconds - self.cpu_seconds.get();
        if delta > 0.0 {
            self.cpu_seconds.inc_by(delta);
        }
        self.resident_memory.set(sample.resident_bytes);
        self.virtual_memory.set(sample.virtual_bytes);
        self.threads.set(sample.threads);
        self.start_time.set(sample.start_time_seconds);
        if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
            self.open_fds.set(entries.count() as i64);
        }
        if let Some(max) = read_max_fds() {
            self.max_fds.set(max);
        }
        if let Some(limit) = super::memory_limit::read() {
            self.memory_limit.set(limit);
        }
        let mut families = self.cpu_seconds.collect();
        for metric in [
            &self.resident_memory,
            &self.memory_limit,
            &self.virtual_memory,
            &self.open_fds,
            &self.max_fds,
            &self.threads,
        ] {
            families.extend(metric.collect());
        }
        families.extend(self.start_time.collect());
        families
    }
}

fn read_stat() -> Option<Sample> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let boot_time = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|text| parse_boot_time(&text))?;
    // SAFETY: sysconf only reads system constants.
    let (ticks, page_size) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
    if ticks <= 0 || page_size <= 0 {
        return None;
    }
    // `c_long` is i32 on 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    let page_size = page_size as i64;
    parse_stat(&stat, ticks as f64, page_size, boot_time)
}

/// Parses `/proc/<pid>/stat` (fields after the parenthesised command name, which may hold spaces).
fn parse_stat(stat: &str, ticks_per_second: f64, page_size: i64, boot_time: f64) -> Option<Sample> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is index 0 here; utime = field 14, stime 15, num_threads 20, starttime 22, vsize 23, rss 24.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |number: usize| fields.get(number - 3).and_then(|value| value.parse::<f64>().ok());
    Some(Sample {
        cpu_seconds: (field(14)? + field(15)?) / ticks_per_second,
        threads: field(20)? as i64,
        start_time_seconds: boot_time + field(22)? / ticks_per_second,
        virtual_bytes: field(23)? as i64,
        resident_bytes: field(24)? as i64 * page_size,
    })
}

fn parse_boot_time(proc_stat: &str) -> Option<f64> {
    proc_stat
        .lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

fn read_max_fds() -> Option<i64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|line| line.starts_with("Max open files"))?;
    line["Max open files".len()..].split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat() {
        let stat = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 7 0 1000 \
                    123456789 512 18446744073709551615";
        let sample = parse_stat(stat, 100.0, 4096, 1_700_000_000.0).unwrap();
        assert_eq!(
            sample,
            Sample {
                cpu_seconds: 3.0,
                resident_bytes: 512 * 4096,
                virtual_bytes: 123_456_789,
                threads: 7,
                start_time_seconds: 1_700_000_010.0,
            }
        );
        assert_eq!(parse_boot_time("cpu 1 2 3\nbtime 1700000000\n"), Some(1_700_000_000.0));
    }

    #[test]
    fn reads_this_process() {
        let sample = read_stat().expect("/proc/self/stat");
        assert!(sample.resident_bytes > 0 && sample.threads >= 1 && sample.start_time_seconds > 1e9);
        assert!(read_max_fds().unwrap_or(0) > 0);
    }
}
