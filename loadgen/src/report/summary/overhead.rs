//! The overhead experiment: its table, and the relay-cost goal, sluice against HAProxy in
//! TCP mode side by side in the same run: the goal's ratios round by round, and the counted
//! costs (syscalls and instructions per query) of every relay. Everything is computed from
//! the rows ([`crate::analysis::relay_cost`]) and `overhead_syscalls.csv`, so `loadgen report`
//! redraws it; older folders (an in-process sluice, no HAProxy) keep their table and lines,
//! and those without serial sluice rows (`sluice_serial`, pipelining off) or busy-polling
//! rows (`haproxy_busy`, `sluice_sleep`: at 1 client, next to the latency goal) their layout.

use std::fmt::Write as _;

use super::table::table;
use crate::analysis::relay_cost::{
    self, added_p50_ms, busy_poll, feature_ratios, goals, key_of, pipelining, round_of, rounds,
    BusyPoll, BusyPollKind, Feature, FeatureRatio, Goal, GoalKind, HAPROXY_BUSY, MANY, ONE, SERIAL,
    SLEEP, UNDIGESTED,
};
use crate::measure::level::LevelResult;
use crate::report::results::Report;

/// The metadata lines older overhead runs printed (an in-process sluice and the bare relay).
const OLD_KEYS: &[&str] = &[
    "overhead_added_p50_ms_1_client",
    "overhead_relay_added_p50_ms_1_client",
    "overhead_sluice_over_relay_p50_ms_1_client",
    "overhead_relay_cpu_us_per_query_64_clients",
    "overhead_sluice_cpu_us_per_query_64_clients",
    "overhead_sluice_over_relay_cpu_us_per_query_64_clients",
    "overhead_sluice_unix_added_p50_ms_1_client",
    "overhead_sluice_unix_cpu_us_per_query_64_clients",
];

/// Writes the overhead section.
pub fn overhead(out: &mut String, rep: &Report) {
    let ov = rep.rows_of("overhead");
    if ov.is_empty() {
        return;
    }
    let relay_cost = ov.iter().any(|r| r.target == "haproxy" || is_sluice(r));
    if !relay_cost {
        let _ = writeln!(
            out,
            "\nOverhead: SELECT 1, direct vs a bare TCP relay (the floor any proxy pays on this host) vs sluice \
             (proxy: backend over TCP; proxy-unix: over the server's Unix socket)"
        );
        table(out, &ov, "target", |r| r.target.to_string());
        for k in OLD_KEYS {
            if let Some(v) = rep.meta_value(k) {
                let _ = writeln!(out, "{k}: {v}");
            }
        }
        return;
    }
    let several = rounds(&ov).len() > 1;
    let has = |target: &str| ov.iter().any(|r| r.target == target);
    let mut what = Vec::new();
    if has(SERIAL) {
        what.push("sluice_serial: pipelining off, --pipeline-depth 1");
    }
    if has(UNDIGESTED) {
        what.push("sluice_undigested: digests off, --digests off, at 64 clients only");
    }
    if has(HAPROXY_BUSY) || has(SLEEP) {
        what.push(
            "haproxy_busy: HAProxy with busy-polling, sluice_sleep: busy polling off, \
             --backend-busy-poll 0, both at 1 client only",
        );
    }
    let what = match what.is_empty() {
        true => String::new(),
        false => format!(" ({})", what.join("; ")),
    };
    let _ = writeln!(
        out,
        "\nOverhead: SELECT 1 direct, through the bare tokio relay, HAProxy (mode tcp, 1 thread) and the sluice binary{what}"
    );
    let _ = writeln!(
        out,
        "(each relay a process of its own, pinned {}; fresh for every level)",
        rep.meta_value("overhead_pinning").unwrap_or("as loadgen")
    );
    table(out, &ov, "target", |r| match several {
        true => format!("{} r{}", key_of(r), round_of(r)),
        false => key_of(r),
    });
    costs(out, rep, &ov, several);
    goal_lines(out, &goals(&ov), &busy_poll(&ov), several);
    feature_lines(out, &pipelining(&ov), several);
    feature_lines(out, &feature_ratios(&ov, Feature::Digests), several);
    syscall_lines(out, rep, &ov);
    instruction_lines(out, rep, &ov);
    for note in rep.notes.iter().filter(|n| n.starts_with("overhead:")) {
        let _ = writeln!(out, "{note}");
    }
}

