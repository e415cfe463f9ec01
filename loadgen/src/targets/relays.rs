//! The relays the overhead experiment compares, each started the same way: a process of its
//! own on a free loopback port in front of the server, pinned to loadgen's CPUs, optionally
//! under valgrind (`--cost-counts`).
//!
//! Two of them exist for sluice's `backend_busy_poll` (while a statement is the only command
//! sluice handles, the wait for its reply's first bytes polls the socket instead of sleeping
//! in `epoll_wait`) and run at 1 client only ([`Relay::runs_at`]): busy polling only matters
//! when a process would otherwise sleep between replies, and at 64 clients they would only
//! lengthen the run. [`Relay::HaProxyBusy`] is HAProxy with its `busy-polling` global
//! keyword (its pollers then never sleep): the same trade made by the C relay, the fair
//! anchor for the technique. [`Relay::SluiceSleeping`] is sluice with `--backend-busy-poll 0`:
//! what busy polling saves. Each runs next to its counterpart in the round.

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
    /// HAProxy as [`Relay::HaProxy`] with `busy-polling` in its `global` section (its pollers
    /// always use a null timeout, so it never sleeps): the C relay making the trade sluice's
    /// `backend_busy_poll` makes, always on. At 1 client only.
    HaProxyBusy,
    /// The sluice binary with this many execution slots (pipelining on, as it ships).
    Sluice(usize),
    /// The sluice binary with this many execution slots and pipelining off
    /// (`--pipeline-depth 1`): what pipelining saves.
    SluiceSerial(usize),
    /// The sluice binary with this many execution slots and busy polling off
    /// (`--backend-busy-poll 0`, every wait for a reply sleeps in `epoll_wait`): what busy
    /// polling saves. At 1 client only.
    SluiceSleeping(usize),
    /// The sluice binary with this many execution slots and statement digests off
    /// (`--digests off`): what the per-digest statistics cost. At 64 clients only.
    SluiceUndigested(usize),
}

impl Relay {
    /// The relays overhead compares, in the order each round measures them after direct:
    /// the byte pipes, then sluice, so HAProxy and sluice run near each other, and each pool
    /// size serial then pipelined, so those two run next to each other. The busy-polling
    /// rows, at 1 client only, sit next to their counterparts: HAProxy busy-polling right
    /// after HAProxy, sluice P=4 with busy polling off right after sluice P=4 (so pipelined
    /// P=4 keeps its neighbour serial P=4). sluice P=4 with digests off, at 64 clients only,
    /// follows sluice P=4 there.
    pub const ALL: [Relay; 9] = [
        Relay::Tokio,
        Relay::HaProxy,
        Relay::HaProxyBusy,
        Relay::SluiceSerial(4),
        Relay::Sluice(4),
        Relay::SluiceSleeping(4),
        Relay::SluiceUndigested(4),
        Relay::SluiceSerial(64),
        Relay::Sluice(64),
    ];

    /// The relays in the order round `round` (from 1) measures them: [`Relay::ALL`] in odd
    /// rounds, reversed in even ones. This host drifts within minutes, and in a fixed order the
    /// last row of a round always paid for it (the 1-client sluice P=64 row most of all);
    /// over each pair of rounds every relay holds the same mean position, and each relay
    /// keeps its neighbours. Not every relay runs at every client count ([`Relay::runs_at`]).
    pub fn in_round(round: usize) -> impl Iterator<Item = Relay> {
        let even = round.is_multiple_of(2);
        (0..Relay::ALL.len())
            .map(move |i| Relay::ALL[if even { Relay::ALL.len() - 1 - i } else { i }])
    }

    /// Whether the relay is measured at `clients`: every relay at every level, except the two
    /// busy-polling rows ([`Relay::HaProxyBusy`], [`Relay::SluiceSleeping`]), at
    /// [`relay_cost::ONE`] client only. Busy polling only matters when a process would
    /// otherwise sleep between replies; at 64 clients they would only lengthen the run.
    pub fn runs_at(self, clients: usize) -> bool {
        match self {
            Relay::HaProxyBusy | Relay::SluiceSleeping(_) => clients == relay_cost::ONE,
            Relay::SluiceUndigested(_) => clients == relay_cost::MANY,
            Relay::Tokio | Relay::HaProxy | Relay::Sluice(_) | Relay::SluiceSerial(_) => true,
        }
    }

    /// The relay levels one round measures: each relay at each of [`relay_cost::CLIENTS`]
    /// it runs at.
    pub fn levels_per_round() -> usize {
        relay_cost::CLIENTS
            .iter()
            .map(|&c| Relay::ALL.iter().filter(|r| r.runs_at(c)).count())
            .sum()
    }

