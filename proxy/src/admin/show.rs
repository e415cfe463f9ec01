//! The SHOW result sets, built from the shared state as plain [`Table`]s (no I/O here; `mod.rs`
//! writes them to the wire).

use std::collections::HashMap;
use std::time::Instant;

use crate::context::Context;
use crate::latency::Summary;
use crate::stats::{
    BackendCloseReason, ClientCloseReason, ConnectFailure, PinReason, RecycleOutcome,
};

/// Column kinds the console sends; only the client's display and decoding differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Int,
    Text,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Int(i64),
    Text(String),
    Null,
}

impl From<u64> for Cell {
    fn from(v: u64) -> Cell {
        Cell::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<u32> for Cell {
    fn from(v: u32) -> Cell {
        Cell::Int(i64::from(v))
    }
}
impl From<usize> for Cell {
    fn from(v: usize) -> Cell {
        Cell::from(v as u64)
    }
}
impl From<String> for Cell {
    fn from(v: String) -> Cell {
        Cell::Text(v)
    }
}
impl From<&str> for Cell {
    fn from(v: &str) -> Cell {
        Cell::Text(v.to_string())
    }
}
impl<T: Into<Cell>> From<Option<T>> for Cell {
    fn from(v: Option<T>) -> Cell {
        v.map_or(Cell::Null, Into::into)
    }
}

/// One result set.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub columns: Vec<(String, Kind)>,
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn new(columns: &[(&str, Kind)]) -> Table {
        Table {
            columns: columns.iter().map(|(n, k)| (n.to_string(), *k)).collect(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<Cell>) {
        debug_assert_eq!(row.len(), self.columns.len());
        self.rows.push(row);
    }
}

use Kind::{Int, Text};

/// One row per idle-backend group (backend user, capability mask, collation). Slot and
/// connection counts are pool-wide (one execution-slot queue serves every group); `idle`
/// is the group's own, `pinned` counts sessions whose backend user is the group's.
/// `pinned_backends` (pool-wide) are the connections pinned sessions hold, against
/// `pinned_max` (max_open less pool_size), by reason in `pinned_by`; `max_open_from` says
/// whether max_open is configured or derived from the server's max_connections.
pub fn pools(ctx: &Context) -> Table {
    let config = ctx.config();
    let snap = ctx.pool.snapshot();
    let max_wait_ms = ctx.pool.slots().take_max_wait().as_millis() as u64;
    let mut pinned_by_user: HashMap<String, u64> = HashMap::new();
    for c in ctx.registry.all().iter().filter(|c| c.pin().is_some()) {
        let user = c.user();
        let backend_user = match config.find_user(user.as_bytes()) {
            Some(u) => u.backend_credentials(&config).0.to_string(),
            None => user,
        };
        *pinned_by_user.entry(backend_user).or_default() += 1;
    }
    let mut t = Table::new(&[
        ("backend", Text),
        ("user", Text),
        ("caps", Text),
        ("collation", Int),
        ("pool_size", Int),
        ("active", Int),
        ("idle", Int),
        ("open", Int),
        ("max_open", Int),
        ("max_open_from", Text),
        ("pinned", Int),
        ("pinned_backends", Int),
        ("pinned_max", Int),
        ("pinned_by", Text),
        ("waiting", Int),
        ("max_wait_ms", Int),
        ("pool_mode", Text),
        ("limit_reason", Text),
        ("server_cpus", Int),
        ("server_cpus_from", Text),
    ]);
    // The mode is the config's, so it is right from the first moment; the driver's status
    // comes with its first tick.
    let limit = ctx.limit.get();
    let auto = config.pool_size == crate::config::PoolSize::Auto;
    let mode = if auto { "auto" } else { "fixed" };
    let reason: Cell = match (auto, limit.auto) {
        (true, true) => limit.reason.as_str().into(),
        (true, false) => "auto: starting".into(),
        (false, _) => Cell::Null,
    };
    let from: Cell = match (config.max_backend_connections, snap.max_open_from_server) {
        (crate::config::BackendLimit::Fixed(_), _) => "config".into(),
        (_, Some(n)) => format!("auto: server max_connections={n}").into(),
        (_, None) => format!(
            "auto: server not read yet, assuming max_connections={}",
            crate::pool::limits::ASSUMED_SERVER_MAX
        )
        .into(),
    };
    let cpus: Cell = ctx.pool.slots().server_cpus(config.server_cpus).into();
    let cpus_from: Cell = match (config.server_cpus, ctx.pool.slots().reported_cpus()) {
        (crate::config::ServerCpus::Fixed(_), _) => "config".into(),
        (_, Some(_)) => "auto: server thread_pool_size".into(),
        (_, None) => "auto: unknown (the server does not say, or not read yet)".into(),
    };
    let by: Vec<String> = snap
        .pinned_by
        .iter()
        .map(|(hold, n)| format!("{hold}={n}"))
        .collect();
    let by: Cell = by.join(",").into();
    let mut groups = snap.groups.clone();
    groups.sort_by(|a, b| {
        (&*a.0.user, a.0.caps, a.0.collation).cmp(&(&*b.0.user, b.0.caps, b.0.collation))
    });
    let mut row = |user: Cell, caps: Cell, collation: Cell, idle: u64, pinned: u64| {
        t.push(vec![
            config.backend.to_string().into(),
            user,
            caps,
            collation,
            snap.pool_size.into(),
            snap.slots_in_use.into(),
            idle.into(),
            snap.open.into(),
            snap.max_open.into(),
            from.clone(),
            pinned.into(),
            snap.pinned.into(),
            snap.pinned_max.into(),
            by.clone(),
            snap.waiting.into(),
            max_wait_ms.into(),
            mode.into(),
            reason.clone(),
            cpus.clone(),
            cpus_from.clone(),
        ]);
    };
    if groups.is_empty() {
        let pinned = pinned_by_user.values().sum();
        row("*".into(), Cell::Null, Cell::Null, 0, pinned);
    }
    for (key, idle) in groups {
        let pinned = pinned_by_user.get(&*key.user).copied().unwrap_or(0);
        row(
            (&*key.user).into(),
            format!("0x{:08x}", key.caps).into(),
            u32::from(key.collation).into(),
            idle as u64,
            pinned,
        );
    }
    t
}

pub fn clients(ctx: &Context) -> Table {
    let mut t = Table::new(&[
        ("id", Int),
        ("user", Text),
        ("addr", Text),
        ("state", Text),
        ("pinned", Text),
        ("queries", Int),
        ("age_s", Int),
        ("backend_thread", Int),
        // Thread ids are per server: the one `backend_thread` is on (its index in `servers`).
        ("backend_server", Int),
    ]);
    for c in ctx.registry.all() {
        let thread = c.backend_thread.load(std::sync::atomic::Ordering::Relaxed);
        let server = c.backend_server.load(std::sync::atomic::Ordering::Relaxed);
        t.push(vec![
            c.id.into(),
            c.user().into(),
            c.addr.as_str().into(),
            c.phase().label().into(),
            c.pin().map(|p| p.label()).into(),
            c.queries.load(std::sync::atomic::Ordering::Relaxed).into(),
            c.connected.elapsed().as_secs().into(),
            (thread != 0).then_some(thread).into(),
            (thread != 0).then_some(server).into(),
        ]);
    }
    t
}

/// For each configured server (column `server`, its index in `servers`): its pool's state
/// (`backend_up` / `backend_down`, with the outage's length and the last connect error and its
/// age), each idle backend, then one row that counts the checked-out ones (they belong to a
/// running session and are not inspected while it uses them). Then one `identity` row per
/// backend account that has logged in: how CONNECTION_ID() shows clients their id
/// (`pseudo_thread_id`, or `rewrite` with the GRANT that would switch it). Then the topology:
/// one row per server (`server_up`, `server_down`, `server_unknown` before the first monitor
/// round, `server_unmonitored` with one server and read_write_split off) with its `role`
/// (writer / replica / excluded), `lag_s`, `gtid_position` and why it is `excluded`, and one
/// `alert` row per alert (split brain, no writer, a writable replica).
pub fn servers(ctx: &Context) -> Table {
    let mut t = Table::new(&[
        ("id", Int),
        ("thread_id", Int),
        ("user", Text),
        ("state", Text),
        ("count", Int),
        ("age_s", Int),
        ("idle_s", Int),
        ("statements", Int),
        ("prepared", Int),
        ("schema", Text),
        ("down_s", Int),
        ("last_error", Text),
        ("last_error_age_s", Int),
        ("backend", Text),
        ("connection_id", Text),
        ("server", Int),
        ("role", Text),
        ("lag_s", Int),
        ("gtid_position", Text),
        ("excluded", Text),
        ("alert", Text),
    ]);
    let config = ctx.config();
    let addresses: Vec<String> = config.endpoints().iter().map(|e| e.to_string()).collect();
    for (index, pool) in ctx.pools().iter().enumerate() {
        let configured = addresses.get(index).cloned().unwrap_or_default();
        pool_rows(&mut t, pool, index, configured);
    }
    let greeting = ctx.handshake.server.get();
    for (user, mode) in ctx.identity.all() {
        let mut row = vec![Cell::Null; t.columns.len()];
        row[2] = user.as_str().into();
        row[3] = "identity".into();
        row[14] = match (mode, &greeting) {
            (crate::conn::identity::IdentityMode::Rewrite, Some(info)) => format!(
                "rewrite; to switch: {}",
                crate::conn::identity::grant_advice(&user, info)
            ),
            _ => mode.as_str().to_string(),
        }
        .into();
        t.push(row);
    }
    topology_rows(&mut t, ctx, &addresses);
    t
}

/// One pool's rows of SHOW SERVERS (see [`servers`]).
fn pool_rows(t: &mut Table, pool: &crate::pool::Pool, index: usize, configured: String) {
    let width = t.columns.len();
    let now = Instant::now();
    let outage = pool.outage();
    let mut server = vec![Cell::Null; width];
    server[13] = if outage.addr.is_empty() {
        configured
    } else {
        outage.addr.clone()
    }
    .into();
    server[3] = if outage.up {
        "backend_up"
    } else {
        "backend_down"
    }
    .into();
    server[10] = outage
        .down_since
        .map(|t| now.saturating_duration_since(t).as_secs())
        .into();
    if let Some(e) = &outage.last_error {
        server[11] = format!("{} ({})", e.message, e.kind).into();
        server[12] = now.saturating_duration_since(e.at).as_secs().into();
    }
    server[15] = index.into();
    t.push(server);
    let mut idle = 0u32;
    pool.for_each_idle(|b| {
        idle += 1;
        t.push(vec![
            b.id.into(),
            b.thread_id.into(),
            (&*b.key.user).into(),
            "idle".into(),
            1u32.into(),
            now.saturating_duration_since(b.created).as_secs().into(),
            now.saturating_duration_since(b.last_used).as_secs().into(),
            b.statements.into(),
            b.stmts.len().into(),
            b.state
                .schema
                .as_ref()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .into(),
            Cell::Null,
            Cell::Null,
            Cell::Null,
            Cell::Null,
            Cell::Null,
            index.into(),
            Cell::Null,
            Cell::Null,
            Cell::Null,
            Cell::Null,
            Cell::Null,
        ]);
    });
    let open = pool.snapshot().open;
    let mut checked_out = vec![Cell::Null; width];
    checked_out[3] = "checked_out".into();
    checked_out[4] = open.saturating_sub(idle).into();
    checked_out[15] = index.into();
    t.push(checked_out);
}

/// The topology rows of SHOW SERVERS (see [`servers`]), from the monitor's last snapshot.
fn topology_rows(t: &mut Table, ctx: &Context, addresses: &[String]) {
    use crate::topology_report::{alerts, role_label, servers};
    let monitored = ctx.config().uses_topology();
    let snapshot = ctx.topology();
    for r in servers(&snapshot, addresses, monitored) {
        let mut row = vec![Cell::Null; t.columns.len()];
        row[3] = format!("server_{}", r.state.label()).into();
        row[13] = r.address.as_str().into();
        row[15] = r.index.into();
        row[16] = role_label(r.role).into();
        row[17] = r.lag.map(|l| l.as_secs()).into();
        row[18] = r.position.clone().into();
        row[19] = r.excluded().map(|why| why.to_string()).into();
        t.push(row);
    }
    for a in alerts(&snapshot, monitored) {
        let mut row = vec![Cell::Null; t.columns.len()];
        row[3] = "alert".into();
        row[15] = a.server.into();
        row[20] = a.text.into();
        t.push(row);
    }
}

/// Counters since start, each with its average rate.
pub fn stats(ctx: &Context, started: Instant) -> Table {
    use std::sync::atomic::Ordering::Relaxed;
    let s = &ctx.stats;
    let uptime = started.elapsed().as_secs_f64().max(0.001);
    let mut t = Table::new(&[("stat", Text), ("value", Int), ("per_second", Text)]);
    let mut counter = |name: String, v: u64| {
        t.push(vec![
            name.into(),
            v.into(),
            format!("{:.2}", v as f64 / uptime).into(),
        ]);
    };
    counter("clients_accepted".into(), s.clients_accepted.load(Relaxed));
    counter("statements".into(), s.statements.load(Relaxed));
    counter("queue_timeouts".into(), s.queue_timeouts.load(Relaxed));
    counter("pin_refusals".into(), s.pin_refusals.load(Relaxed));
    counter("pin_overflows".into(), s.pin_overflows.load(Relaxed));
    counter("slot_overflows".into(), s.slot_overflows.load(Relaxed));
    counter("slots_kept".into(), s.slots_kept.load(Relaxed));
    counter("client_errors".into(), s.client_errors.load(Relaxed));
    counter("backend_connects".into(), s.backend_connects.load(Relaxed));
    counter("control_connects".into(), s.control_connects.load(Relaxed));
    counter(
        "backend_connect_errors".into(),
        s.backend_connect_errors.load(Relaxed),
    );
    counter("replays".into(), s.replays.load(Relaxed));
    counter("bytes_to_clients".into(), s.bytes_to_clients.load(Relaxed));
    counter("ryw_fallbacks".into(), s.ryw_fallbacks.load(Relaxed));
    counter("digests_evicted".into(), ctx.digests.evicted());
    for (name, _, n) in s.pipeline.rows().into_iter().chain(s.busy_poll.rows()) {
        counter(name.into(), n);
    }
    // Where statements went, with several servers or the split on (server.route.why).
    for ((server, route, why), n) in s.routed_snapshot() {
        counter(format!("routed.{server}.{route}.{why}"), n);
    }
    for r in ClientCloseReason::ALL {
        counter(format!("client_disconnects.{r}"), s.client_closes_by(*r));
    }
    for r in BackendCloseReason::ALL {
        counter(format!("backend_disconnects.{r}"), s.backend_closes_by(*r));
    }
    for r in PinReason::ALL {
        counter(format!("pins.{r}"), s.pins_by(*r));
    }
    for r in RecycleOutcome::ALL {
        counter(format!("recycles.{r}"), s.recycles_by(*r));
    }
    for r in ConnectFailure::ALL {
        counter(
            format!("backend_connect_failures.{r}"),
            s.connect_failures_by(*r),
        );
    }
    let snap = ctx.pool.snapshot();
    let mut gauge = |name: &str, v: u64| t.push(vec![name.into(), v.into(), Cell::Null]);
    gauge("uptime_s", started.elapsed().as_secs());
    gauge("clients_connected", ctx.registry.len() as u64);
    gauge("backends_open", u64::from(snap.open));
    gauge("backends_idle", u64::from(snap.idle));
    gauge("backends_to_reset", u64::from(snap.to_reset));
    gauge("backends_max", u64::from(snap.max_open));
    gauge("pinned_backends", u64::from(snap.pinned));
    gauge("pinned_backends_max", u64::from(snap.pinned_max));
    gauge("backend_up", u64::from(ctx.pool.backend_up()));
    gauge("slots_in_use", u64::from(snap.slots_in_use));
    gauge("queue_length", snap.waiting as u64);
    gauge("paused", u64::from(*ctx.paused.borrow()));
    gauge("digests", ctx.digests.len() as u64);
    t
}

/// Every setting with its current value (secrets masked), default and whether it is live.
pub fn config(ctx: &Context) -> Table {
    let config = ctx.config();
    // The masked TOML is the one rendering of values that never shows a secret.
    let parsed: toml::Table = toml::from_str(&config.masked_toml()).unwrap_or_default();
    let mut t = Table::new(&[
        ("setting", Text),
        ("value", Text),
        ("default", Text),
        ("live", Text),
    ]);
    for doc in crate::config::SETTINGS {
        let value: Cell = match doc.name {
            "users" | "admin_users" => {
                let list = if doc.name == "users" {
                    &config.users
                } else {
                    &config.admin_users
                };
                let names: Vec<&str> = list.iter().map(|u| u.name.as_str()).collect();
                format!("[{}] (passwords masked)", names.join(", ")).into()
            }
            "config" => config
                .config_path
                .as_ref()
                .map(|p| p.display().to_string())
                .into(),
            name => parsed
                .get(name)
                .map(|v| match v {
                    toml::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .into(),
        };
        let default = (!doc.default.is_empty()).then_some(doc.default);
        t.push(vec![
            doc.name.into(),
            value,
            default.into(),
            if doc.live { "yes" } else { "no" }.into(),
        ]);
    }
    t
}

pub fn version(ctx: &Context) -> Table {
    let mut t = Table::new(&[
        ("sluice", Text),
        ("backend", Text),
        ("backend_version", Text),
    ]);
    t.push(vec![
        env!("CARGO_PKG_VERSION").into(),
        ctx.config().backend.to_string().into(),
        String::from_utf8_lossy(&ctx.handshake.server_version())
            .into_owned()
            .into(),
    ]);
    t
}

/// Percentiles in microseconds since start.
pub fn latency(ctx: &Context) -> Table {
    let mut t = Table::new(&[
        ("metric", Text),
        ("count", Int),
        ("p50_us", Int),
        ("p99_us", Int),
        ("p999_us", Int),
        ("max_us", Int),
        ("mean_us", Int),
    ]);
    let mut row = |name: &str, s: Summary| {
        let mean = s.sum.checked_div(s.count).unwrap_or(0);
        t.push(vec![
            name.into(),
            s.count.into(),
            s.p50.into(),
            s.p99.into(),
            s.p999.into(),
            s.max.into(),
            mean.into(),
        ]);
    };
    row("queue_wait", ctx.latency.queue_wait.snapshot().summary());
    row(
        "backend_time",
        ctx.latency.backend_time.snapshot().summary(),
    );
    t
}

pub fn help() -> Table {
    let mut t = Table::new(&[("command", Text), ("description", Text)]);
    for (cmd, what) in super::parser::COMMANDS {
        t.push(vec![(*cmd).into(), (*what).into()]);
    }
    t
}

/// The answer to `SELECT @@name`: clients probe a few variables at connect.
pub fn variable(name: &str) -> Table {
    let value: Cell = match name {
        "version_comment" => "sluice admin console".into(),
        "version" => format!("{}-sluice-admin", env!("CARGO_PKG_VERSION")).into(),
        "max_allowed_packet" => (64u64 << 20).into(),
        "wait_timeout" | "interactive_timeout" => 28_800u64.into(),
        "autocommit" => 1u64.into(),
        "server_id" => 0u64.into(),
        _ => Cell::Null,
    };
    let kind = if matches!(value, Cell::Int(_)) {
        Int
    } else {
        Text
    };
    let mut t = Table::new(&[(&format!("@@{name}"), kind)]);
    t.push(vec![value]);
    t
}
