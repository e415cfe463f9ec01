//! Syscalls of a relay process over a window: what a relayed query costs in kernel crossings,
//! counted rather than timed, so it repeats where this host's timings drift by tens of
//! percent between runs.
//!
//! Two counters, each attached to every thread of the process for the window only:
//! - `perf stat` on the `raw_syscalls:sys_enter` tracepoint (plus one `syscalls:sys_enter_*`
//!   tracepoint per syscall a relay makes per query), counted in the kernel: the process never
//!   stops. It is started with its events disabled and switched on and off through its
//!   control FIFO, so the count covers exactly the interval loadgen counts queries over.
//!   Enabling a syscall tracepoint puts every task of the host on the kernel's slower syscall
//!   path, so the window is still measured apart from the timed one.
//! - `strace -c -f`, the fallback: every syscall stops the process twice for the tracer,
//!   which on this host cuts a relay's throughput by an order of magnitude and lets each
//!   wake-up find more work (fewer `epoll_wait`s per query than untraced).
//!
//! The window's QPS is kept next to the count, so the report shows how much each counter
//! slowed the relay.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

use crate::cli::SyscallCounterChoice;

/// The syscalls counted one by one (the rest are `other`): what a relay does per query,
/// whichever way it waits for its sockets and clocks, and what setting up and tearing down
/// connections takes.
const NAMED: &[&str] = &[
    "sendto",
    "recvfrom",
    "read",
    "write",
    "readv",
    "writev",
    "sendmsg",
    "recvmsg",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_ctl",
    "poll",
    "ppoll",
    "futex",
    "sched_yield",
    "io_uring_enter",
    "clock_gettime",
    "nanosleep",
    "clock_nanosleep",
    "setsockopt",
    "getsockopt",
    "ioctl",
    "accept4",
    "connect",
    "close",
    "shutdown",
    "mmap",
    "munmap",
    "madvise",
    "brk",
    "rt_sigprocmask",
];

/// Where the kernel lists its syscall tracepoints (perf mounts tracefs on first use).
const TRACEPOINTS: &[&str] = &[
    "/sys/kernel/tracing/events/syscalls",
    "/sys/kernel/debug/tracing/events/syscalls",
];

/// How long a counter may take to switch on or off.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(10);

/// A way of counting syscalls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counter {
    /// `perf stat` with these tracepoint events (the total first).
    Perf(Vec<String>),
    /// `strace -c -f`.
    Strace,
}

/// Syscalls counted over a window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyscallCounts {
    /// Every syscall.
    pub total: u64,
    /// The ones counted by name, most frequent first (zeros left out).
    pub by_name: Vec<(String, u64)>,
}

/// One row of `overhead_syscalls.csv`: one syscall (or `total`) of one relay at one client
/// count in one round, over the counting window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SyscallRow {
    pub round: usize,
    pub target: String,
    pub pool_size: Option<usize>,
    pub clients: usize,
    /// `perf` or `strace`.
    pub counter: String,
    /// The syscall, or `total` for all of them.
    pub syscall: String,
    pub calls: u64,
    /// Queries answered over the same window.
    pub queries: u64,
    pub per_query: f64,
}

