//! The monitor loop: every `monitor_interval`, check every server over its own monitor
//! connection ([`monitor::observe`]), decide the roles ([`decide`]), and publish the result
//! as a [`Snapshot`] on a `tokio::sync::watch` channel that sessions, SHOW SERVERS and
//! /metrics read without locking anything.
//!
//! Servers are checked concurrently, each within `check_timeout`, so one hung server delays
//! no other server's check. A connection that failed a check is dropped (its state is
//! unknown) and opened again next round. Alerts (split brain, ambiguity, a writable replica)
//! and writer changes are logged once per transition, not every round.
//!
//! The loop takes plain arguments ([`MonitorSettings`], a [`Connect`]or), so the caller
//! builds them from `Config`; it ends when every receiver is dropped.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tokio::sync::watch;

use super::monitor::{self, TextQuery};
use super::observation::{CheckFailure, Observation};
use super::roles::{decide, Alert, Limits, Memory, NoWriter, Topology, Verdict};
use super::Flavor;
use crate::conn::backend::{BackendConn, BackendTarget, PoolKey};

/// The monitor's settings (from `Config`: `servers`, `monitor_user`, `monitor_interval`,
/// `max_replica_lag`).
#[derive(Debug, Clone)]
pub struct MonitorSettings {
    /// Time between the starts of two rounds. Default: 500 ms.
    pub interval: Duration,
    /// Connect plus both queries of one check. A check that takes longer fails
    /// ([`CheckFailure::Timeout`]). Keep it below `interval`.
    pub check_timeout: Duration,
    pub limits: Limits,
}

/// What the monitor publishes after each round.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Roles, lag and positions (index = configured server).
    pub topology: Topology,
    /// Each server's flavour, once a check has connected (from its greeting).
    pub flavors: Vec<Option<Flavor>>,
    /// 0 before the first round finished (then every server is excluded and there is no
    /// writer: writes wait, which is what they must do until roles are known).
    pub round: u64,
    /// When this round finished.
    pub at: Instant,
}

impl Snapshot {
    /// The snapshot before any round: nothing known.
    pub fn unknown(servers: usize) -> Snapshot {
        let observations: Vec<Observation> = vec![Err(CheckFailure::Unreachable); servers];
        let limits = Limits {
            max_replica_lag: Duration::ZERO,
        };
        Snapshot {
            topology: decide(&Memory::default(), &observations, &limits),
            flavors: vec![None; servers],
            round: 0,
            at: Instant::now(),
        }
    }
}

impl Snapshot {
    /// One server and no monitor: it is the writer, and always has been.
    pub fn single_writer() -> Snapshot {
        use super::roles::{Role, ServerView};
        Snapshot {
            topology: Topology {
                verdict: Verdict::Writer {
                    index: 0,
                    rivals: Vec::new(),
                },
                servers: vec![ServerView {
                    role: Role::Writer,
                    lag: Some(Duration::ZERO),
                    position: None,
                }],
                memory: Memory {
                    writer: Some(0),
                    rivals: Default::default(),
                },
            },
            flavors: vec![None],
            round: 0,
            at: Instant::now(),
        }
    }
}

/// Opens a monitor connection to one server.
pub trait Connect: Send + Sync + 'static {
    type Conn: TextQuery + Send + 'static;
    /// Connects to server `index` and says which flavour it is.
    fn connect(
        &self,
        index: usize,
    ) -> impl Future<Output = Result<(Self::Conn, Flavor), CheckFailure>> + Send;
    /// How many servers there are.
    fn servers(&self) -> usize;
}

/// Connects with sluice's own [`BackendConn`] and the monitor's credentials.
#[derive(Debug, Clone)]
pub struct BackendConnect {
    /// One target per configured server, with `monitor_user` and its password.
    pub targets: Vec<BackendTarget>,
}

impl Connect for BackendConnect {
    type Conn = BackendConn;

    async fn connect(&self, index: usize) -> Result<(BackendConn, Flavor), CheckFailure> {
        let target = self.targets.get(index).ok_or(CheckFailure::Unreachable)?;
        let key = PoolKey {
            user: Arc::from(target.user.as_str()),
            caps: 0,
            collation: 45,
            globals: 0,
        };
        let conn = BackendConn::connect(target, key)
            .await
            .map_err(|e| monitor::failure_of(&e))?;
        let flavor = Flavor::from_version(&conn.server.version);
        Ok((conn, flavor))
    }

    fn servers(&self) -> usize {
        self.targets.len()
    }
}

