//! Counters shared by every part of the proxy, and the closed enums of reasons they count.
//!
//! Plain relaxed atomics: they are read by the admin console and metrics, never used for
//! control decisions.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why the `pool_size = auto` limit last changed (set by `pool::limiter`) (labels of the `sluice_pool_limit_changes_total` counter).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LimitReason {
    /// Started at `min_pool_size`, or `auto` was switched on.
    Start,
    /// Trying a larger limit.
    ProbeUp,
    /// Trying a smaller limit (periodic, or because the server slowed down).
    ProbeDown,
    /// An up probe added latency without throughput: back to the previous limit.
    BackOff,
    /// A down probe cost throughput: back to the previous limit.
    Restore,
    /// `min_pool_size`, `max_pool_size` or `max_backend_connections` changed.
    Bounds,
}

impl LimitReason {
    pub const ALL: &'static [LimitReason] = &[
        LimitReason::Start,
        LimitReason::ProbeUp,
        LimitReason::ProbeDown,
        LimitReason::BackOff,
        LimitReason::Restore,
        LimitReason::Bounds,
    ];

    pub fn label(self) -> &'static str {
        match self {
            LimitReason::Start => "start",
            LimitReason::ProbeUp => "probe_up",
            LimitReason::ProbeDown => "probe_down",
            LimitReason::BackOff => "back_off",
            LimitReason::Restore => "restore",
            LimitReason::Bounds => "bounds",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for LimitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

macro_rules! reason_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident => $label:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// How many variants there are: the size of a counter array over them.
            pub const COUNT: usize = $name::ALL.len();
            pub fn label(self) -> &'static str { match self { $($name::$variant => $label),+ } }
            fn index(self) -> usize { self as usize }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str(self.label()) }
        }
    };
}

reason_enum!(
    /// Why a client session ended.
    ClientCloseReason {
        Quit => "quit",
        Eof => "client_closed",
        ProtocolError => "protocol_error",
        HandshakeFailed => "handshake_failed",
        AuthFailed => "auth_failed",
        TooManyClients => "too_many_clients",
        LoginTimeout => "login_timeout",
        WriteTimeout => "write_timeout",
        BackendLost => "backend_lost",
        Killed => "killed",
        Shutdown => "shutdown",
        IoError => "io_error",
        IdleTimeout => "idle_timeout",
    }
);

reason_enum!(
    /// Why a backend connection was closed.
    BackendCloseReason {
        Broken => "broken",
        ResetFailed => "reset_failed",
        Lifetime => "lifetime",
        IdleTimeout => "idle_timeout",
        HealthCheck => "health_check",
        Evicted => "evicted",
        OverLimit => "over_limit",
        Shutdown => "shutdown",
        Retired => "globals_changed",
    }
);

reason_enum!(
    /// Why a session is pinned to its backend.
    PinReason {
        UserVariable => "user_variable",
        TemporaryTable => "temporary_table",
        NamedLock => "named_lock",
        TableLock => "table_lock",
        SqlPrepare => "sql_prepare",
        PreparedStatement => "prepared_statement",
        FoundRows => "found_rows",
        UnknownSet => "unclassified_set",
        NextTransaction => "next_transaction_characteristics",
        Handler => "handler",
        UntrackedState => "untracked_state_change",
        Cursor => "open_cursor",
        Sequence => "sequence",
    }
);

reason_enum!(
    /// Why opening a backend connection failed (`pool::outage::classify`).
    ConnectFailure {
        Refused => "refused",
        Timeout => "timeout",
        Network => "network",
        AccessDenied => "access_denied",
        UnknownDatabase => "unknown_database",
        ServerBusy => "server_busy",
        ServerError => "server_error",
        Protocol => "protocol",
        Tls => "tls",
    }
);

reason_enum!(
    /// What `pool::recycle::decide` chose for a returned backend.
    RecycleOutcome {
        Release => "release",
        Reset => "reset",
        Close => "close",
    }
);

pub struct Counters<const N: usize>([AtomicU64; N]);

