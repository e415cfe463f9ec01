//! The relays the overhead experiment compares, each started the same way: a process of its
//! own on a free loopback port in front of the server, pinned to loadgen's CPUs, optionally
//! under valgrind (`--cost-counts`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

use super::process::{free_addr, RelayProcess};
use super::{haproxy, relay_floor, sluice_child};
use crate::analysis::relay_cost;

/// A relay in front of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relay {
    /// The bare tokio relay (`loadgen relay`): the floor of any proxy's cost.
    Tokio,
    /// HAProxy in TCP mode, one thread: the plain C relay.
    HaProxy,
    /// The sluice binary with this many execution slots (pipelining on, as it ships).
    Sluice(usize),
    /// The sluice binary with this many execution slots and pipelining off
    /// (`--pipeline-depth 1`): what pipelining saves.
    SluiceSerial(usize),
}

impl Relay {
    /// The relays overhead compares, in the order each round measures them after direct:
    /// the byte pipes, then sluice, so HAProxy and sluice run next to each other, and each
    /// pool size serial then pipelined, so those two do too.
    pub const ALL: [Relay; 6] = [
        Relay::Tokio,
        Relay::HaProxy,
        Relay::SluiceSerial(4),
        Relay::Sluice(4),
        Relay::SluiceSerial(64),
        Relay::Sluice(64),
    ];

    /// The relays in the order round `round` (from 1) measures them: [`Relay::ALL`] in odd
    /// rounds, reversed in even ones. This host drifts within minutes, and in a fixed order the
    /// last row of a round always paid for it (the 1-client sluice P=64 row most of all);
    /// over each pair of rounds every relay holds the same mean position, and HAProxy stays
    /// next to sluice.
    pub fn in_round(round: usize) -> impl Iterator<Item = Relay> {
        let even = round.is_multiple_of(2);
        (0..Relay::ALL.len())
            .map(move |i| Relay::ALL[if even { Relay::ALL.len() - 1 - i } else { i }])
    }

    /// The flags serial sluice runs with on top of pipelined sluice's.
    pub const SERIAL_ARGS: [&'static str; 2] = ["--pipeline-depth", "1"];

    /// The `target` column.
    pub fn target(self) -> &'static str {
        match self {
            Relay::Tokio => "relay",
            Relay::HaProxy => "haproxy",
            Relay::Sluice(_) => "sluice",
            Relay::SluiceSerial(_) => relay_cost::SERIAL,
        }
    }

    /// sluice's pool size; `None` for the byte pipes.
    pub fn pool(self) -> Option<usize> {
        match self {
            Relay::Sluice(p) | Relay::SluiceSerial(p) => Some(p),
            Relay::Tokio | Relay::HaProxy => None,
        }
    }

    /// A short name for logs and metadata keys: `relay`, `haproxy`, `sluice_p4`,
    /// `sluice_serial_p4` (the rows' [`relay_cost::key_of`]).
    pub fn key(self) -> String {
        relay_cost::key(self.target(), self.pool())
    }

    /// For the progress log: `bare tokio relay`, `HAProxy`, `sluice P=4`.
    pub fn label(self) -> String {
        match self {
            Relay::Tokio => "bare tokio relay".into(),
            Relay::HaProxy => "HAProxy".into(),
            Relay::Sluice(p) => format!("sluice P={p}"),
            Relay::SluiceSerial(p) => format!("sluice P={p} pipelining off"),
        }
    }
}

/// The binaries the relays need, found once before the run.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// HAProxy, or why there is none.
    pub haproxy: Result<PathBuf, String>,
    /// The sluice binary, or why there is none.
    pub sluice: Result<PathBuf, String>,
}

impl Binaries {
    /// The binary `relay` needs, or why it cannot run (the tokio relay is loadgen itself).
    pub fn missing(&self, relay: Relay) -> Option<&str> {
        match relay {
            Relay::Tokio => None,
            Relay::HaProxy => self.haproxy.as_ref().err().map(String::as_str),
            Relay::Sluice(_) | Relay::SluiceSerial(_) => {
                self.sluice.as_ref().err().map(String::as_str)
            }
        }
    }
}

/// How a relay is started.
pub struct Launch<'a> {
    /// The server's `host:port`.
    pub backend: &'a str,
    /// The most clients it will serve.
    pub max_clients: usize,
    /// CPUs it is pinned to.
    pub cpus: &'a [usize],
    /// Where its config and log go.
    pub dir: &'a Path,
    /// valgrind's command line to run it under, when counting instructions.
    pub under: Option<Vec<String>>,
    /// sluice's `--server-cpus`, when loadgen pinned the server (`Run::server_cpu_count`).
    pub server_cpus: Option<u32>,
}

