//! A relay the overhead experiment runs as a process of its own (HAProxy, the bare tokio
//! relay, the sluice binary; each possibly under valgrind), so every relay's CPU is counted
//! the same way: utime + stime of one process, from `/proc/<pid>/stat`.
//!
//! It is started by dbkit's spawner: pinned to the given CPUs before `exec` (so every thread
//! it creates inherits the mask), in its own process group (a terminal's Ctrl-C reaches only
//! loadgen, which then tears it down), with `PR_SET_PDEATHSIG`, so even a SIGKILLed loadgen
//! takes it along. Dropping it kills it (SIGKILL) and reaps it; [`RelayProcess::stop`] asks
//! politely first, so valgrind can remove its FIFOs.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// A running relay process.
pub struct RelayProcess {
    child: Option<std::process::Child>,
    /// Its process id (valgrind's, when it runs under valgrind: the same process).
    pub pid: u32,
    /// Where clients connect.
    pub addr: SocketAddr,
    log: PathBuf,
}

impl RelayProcess {
    /// Starts `cmd` pinned to `cpus` with stdout and stderr in `log`, and waits up to
    /// `ready_within` until it accepts TCP connections on `addr`.
    pub async fn start(
        mut cmd: std::process::Command,
        addr: SocketAddr,
        cpus: &[usize],
        log: &Path,
        ready_within: Duration,
    ) -> Result<RelayProcess> {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let out =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        cmd.stdin(std::process::Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        let child = dbkit::spawn::spawn(
            cmd,
            dbkit::spawn::SpawnOptions {
                cpus: Some(cpus.to_vec()),
                new_process_group: true,
            },
        )
        .with_context(|| format!("starting {program}"))?;
        let mut me = RelayProcess {
            pid: child.id(),
            child: Some(child),
            addr,
            log: log.to_path_buf(),
        };
        let deadline = Instant::now() + ready_within;
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            if let Some(status) = me.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!("{program} exited with {status}: {}", me.log_tail());
            }
            if Instant::now() > deadline {
                bail!(
                    "{program} did not listen on {addr} within {} s: {}",
                    ready_within.as_secs(),
                    me.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(me)
    }

    /// The CPUs it may run on, as the kernel says (`Cpus_allowed_list`).
    pub fn cpus_allowed(&self) -> String {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| "?".into())
    }

    /// The last lines of its log, for error messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(8)..].join(" | ");
        if tail.is_empty() {
            format!("(nothing in {})", self.log.display())
        } else {
            tail
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    pub async fn stop(mut self, grace: Duration) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill(2) on our own child's pid, which we have not reaped yet.
            unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGTERM) };
            let deadline = Instant::now() + grace;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A loopback address nobody listens on right now (the relay binds it a moment later).
pub fn free_addr() -> Result<SocketAddr> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}