impl Counter {
    /// `perf` or `strace`, for the CSV.
    pub fn name(&self) -> &'static str {
        match self {
            Counter::Perf(_) => "perf",
            Counter::Strace => "strace",
        }
    }

    /// For the metadata and the summary.
    pub fn label(&self) -> String {
        match self {
            Counter::Perf(events) => format!(
                "perf stat -e raw_syscalls:sys_enter (+{} syscalls by name), counted in the kernel",
                events.len() - 1
            ),
            Counter::Strace => "strace -c -f (ptrace: stops the relay at every syscall)".into(),
        }
    }

    /// The counter `choice` picks on this host, or why there is none.
    pub fn detect(choice: SyscallCounterChoice) -> Result<Counter, String> {
        let perf = || {
            let total = vec!["raw_syscalls:sys_enter".to_string()];
            // The total first: it also mounts tracefs, which says which syscalls this kernel
            // has (arm64 has no epoll_wait). Then the named ones, or the total alone.
            if !perf_counts(&total) {
                return None;
            }
            let mut all = total.clone();
            all.extend(
                NAMED
                    .iter()
                    .filter(|n| has_tracepoint(n))
                    .map(|n| format!("syscalls:sys_enter_{n}")),
            );
            Some(if perf_counts(&all) { all } else { total })
        };
        let strace = || tool_runs("strace", &["-V"]);
        match choice {
            SyscallCounterChoice::Off => {
                Err("syscall counting is off (--syscall-counter off)".into())
            }
            SyscallCounterChoice::Perf => perf()
                .map(Counter::Perf)
                .ok_or_else(|| "perf cannot count the raw_syscalls tracepoint here".into()),
            SyscallCounterChoice::Strace => strace()
                .then_some(Counter::Strace)
                .ok_or_else(|| "no strace (apt-get install strace)".into()),
            SyscallCounterChoice::Auto => perf()
                .map(Counter::Perf)
                .or_else(|| strace().then_some(Counter::Strace))
                .ok_or_else(|| {
                    "neither perf (tracepoints) nor strace works here; install strace \
                     (scripts/install-test-deps.sh --overhead)"
                        .into()
                }),
        }
    }

    /// Starts counting the syscalls of every thread of `pid`, its files in `dir`; returns
    /// once counting is on.
    pub async fn start(&self, pid: u32, dir: &Path) -> Result<Counting> {
        let out = dir.join(format!("syscalls-{pid}.txt"));
        let _ = std::fs::remove_file(&out);
        let mut cmd;
        let mut control = None;
        match self {
            Counter::Perf(events) => {
                let (ctl, ack) = (
                    dir.join(format!("perf-{pid}.ctl")),
                    dir.join(format!("perf-{pid}.ack")),
                );
                for fifo in [&ctl, &ack] {
                    make_fifo(fifo)?;
                }
                cmd = std::process::Command::new("perf");
                cmd.args(["stat", "-x", ",", "-D", "-1", "-e", &events.join(",")])
                    .arg("--control")
                    .arg(format!("fifo:{},{}", ctl.display(), ack.display()))
                    .arg("-o")
                    .arg(&out)
                    .args(["-p", &pid.to_string()]);
                // Read-write opens never block, whichever side opens first.
                let open = pipe::OpenOptions::new().read_write(true).clone();
                control = Some((open.open_sender(&ctl)?, open.open_receiver(&ack)?));
            }
            Counter::Strace => {
                cmd = std::process::Command::new("strace");
                cmd.args(["-c", "-f", "-o"])
                    .arg(&out)
                    .args(["-p", &pid.to_string()]);
            }
        }
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let child = dbkit::spawn::spawn(
            cmd,
            dbkit::spawn::SpawnOptions {
                cpus: None,
                new_process_group: true,
            },
        )
        .context("starting the syscall counter")?;
        let mut counting = Counting {
            child: Some(child),
            out,
            control,
        };
        match counting.control.as_mut() {
            Some(ctl) => command(ctl, "enable").await?,
            None => counting.await_strace_attached(pid).await?,
        }
        Ok(counting)
    }
}

/// A counter that is counting; dropping it kills it.
pub struct Counting {
    child: Option<std::process::Child>,
    out: PathBuf,
    control: Option<(pipe::Sender, pipe::Receiver)>,
}