    /// Whether `--cost-counts` counts the relay's instructions under callgrind: not for the
    /// busy-polling rows. A process that polls instead of sleeping executes instructions for
    /// as long as it waits, so under valgrind (tens of times slower) its count would measure
    /// wall time rather than the work a query takes, and HAProxy busy-polling never sleeps,
    /// so the idle rate subtracted from its count would be its spinning's. For the same
    /// reason every sluice runs with busy polling off under callgrind (`start_once`), so
    /// sluice P=4 busy polling off would only repeat sluice P=4's count.
    pub fn counts_instructions(self) -> bool {
        !matches!(self, Relay::HaProxyBusy | Relay::SluiceSleeping(_))
    }

    /// The flags serial sluice runs with on top of pipelined sluice's.
    pub const SERIAL_ARGS: [&'static str; 2] = ["--pipeline-depth", "1"];

    /// The flags sluice with busy polling off runs with on top of pipelined sluice's.
    pub const SLEEP_ARGS: [&'static str; 2] = ["--backend-busy-poll", "0"];

    /// The flags sluice with digests off runs with on top of pipelined sluice's.
    pub const UNDIGESTED_ARGS: [&'static str; 2] = ["--digests", "off"];

    /// The `target` column.
    pub fn target(self) -> &'static str {
        match self {
            Relay::Tokio => "relay",
            Relay::HaProxy => "haproxy",
            Relay::HaProxyBusy => relay_cost::HAPROXY_BUSY,
            Relay::Sluice(_) => "sluice",
            Relay::SluiceSerial(_) => relay_cost::SERIAL,
            Relay::SluiceSleeping(_) => relay_cost::SLEEP,
            Relay::SluiceUndigested(_) => relay_cost::UNDIGESTED,
        }
    }

    /// sluice's pool size; `None` for the byte pipes.
    pub fn pool(self) -> Option<usize> {
        match self {
            Relay::Sluice(p)
            | Relay::SluiceSerial(p)
            | Relay::SluiceSleeping(p)
            | Relay::SluiceUndigested(p) => Some(p),
            Relay::Tokio | Relay::HaProxy | Relay::HaProxyBusy => None,
        }
    }

    /// A short name for logs and metadata keys: `relay`, `haproxy`, `haproxy_busy`,
    /// `sluice_p4`, `sluice_serial_p4`, `sluice_sleep_p4`, `sluice_undigested_p4` (the rows'
    /// [`relay_cost::key_of`]).
    pub fn key(self) -> String {
        relay_cost::key(self.target(), self.pool())
    }

    /// For the progress log: `bare tokio relay`, `HAProxy`, `HAProxy busy-polling`,
    /// `sluice P=4`, `sluice P=4 pipelining off`, `sluice P=4 busy polling off`.
    pub fn label(self) -> String {
        match self {
            Relay::Tokio => "bare tokio relay".into(),
            Relay::HaProxy => "HAProxy".into(),
            Relay::HaProxyBusy => "HAProxy busy-polling".into(),
            Relay::Sluice(p) => format!("sluice P={p}"),
            Relay::SluiceSerial(p) => format!("sluice P={p} pipelining off"),
            Relay::SluiceSleeping(p) => format!("sluice P={p} busy polling off"),
            Relay::SluiceUndigested(p) => format!("sluice P={p} digests off"),
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
            Relay::HaProxy | Relay::HaProxyBusy => self.haproxy.as_ref().err().map(String::as_str),
            Relay::Sluice(_)
            | Relay::SluiceSerial(_)
            | Relay::SluiceSleeping(_)
            | Relay::SluiceUndigested(_) => self.sluice.as_ref().err().map(String::as_str),
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
        Relay::HaProxy | Relay::HaProxyBusy => {
            let bin = bins.haproxy.clone().map_err(anyhow::Error::msg)?;
            let cfg = how.dir.join(format!("{key}.cfg"));
            let busy = relay == Relay::HaProxyBusy;
            std::fs::write(
                &cfg,
                haproxy::config(&listen.to_string(), how.backend, busy),
            )?;
            haproxy::command(&bin, &cfg)
        }
        Relay::Sluice(pool)
        | Relay::SluiceSerial(pool)
        | Relay::SluiceSleeping(pool)
        | Relay::SluiceUndigested(pool) => {
            let bin = bins.sluice.clone().map_err(anyhow::Error::msg)?;
            let mut cmd =
                sluice_child::command(&bin, listen, how.backend, pool, how.max_clients + 64);
            match relay {
                Relay::SluiceSerial(_) => cmd.args(Relay::SERIAL_ARGS),
                Relay::SluiceUndigested(_) => cmd.args(Relay::UNDIGESTED_ARGS),
                _ => &mut cmd,
            };
            // Under callgrind every sluice sleeps: a poll loop's instructions grow with how
            // long the reply takes, which under valgrind's slowdown says nothing about the
            // relay, and the count is meant to repeat from run to run.
            if relay == Relay::SluiceSleeping(pool) || how.under.is_some() {
                cmd.args(Relay::SLEEP_ARGS);
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

    /// Where a relay sits in round `round` at `clients`, among those that run there.
    fn position(round: usize, clients: usize, relay: Relay) -> usize {
        Relay::in_round(round)
            .filter(|r| r.runs_at(clients))
            .position(|r| r == relay)
            .unwrap()
    }

    #[test]
    fn the_busy_polling_rows_run_at_one_client_next_to_their_counterparts() {
        use relay_cost::{MANY, ONE};
        for relay in Relay::ALL {
            let one_only = matches!(relay, Relay::HaProxyBusy | Relay::SluiceSleeping(_));
            let many_only = matches!(relay, Relay::SluiceUndigested(_));
            assert_eq!(relay.runs_at(ONE), !many_only, "{relay:?}");
            assert_eq!(relay.runs_at(MANY), !one_only, "{relay:?}");
            assert_eq!(relay.counts_instructions(), !one_only, "{relay:?}");
        }
        // At 64 clients, the six relays of before, with digests off after sluice P=4.
        let many: Vec<Relay> = Relay::in_round(1).filter(|r| r.runs_at(MANY)).collect();
        assert_eq!(
            many,
            [
                Relay::Tokio,
                Relay::HaProxy,
                Relay::SluiceSerial(4),
                Relay::Sluice(4),
                Relay::SluiceUndigested(4),
                Relay::SluiceSerial(64),
                Relay::Sluice(64),
            ]
        );
        // 8 relays at 1 client, 7 at 64.
        assert_eq!(Relay::levels_per_round(), 15);
        // Each next to its counterpart, forwards and backwards.
        for round in [1, 2] {
            let at = |relay| position(round, ONE, relay) as isize;
            assert_eq!((at(Relay::HaProxyBusy) - at(Relay::HaProxy)).abs(), 1);
            assert_eq!(
                (at(Relay::SluiceSleeping(4)) - at(Relay::Sluice(4))).abs(),
                1
            );
            assert_eq!((at(Relay::SluiceSerial(4)) - at(Relay::Sluice(4))).abs(), 1);
        }
        // Forwards: HAProxy then HAProxy busy-polling; sluice P=4 then busy polling off.
        assert_eq!(position(1, ONE, Relay::HaProxyBusy), 2);
        assert_eq!(position(1, ONE, Relay::SluiceSleeping(4)), 5);
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
        assert_eq!(Relay::HaProxyBusy.key(), "haproxy_busy");
        assert_eq!(Relay::HaProxyBusy.target(), "haproxy_busy");
        assert_eq!(Relay::HaProxyBusy.pool(), None);
        assert_eq!(Relay::HaProxyBusy.label(), "HAProxy busy-polling");
        assert_eq!(Relay::SluiceSleeping(4).key(), "sluice_sleep_p4");
        assert_eq!(Relay::SluiceSleeping(4).target(), "sluice_sleep");
        assert_eq!(Relay::SluiceSleeping(4).pool(), Some(4));
        assert_eq!(
            Relay::SluiceSleeping(4).label(),
            "sluice P=4 busy polling off"
        );
        assert_eq!(Relay::SLEEP_ARGS, ["--backend-busy-poll", "0"]);
        assert_eq!(Relay::UNDIGESTED_ARGS, ["--digests", "off"]);
        assert_eq!(Relay::SluiceUndigested(4).label(), "sluice P=4 digests off");
        let keys: Vec<String> = Relay::ALL.iter().map(|r| r.key()).collect();
        assert_eq!(
            keys,
            [
                "relay",
                "haproxy",
                "haproxy_busy",
                "sluice_serial_p4",
                "sluice_p4",
                "sluice_sleep_p4",
                "sluice_undigested_p4",
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
        assert_eq!(bins.missing(Relay::HaProxyBusy), Some("no haproxy"));
        assert_eq!(bins.missing(Relay::Sluice(4)), None);
        assert_eq!(bins.missing(Relay::SluiceSerial(4)), None);
        assert_eq!(bins.missing(Relay::SluiceSleeping(4)), None);
        assert_eq!(bins.missing(Relay::Tokio), None);
    }
}
