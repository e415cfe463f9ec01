//! What the sysbench experiment's load goes through: nothing (direct), HAProxy in TCP mode
//! with one thread (the config of [`super::haproxy`], as the overhead experiment runs it), or
//! the sluice binary with its defaults plus `--sysbench-sluice-args`, accepting the
//! application account and passing it through to the server. Each relay is a process of its
//! own on a free loopback port, pinned to loadgen's CPUs, started fresh for every level.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::haproxy;
use super::process::{free_addr, RelayProcess};
use super::relays::{Binaries, Relay};
use super::sluice_child;
use crate::cli::SysbenchTarget;

/// How a relay is started.
pub struct Launch<'a> {
    /// The server's `host:port`.
    pub backend: &'a str,
    /// CPUs it is pinned to.
    pub cpus: &'a [usize],
    /// Where its config and log go.
    pub dir: &'a Path,
    /// The account sluice accepts, `NAME:PASSWORD`.
    pub user: &'a str,
    /// sluice's flags beyond listen, backend and user.
    pub sluice_args: &'a [String],
}

/// The binary `target` needs, or why it cannot run.
pub fn missing(target: SysbenchTarget, bins: &Binaries) -> Option<&str> {
    match target {
        SysbenchTarget::Direct => None,
        SysbenchTarget::Haproxy => bins.missing(Relay::HaProxy),
        SysbenchTarget::Sluice => bins.missing(Relay::Sluice(0)),
    }
}

/// The sluice command line after the binary, as the metadata shows it.
pub fn sluice_args_shown(how: &Launch<'_>) -> String {
    let user = how.user.split(':').next().unwrap_or("");
    let mut args = vec![
        "--listen <free port>".to_string(),
        format!("--backend {}", how.backend),
        format!("--user {user}:***"),
    ];
    args.extend(how.sluice_args.iter().cloned());
    args.join(" ")
}

/// Starts the relay for `target` (nothing for direct) on a free loopback port; three tries,
/// since another process may take the port between the probe and the relay's bind.
pub async fn start(
    target: SysbenchTarget,
    bins: &Binaries,
    how: &Launch<'_>,
) -> Result<Option<RelayProcess>> {
    if target == SysbenchTarget::Direct {
        return Ok(None);
    }
    let mut tries = 0;
    loop {
        tries += 1;
        match start_once(target, bins, how).await {
            Err(_) if tries < 3 && missing(target, bins).is_none() => {}
            done => return done.map(Some),
        }
    }
}

async fn start_once(
    target: SysbenchTarget,
    bins: &Binaries,
    how: &Launch<'_>,
) -> Result<RelayProcess> {
    let listen = free_addr()?;
    let key = target.key();
    let cmd = match target {
        SysbenchTarget::Haproxy => {
            let bin = bins.haproxy.clone().map_err(anyhow::Error::msg)?;
            let cfg = how.dir.join(format!("sysbench-{key}.cfg"));
            std::fs::write(
                &cfg,
                haproxy::config(&listen.to_string(), how.backend, false),
            )?;
            haproxy::command(&bin, &cfg)
        }
        SysbenchTarget::Sluice => {
            let bin = bins.sluice.clone().map_err(anyhow::Error::msg)?;
            let mut cmd = sluice_child::default_command(&bin, listen, how.backend, how.user);
            cmd.args(how.sluice_args);
            cmd
        }
        SysbenchTarget::Direct => unreachable!("direct has no relay"),
    };
    let log = how.dir.join(format!("sysbench-{key}.log"));
    RelayProcess::start(cmd, listen, how.cpus, &log, Duration::from_secs(15)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shown_command_hides_the_password_and_keeps_the_extra_flags() {
        let extra = ["--pool-size".to_string(), "auto".to_string()];
        let how = Launch {
            backend: "127.0.0.1:3306",
            cpus: &[1],
            dir: Path::new("/tmp"),
            user: "sbtest_app:secret",
            sluice_args: &extra,
        };
        assert_eq!(
            sluice_args_shown(&how),
            "--listen <free port> --backend 127.0.0.1:3306 --user sbtest_app:*** --pool-size auto"
        );
        let bins = Binaries {
            haproxy: Err("no haproxy".into()),
            sluice: Ok("/x/sluice".into()),
        };
        assert_eq!(missing(SysbenchTarget::Haproxy, &bins), Some("no haproxy"));
        assert_eq!(missing(SysbenchTarget::Sluice, &bins), None);
        assert_eq!(missing(SysbenchTarget::Direct, &bins), None);
    }
}