/// A sluice row: pipelined, serial, or with busy polling off.
fn is_sluice(r: &LevelResult) -> bool {
    r.target == "sluice" || r.target == SERIAL || r.target == SLEEP || r.target == UNDIGESTED
}

/// The widest of `names`, and at least `min` (the width older runs' lines were laid out in).
fn width<'a>(min: usize, names: impl Iterator<Item = &'a str>) -> usize {
    names.map(str::len).fold(min, usize::max)
}

fn clients_word(n: usize) -> &'static str {
    if n == 1 {
        "client"
    } else {
        "clients"
    }
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map(|v| format!("{v:.prec$}"))
        .unwrap_or_else(|| "-".into())
}

/// The relay-cost table: added p50, the relay's and the server's CPU, syscalls and
/// instructions per query.
fn costs(out: &mut String, rep: &Report, rows: &[&LevelResult], several: bool) {
    let _ = writeln!(
        out,
        "\nRelay cost per answered query (CPU = utime + stime of the process over the window; syscalls in a separate window)"
    );
    let name = |r: &LevelResult| match several {
        true => format!("{} r{}", key_of(r), round_of(r)),
        false => key_of(r),
    };
    let names: Vec<String> = rows.iter().map(|r| name(r)).collect();
    let w = width(14, names.iter().map(String::as_str));
    let _ = writeln!(
        out,
        "{:>w$} {:>7} {:>7} {:>8} {:>8} {:>9} {:>10} {:>11} {:>11} {:>12} {:>10}",
        "target",
        "clients",
        "QPS",
        "p50 ms",
        "p99 ms",
        "+p50 ms",
        "CPU us/q",
        "server us/q",
        "syscalls/q",
        "QPS counting",
        "instr/q"
    );
    for (r, name) in rows.iter().zip(names) {
        let counting = r
            .syscall_window_qps
            .map(|q| format!("{:.2}x", q / r.qps.max(1e-9)));
        let _ = writeln!(
            out,
            "{name:>w$} {:>7} {:>7.0} {:>8.3} {:>8.2} {:>9} {:>10} {:>11} {:>11} {:>12} {:>10}",
            r.clients,
            r.qps,
            r.p50_ms,
            r.p99_ms,
            added_p50_ms(rows, r)
                .map(|a| format!("{a:+.3}"))
                .unwrap_or_else(|| "-".into()),
            opt(r.cpu_us_per_query, 1),
            opt(r.server_cpu_us_per_query, 1),
            opt(r.syscalls_per_query, 2),
            counting.unwrap_or_else(|| "-".into()),
            opt(r.instructions_per_query, 0),
        );
    }
    if rep.meta_value("overhead_syscall_counter").is_some() {
        let _ = writeln!(
            out,
            "QPS counting = the relay's QPS while its syscalls were counted, over its timed QPS (the counter's cost)."
        );
    }
}

fn verdict(g: &Goal) -> &'static str {
    if g.met {
        "met"
    } else {
        "not met"
    }
}

fn round_prefix(several: bool, round: usize) -> String {
    if several {
        format!("  round {round}: ")
    } else {
        "  ".into()
    }
}

