//! What the bench reads of a process from /proc: CPU seconds, CPU by thread, peak RSS.

use std::collections::BTreeMap;

/// CPU seconds (user + system) a process has used so far, from /proc (`self` or a pid).
pub fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks: f64 = fields.get(11..13).map_or(0.0, |f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum());
    ticks / 100.0 // USER_HZ
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
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
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
