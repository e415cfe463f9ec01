//! The proxy's own metric families as tables: each row names a family, says what it means and
//! reads its value from one [`Scrape`] (the pool's snapshot, the client registry's counts, the
//! counters in `stats`, the latency histograms). `metrics.rs` writes the tables in order; a
//! new family is a new row.

use std::sync::atomic::Ordering::Relaxed;

use crate::context::Context;
use crate::latency::Snapshot;
use crate::pool::{Hold, PoolSnapshot};
use crate::registry::ClientPhase;
use crate::stats::{
    BackendCloseReason, ClientCloseReason, ConnectFailure, LimitReason, PinReason, RecycleOutcome,
};

/// What a scrape reads once and every row shares.
pub(super) struct Scrape<'a> {
    pub ctx: &'a Context,
    pub snap: PoolSnapshot,
    /// Client sessions per [`PHASES`] entry.
    pub by_phase: [i64; PHASES.len()],
    /// Client sessions pinned, per [`PinReason::ALL`] entry.
    pub pinned: Vec<i64>,
}

impl<'a> Scrape<'a> {
    pub fn read(ctx: &'a Context) -> Scrape<'a> {
        let mut by_phase = [0i64; PHASES.len()];
        let mut pinned = vec![0i64; PinReason::ALL.len()];
        for c in &ctx.registry.all() {
            if let Some(i) = PHASES.iter().position(|p| *p == c.phase()) {
                by_phase[i] += 1;
            }
            if let Some(i) = c
                .pin()
                .and_then(|r| PinReason::ALL.iter().position(|x| *x == r))
            {
                pinned[i] += 1;
            }
        }
        Scrape {
            ctx,
            snap: ctx.pool.snapshot(),
            by_phase,
            pinned,
        }
    }
}

const PHASES: [ClientPhase; 5] = [
    ClientPhase::Login,
    ClientPhase::Idle,
    ClientPhase::Waiting,
    ClientPhase::Active,
    ClientPhase::IdleInTransaction,
];

/// One family: its name (after the `sluice_` prefix), its help and how a scrape reads it.
pub(super) struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub read: fn(&Scrape<'_>) -> Reading,
}

/// A family's value(s) at one scrape.
pub(super) enum Reading {
    Gauge(i64),
    Counter(u64),
    /// A counter in bytes (the `_bytes` unit suffix).
    Bytes(u64),
    /// One gauge per label value: (label name, [(label value, value)]).
    Gauges(&'static str, Vec<(&'static str, i64)>),
    /// One counter per label value.
    Counters(&'static str, Vec<(&'static str, u64)>),
    /// A latency histogram, in seconds.
    Histogram(Snapshot),
    /// Not written at this scrape (a value the proxy does not know).
    Absent,
}