/// The relay-cost goal, round by round, each round's busy-polling lines after its latency goal,
/// and the range over the rounds.
fn goal_lines(out: &mut String, goals: &[Goal], busy: &[BusyPoll], several: bool) {
    if goals.is_empty() {
        let _ = writeln!(
            out,
            "The relay-cost goal cannot be judged: the run has no HAProxy rows or no sluice rows."
        );
        let mut rounds: Vec<usize> = busy.iter().map(|b| b.round).collect();
        rounds.dedup();
        for round in rounds {
            busy_poll_lines(out, busy, round, &round_prefix(several, round));
        }
        busy_poll_medians(out, busy, several);
        return;
    }
    let _ = writeln!(
        out,
        "\nThe relay-cost goal, sluice against HAProxy measured side by side in the same run{}:",
        if several {
            " (each round on its own)"
        } else {
            ""
        }
    );
    let mut rounds: Vec<usize> = goals
        .iter()
        .map(|g| g.round)
        .chain(busy.iter().map(|b| b.round))
        .collect();
    rounds.sort_unstable();
    rounds.dedup();
    for round in rounds {
        let of = |kind| {
            goals
                .iter()
                .filter(move |g| g.round == round && g.kind == kind)
        };
        let prefix = round_prefix(several, round);
        let cpu: Vec<String> = of(GoalKind::CpuRatio)
            .map(|g| format!("P={} {:.2}x ({})", g.pool, g.value, verdict(g)))
            .collect();
        if !cpu.is_empty() {
            let _ = writeln!(
                out,
                "{prefix}CPU per query at {MANY} clients, sluice / HAProxy (goal <= {:.2}): {}",
                relay_cost::CPU_RATIO_GOAL,
                cpu.join(", ")
            );
        }
        let qps: Vec<String> = of(GoalKind::QpsRatio)
            .map(|g| format!("P={} {:.2}x ({})", g.pool, g.value, verdict(g)))
            .collect();
        if !qps.is_empty() {
            let _ = writeln!(
                out,
                "{prefix}QPS at {MANY} clients, sluice / HAProxy (goal >= {:.2}): {}",
                relay_cost::QPS_RATIO_GOAL,
                qps.join(", ")
            );
        }
        let p50: Vec<&Goal> = of(GoalKind::AddedP50).collect();
        if let Some(first) = p50.first() {
            let sluice: Vec<String> = p50
                .iter()
                .map(|g| format!("P={} {:+.3} ms ({})", g.pool, g.value, verdict(g)))
                .collect();
            let _ = writeln!(
                out,
                "{prefix}added p50 over direct at {ONE} client (goal: no worse than HAProxy's {:+.3} ms): {}",
                first.bound,
                sluice.join(", ")
            );
        }
        busy_poll_lines(out, busy, round, &prefix);
    }
    if several {
        let mut keys: Vec<(GoalKind, usize)> = goals.iter().map(|g| (g.kind, g.pool)).collect();
        keys.sort_by_key(|(k, p)| (*k as u8, *p));
        keys.dedup();
        let (mut ranges, mut medians) = (Vec::new(), Vec::new());
        for &(kind, pool) in &keys {
            let mut v: Vec<f64> = goals
                .iter()
                .filter(|g| g.kind == kind && g.pool == pool)
                .map(Goal::headline)
                .collect();
            let (lo, hi) = v
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            let (what, met): (&str, fn(f64) -> bool) = match kind {
                GoalKind::CpuRatio => ("CPU ratio", |m| m <= relay_cost::CPU_RATIO_GOAL),
                GoalKind::QpsRatio => ("QPS ratio", |m| m >= relay_cost::QPS_RATIO_GOAL),
                GoalKind::AddedP50 => ("added p50 minus HAProxy's (ms)", |m| m <= 0.0),
            };
            ranges.push(format!("{what} P={pool} {lo:.3}..{hi:.3}"));
            if let Some(m) = relay_cost::median(&mut v) {
                let verdict = if met(m) { "met" } else { "not met" };
                medians.push(format!("{what} P={pool} {m:.3} ({verdict})"));
            }
        }
        let _ = writeln!(out, "  range over the rounds: {}", ranges.join("; "));
        // One round can land on a host stall; the median of interleaved rounds is the
        // stable judgement (every other round runs backwards, `Relay::in_round`).
        let _ = writeln!(out, "  median over the rounds: {}", medians.join("; "));
    }
    busy_poll_medians(out, busy, several);
}

/// Busy polling at [`ONE`] client in `round` (informative; nothing for runs without the
/// busy-polling rows): sluice's added p50 minus its own with busy polling off (negative:
/// polling saves), then minus HAProxy busy-polling's.
fn busy_poll_lines(out: &mut String, busy: &[BusyPoll], round: usize, prefix: &str) {
    let lines = [
        (
            BusyPollKind::OverSleeping,
            format!("busy polling at {ONE} client: added p50, "),
            "polling minus busy polling off:",
        ),
        (
            BusyPollKind::OverHaProxyBusy,
            "against HAProxy busy-polling (the same trade, always on): ".to_string(),
            "added p50 minus HAProxy busy-polling's:",
        ),
    ];
    for (kind, head, what) in lines {
        let parts: Vec<String> = busy
            .iter()
            .filter(|b| b.round == round && b.kind == kind)
            .map(|b| format!("sluice P={} {what} {:+.3} ms", b.pool, b.value))
            .collect();
        if !parts.is_empty() {
            let _ = writeln!(out, "{prefix}{head}{}", parts.join("; "));
        }
    }
}