/// Starts the monitor loop; the receiver holds [`Snapshot::unknown`] until the first round.
pub fn spawn<C: Connect>(
    settings: MonitorSettings,
    connect: C,
) -> (watch::Receiver<Arc<Snapshot>>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(Arc::new(Snapshot::unknown(connect.servers())));
    let handle = tokio::spawn(run(settings, connect, tx));
    (rx, handle)
}

/// The loop itself (public for callers that run it on their own task).
pub async fn run<C: Connect>(
    settings: MonitorSettings,
    connect: C,
    tx: watch::Sender<Arc<Snapshot>>,
) {
    let n = connect.servers();
    let mut conns: Vec<Option<(C::Conn, Flavor)>> = (0..n).map(|_| None).collect();
    let mut flavors: Vec<Option<Flavor>> = vec![None; n];
    let mut memory = Memory::default();
    let mut log = Transitions::default();
    let mut ticker = tokio::time::interval(settings.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for round in 1u64.. {
        ticker.tick().await;
        if tx.is_closed() {
            return;
        }
        let checks = conns
            .iter_mut()
            .enumerate()
            .map(|(i, slot)| check(&connect, i, slot, settings.check_timeout));
        let observations: Vec<Observation> = join_all(checks).await;
        for (i, slot) in conns.iter().enumerate() {
            if let Some((_, f)) = slot {
                flavors[i] = Some(*f);
            }
        }
        let topology = decide(&memory, &observations, &settings.limits);
        memory = topology.memory.clone();
        log.record(&topology);
        let snapshot = Snapshot {
            topology,
            flavors: flavors.clone(),
            round,
            at: Instant::now(),
        };
        if tx.send(Arc::new(snapshot)).is_err() {
            return;
        }
    }
}

/// One server's check: reuse its connection or open one, all within `timeout`.
async fn check<C: Connect>(
    connect: &C,
    index: usize,
    slot: &mut Option<(C::Conn, Flavor)>,
    timeout: Duration,
) -> Observation {
    let started = tokio::time::Instant::now();
    if slot.is_none() {
        match tokio::time::timeout(timeout, connect.connect(index)).await {
            Ok(Ok(opened)) => *slot = Some(opened),
            Ok(Err(failure)) => return Err(failure),
            Err(_) => return Err(CheckFailure::Timeout),
        }
    }
    let Some((conn, flavor)) = slot.as_mut() else {
        return Err(CheckFailure::Unreachable);
    };
    let left = timeout.saturating_sub(started.elapsed());
    let observation = monitor::observe(conn, *flavor, left).await;
    if observation.is_err() {
        // A failed or timed-out check leaves the connection in an unknown state.
        *slot = None;
    }
    observation
}

/// What was last logged, so each change is logged once.
#[derive(Debug, Default)]
struct Transitions {
    writer: Option<Option<usize>>,
    alerts: Vec<Alert>,
}

impl Transitions {
    fn record(&mut self, t: &Topology) {
        let writer = t.writer();
        if self.writer != Some(writer) {
            match &t.verdict {
                Verdict::Writer { index, .. } => {
                    tracing::info!(server = index, "topology: writer is server {index}")
                }
                Verdict::NoWriter(why) => tracing::warn!(
                    reason = no_writer_text(why),
                    "topology: no writer, writes wait (writer_wait_timeout)"
                ),
            }
            self.writer = Some(writer);
        }
        let alerts = t.alerts();
        for alert in alerts.iter().filter(|a| !self.alerts.contains(a)) {
            match alert {
                Alert::SplitBrain { writer, rivals } => tracing::error!(
                    writer,
                    ?rivals,
                    "split brain: servers {rivals:?} are writable and replicate from nobody \
                     while server {writer} is the writer; they get no reads or writes"
                ),
                Alert::Ambiguous { candidates } => tracing::error!(
                    ?candidates,
                    "split brain: servers {candidates:?} are all writable and replicate \
                     from nobody; no writes until only one is (sluice does not guess)"
                ),
                Alert::WritableReplica { index } => tracing::error!(
                    server = index,
                    "server {index} replicates with read_only=OFF; it gets no reads or writes"
                ),
            }
        }
        for gone in self.alerts.iter().filter(|a| !alerts.contains(a)) {
            tracing::info!(alert = ?gone, "topology: alert resolved");
        }
        self.alerts = alerts;
    }
}

fn no_writer_text(why: &NoWriter) -> &'static str {
    match why {
        NoWriter::Unreachable { .. } => "the writer is unreachable",
        NoWriter::NoCandidate => "no server is writable and not replicating",
        NoWriter::Ambiguous { .. } => "several servers are writable (split brain)",
    }
}
