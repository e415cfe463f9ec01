//! SHOW DIGESTS and SHOW RULES as plain [`Table`]s, and RELOAD RULES.

use std::time::SystemTime;

use super::actions::AdminError;
use super::show::{Cell, Kind, Table};
use crate::config::{format_duration, RouteTarget, RuleDef};
use crate::context::Context;
use crate::digests::{DigestRow, Order};

/// Characters of the normalised text SHOW DIGESTS shows.
const SHOWN_TEXT: usize = 200;

/// One row per (digest, user, schema, server), largest first; the overflow row (the numbers
/// of every evicted row, `digest` NULL) last. Times in µs, first/last seen in Unix seconds.
pub fn digests(ctx: &Context, order: Order, limit: Option<usize>) -> Table {
    use Kind::{Int, Text};
    let mut t = Table::new(&[
        ("digest", Text),
        ("user", Text),
        ("schema", Text),
        ("server", Int),
        ("count", Int),
        ("errors", Int),
        ("total_time_us", Int),
        ("avg_us", Int),
        ("min_us", Int),
        ("max_us", Int),
        ("p50_us", Int),
        ("p99_us", Int),
        ("queued_us", Int),
        ("server_us", Int),
        ("rows_sent", Int),
        ("rows_affected", Int),
        ("pinned", Int),
        ("replica", Int),
        ("pipelined", Int),
        ("retried", Int),
        ("first_seen", Int),
        ("last_seen", Int),
        ("digest_text", Text),
    ]);
    for r in ctx.digests.rows(order, limit) {
        t.push(digest_row(&r));
    }
    t
}

fn digest_row(r: &DigestRow) -> Vec<Cell> {
    let n = &r.totals;
    let unix = |at: SystemTime| {
        at.duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    };
    let text: String = String::from_utf8_lossy(&r.text)
        .chars()
        .take(SHOWN_TEXT)
        .collect();
    vec![
        r.digest.map(|d| d.to_string()).into(),
        (*r.user).into(),
        r.schema
            .as_deref()
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .into(),
        r.server.into(),
        n.count.into(),
        n.errors.into(),
        n.total_us.into(),
        n.total_us.checked_div(n.count).unwrap_or(0).into(),
        n.min_us.into(),
        n.max_us.into(),
        n.p50_us.into(),
        n.p99_us.into(),
        n.queued_us.into(),
        n.server_us.into(),
        n.rows_sent.into(),
        n.rows_affected.into(),
        n.pinned.into(),
        n.replica.into(),
        n.pipelined.into(),
        n.retried.into(),
        r.first_seen.map(unix).into(),
        unix(r.last_seen).into(),
        text.into(),
    ]
}

/// Every rule in force, in order, with what it matches, what it does and its counters;
/// `running` / `queued` are its max_concurrency gate's now.
pub fn rules(ctx: &Context) -> Table {
    use std::sync::atomic::Ordering::Relaxed;
    use Kind::{Int, Text};
    let mut t = Table::new(&[
        ("rule", Int),
        ("name", Text),
        ("match", Text),
        ("action", Text),
        ("hits", Int),
        ("blocked", Int),
        ("timed_out", Int),
        ("throttled", Int),
        ("queue_timeouts", Int),
        ("overridden", Int),
        ("logged", Int),
        ("running", Int),
        ("queued", Int),
    ]);
    let Some(set) = ctx.rules() else {
        return t;
    };
    let servers: Vec<String> = ctx
        .config()
        .endpoints()
        .iter()
        .map(|e| e.to_string())
        .collect();
    for (i, rule) in set.rules().iter().enumerate() {
        let c = &rule.counters;
        let gate = rule.gate();
        t.push(vec![
            i.into(),
            rule.def.name.clone().into(),
            matchers(&rule.def).into(),
            actions(&rule.def, &servers).into(),
            c.hits.load(Relaxed).into(),
            c.blocked.load(Relaxed).into(),
            c.timed_out.load(Relaxed).into(),
            c.throttled.load(Relaxed).into(),
            c.queue_timeouts.load(Relaxed).into(),
            c.overridden.load(Relaxed).into(),
            c.logged.load(Relaxed).into(),
            gate.map(|g| g.running()).into(),
            gate.map(|g| g.waiting()).into(),
        ]);
    }
    t
}

/// `digest=0x.. match_digest=/../ user=.. schema=.. client_addr=..`; "(every statement)".
fn matchers(d: &RuleDef) -> String {
    let mut m = Vec::new();
    if let Some(id) = d.digest {
        m.push(format!("digest=0x{id:016x}"));
    }
    if let Some(p) = &d.match_digest {
        m.push(format!("match_digest=/{}/", p.0.as_str()));
    }
    if let Some(u) = &d.user {
        m.push(format!("user={u}"));
    }
    if let Some(s) = &d.schema {
        m.push(format!("schema={s}"));
    }
    if let Some(c) = &d.client_addr {
        m.push(format!("client_addr={c}"));
    }
    if m.is_empty() {
        return "(every statement)".into();
    }
    m.join(" ")
}

fn actions(d: &RuleDef, servers: &[String]) -> String {
    let mut a = Vec::new();
    if let Some(r) = d.route {
        a.push(match r {
            RouteTarget::Server(i) => {
                format!(
                    "route=server:{}",
                    servers.get(i).map_or("?", |s| s.as_str())
                )
            }
            other => format!("route={other}"),
        });
    }
    if let Some(e) = &d.error {
        a.push(format!("error={e:?}"));
    }
    if let Some(t) = d.timeout {
        a.push(format!("timeout={}", format_duration(t)));
    }
    if let Some(n) = d.max_concurrency {
        a.push(format!("max_concurrency={n}"));
    }
    if let Some(rate) = d.log {
        a.push(if rate >= 1.0 {
            "log".into()
        } else {
            format!("log={rate}")
        });
    }
    a.join(" ")
}

/// RELOAD RULES: the config file is read and checked whole, and only its `[[rules]]` are
/// applied (every other setting keeps its running value). A broken file changes nothing.
pub fn reload_rules(ctx: &Context) -> Result<usize, AdminError> {
    let current = ctx.config();
    if current.config_path.is_none() {
        return Err(AdminError::NoConfigFile);
    }
    let next = current.reload().map_err(|e| {
        tracing::warn!("RELOAD RULES refused, the rules in force stay: {e}");
        AdminError::ReloadRules(e)
    })?;
    let mut cfg = (*current).clone();
    cfg.rules = next.rules.clone();
    let n = cfg.rules.len();
    ctx.replace_config(cfg);
    tracing::info!(rules = n, "RELOAD RULES applied");
    Ok(n)
}