impl Counting {
    /// Until strace has attached every thread of `pid` (each names it as its tracer).
    async fn await_strace_attached(&mut self, pid: u32) -> Result<()> {
        let tracer = self.child.as_ref().map_or(0, |c| c.id());
        let deadline = Instant::now() + CONTROL_TIMEOUT;
        loop {
            if all_traced_by(pid, tracer) {
                return Ok(());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                bail!("strace exited with {status} before attaching to {pid}");
            }
            if Instant::now() > deadline {
                bail!("strace did not attach to every thread of {pid} within 10 s");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Stops counting and returns the counts.
    pub async fn stop(mut self) -> Result<SyscallCounts> {
        if let Some(ctl) = self.control.as_mut() {
            command(ctl, "disable").await?;
        }
        let mut child = self.child.take().context("the counter is gone")?;
        // Both print their counts when interrupted (strace detaches first).
        // SAFETY: kill(2) on our own unreaped child.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let deadline = Instant::now() + CONTROL_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("the syscall counter did not exit within 10 s of SIGINT");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let text = std::fs::read_to_string(&self.out).with_context(|| {
            format!(
                "the syscall counter ({status}) wrote no {}",
                self.out.display()
            )
        })?;
        let counts = match self.control {
            Some(_) => parse_perf(&text),
            None => parse_strace(&text),
        };
        counts.map_err(|e| anyhow::anyhow!("{e} in {}:\n{text}", self.out.display()))
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Sends a perf control command and waits for its `ack`.
async fn command(ctl: &mut (pipe::Sender, pipe::Receiver), what: &str) -> Result<()> {
    ctl.0.write_all(format!("{what}\n").as_bytes()).await?;
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(CONTROL_TIMEOUT, ctl.1.read(&mut buf))
        .await
        .with_context(|| format!("perf did not acknowledge `{what}` within 10 s"))??;
    if !buf[..n].starts_with(b"ack") {
        bail!(
            "perf answered {:?} to `{what}`",
            String::from_utf8_lossy(&buf[..n])
        );
    }
    Ok(())
}

fn make_fifo(path: &Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let _ = std::fs::remove_file(path);
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: mkfifo reads a NUL-terminated path we own.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("mkfifo {}", path.display()));
    }
    Ok(())
}

/// Whether every thread of `pid` names `tracer` as its tracer.
fn all_traced_by(pid: u32, tracer: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut any = false;
    for task in tasks.flatten() {
        any = true;
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let traced = status
            .lines()
            .find_map(|l| l.strip_prefix("TracerPid:"))
            .and_then(|v| v.trim().parse::<u32>().ok());
        if traced != Some(tracer) {
            return false;
        }
    }
    any
}

/// Whether the kernel has an enter tracepoint for `syscall` (yes when it cannot tell: perf's
/// probe decides then).
fn has_tracepoint(syscall: &str) -> bool {
    match TRACEPOINTS.iter().map(Path::new).find(|d| d.is_dir()) {
        Some(dir) => dir.join(format!("sys_enter_{syscall}")).is_dir(),
        None => true,
    }
}

/// Whether perf can count `events` here (a second's probe on `true`).
fn perf_counts(events: &[String]) -> bool {
    let out = std::process::Command::new("perf")
        .args(["stat", "-x", ",", "-e", &events.join(","), "--", "true"])
        .output();
    match out {
        Ok(o) if o.status.success() => parse_perf(&String::from_utf8_lossy(&o.stderr)).is_ok(),
        _ => false,
    }
}

fn tool_runs(tool: &str, args: &[&str]) -> bool {
    std::process::Command::new(tool)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `perf stat -x ,` output: `count,unit,event,running time,percent,...` per event; the total
/// is `raw_syscalls:sys_enter`, the named ones `syscalls:sys_enter_<name>`.
pub fn parse_perf(text: &str) -> Result<SyscallCounts, String> {
    let mut total = None;
    let mut by_name = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let fields: Vec<&str> = line.split(',').collect();
        let (Some(count), Some(event)) = (fields.first(), fields.get(2)) else {
            continue;
        };
        let Ok(count) = count.trim().parse::<u64>() else {
            if event.contains("sys_enter") {
                return Err(format!("perf could not count {event} ({count})"));
            }
            continue;
        };
        if *event == "raw_syscalls:sys_enter" {
            total = Some(count);
        } else if let Some(name) = event.strip_prefix("syscalls:sys_enter_") {
            by_name.push((name.to_string(), count));
        }
    }
    let total = total.ok_or("no raw_syscalls:sys_enter count")?;
    Ok(SyscallCounts {
        total,
        by_name: sorted(by_name),
    })
}

/// `strace -c` output: a table whose columns the dashed line under the header delimits;
/// `calls` per syscall, the `total` row last.
pub fn parse_strace(text: &str) -> Result<SyscallCounts, String> {
    let lines: Vec<&str> = text.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.trim_start().starts_with("% time"))
        .ok_or("no strace -c header")?;
    let dashes = lines.get(header + 1).ok_or("no line under the header")?;
    // Column spans from the runs of dashes; the last one runs to the end of the line.
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in dashes.char_indices().chain([(dashes.len(), ' ')]) {
        match (c == '-', start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                spans.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    let cell = |line: &str, (s, e): (usize, usize), last: bool| {
        let end = if last { line.len() } else { e.min(line.len()) };
        line.get(s.min(line.len())..end)
            .unwrap_or("")
            .trim()
            .to_string()
    };
    let names: Vec<String> = spans
        .iter()
        .enumerate()
        .map(|(i, &sp)| cell(lines[header], sp, i + 1 == spans.len()))
        .collect();
    let col = |name: &str| names.iter().position(|n| n == name);
    let (calls, syscall) = col("calls")
        .zip(col("syscall"))
        .ok_or("no calls or syscall column")?;
    let mut by_name = Vec::new();
    let mut total = None;
    for line in &lines[header + 2..] {
        if line.trim_start().starts_with('-') || line.trim().is_empty() {
            continue;
        }
        let name = cell(line, spans[syscall], syscall + 1 == spans.len());
        let n: u64 = cell(line, spans[calls], false)
            .parse()
            .map_err(|_| format!("no call count in {line:?}"))?;
        if name == "total" {
            total = Some(n);
        } else {
            by_name.push((name, n));
        }
    }
    let total = total.unwrap_or_else(|| by_name.iter().map(|(_, n)| n).sum());
    Ok(SyscallCounts {
        total,
        by_name: sorted(by_name),
    })
}

fn sorted(mut by_name: Vec<(String, u64)>) -> Vec<(String, u64)> {
    by_name.retain(|(_, n)| *n > 0);
    by_name.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    by_name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strace_summaries_are_read_by_their_columns() {
        // HAProxy at 64 clients, strace 6.1 (the errors column is blank on most rows).
        let text = "\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 55.38    0.268930          27      9917           sendto
 38.57    0.187279          18      9993        76 recvfrom
  2.62    0.012714          74       171           epoll_wait
  0.00    0.000015          15         1           rt_sigreturn
------ ----------- ----------- --------- --------- ----------------
100.00    0.485597          23     20082        76 total
";
        let c = parse_strace(text).unwrap();
        assert_eq!(c.total, 20082);
        assert_eq!(
            c.by_name,
            [
                ("recvfrom".to_string(), 9993),
                ("sendto".to_string(), 9917),
                ("epoll_wait".to_string(), 171),
                ("rt_sigreturn".to_string(), 1),
            ]
        );
        // Without a total row, the rows add up.
        let no_total: String = text.lines().take(6).map(|l| format!("{l}\n")).collect();
        assert_eq!(
            parse_strace(&no_total).unwrap().total,
            9917 + 9993 + 171 + 1
        );
        assert!(parse_strace("strace: Process 1 attached\n").is_err());
    }

    #[test]
    fn perf_csv_gives_the_total_and_the_named_syscalls() {
        let text = "# started on Tue Dec  1 14:44:11 2026\n\n\
                    20063,,raw_syscalls:sys_enter,80604798,100.00,,\n\
                    4005,,syscalls:sys_enter_sendto,80604798,100.00,,\n\
                    4003,,syscalls:sys_enter_recvfrom,80604798,100.00,,\n\
                    0,,syscalls:sys_enter_futex,80604798,100.00,,\n";
        let c = parse_perf(text).unwrap();
        assert_eq!(c.total, 20063);
        assert_eq!(
            c.by_name,
            [("sendto".to_string(), 4005), ("recvfrom".to_string(), 4003)]
        );
        let unsupported = "<not supported>,,raw_syscalls:sys_enter,0,100.00,,\n";
        assert!(parse_perf(unsupported)
            .unwrap_err()
            .contains("could not count"));
        assert!(parse_perf("1,,cycles,1,100.00,,\n").is_err());
    }
}
