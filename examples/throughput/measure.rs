//! What the bench reads of a process from /proc: CPU seconds, CPU by thread, peak RSS; and of the
//! machine: its busy CPU, its free memory.

use std::collections::BTreeMap;

/// CPU seconds (user + system) a process has used so far, from /proc (`self` or a pid).
pub fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat_cpu_seconds(&stat_fields(&stat))
}

/// The fields of a /proc stat line after the command name (which may hold spaces).
fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect()
}

/// utime + stime (the 12th and 13th fields after the name), in seconds.
fn stat_cpu_seconds(fields: &[&str]) -> f64 {
    let ticks: f64 = fields.get(11..13).map_or(0.0, |f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum());
    ticks / 100.0 // USER_HZ
}

/// CPU seconds used so far by the processes of each of `groups` (services that start.sh began with
/// `setsid`: a group's id is the pid in its pid file), in one pass over /proc.
fn groups_cpu_seconds<const N: usize>(groups: [&str; N]) -> [f64; N] {
    let mut seconds = [0.0; N];
    for process in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(process.path().join("stat")) else { continue };
        let fields = stat_fields(&stat);
        if let Some(i) = fields.get(2).and_then(|pgid| groups.iter().position(|g| g == pgid)) {
            seconds[i] += stat_cpu_seconds(&fields);
        }
    }
    seconds
}

/// CPU seconds used so far by the broker and the S3 server, from the pid files of the services'
/// state directory (`KSA_SERVICES_STATE`, set by localstack/with-services.sh); none without it.
#[derive(Clone, Copy)]
struct ServicesCpu {
    broker: f64,
    s3: f64,
}

impl ServicesCpu {
    fn now() -> Option<Self> {
        let state = std::path::PathBuf::from(std::env::var_os("KSA_SERVICES_STATE")?);
        let pid = |name: &str| std::fs::read_to_string(state.join(name)).ok().map(|p| p.trim().to_string());
        let (broker, s3) = (pid("kafka.pid")?, pid("s3.pid")?);
        let [broker, s3] = groups_cpu_seconds([&broker, &s3]);
        Some(Self { broker, s3 })
    }
}

/// CPU seconds per thread name of a process (threads of one name summed), busiest first.
pub fn thread_cpu(pid: u32) -> Vec<(String, f64)> {
    let mut by_name: BTreeMap<String, f64> = BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let tid = task.file_name().to_string_lossy().into_owned();
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default().trim().to_string();
        *by_name.entry(name).or_default() += cpu_seconds(&format!("{pid}/task/{tid}"));
    }
    let mut threads: Vec<(String, f64)> = by_name.into_iter().collect();
    threads.sort_by(|a, b| b.1.total_cmp(&a.1));
    threads
}

/// Peak resident set (VmHWM) of a process, in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// CPU seconds (user + system) used by this process's children that have exited and been waited for.
pub fn children_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields = stat_fields(&stat);
    // cutime and cstime follow utime and stime.
    let ticks: f64 = fields.get(13..15).map_or(0.0, |f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum());
    ticks / 100.0
}

/// The machine's free memory and page cache, from /proc/meminfo: with little memory free, each page a
/// contender touches for the first time costs more, so figures of runs on such a host differ (see
/// docs/performance.md, 2026-12-05).
pub fn memory_state() -> String {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let gib = |name: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().strip_suffix("kB")?.trim().parse::<f64>().ok())
            .map_or("?".into(), |kib| format!("{:.1} GiB", kib / (1 << 20) as f64))
    };
    format!("memory free {}, page cache {}, of {}", gib("MemFree:"), gib("Cached:"), gib("MemTotal:"))
}

/// The machine's CPU seconds so far, busy (user, nice, system, interrupts, steal) and in all, from the
/// first line of /proc/stat: the broker and the S3 server share the cores with each contender, so what
/// they took of the machine during a run says whether the cores were the bound.
#[derive(Clone, Copy)]
pub struct MachineCpu {
    busy: f64,
    all: f64,
    services: Option<ServicesCpu>,
}

impl MachineCpu {
    pub fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let ticks: Vec<f64> = stat
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("cpu "))
            .map(|l| l.split_whitespace().filter_map(|v| v.parse().ok()).collect())
            .unwrap_or_default();
        // user nice system idle iowait irq softirq steal (guest time is in user already).
        let at = |i: usize| ticks.get(i).copied().unwrap_or(0.0) / 100.0;
        let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
        Self { busy, all: busy + at(3) + at(4), services: ServicesCpu::now() }
    }

    /// What the machine's cores did since `earlier`, in words: how busy, and who took the busy CPU
    /// seconds (`contender`: the CPU seconds of the contender measured).
    pub fn since(self, earlier: MachineCpu, contender: f64) -> String {
        let busy = self.busy - earlier.busy;
        let services = match (self.services, earlier.services) {
            (Some(now), Some(then)) => {
                let (broker, s3) = (now.broker - then.broker, now.s3 - then.s3);
                format!(
                    "the broker {broker:.1}, S3 {s3:.1}, the contender {contender:.1}, others {:.1}",
                    busy - broker - s3 - contender
                )
            }
            _ => format!("the contender {contender:.1}, others {:.1}", busy - contender),
        };
        let all = self.all - earlier.all;
        let share = if all > 0.0 { format!("{:.0} %", 100.0 * busy / all) } else { "n/a".into() };
        format!("the machine's cores busy {share} ({busy:.1} CPU s: {services})")
    }
}