/// With several rounds, the busy-polling differences' medians over the rounds.
fn busy_poll_medians(out: &mut String, busy: &[BusyPoll], several: bool) {
    if !several {
        return;
    }
    let mut keys: Vec<(BusyPollKind, usize)> = Vec::new();
    for b in busy {
        if !keys.contains(&(b.kind, b.pool)) {
            keys.push((b.kind, b.pool));
        }
    }
    let parts: Vec<String> = keys
        .into_iter()
        .filter_map(|(kind, pool)| {
            let mut v: Vec<f64> = busy
                .iter()
                .filter(|b| b.kind == kind && b.pool == pool)
                .map(|b| b.value)
                .collect();
            let m = relay_cost::median(&mut v)?;
            let what = match kind {
                BusyPollKind::OverSleeping => "polling minus busy polling off",
                BusyPollKind::OverHaProxyBusy => "minus HAProxy busy-polling",
            };
            Some(format!("sluice P={pool} {what} {m:+.3} ms"))
        })
        .collect();
    if !parts.is_empty() {
        let _ = writeln!(
            out,
            "  busy polling at {ONE} client, median over the rounds: {}",
            parts.join("; ")
        );
    }
}

/// What pipelining saves (or digests cost), round by round: sluice's CPU per query over its
/// own with the feature off at [`MANY`] clients (nothing for runs without such rows).
fn feature_lines(out: &mut String, ratios: &[FeatureRatio], several: bool) {
    let mut rounds: Vec<usize> = ratios.iter().map(|p| p.round).collect();
    rounds.dedup();
    for round in rounds {
        let prefix = round_prefix(several, round);
        let (what, how) = match ratios[0].feature {
            Feature::Pipelining => ("pipelining", "pipelined / serial"),
            Feature::Digests => ("digests", "digests on / off"),
        };
        let parts: Vec<String> = ratios
            .iter()
            .filter(|p| p.round == round)
            .map(|p| format!("P={} {:.2}", p.pool, p.ratio))
            .collect();
        let _ = writeln!(
            out,
            "{prefix}{what}: CPU per query at {MANY} clients, {how}: {}",
            parts.join(", ")
        );
    }
}

/// Syscalls per query by target and client count, with the main syscalls one by one.
fn syscall_lines(out: &mut String, rep: &Report, rows: &[&LevelResult]) {
    let Some(counter) = rep.meta_value("overhead_syscall_counter") else {
        return;
    };
    let _ = writeln!(
        out,
        "\nSyscalls per query ({counter}; {} s windows after each timed one; median over rounds):",
        rep.meta_value("overhead_syscall_window_s").unwrap_or("?")
    );
    let counted = rows.iter().filter(|r| r.syscalls_per_query.is_some());
    let keys: Vec<String> = counted.map(|r| key_of(r)).collect();
    let w = width(11, keys.iter().map(String::as_str));
    for clients in [MANY, ONE] {
        // Each relay once, in the order measured (the rounds repeat it).
        let mut targets: Vec<String> = Vec::new();
        for r in rows
            .iter()
            .filter(|r| r.clients == clients && r.syscalls_per_query.is_some())
        {
            if !targets.contains(&key_of(r)) {
                targets.push(key_of(r));
            }
        }
        for t in targets {
            let total = relay_cost::median_of(rows, &t, clients, |r| r.syscalls_per_query);
            let by_call: Vec<String> = rep
                .syscalls
                .iter()
                .filter(|s| s.round == 1 && s.clients == clients && s.syscall != "total")
                .filter(|s| relay_cost::key(&s.target, s.pool_size) == t)
                .take(6)
                .map(|s| format!("{} {:.2}", s.syscall, s.per_query))
                .collect();
            let by_call = if by_call.is_empty() {
                String::new()
            } else {
                format!(" ({})", by_call.join(", "))
            };
            let _ = writeln!(
                out,
                "  {clients:>2} {:<7} {t:<w$} {:>6}{by_call}",
                clients_word(clients),
                opt(total, 2),
            );
        }
    }
}