const fn row(name: &'static str, help: &'static str, read: fn(&Scrape<'_>) -> Reading) -> Family {
    Family { name, help, read }
}

/// Who is connected, what the pool holds and what limits are in force.
pub(super) const STATE: &[Family] = &[
    row("clients", "Client sessions by state", |s| {
        let phases = PHASES.iter().map(|p| p.label()).zip(s.by_phase);
        Reading::Gauges("state", phases.collect())
    }),
    row("backends", "Open backend connections by state", |s| {
        let snap = &s.snap;
        let in_use = i64::from(snap.open.saturating_sub(snap.idle + snap.to_reset));
        let states = [
            ("idle", i64::from(snap.idle)),
            ("to_reset", i64::from(snap.to_reset)),
            ("in_use", in_use),
        ];
        Reading::Gauges("state", states.to_vec())
    }),
    row(
        "pinned_sessions",
        "Sessions pinned to their backend, by reason",
        |s| {
            let pins = PinReason::ALL
                .iter()
                .map(|r| r.label())
                .zip(s.pinned.iter().copied());
            Reading::Gauges("reason", pins.collect())
        },
    ),
    row(
        "pinned_backends",
        "Backend connections pinned sessions hold between statements, by reason",
        |s| {
            let held = Hold::all().map(|h| {
                let pinned_by = s.snap.pinned_by.iter().find(|(x, _)| *x == h);
                (h.label(), i64::from(pinned_by.map_or(0, |x| x.1)))
            });
            Reading::Gauges("reason", held.collect())
        },
    ),
    row(
        "pinned_backends_max",
        "Backend connections pinned sessions may hold: max_backend_connections - pool_size",
        |s| Reading::Gauge(s.snap.pinned_max.into()),
    ),
    row(
        "server_max_connections",
        "The backend's max_connections, from which max_backend_connections = auto is derived",
        |s| gauge_if_known(s.snap.max_open_from_server),
    ),
    row(
        "server_cpus",
        "The backend's CPUs (server_cpus), which tell pipelining when it is saturated",
        |s| {
            let configured = s.ctx.config().server_cpus;
            gauge_if_known(s.ctx.pool.slots().server_cpus(configured))
        },
    ),
    row(
        "backend_up",
        "1 while the backend server accepts connections, 0 during an outage",
        |s| Reading::Gauge(s.ctx.pool.backend_up().into()),
    ),
    row(
        "backend_connect_failures",
        "Failed backend connects, by kind",
        |s| {
            let stats = &s.ctx.stats;
            let failures = ConnectFailure::ALL
                .iter()
                .map(|r| (r.label(), stats.connect_failures_by(*r)));
            Reading::Counters("kind", failures.collect())
        },
    ),
    row("backends_max", "max_backend_connections in force", |s| {
        Reading::Gauge(s.snap.max_open.into())
    }),
    row("pool_size", "Execution slots (pool_size in force)", |s| {
        Reading::Gauge(s.snap.pool_size.into())
    }),
    row(
        "pool_limit",
        "Concurrency limit in force (pool_size = auto moves it; fixed pool_size otherwise)",
        |s| Reading::Gauge(s.snap.pool_size.into()),
    ),
    row(
        "pool_auto",
        "1 while pool_size = auto sizes the pool",
        |s| Reading::Gauge(s.ctx.limit.get().auto.into()),
    ),
    row("slots_in_use", "Execution slots held: by running statements (those beyond pool_size too) and by transactions that keep theirs for want of a pinned place", |s| {
        Reading::Gauge(s.snap.slots_in_use.into())
    }),
    row(
        "queue_length",
        "Statements waiting for an execution slot",
        |s| Reading::Gauge(s.snap.waiting as i64),
    ),
    row(
        "paused",
        "1 while the admin console has paused the proxy",
        |s| Reading::Gauge((*s.ctx.paused.borrow()).into()),
    ),
    row("clients_accepted", "Client connections accepted", |s| {
        Reading::Counter(s.ctx.stats.clients_accepted.load(Relaxed))
    }),
    row("statements", "Statements received from clients", |s| {
        Reading::Counter(s.ctx.stats.statements.load(Relaxed))
    }),
];

/// How statements and connections ended: timeouts, refusals, pins, errors, closes.
pub(super) const OUTCOMES: &[Family] = &[
    row(
        "queue_timeouts",
        "Statements that got error 9001 after queue_timeout",
        |s| Reading::Counter(s.ctx.stats.queue_timeouts.load(Relaxed)),
    ),
    row(
        "pin_refusals",
        "Statements refused with 9005: they would have pinned and no pinned place freed up within pin_wait",
        |s| Reading::Counter(s.ctx.stats.pin_refusals.load(Relaxed)),
    ),
    row(
        "pin_overflows",
        "Sessions that pinned after their statement ran while every pinned place was taken",
        |s| Reading::Counter(s.ctx.stats.pin_overflows.load(Relaxed)),
    ),
    row(
        "slot_overflows",
        "Statements of sessions in a transaction or holding a lock that ran beyond pool_size: no execution slot came back within their patience",
        |s| Reading::Counter(s.ctx.stats.slot_overflows.load(Relaxed)),
    ),
    row(
        "slots_kept",
        "Statements after which a session in a transaction or holding a lock kept its execution slot until its next statement: no pinned place was free",
        |s| Reading::Counter(s.ctx.stats.slots_kept.load(Relaxed)),
    ),
    row("backend_connects", "Backend connections opened", |s| {
        Reading::Counter(s.ctx.stats.backend_connects.load(Relaxed))
    }),
    row(
        "control_connects",
        "Control connections opened for login-time default-database checks",
        |s| Reading::Counter(s.ctx.stats.control_connects.load(Relaxed)),
    ),
    row("replays", "Session-state replays onto a backend", |s| {
        Reading::Counter(s.ctx.stats.replays.load(Relaxed))
    }),
    row("errors", "Errors by kind", |s| {
        let stats = &s.ctx.stats;
        let errors = [
            ("sent_to_client", stats.client_errors.load(Relaxed)),
            ("backend_connect", stats.backend_connect_errors.load(Relaxed)),
            ("queue_timeout", stats.queue_timeouts.load(Relaxed)),
        ];
        Reading::Counters("kind", errors.to_vec())
    }),
    row("client_disconnects", "Client sessions ended, by reason", |s| {
        let stats = &s.ctx.stats;
        let closes = ClientCloseReason::ALL
            .iter()
            .map(|r| (r.label(), stats.client_closes_by(*r)));
        Reading::Counters("reason", closes.collect())
    }),
    row("backend_disconnects", "Backend connections closed, by reason", |s| {
        let stats = &s.ctx.stats;
        let closes = BackendCloseReason::ALL
            .iter()
            .map(|r| (r.label(), stats.backend_closes_by(*r)));
        Reading::Counters("reason", closes.collect())
    }),
    row("pins", "Sessions pinned, by reason", |s| {
        let stats = &s.ctx.stats;
        let pins = PinReason::ALL.iter().map(|r| (r.label(), stats.pins_by(*r)));
        Reading::Counters("reason", pins.collect())
    }),
    row("recycles", "Backends returned to the pool, by decision", |s| {
        let stats = &s.ctx.stats;
        let recycles = RecycleOutcome::ALL
            .iter()
            .map(|r| (r.label(), stats.recycles_by(*r)));
        Reading::Counters("outcome", recycles.collect())
    }),
    row(
        "pool_limit_changes",
        "pool_size = auto limit changes, by reason",
        |s| {
            let stats = &s.ctx.stats;
            let limits = LimitReason::ALL
                .iter()
                .map(|r| (r.label(), stats.limit_changes_by(*r)));
            Reading::Counters("reason", limits.collect())
        },
    ),
    row("client_sent", "Bytes relayed to clients", |s| {
        Reading::Bytes(s.ctx.stats.bytes_to_clients.load(Relaxed))
    }),
];

/// Where statements spend their time.
pub(super) const LATENCY: &[Family] = &[
    row(
        "queue_wait",
        "Wait for an execution slot and a ready backend",
        |s| Reading::Histogram(s.ctx.latency.queue_wait.snapshot()),
    ),
    row(
        "backend_time",
        "Statement time on the backend, response relay included",
        |s| Reading::Histogram(s.ctx.latency.backend_time.snapshot()),
    ),
];

fn gauge_if_known(n: Option<u32>) -> Reading {
    n.map_or(Reading::Absent, |n| Reading::Gauge(n.into()))
}
