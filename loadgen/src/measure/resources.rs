//! What loadgen (and an in-process sluice) cost: CPU time and resident memory, read from
//! `getrusage` and `/proc`, so the report can show loadgen was not the bottleneck.

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
    }
}
