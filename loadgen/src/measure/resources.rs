//! What loadgen (and an in-process sluice) cost: CPU time and resident memory, read from
//! `getrusage` and `/proc`, so the report can show loadgen was not the bottleneck; and the
//! CPU of another process (a relay, the server) from `/proc/<pid>/stat`.

/// Thread-name prefix of the in-process sluice runtime; its CPU is reported separately.
pub const PROXY_THREAD_PREFIX: &str = "sluice-";

/// CPU consumed so far, in nanoseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuSample {
    /// Whole process (user + system), every thread.
    pub process_ns: u64,
    /// Threads of the in-process proxy (0 when none runs).
    pub proxy_ns: u64,
}

impl CpuSample {
    /// Takes a sample now.
    pub fn now() -> CpuSample {
        CpuSample {
            process_ns: process_cpu_ns(),
            proxy_ns: threads_cpu_ns(PROXY_THREAD_PREFIX),
        }
    }

    /// `(loadgen ns, proxy ns)` spent between `earlier` and `self`.
    pub fn since(&self, earlier: &CpuSample) -> (u64, u64) {
        let proxy = self.proxy_ns.saturating_sub(earlier.proxy_ns);
        let total = self.process_ns.saturating_sub(earlier.process_ns);
        (total.saturating_sub(proxy), proxy)
    }
}

fn process_cpu_ns() -> u64 {
    // SAFETY: getrusage fills a zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Sum of on-CPU time of this process's threads whose name starts with `prefix`
/// (`/proc/self/task/*/schedstat`, nanoseconds). Threads that already exited are lost,
/// which is fine for long-lived runtime workers.
pub fn threads_cpu_ns(prefix: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let mut total = 0;
    for task in tasks.flatten() {
        let path = task.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("schedstat")).unwrap_or_default();
        total += stat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    total
}

/// CPU (user + system) process `pid` has used so far, every thread (exited ones too), in
/// nanoseconds. The kernel reports it in clock ticks (10 ms at the usual 100 Hz), so a
/// difference over a window is good to two ticks.
pub fn pid_cpu_ns(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let ticks = stat_cpu_ticks(&stat)?;
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&h| h > 0)?;
    Some(ticks * (1_000_000_000 / hz))
}

/// `utime + stime` (fields 14 and 15) of a `/proc/<pid>/stat` line. Field 2, the command
/// name, is in parentheses and may itself hold spaces and parentheses, so the fields are
/// counted from the last `)`.
pub fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (the state).
    let utime: u64 = fields.get(14 - 3)?.parse().ok()?;
    let stime: u64 = fields.get(15 - 3)?.parse().ok()?;
    Some(utime + stime)
}

/// The CPUs process `pid` may run on, as the kernel says (`Cpus_allowed_list`); `?` when
/// it is gone.
pub fn cpus_allowed(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| "?".into())
}

/// Resident set size now and its peak, in MiB (`VmRSS`, `VmHWM`).
pub fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
            .unwrap_or(0.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_and_rss_are_measured() {
        let a = CpuSample::now();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = CpuSample::now();
        let (loadgen, proxy) = b.since(&a);
        assert!(loadgen > 0, "no CPU time measured");
        assert_eq!(proxy, 0);
        let (rss, peak) = rss_mib();
        assert!(rss > 0.0 && peak >= rss);
        assert!(pid_cpu_ns(std::process::id()).is_some_and(|ns| ns > 0));
        assert_eq!(pid_cpu_ns(u32::MAX), None);
        assert_ne!(cpus_allowed(std::process::id()), "?");
        assert_eq!(cpus_allowed(u32::MAX), "?");
    }

    #[test]
    fn proc_stat_cpu_is_utime_plus_stime_after_the_command_name() {
        // A real line from HAProxy, then a command name with spaces and a parenthesis.
        let haproxy = "27581 (haproxy) S 1 27580 27580 0 -1 4194560 1520 0 0 0 5361 9812 0 0 20 0 2 0 \
                       1043178 51908608 4011 18446744073709551615 1 1 0 0 0 0 0 4096 16386 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(stat_cpu_ticks(haproxy), Some(5361 + 9812));
        let odd = "7 (a b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 0 0";
        assert_eq!(stat_cpu_ticks(odd), Some(7));
        assert_eq!(stat_cpu_ticks("7 (short) R 1"), None);
        assert_eq!(stat_cpu_ticks("no parenthesis"), None);
    }
}