/// Starts `relay` on a free loopback port (three tries, but one under valgrind, whose start
/// takes long: another process may take the port between our probe and the relay's bind).
pub async fn start(relay: Relay, bins: &Binaries, how: &Launch<'_>) -> Result<RelayProcess> {
    let mut tries = 0;
    loop {
        tries += 1;
        match start_once(relay, bins, how).await {
            // The last try's error is the one reported.
            Err(_) if tries < 3 && how.under.is_none() && bins.missing(relay).is_none() => {}
            done => return done,
        }
    }
}

async fn start_once(relay: Relay, bins: &Binaries, how: &Launch<'_>) -> Result<RelayProcess> {
    let listen: SocketAddr = free_addr()?;
    let key = relay.key();
    let cmd = match relay {
        Relay::Tokio => relay_floor::command(listen, how.backend)?,
        Relay::HaProxy => {
            let bin = bins.haproxy.clone().map_err(anyhow::Error::msg)?;
            let cfg = how.dir.join(format!("{key}.cfg"));
            std::fs::write(&cfg, haproxy::config(&listen.to_string(), how.backend))?;
            haproxy::command(&bin, &cfg)
        }
        Relay::Sluice(pool) | Relay::SluiceSerial(pool) => {
            let bin = bins.sluice.clone().map_err(anyhow::Error::msg)?;
            let mut cmd =
                sluice_child::command(&bin, listen, how.backend, pool, how.max_clients + 64);
            if let Relay::SluiceSerial(_) = relay {
                cmd.args(Relay::SERIAL_ARGS);
            }
            if let Some(n) = how.server_cpus {
                cmd.args(["--server-cpus", &n.to_string()]);
            }
            cmd
        }
    };
    let (cmd, ready) = match &how.under {
        Some(valgrind) => (wrap(valgrind, cmd), Duration::from_secs(120)),
        None => (cmd, Duration::from_secs(15)),
    };
    let log = how.dir.join(format!("{key}.log"));
    RelayProcess::start(cmd, listen, how.cpus, &log, ready).await
}

/// `cmd` under the program and arguments of `under` (valgrind and its options).
fn wrap(under: &[String], cmd: std::process::Command) -> std::process::Command {
    let mut wrapped = std::process::Command::new(&under[0]);
    wrapped
        .args(&under[1..])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    wrapped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_rounds_run_backwards() {
        let odd: Vec<Relay> = Relay::in_round(1).collect();
        let mut even: Vec<Relay> = Relay::in_round(2).collect();
        assert_eq!(odd, Relay::ALL);
        even.reverse();
        assert_eq!(even, Relay::ALL);
        assert_eq!(Relay::in_round(3).collect::<Vec<_>>(), Relay::ALL);
    }

    #[test]
    fn names_and_wrapping() {
        assert_eq!(Relay::Sluice(64).key(), "sluice_p64");
        assert_eq!(Relay::Sluice(4).target(), "sluice");
        assert_eq!(Relay::HaProxy.key(), "haproxy");
        assert_eq!(Relay::Tokio.pool(), None);
        assert_eq!(Relay::SluiceSerial(4).key(), "sluice_serial_p4");
        assert_eq!(Relay::SluiceSerial(64).target(), "sluice_serial");
        assert_eq!(Relay::SluiceSerial(64).pool(), Some(64));
        let keys: Vec<String> = Relay::ALL.iter().map(|r| r.key()).collect();
        assert_eq!(
            keys,
            [
                "relay",
                "haproxy",
                "sluice_serial_p4",
                "sluice_p4",
                "sluice_serial_p64",
                "sluice_p64"
            ]
        );
        let mut cmd = std::process::Command::new("/bin/relay");
        cmd.args(["-f", "x"]).env("RUST_LOG", "warn");
        let under = vec!["valgrind".to_string(), "--tool=callgrind".to_string()];
        let w = wrap(&under, cmd);
        let args: Vec<_> = w
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(w.get_program(), "valgrind");
        assert_eq!(args, ["--tool=callgrind", "/bin/relay", "-f", "x"]);
        assert!(w
            .get_envs()
            .any(|(k, v)| k == "RUST_LOG" && v == Some("warn".as_ref())));
        let bins = Binaries {
            haproxy: Err("no haproxy".into()),
            sluice: Ok("/x/sluice".into()),
        };
        assert_eq!(bins.missing(Relay::HaProxy), Some("no haproxy"));
        assert_eq!(bins.missing(Relay::Sluice(4)), None);
        assert_eq!(bins.missing(Relay::SluiceSerial(4)), None);
        assert_eq!(bins.missing(Relay::Tokio), None);
    }
}