/// Instructions per query under callgrind, when `--cost-counts` ran.
fn instruction_lines(out: &mut String, rep: &Report, rows: &[&LevelResult]) {
    if !rows.iter().any(|r| r.instructions_per_query.is_some()) {
        return;
    }
    let _ = writeln!(
        out,
        "\nInstructions per query (callgrind, user space only, {} queries per client count, idle cost subtracted; {}):",
        rep.meta_value("overhead_callgrind_queries").unwrap_or("?"),
        rep.meta_value("overhead_valgrind").unwrap_or("valgrind")
    );
    for clients in [ONE, MANY] {
        let parts: Vec<String> = rows
            .iter()
            .filter(|r| r.clients == clients)
            .filter_map(|r| {
                r.instructions_per_query
                    .map(|i| format!("{} {i:.0}", key_of(r)))
            })
            .collect();
        let haproxy = rows
            .iter()
            .find(|r| r.clients == clients && r.target == "haproxy")
            .and_then(|r| r.instructions_per_query);
        let ratios: Vec<String> = rows
            .iter()
            .filter(|r| r.clients == clients && is_sluice(r))
            .filter_map(|r| {
                let (i, h) = (r.instructions_per_query?, haproxy?);
                (h > 0.0).then(|| format!("{} {:.2}x", key_of(r), i / h))
            })
            .collect();
        if parts.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "  {clients:>2} {}: {}{}",
            clients_word(clients),
            parts.join(", "),
            if ratios.is_empty() {
                String::new()
            } else {
                format!("; over HAProxy's: {}", ratios.join(", "))
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{report, row};
    use super::*;
    use crate::measure::syscalls::SyscallRow;

    fn relay_row(
        target: &str,
        pool: Option<usize>,
        clients: usize,
        qps: f64,
        p50: f64,
        cpu: f64,
    ) -> LevelResult {
        LevelResult {
            experiment: "overhead".into(),
            pool_size: pool,
            p50_ms: p50,
            cpu_us_per_query: Some(cpu),
            server_cpu_us_per_query: Some(20.0),
            syscalls_per_query: Some(4.2),
            syscall_window_qps: Some(qps * 0.9),
            round: Some(1),
            ..row("overhead", target, clients, qps, p50 * 2.0)
        }
    }

    fn relay_cost_run() -> Report {
        let mut direct1 = row("overhead", "direct", 1, 21400.0, 0.09);
        direct1.p50_ms = 0.045;
        let mut direct64 = row("overhead", "direct", 64, 28000.0, 4.4);
        direct64.p50_ms = 2.2;
        let mut h64 = relay_row("haproxy", None, 64, 14900.0, 4.2, 34.7);
        h64.instructions_per_query = Some(6260.0);
        let mut s64 = relay_row("sluice", Some(64), 64, 15050.0, 4.2, 37.8);
        s64.instructions_per_query = Some(25040.0);
        let rows = vec![
            direct1,
            relay_row("haproxy", None, 1, 10300.0, 0.085, 60.0),
            relay_row("sluice", Some(4), 1, 11300.0, 0.080, 55.0),
            relay_row("sluice", Some(64), 1, 9300.0, 0.100, 65.0),
            direct64,
            h64,
            relay_row("sluice", Some(4), 64, 12900.0, 4.9, 43.5),
            s64,
        ];
        let mut rep = report(
            rows,
            &[
                (
                    "overhead_syscall_counter",
                    "perf stat -e raw_syscalls:sys_enter",
                ),
                ("overhead_syscall_window_s", "2"),
                ("overhead_callgrind_queries", "20000"),
                (
                    "overhead_pinning",
                    "relays and load on CPUs [1], server on CPUs [0]",
                ),
            ],
        );
        rep.syscalls = vec![SyscallRow {
            round: 1,
            target: "haproxy".into(),
            clients: 64,
            counter: "perf".into(),
            syscall: "sendto".into(),
            calls: 2000,
            queries: 1000,
            per_query: 2.0,
            ..SyscallRow::default()
        }];
        rep.notes.push("overhead: sluice not measured: x".into());
        rep
    }

    #[test]
    fn the_goal_lines_state_issue_17s_ratios() {
        let mut out = String::new();
        overhead(&mut out, &relay_cost_run());
        for want in [
            "HAProxy (mode tcp, 1 thread)",
            "pinned relays and load on CPUs [1], server on CPUs [0]",
            "CPU per query at 64 clients, sluice / HAProxy (goal <= 0.80): P=4 1.25x (not met), P=64 1.09x (not met)",
            "QPS at 64 clients, sluice / HAProxy (goal >= 1.00): P=4 0.87x (not met), P=64 1.01x (met)",
            "added p50 over direct at 1 client (goal: no worse than HAProxy's +0.040 ms): P=4 +0.035 ms (met), P=64 +0.055 ms (not met)",
            "Syscalls per query (perf stat -e raw_syscalls:sys_enter; 2 s windows",
            "64 clients haproxy       4.20 (sendto 2.00)",
            "64 clients: haproxy 6260, sluice_p64 25040; over HAProxy's: sluice_p64 4.00x",
            "overhead: sluice not measured: x",
        ] {
            assert!(out.contains(want), "{want:?} missing:\n{out}");
        }
        // Without serial rows, the layout of older runs and no pipelining line.
        for want in [
            "Overhead: SELECT 1 direct, through the bare tokio relay, HAProxy (mode tcp, 1 thread) and the sluice binary",
            "        target clients     QPS   p50 ms   p99 ms   +p50 ms   CPU us/q server us/q  syscalls/q QPS counting    instr/q",
            "  64 clients haproxy       4.20 (sendto 2.00)",
        ] {
            assert!(out.lines().any(|l| l == want), "{want:?} missing:\n{out}");
        }
        assert!(!out.contains("pipelining"), "{out}");
        // The cost table: HAProxy's added p50 and CPU at 1 client.
        let costs = out
            .split("Relay cost per answered query")
            .nth(1)
            .unwrap_or("");
        let line = costs
            .lines()
            .find(|l| l.trim_start().starts_with("haproxy       1"))
            .unwrap_or("");
        assert!(
            line.contains("+0.040") && line.contains("60.0") && line.contains("0.90x"),
            "{out}"
        );
    }

    /// [`relay_cost_run`] with serial sluice (pipelining off) measured next to pipelined sluice, in
    /// the run's order: relay, haproxy, serial P=4, P=4, serial P=64, P=64.
    fn with_serial() -> Report {
        let mut rep = relay_cost_run();
        let serial =
            |pool, clients, qps, p50, cpu| relay_row(SERIAL, Some(pool), clients, qps, p50, cpu);
        let mut s64 = serial(64, 64, 14000.0, 4.5, 42.0);
        s64.instructions_per_query = Some(31300.0);
        rep.rows.insert(7, s64);
        rep.rows.insert(6, serial(4, 64, 12000.0, 5.0, 58.0));
        rep.rows.insert(3, serial(64, 1, 9000.0, 0.101, 66.0));
        rep.rows.insert(2, serial(4, 1, 11000.0, 0.082, 57.0));
        rep.syscalls.push(SyscallRow {
            round: 1,
            target: SERIAL.into(),
            pool_size: Some(64),
            clients: 64,
            counter: "perf".into(),
            syscall: "sendto".into(),
            calls: 3000,
            queries: 1000,
            per_query: 3.0,
        });
        rep
    }

    #[test]
    fn serial_rows_add_pipelinings_ratio_and_keep_the_goal_lines() {
        let mut out = String::new();
        overhead(&mut out, &with_serial());
        let lines: Vec<&str> = out.lines().collect();
        for want in [
            "Overhead: SELECT 1 direct, through the bare tokio relay, HAProxy (mode tcp, 1 thread) and the sluice binary (sluice_serial: pipelining off, --pipeline-depth 1)",
            "  CPU per query at 64 clients, sluice / HAProxy (goal <= 0.80): P=4 1.25x (not met), P=64 1.09x (not met)",
            "  QPS at 64 clients, sluice / HAProxy (goal >= 1.00): P=4 0.87x (not met), P=64 1.01x (met)",
            "  added p50 over direct at 1 client (goal: no worse than HAProxy's +0.040 ms): P=4 +0.035 ms (met), P=64 +0.055 ms (not met)",
            "  pipelining: CPU per query at 64 clients, pipelined / serial: P=4 0.75, P=64 0.90",
            "           target clients     QPS   p50 ms   p99 ms   +p50 ms   CPU us/q server us/q  syscalls/q QPS counting    instr/q",
            "sluice_serial_p64      64   14000    4.500     9.00    +2.300       42.0        20.0        4.20        0.90x      31300",
            "          haproxy       1   10300    0.085     0.17    +0.040       60.0        20.0        4.20        0.90x          -",
            "  64 clients haproxy             4.20 (sendto 2.00)",
            "  64 clients sluice_serial_p64   4.20 (sendto 3.00)",
            "   1 client  sluice_serial_p4    4.20",
            "  64 clients: haproxy 6260, sluice_serial_p64 31300, sluice_p64 25040; over HAProxy's: sluice_serial_p64 5.00x, sluice_p64 4.00x",
        ] {
            assert!(lines.contains(&want), "{want:?} missing:\n{out}");
        }
        // The pipelining line follows the goal's.
        let at = |s: &str| out.find(s).unwrap();
        assert!(
            at("  added p50 over direct") < at("  pipelining: "),
            "{out}"
        );
    }

    /// [`with_serial`] with the busy-polling rows at 1 client, in the run's order: HAProxy
    /// busy-polling after HAProxy (+0.030 ms over direct), sluice P=4 with busy polling off
    /// after sluice P=4 (+0.065 ms; with it +0.035).
    fn with_busy_poll() -> Report {
        let mut rep = with_serial();
        rep.rows
            .insert(4, relay_row(SLEEP, Some(4), 1, 8000.0, 0.110, 60.0));
        rep.rows
            .insert(2, relay_row(HAPROXY_BUSY, None, 1, 12500.0, 0.075, 80.0));
        rep
    }

    #[test]
    fn busy_polling_rows_add_two_lines_after_the_latency_goal_and_keep_the_goal_lines() {
        let mut out = String::new();
        overhead(&mut out, &with_busy_poll());
        let lines: Vec<&str> = out.lines().collect();
        let goal = "  added p50 over direct at 1 client (goal: no worse than HAProxy's +0.040 ms): P=4 +0.035 ms (met), P=64 +0.055 ms (not met)";
        let off = "  busy polling at 1 client: added p50, sluice P=4 polling minus busy polling off: -0.030 ms";
        let haproxy = "  against HAProxy busy-polling (the same trade, always on): sluice P=4 added p50 minus HAProxy busy-polling's: +0.005 ms";
        for want in [
            "Overhead: SELECT 1 direct, through the bare tokio relay, HAProxy (mode tcp, 1 thread) and the sluice binary \
             (sluice_serial: pipelining off, --pipeline-depth 1; haproxy_busy: HAProxy with busy-polling, \
             sluice_sleep: busy polling off, --backend-busy-poll 0, both at 1 client only)",
            "     haproxy_busy       1   12500    0.075     0.15    +0.030       80.0        20.0        4.20        0.90x          -",
            "  sluice_sleep_p4       1    8000    0.110     0.22    +0.065       60.0        20.0        4.20        0.90x          -",
            "   1 client  haproxy_busy        4.20",
            "   1 client  sluice_sleep_p4     4.20",
        ] {
            assert!(lines.contains(&want), "{want:?} missing:\n{out}");
        }
        // Right after the latency goal, in this order, then pipelining.
        let at = |l: &str| {
            lines
                .iter()
                .position(|x| *x == l)
                .unwrap_or_else(|| panic!("{l:?} missing:\n{out}"))
        };
        assert_eq!(
            (at(off), at(haproxy)),
            (at(goal) + 1, at(goal) + 2),
            "{out}"
        );
        assert!(
            lines[at(haproxy) + 1].starts_with("  pipelining: "),
            "{out}"
        );
        // The goal lines are those of the run without the busy-polling rows.
        let mut before = String::new();
        overhead(&mut before, &with_serial());
        let goal_lines = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| l.contains("(goal"))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(goal_lines(&out), goal_lines(&before));
        assert!(!before.contains("busy polling"), "{before}");
        // No instructions for the busy-polling rows, and no ratio for them.
        assert!(!out.contains("sluice_sleep_p4 0."), "{out}");
    }

    #[test]
    fn several_rounds_give_busy_pollings_lines_round_by_round_and_their_median() {
        let mut rep = with_busy_poll();
        add_round_2(&mut rep, |r| {
            if r.target == SLEEP {
                r.p50_ms = 0.090;
            }
        });
        let mut out = String::new();
        overhead(&mut out, &rep);
        let lines: Vec<&str> = out.lines().collect();
        for want in [
            "  round 1: busy polling at 1 client: added p50, sluice P=4 polling minus busy polling off: -0.030 ms",
            "  round 2: busy polling at 1 client: added p50, sluice P=4 polling minus busy polling off: -0.010 ms",
            "  round 2: against HAProxy busy-polling (the same trade, always on): sluice P=4 added p50 minus HAProxy busy-polling's: +0.005 ms",
            "  busy polling at 1 client, median over the rounds: sluice P=4 polling minus busy polling off -0.020 ms; sluice P=4 minus HAProxy busy-polling +0.005 ms",
        ] {
            assert!(lines.contains(&want), "{want:?} missing:\n{out}");
        }
        // Each round's lines follow its latency goal; the median follows the goals'.
        let at = |s: &str| lines.iter().position(|l| l.starts_with(s)).unwrap();
        assert_eq!(
            at("  round 2: busy polling"),
            at("  round 2: added p50") + 1
        );
        assert!(at("  busy polling at 1 client, median") > at("  median over the rounds"));
        assert!(at("  busy polling at 1 client, median") < at("  round 1: pipelining"));
    }

    #[test]
    fn busy_pollings_lines_stand_without_the_goal() {
        // No HAProxy at all: no goal, but what busy polling saves.
        let mut rep = with_busy_poll();
        rep.rows
            .retain(|r| r.target != "haproxy" && r.target != HAPROXY_BUSY);
        let mut out = String::new();
        overhead(&mut out, &rep);
        assert!(
            out.contains("The relay-cost goal cannot be judged"),
            "{out}"
        );
        assert!(
            out.lines().any(|l| l == "  busy polling at 1 client: added p50, sluice P=4 polling minus busy polling off: -0.030 ms"),
            "{out}"
        );
        assert!(!out.contains("against HAProxy busy-polling"), "{out}");
    }

    /// A copy of every row as round 2, changed by `change`.
    fn add_round_2(rep: &mut Report, change: impl Fn(&mut LevelResult)) {
        let second: Vec<LevelResult> = rep
            .rows
            .iter()
            .cloned()
            .map(|mut r| {
                r.round = Some(2);
                change(&mut r);
                r
            })
            .collect();
        rep.rows.extend(second);
    }

    #[test]
    fn several_rounds_give_pipelinings_ratio_round_by_round() {
        let mut rep = with_serial();
        add_round_2(&mut rep, |r| {
            if r.target == SERIAL {
                r.cpu_us_per_query = r.cpu_us_per_query.map(|c| c / 2.0);
            }
        });
        let mut out = String::new();
        overhead(&mut out, &rep);
        let lines: Vec<&str> = out.lines().collect();
        for want in [
            "  round 1: pipelining: CPU per query at 64 clients, pipelined / serial: P=4 0.75, P=64 0.90",
            "  round 2: pipelining: CPU per query at 64 clients, pipelined / serial: P=4 1.50, P=64 1.80",
        ] {
            assert!(lines.contains(&want), "{want:?} missing:\n{out}");
        }
        assert!(out.contains("sluice_serial_p64 r2"), "{out}");
    }

    #[test]
    fn several_rounds_are_judged_each_on_its_own_with_their_range() {
        let mut rep = relay_cost_run();
        add_round_2(&mut rep, |r| {
            if r.target == "haproxy" {
                r.cpu_us_per_query = r.cpu_us_per_query.map(|c| c * 1.25);
            }
        });
        let mut out = String::new();
        overhead(&mut out, &rep);
        assert!(
            out.contains("  round 1: CPU per query at 64 clients"),
            "{out}"
        );
        assert!(out.contains("  round 2: CPU per query at 64 clients, sluice / HAProxy (goal <= 0.80): P=4 1.00x"), "{out}");
        assert!(
            out.contains("range over the rounds: CPU ratio P=4 1.003..1.254"),
            "{out}"
        );
        assert!(
            out.contains("median over the rounds: CPU ratio P=4 1.128 (not met)"),
            "{out}"
        );
        assert!(out.contains("haproxy r2"), "{out}");
        // The syscall lines name each relay once, the median over the rounds.
        assert_eq!(out.matches("64 clients haproxy ").count(), 1, "{out}");
    }

    #[test]
    fn an_older_run_keeps_its_table_and_lines() {
        let rep = report(
            vec![
                row("overhead", "direct", 1, 20000.0, 0.1),
                row("overhead", "proxy-unix", 1, 9000.0, 0.2),
            ],
            &[
                ("overhead_added_p50_ms_1_client", "0.0490"),
                ("unrelated", "x"),
            ],
        );
        let mut out = String::new();
        overhead(&mut out, &rep);
        assert!(
            out.contains("Overhead: SELECT 1, direct vs a bare TCP relay"),
            "{out}"
        );
        assert!(
            out.contains("overhead_added_p50_ms_1_client: 0.0490"),
            "{out}"
        );
        assert!(out.contains("proxy-unix"), "{out}");
        assert!(
            !out.contains("unrelated") && !out.contains("relay-cost goal"),
            "{out}"
        );
        let mut none = String::new();
        overhead(&mut none, &report(vec![], &[]));
        assert!(none.is_empty());
    }
}
