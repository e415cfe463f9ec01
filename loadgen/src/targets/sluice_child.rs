//! The release `sluice` binary as a child process: the soak's ([`SluiceChild`]: started on
//! free loopback ports, its memory and descriptors read from `/proc/<pid>`, its `/metrics`
//! scraped, stopped with SIGTERM), and the overhead and sysbench experiments' ([`command`],
//! [`default_command`], run as a [`super::process::RelayProcess`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::process::free_addr;

/// The release `sluice` binary running as a child process.
pub struct SluiceChild {
    child: tokio::process::Child,
    /// Its process id.
    pub pid: u32,
    /// The binary that runs.
    pub bin: PathBuf,
    listen: SocketAddr,
    metrics: SocketAddr,
}

impl SluiceChild {
    /// Starts `bin` in front of `backend` with `pool` slots, room for `max_clients`
    /// clients, logging to `dir/sluice.log`.
    pub async fn start(
        bin: PathBuf,
        backend: &str,
        pool: usize,
        max_clients: usize,
        dir: &Path,
    ) -> Result<SluiceChild> {
        let (listen, metrics) = (free_addr()?, free_addr()?);
        let log = std::fs::File::create(dir.join("sluice.log"))?;
        let mut cmd = command(&bin, listen, backend, pool, max_clients);
        cmd.args(["--metrics-listen", &metrics.to_string()]);
        let child = tokio::process::Command::from(cmd)
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let pid = child.id().context("sluice exited at once")?;
        let mut me = SluiceChild {
            child,
            pid,
            bin,
            listen,
            metrics,
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        while tokio::net::TcpStream::connect(listen).await.is_err() {
            if let Ok(Some(status)) = me.child.try_wait() {
                bail!("sluice exited with {status} (see sluice.log)");
            }
            if Instant::now() > deadline {
                bail!("sluice did not listen on {listen} within 15 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(me)
    }

    /// Where clients connect, as the bench user.
    pub fn url(&self) -> String {
        format!("mysql://bench:bench@{}/bench", self.listen)
    }

    /// The `/metrics` text.
    pub async fn metrics(&self) -> Result<String> {
        let mut s = tokio::net::TcpStream::connect(self.metrics).await?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: sluice\r\nConnection: close\r\n\r\n")
            .await?;
        let mut body = String::new();
        tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut body)).await??;
        Ok(body)
    }

    /// SIGTERM (sluice drains and exits), then a kill if it lingers.
    pub async fn stop(mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.pid as libc::pid_t, libc::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// The command that runs `bin` on `listen` in front of `backend` (the bench user, `pool`
/// slots, twice that in backend connections, room for `max_clients` clients, warnings only
/// in its log).
pub fn command(
    bin: &Path,
    listen: SocketAddr,
    backend: &str,
    pool: usize,
    max_clients: usize,
) -> std::process::Command {
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["--listen", &listen.to_string()])
        .args(["--backend", backend])
        .args(["--user", "bench:bench"])
        .args(["--pool-size", &pool.to_string()])
        .args(["--max-backend-connections", &(pool * 2).to_string()])
        .args(["--max-client-connections", &max_clients.to_string()])
        .env("RUST_LOG", "warn");
    cmd
}

/// The command that runs `bin` on `listen` in front of `backend` with its default settings,
/// accepting `user` (`NAME:PASSWORD`, passed through to the backend as the same account),
/// warnings only in its log; the caller adds any other flag.
pub fn default_command(
    bin: &Path,
    listen: SocketAddr,
    backend: &str,
    user: &str,
) -> std::process::Command {
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["--listen", &listen.to_string()])
        .args(["--backend", backend])
        .args(["--user", user])
        .env("RUST_LOG", "warn");
    cmd
}

/// `explicit` (`--sluice-bin` / `SLUICE_BIN`), else `sluice` next to this executable
/// (`just soak`, `just overhead` and `just bench-all` build both).
pub fn sluice_bin(explicit: Option<&Path>) -> Result<PathBuf> {
    let bin = match explicit {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()?.with_file_name("sluice"),
    };
    if !bin.is_file() {
        bail!(
            "no sluice binary at {}; build it with `cargo build --release -p sluice` or pass --sluice-bin",
            bin.display()
        );
    }
    Ok(bin)
}

/// `VmRSS` of `pid` in MiB.
pub fn proc_rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// Open file descriptors of `pid`.
pub fn proc_fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count() as u64)
        .unwrap_or(0)
}

/// Sum of every sample of a metric family in Prometheus text (`prefix` includes the `{`).
pub fn metric_sum(text: &str, prefix: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next())
        .filter_map(|v| v.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_families_are_summed() {
        let text = "# HELP sluice_backends x\nsluice_backends{state=\"idle\"} 3\nsluice_backends{state=\"in_use\"} 5\nsluice_backends_max 64\n";
        assert_eq!(metric_sum(text, "sluice_backends{"), 8);
        assert_eq!(metric_sum(text, "sluice_clients{"), 0);
    }
}