impl<const N: usize> Default for Counters<N> {
    fn default() -> Self {
        Counters(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl<const N: usize> Counters<N> {
    pub fn get(&self, i: usize) -> u64 {
        self.0
            .get(i)
            .map(|c| c.load(Ordering::Relaxed))
            .unwrap_or(0)
    }
    fn add(&self, i: usize) {
        if let Some(c) = self.0.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Process-wide totals. Gauges (current counts) live with the pool and the client registry.
#[derive(Default)]
pub struct Stats {
    pub clients_accepted: AtomicU64,
    pub statements: AtomicU64,
    pub queue_timeouts: AtomicU64,
    /// Statements refused by `max_queue_wait` admission control.
    pub shed: AtomicU64,
    /// Statements refused with 9005: they would have pinned, and no pinned place freed up
    /// within `pin_wait`.
    pub pin_refusals: AtomicU64,
    /// Sessions that pinned after their statement ran (nothing predicted it) while every
    /// pinned place was taken: they keep their backend beyond the cap.
    pub pin_overflows: AtomicU64,
    /// Statements of sessions in a transaction or holding a lock that ran beyond pool_size:
    /// no execution slot came back within their patience (`pool::Slots::patience`), so the
    /// slots may all have been held by statements waiting on their locks.
    pub slot_overflows: AtomicU64,
    /// Statements after which a session in a transaction or holding a lock kept its
    /// execution slot until its next statement: no pinned place was free for its backend.
    pub slots_kept: AtomicU64,
    pub backend_connects: AtomicU64,
    /// Control connections opened for login-time database checks (`pool::control`).
    pub control_connects: AtomicU64,
    pub backend_connect_errors: AtomicU64,
    pub replays: AtomicU64,
    pub bytes_to_clients: AtomicU64,
    pub client_errors: AtomicU64,
    pub client_closes: Counters<{ ClientCloseReason::COUNT }>,
    pub backend_closes: Counters<{ BackendCloseReason::COUNT }>,
    pub pins: Counters<{ PinReason::COUNT }>,
    pub recycles: Counters<{ RecycleOutcome::COUNT }>,
    pub connect_failures: Counters<{ ConnectFailure::COUNT }>,
    /// `pool_size = auto` limit changes, by `LimitReason`.
    pub limit_changes: Counters<8>,
    /// Statements routed, by (server index, route label, why label): see [`Stats::routed`].
    pub routed: std::sync::Mutex<std::collections::BTreeMap<RouteKey, u64>>,
    /// Read-your-writes reads that went to the writer because no replica had the write
    /// (`read_your_writes = session | wait`, including a wait that timed out).
    pub ryw_fallbacks: AtomicU64,
    /// Autocommit reads run again on another server because their replica failed before
    /// the client saw a byte.
    pub read_retries: AtomicU64,
    pub pipeline: PipelineStats,
    pub busy_poll: BusyPollStats,
}

/// Pipelining's counters (`pool::batches`).
#[derive(Default)]
pub struct PipelineStats {
    pub batches: AtomicU64,
    pub statements: AtomicU64,
    pub retries: AtomicU64,
    pub interrupts: AtomicU64,
    pub warnings_dropped: AtomicU64,
    pub cuts: AtomicU64,
    pub kills: AtomicU64,
    pub stalled_readers: AtomicU64,
}

impl PipelineStats {
    /// (name, help, value) of each counter, for SHOW STATS and /metrics.
    pub fn rows(&self) -> [(&'static str, &'static str, u64); 8] {
        let v = |c: &AtomicU64| c.load(Ordering::Relaxed);
        [
            ("pipeline_batches", "Writes that carried the statements of several sessions to one backend", v(&self.batches)),
            ("pipelined_statements", "Statements sent in such a write, leaders included", v(&self.statements)),
            ("pipeline_retries", "Pipelined reads run again on their own: the batch's backend failed before their answer began", v(&self.retries)),
            ("pipeline_interrupts", "Pipelined statements a KILL QUERY ended with 1317 in sluice instead of on the server", v(&self.interrupts)),
            ("pipeline_warnings_dropped", "Pipelined reads whose warnings a later statement of the batch replaced on the backend (their session's next diagnostics read runs them again first)", v(&self.warnings_dropped)),
            ("pipeline_cuts", "Pipelined reads sent to run again on their own because the answer ahead of them in the batch was slow or its client stopped reading (their copy's answer is read and dropped)", v(&self.cuts)),
            ("pipeline_kills", "Pipelined statements a KILL QUERY (or a dropped answer that took too long) stopped on the server by its query id", v(&self.kills)),
            ("stalled_readers", "Statements whose client stopped reading and that gave their execution slot up while the server waited for the client (the backend stays theirs, on a pinned place)", v(&self.stalled_readers)),
        ]
    }
}

/// Busy polling's counters (`conn::busy_poll`), for SHOW STATS and /metrics.
#[derive(Default)]
pub struct BusyPollStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub skipped: AtomicU64,
}

impl BusyPollStats {
    /// (name, help, value) of each counter.
    pub fn rows(&self) -> [(&'static str, &'static str, u64); 3] {
        let v = |c: &AtomicU64| c.load(Ordering::Relaxed);
        [
            ("busy_poll_hits", "Replies whose first bytes came while sluice polled the backend without sleeping", v(&self.hits)),
            ("busy_poll_misses", "Polls that ran out of backend_busy_poll before the reply came (the wait then slept)", v(&self.misses)),
            ("busy_poll_skipped", "Lone waits that slept without polling: sleeping had been quicker on that backend connection lately, or one wait in 16 measuring it", v(&self.skipped)),
        ]
    }
}

/// One `routed{server,route,why}` series: the server index, `"writer"` / `"replica"` /
/// `"held"` / `"wait_replica"`, and `ToWriter::label` (or `"read"` for a replica).
pub type RouteKey = (usize, &'static str, &'static str);

impl Stats {
    pub fn incr(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    pub fn client_closed(&self, r: ClientCloseReason) {
        self.client_closes.add(r.index());
    }
    pub fn backend_closed(&self, r: BackendCloseReason) {
        self.backend_closes.add(r.index());
    }
    pub fn pinned(&self, r: PinReason) {
        self.pins.add(r.index());
    }
    pub fn recycled(&self, r: RecycleOutcome) {
        self.recycles.add(r.index());
    }
    pub fn connect_failed(&self, r: ConnectFailure) {
        self.connect_failures.add(r.index());
    }
    pub fn connect_failures_by(&self, r: ConnectFailure) -> u64 {
        self.connect_failures.get(r.index())
    }
    /// Counts one routed statement (`routed{server,route,why}`).
    pub fn routed(&self, server: usize, route: &'static str, why: &'static str) {
        let mut m = self.routed.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry((server, route, why)).or_default() += 1;
    }
    /// Every `routed` series with its count.
    pub fn routed_snapshot(&self) -> Vec<(RouteKey, u64)> {
        let m = self.routed.lock().unwrap_or_else(|p| p.into_inner());
        m.iter().map(|(k, v)| (*k, *v)).collect()
    }
    pub fn limit_changed(&self, r: LimitReason) {
        self.limit_changes.add(r.index());
    }
    pub fn limit_changes_by(&self, r: LimitReason) -> u64 {
        self.limit_changes.get(r.index())
    }
    pub fn client_closes_by(&self, r: ClientCloseReason) -> u64 {
        self.client_closes.get(r.index())
    }
    pub fn backend_closes_by(&self, r: BackendCloseReason) -> u64 {
        self.backend_closes.get(r.index())
    }
    pub fn pins_by(&self, r: PinReason) -> u64 {
        self.pins.get(r.index())
    }
    pub fn recycles_by(&self, r: RecycleOutcome) -> u64 {
        self.recycles.get(r.index())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_arrays_fit_every_reason() {
        let s = Stats::default();
        for r in ClientCloseReason::ALL {
            s.client_closed(*r);
            assert_eq!(s.client_closes_by(*r), 1);
        }
        for r in BackendCloseReason::ALL {
            s.backend_closed(*r);
            assert_eq!(s.backend_closes_by(*r), 1);
        }
        for r in PinReason::ALL {
            s.pinned(*r);
            assert_eq!(s.pins_by(*r), 1);
        }
        for r in RecycleOutcome::ALL {
            s.recycled(*r);
            assert_eq!(s.recycles_by(*r), 1);
        }
        for r in ConnectFailure::ALL {
            s.connect_failed(*r);
            assert_eq!(s.connect_failures_by(*r), 1);
        }
        for r in LimitReason::ALL {
            s.limit_changed(*r);
            assert_eq!(s.limit_changes_by(*r), 1);
        }
    }
}
