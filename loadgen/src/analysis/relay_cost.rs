//! The relay-cost goal, from the overhead rows of one run: at 64 clients sluice's CPU per
//! relayed query at most 0.8 x HAProxy's and its QPS at least HAProxy's, at P=4 and at P=64;
//! at 1 client its added p50 over direct no worse than HAProxy's. Every comparison is within
//! one round (the targets measured one after the other), never across runs. The goal is
//! judged on sluice as it ships (pipelining on, target `sluice`); the same binary with
//! pipelining off (`--pipeline-depth 1`, target `sluice_serial`) gives what pipelining saves
//! ([`pipelining`]). Two rows at 1 client only give what sluice's busy polling
//! (`backend_busy_poll`) does ([`busy_poll`]): sluice with it off (`--backend-busy-poll 0`,
//! target `sluice_sleep`), what it saves, and HAProxy with its `busy-polling` (target
//! `haproxy_busy`), the same trade made by the C relay. They are informative and change no
//! goal.

use crate::measure::level::LevelResult;

/// The client count the CPU and QPS goals are judged at.
pub const MANY: usize = 64;
/// The client count the latency goal is judged at.
pub const ONE: usize = 1;
/// The client counts the overhead experiment measures.
pub const CLIENTS: [usize; 2] = [ONE, MANY];
/// sluice's CPU per query may be at most this times HAProxy's.
pub const CPU_RATIO_GOAL: f64 = 0.8;
/// sluice's QPS must be at least this times HAProxy's.
pub const QPS_RATIO_GOAL: f64 = 1.0;

/// What a goal compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoalKind {
    /// sluice's CPU per query over HAProxy's, at [`MANY`] clients.
    CpuRatio,
    /// sluice's QPS over HAProxy's, at [`MANY`] clients.
    QpsRatio,
    /// sluice's added p50 over direct against HAProxy's, at [`ONE`] client (ms).
    AddedP50,
}

/// One goal judged for one sluice pool size in one round.
#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    pub kind: GoalKind,
    pub round: usize,
    /// sluice's pool size.
    pub pool: usize,
    /// The ratio, or sluice's added p50 (ms).
    pub value: f64,
    /// The bound: 0.8, 1.0, or HAProxy's added p50 (ms).
    pub bound: f64,
    pub met: bool,
}

impl Goal {
    /// The metadata key (without a round suffix).
    pub fn key(&self) -> String {
        let p = self.pool;
        match self.kind {
            GoalKind::CpuRatio => {
                format!("overhead_cpu_ratio_sluice_p{p}_over_haproxy_{MANY}_clients")
            }
            GoalKind::QpsRatio => {
                format!("overhead_qps_ratio_sluice_p{p}_over_haproxy_{MANY}_clients")
            }
            GoalKind::AddedP50 => {
                format!("overhead_added_p50_ms_sluice_p{p}_minus_haproxy_{ONE}_client")
            }
        }
    }

    /// sluice's added p50 minus HAProxy's for the latency goal; the ratio otherwise (the
    /// number the metadata keeps).
    pub fn headline(&self) -> f64 {
        match self.kind {
            GoalKind::AddedP50 => self.value - self.bound,
            _ => self.value,
        }
    }
}

/// A row's round (rows from before rounds existed are round 1).
pub fn round_of(r: &LevelResult) -> usize {
    r.round.unwrap_or(1)
}

/// The rounds present, in order.
pub fn rounds(rows: &[&LevelResult]) -> Vec<usize> {
    let mut v: Vec<usize> = rows.iter().map(|r| round_of(r)).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The target of sluice with pipelining off (`--pipeline-depth 1`).
pub const SERIAL: &str = "sluice_serial";
/// The target of sluice with busy polling off (`--backend-busy-poll 0`).
pub const SLEEP: &str = "sluice_sleep";
/// The target of HAProxy with `busy-polling` (its pollers never sleep).
pub const HAPROXY_BUSY: &str = "haproxy_busy";
/// The target of sluice with statement digests off (`--digests off`).
pub const UNDIGESTED: &str = "sluice_undigested";

/// A row's relay name: `direct`, `relay`, `haproxy`, `haproxy_busy`, `sluice_p4`,
/// `sluice_serial_p4`, `sluice_sleep_p4`, `sluice_undigested_p4` (an in-process `proxy` row
/// of an older run:
/// `proxy`).
pub fn key_of(r: &LevelResult) -> String {
    key(&r.target, r.pool_size)
}

/// The relay name of `target` with sluice's pool size `pool` (see [`key_of`]).
pub fn key(target: &str, pool: Option<usize>) -> String {
    match (target, pool) {
        ("sluice" | SERIAL | SLEEP | UNDIGESTED, Some(p)) => format!("{target}_p{p}"),
        (t, _) => t.to_string(),
    }
}

/// The row of `key` at `clients` in `round`.
pub fn find<'a>(
    rows: &[&'a LevelResult],
    round: usize,
    key: &str,
    clients: usize,
) -> Option<&'a LevelResult> {
    rows.iter()
        .copied()
        .find(|r| round_of(r) == round && r.clients == clients && key_of(r) == key)
}

/// p50 over direct's at the same client count in the same round, ms.
pub fn added_p50_ms(rows: &[&LevelResult], r: &LevelResult) -> Option<f64> {
    let direct = find(rows, round_of(r), "direct", r.clients)?;
    (r.target != "direct").then_some(r.p50_ms - direct.p50_ms)
}

/// sluice's pool sizes present, ascending.
pub fn sluice_pools(rows: &[&LevelResult]) -> Vec<usize> {
    pools_of(rows, "sluice")
}

/// The pool sizes the rows of `target` ran at, ascending.
fn pools_of(rows: &[&LevelResult], target: &str) -> Vec<usize> {
    let mut v: Vec<usize> = rows
        .iter()
        .filter(|r| r.target == target)
        .filter_map(|r| r.pool_size)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() => Some(a / b),
        _ => None,
    }
}

/// Every goal the rows can judge, round by round, for every sluice pool size.
pub fn goals(rows: &[&LevelResult]) -> Vec<Goal> {
    let mut out = Vec::new();
    for round in rounds(rows) {
        for pool in sluice_pools(rows) {
            let sluice = format!("sluice_p{pool}");
            let (s, h) = (
                find(rows, round, &sluice, MANY),
                find(rows, round, "haproxy", MANY),
            );
            let goal = |kind, value: Option<f64>, bound: f64, met: fn(f64, f64) -> bool| {
                value.map(|value| Goal {
                    kind,
                    round,
                    pool,
                    value,
                    bound,
                    met: met(value, bound),
                })
            };
            out.extend(goal(
                GoalKind::CpuRatio,
                ratio(
                    s.and_then(|r| r.cpu_us_per_query),
                    h.and_then(|r| r.cpu_us_per_query),
                ),
                CPU_RATIO_GOAL,
                |v, b| v <= b,
            ));
            out.extend(goal(
                GoalKind::QpsRatio,
                ratio(s.map(|r| r.qps), h.map(|r| r.qps)),
                QPS_RATIO_GOAL,
                |v, b| v >= b,
            ));
            let (s1, h1) = (
                find(rows, round, &sluice, ONE),
                find(rows, round, "haproxy", ONE),
            );
            let added = |r: Option<&LevelResult>| r.and_then(|r| added_p50_ms(rows, r));
            if let Some(bound) = added(h1) {
                out.extend(goal(GoalKind::AddedP50, added(s1), bound, |v, b| v <= b));
            }
        }
    }
    out
}

/// sluice as it ships against itself with one feature off, in CPU per query at [`MANY`]
/// clients: what the feature saves (below 1) or costs (above 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// Pipelined over serial sluice (`--pipeline-depth 1`).
    Pipelining,
    /// Digests on over digests off (`--digests off`).
    Digests,
}

impl Feature {
    /// The target of sluice with the feature off.
    pub fn off_target(self) -> &'static str {
        match self {
            Feature::Pipelining => SERIAL,
            Feature::Digests => UNDIGESTED,
        }
    }

    /// How the metadata key names the row with the feature off.
    fn key_word(self) -> &'static str {
        match self {
            Feature::Pipelining => "serial",
            Feature::Digests => "undigested",
        }
    }
}

/// sluice's CPU per query over its own with a [`Feature`] off, at [`MANY`] clients, for one
/// pool size in one round.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureRatio {
    pub feature: Feature,
    pub round: usize,
    pub pool: usize,
    pub ratio: f64,
}

impl FeatureRatio {
    /// The metadata key (without a round suffix).
    pub fn key(&self) -> String {
        format!(
            "overhead_cpu_ratio_sluice_p{}_over_{}_{MANY}_clients",
            self.pool,
            self.feature.key_word()
        )
    }
}

/// Every pipelined / serial CPU ratio the rows give, round by round, for every pool size
/// both ran at (none for runs from before the serial rows).
pub fn pipelining(rows: &[&LevelResult]) -> Vec<FeatureRatio> {
    feature_ratios(rows, Feature::Pipelining)
}

/// Every CPU ratio of sluice over its own with `feature` off, round by round, for every pool
/// size both ran at (none for runs without such rows).
pub fn feature_ratios(rows: &[&LevelResult], feature: Feature) -> Vec<FeatureRatio> {
    let mut out = Vec::new();
    for round in rounds(rows) {
        for pool in sluice_pools(rows) {
            let cpu = |key: String| find(rows, round, &key, MANY).and_then(|r| r.cpu_us_per_query);
            let on = cpu(format!("sluice_p{pool}"));
            let off = cpu(format!("{}_p{pool}", feature.off_target()));
            if let Some(ratio) = ratio(on, off) {
                out.push(FeatureRatio {
                    feature,
                    round,
                    pool,
                    ratio,
                });
            }
        }
    }
    out
}

/// What a busy-polling line compares, at [`ONE`] client (ms of added p50 over direct).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusyPollKind {
    /// sluice's added p50 minus its own with busy polling off (`sluice_sleep`): negative
    /// when polling saves.
    OverSleeping,
    /// sluice's added p50 minus HAProxy busy-polling's (`haproxy_busy`): the same trade,
    /// made always by the C relay.
    OverHaProxyBusy,
}

/// One busy-polling difference for one sluice pool size in one round. Informative: issue
/// 17's goals stay judged against plain HAProxy ([`goals`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BusyPoll {
    pub kind: BusyPollKind,
    pub round: usize,
    pub pool: usize,
    /// Pipelined sluice's added p50 minus the other relay's, ms.
    pub value: f64,
}

impl BusyPoll {
    /// The metadata key (without a round suffix), named like the latency goal's.
    pub fn key(&self) -> String {
        let p = self.pool;
        let other = match self.kind {
            BusyPollKind::OverSleeping => format!("{SLEEP}_p{p}"),
            BusyPollKind::OverHaProxyBusy => HAPROXY_BUSY.to_string(),
        };
        format!("overhead_added_p50_ms_sluice_p{p}_minus_{other}_{ONE}_client")
    }
}

/// Every busy-polling difference the rows give, round by round, at [`ONE`] client, for each
/// pool size sluice also ran at with busy polling off (P=4): sluice's added p50 minus its
/// own with busy polling off, then minus HAProxy busy-polling's (none for runs from before
/// these rows).
pub fn busy_poll(rows: &[&LevelResult]) -> Vec<BusyPoll> {
    let mut out = Vec::new();
    for round in rounds(rows) {
        for pool in pools_of(rows, SLEEP) {
            let added = |key: &str| find(rows, round, key, ONE).and_then(|r| added_p50_ms(rows, r));
            let Some(on) = added(&format!("sluice_p{pool}")) else {
                continue;
            };
            let others = [
                (
                    BusyPollKind::OverSleeping,
                    added(&format!("{SLEEP}_p{pool}")),
                ),
                (BusyPollKind::OverHaProxyBusy, added(HAPROXY_BUSY)),
            ];
            for (kind, other) in others {
                if let Some(other) = other {
                    out.push(BusyPoll {
                        kind,
                        round,
                        pool,
                        value: on - other,
                    });
                }
            }
        }
    }
    out
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// A per-query count of `key` at `clients` (`metric` picks it from a row), as the median over
/// the rounds that measured it.
pub fn median_of(
    rows: &[&LevelResult],
    key: &str,
    clients: usize,
    metric: fn(&LevelResult) -> Option<f64>,
) -> Option<f64> {
    let mut v: Vec<f64> = rows
        .iter()
        .filter(|r| r.clients == clients && key_of(r) == key)
        .filter_map(|r| metric(r))
        .collect();
    median(&mut v)
}

/// The metadata the goals and the per-target costs give: each goal's median over the rounds
/// (and each round's value when there are several), pipelining's and busy polling's the
/// same way, then every relay's CPU, syscalls and instructions per query and its added p50
/// at 1 client.
pub fn meta(rows: &[&LevelResult]) -> Vec<(String, String)> {
    // (key, round, value): the goals', then pipelining's, then busy polling's.
    let judged: Vec<(String, usize, f64)> = goals(rows)
        .iter()
        .map(|g| (g.key(), g.round, g.headline()))
        .chain(pipelining(rows).iter().map(|p| (p.key(), p.round, p.ratio)))
        .chain(
            feature_ratios(rows, Feature::Digests)
                .iter()
                .map(|p| (p.key(), p.round, p.ratio)),
        )
        .chain(busy_poll(rows).iter().map(|b| (b.key(), b.round, b.value)))
        .collect();
    let several = rounds(rows).len() > 1;
    let mut out = Vec::new();
    // Each key once, in first-seen order (the rounds repeat them).
    let mut keys: Vec<&String> = Vec::new();
    for (k, _, _) in &judged {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for key in keys {
        let mine: Vec<&(String, usize, f64)> = judged.iter().filter(|j| &j.0 == key).collect();
        let mut values: Vec<f64> = mine.iter().map(|j| j.2).collect();
        if let Some(m) = median(&mut values) {
            out.push((key.clone(), format!("{m:.4}")));
        }
        if several {
            for (_, round, value) in mine {
                out.push((format!("{key}_round{round}"), format!("{value:.4}")));
            }
        }
    }
    let mut targets: Vec<String> = rows.iter().map(|r| key_of(r)).collect();
    targets.sort();
    targets.dedup();
    type Metric = fn(&LevelResult) -> Option<f64>;
    let metrics: [(&str, Metric); 4] = [
        ("cpu_us_per_query", |r| r.cpu_us_per_query),
        ("server_cpu_us_per_query", |r| r.server_cpu_us_per_query),
        ("syscalls_per_query", |r| r.syscalls_per_query),
        ("instructions_per_query", |r| r.instructions_per_query),
    ];
    for t in &targets {
        for clients in [ONE, MANY] {
            for (name, metric) in metrics {
                if let Some(v) = median_of(rows, t, clients, metric) {
                    out.push((
                        format!("overhead_{t}_{name}_{clients}_clients"),
                        format!("{v:.2}"),
                    ));
                }
            }
        }
        let added = |r: &LevelResult| added_p50_ms(rows, r);
        let mut v: Vec<f64> = rows
            .iter()
            .filter(|r| r.clients == ONE && key_of(r) == *t)
            .filter_map(|r| added(r))
            .collect();
        if let Some(m) = median(&mut v) {
            out.push((
                format!("overhead_{t}_added_p50_ms_1_client"),
                format!("{m:.4}"),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values the metadata gives key `k` (one, if the key is unique).
    fn values_of<'a>(meta: &'a [(String, String)], k: &str) -> Vec<&'a str> {
        meta.iter()
            .filter(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// Every metadata key appears once.
    fn assert_keys_once(meta: &[(String, String)]) {
        let mut keys: Vec<&String> = meta.iter().map(|(k, _)| k).collect();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n, "{meta:?}");
    }

    /// A relay-cost table: direct, HAProxy, sluice P=4 and P=64 (QPS; CPU µs per query at 64
    /// clients), with p50s that give HAProxy +0.040 ms and sluice +0.035/+0.055 ms at 1 client.
    fn relay_cost_run(round: usize) -> Vec<LevelResult> {
        let row = |target: &str, pool: Option<usize>, clients, qps, p50_ms, cpu: Option<f64>| {
            LevelResult {
                experiment: "overhead".into(),
                target: target.into(),
                clients,
                pool_size: pool,
                qps,
                p50_ms,
                cpu_us_per_query: cpu,
                round: Some(round),
                ..LevelResult::default()
            }
        };
        vec![
            row("direct", None, 1, 21400.0, 0.045, None),
            row("haproxy", None, 1, 10300.0, 0.085, Some(60.0)),
            row("sluice", Some(4), 1, 11300.0, 0.080, Some(55.0)),
            row("sluice", Some(64), 1, 9300.0, 0.100, Some(65.0)),
            row("direct", None, 64, 28000.0, 2.2, None),
            row("haproxy", None, 64, 14900.0, 4.2, Some(34.7)),
            row("sluice", Some(4), 64, 12900.0, 4.9, Some(43.5)),
            row("sluice", Some(64), 64, 15050.0, 4.2, Some(27.0)),
        ]
    }

    #[test]
    fn issue_17s_numbers_miss_the_cpu_goal_at_both_pool_sizes() {
        let rows = relay_cost_run(1);
        let refs: Vec<&LevelResult> = rows.iter().collect();
        let g = goals(&refs);
        assert_eq!(g.len(), 6, "{g:?}");
        let get = |kind, pool| g.iter().find(|x| x.kind == kind && x.pool == pool).unwrap();
        let cpu4 = get(GoalKind::CpuRatio, 4);
        assert!(
            (cpu4.value - 43.5 / 34.7).abs() < 1e-9 && !cpu4.met,
            "{cpu4:?}"
        );
        let cpu64 = get(GoalKind::CpuRatio, 64);
        assert!(
            (cpu64.value - 27.0 / 34.7).abs() < 1e-9 && cpu64.met,
            "{cpu64:?}"
        );
        assert!(!get(GoalKind::QpsRatio, 4).met);
        assert!(get(GoalKind::QpsRatio, 64).met, "15,050 >= 14,900");
        let p4 = get(GoalKind::AddedP50, 4);
        assert!((p4.value - 0.035).abs() < 1e-9 && (p4.bound - 0.040).abs() < 1e-9 && p4.met);
        assert!(!get(GoalKind::AddedP50, 64).met);
        assert_eq!(
            cpu4.key(),
            "overhead_cpu_ratio_sluice_p4_over_haproxy_64_clients"
        );
        assert!((p4.headline() + 0.005).abs() < 1e-9);
    }

    #[test]
    fn ratios_stay_within_a_round_and_the_metadata_takes_their_median() {
        let mut rows = relay_cost_run(1);
        let mut second = relay_cost_run(2);
        // Round 2 ran on a slower host: every time doubled, the ratios did not move...
        for r in &mut second {
            r.cpu_us_per_query = r.cpu_us_per_query.map(|c| c * 2.0);
            r.qps /= 2.0;
        }
        // ...except sluice P=64's CPU, 1.0 x HAProxy's this time.
        second[7].cpu_us_per_query = Some(34.7 * 2.0);
        rows.extend(second);
        let refs: Vec<&LevelResult> = rows.iter().collect();
        assert_eq!(rounds(&refs), [1, 2]);
        let cpu64: Vec<f64> = goals(&refs)
            .into_iter()
            .filter(|g| g.kind == GoalKind::CpuRatio && g.pool == 64)
            .map(|g| g.value)
            .collect();
        assert_eq!(cpu64.len(), 2);
        assert!((cpu64[0] - 27.0 / 34.7).abs() < 1e-9 && (cpu64[1] - 1.0).abs() < 1e-9);
        let meta = meta(&refs);
        let get = |k: &str| {
            meta.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        let mid = (27.0 / 34.7 + 1.0) / 2.0;
        assert_eq!(
            get("overhead_cpu_ratio_sluice_p64_over_haproxy_64_clients"),
            Some(format!("{mid:.4}").as_str())
        );
        assert_eq!(
            get("overhead_cpu_ratio_sluice_p64_over_haproxy_64_clients_round2"),
            Some("1.0000")
        );
        assert_eq!(
            get("overhead_haproxy_added_p50_ms_1_client"),
            Some("0.0400")
        );
        // HAProxy's CPU: 34.7 and 69.4 µs, median 52.05.
        assert_eq!(
            get("overhead_haproxy_cpu_us_per_query_64_clients"),
            Some("52.05")
        );
        assert_eq!(get("overhead_direct_cpu_us_per_query_64_clients"), None);
    }

    /// [`relay_cost_run`] with serial sluice (pipelining off) measured too: more CPU at 64 clients
    /// than pipelined sluice at P=4 (58 against 43.5 µs), a little more at P=64 (30 against 27).
    fn with_serial(round: usize) -> Vec<LevelResult> {
        let mut rows = relay_cost_run(round);
        let serial = |pool, clients, qps, p50_ms, cpu| LevelResult {
            experiment: "overhead".into(),
            target: SERIAL.into(),
            clients,
            pool_size: Some(pool),
            qps,
            p50_ms,
            cpu_us_per_query: Some(cpu),
            round: Some(round),
            ..LevelResult::default()
        };
        rows.extend([
            serial(4, 1, 11000.0, 0.082, 57.0),
            serial(64, 1, 9000.0, 0.101, 66.0),
            serial(4, 64, 11000.0, 5.5, 58.0),
            serial(64, 64, 14000.0, 4.5, 30.0),
        ]);
        rows
    }

    #[test]
    fn serial_rows_give_pipelinings_ratio_and_leave_the_goal_to_pipelined_sluice() {
        let rows = with_serial(1);
        let refs: Vec<&LevelResult> = rows.iter().collect();
        assert_eq!(key_of(&rows[8]), "sluice_serial_p4");
        assert_eq!(key_of(&rows[11]), "sluice_serial_p64");
        assert_eq!(key("sluice", Some(64)), "sluice_p64");
        assert_eq!(key("haproxy", None), "haproxy");
        assert_eq!(sluice_pools(&refs), [4, 64]);
        // The goals are judged on pipelined sluice alone, as without the serial rows.
        let plain = relay_cost_run(1);
        let plain_refs: Vec<&LevelResult> = plain.iter().collect();
        assert_eq!(goals(&refs), goals(&plain_refs));
        let p = pipelining(&refs);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!((p[0].ratio - 43.5 / 58.0).abs() < 1e-9 && p[0].pool == 4);
        assert!((p[1].ratio - 27.0 / 30.0).abs() < 1e-9 && p[1].pool == 64);
        assert_eq!(
            p[0].key(),
            "overhead_cpu_ratio_sluice_p4_over_serial_64_clients"
        );
        assert!(pipelining(&plain_refs).is_empty());
        let meta = meta(&refs);
        let get = |k: &str| {
            meta.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(
            get("overhead_cpu_ratio_sluice_p4_over_serial_64_clients"),
            Some("0.7500")
        );
        assert_eq!(
            get("overhead_cpu_ratio_sluice_p64_over_serial_64_clients"),
            Some("0.9000")
        );
        assert_eq!(
            get("overhead_sluice_serial_p4_cpu_us_per_query_64_clients"),
            Some("58.00")
        );
        assert_eq!(
            get("overhead_sluice_serial_p64_added_p50_ms_1_client"),
            Some("0.0560")
        );
        assert_keys_once(&meta);
    }

    #[test]
    fn a_digests_off_row_gives_what_digests_cost_at_64_clients() {
        let mut rows = with_serial(1);
        rows.push(LevelResult {
            experiment: "overhead".into(),
            target: UNDIGESTED.into(),
            clients: MANY,
            pool_size: Some(4),
            qps: 12500.0,
            p50_ms: 5.0,
            cpu_us_per_query: Some(42.0),
            round: Some(1),
            ..LevelResult::default()
        });
        let refs: Vec<&LevelResult> = rows.iter().collect();
        assert_eq!(key_of(rows.last().unwrap()), "sluice_undigested_p4");
        let d = feature_ratios(&refs, Feature::Digests);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!((d[0].ratio - 43.5 / 42.0).abs() < 1e-9 && d[0].pool == 4);
        assert_eq!(
            d[0].key(),
            "overhead_cpu_ratio_sluice_p4_over_undigested_64_clients"
        );
        // Pipelining's ratios are untouched by the extra row.
        assert_eq!(pipelining(&refs).len(), 2);
        let meta = meta(&refs);
        assert!(meta.iter().any(|(k, v)| k
            == "overhead_cpu_ratio_sluice_p4_over_undigested_64_clients"
            && v == &format!("{:.4}", 43.5 / 42.0)));
        assert_keys_once(&meta);
    }

    #[test]
    fn pipelinings_ratio_stays_within_a_round_with_its_median_in_the_metadata() {
        let mut rows = with_serial(1);
        let mut second = with_serial(2);
        // Round 2: serial sluice P=4 at 64 clients twice as costly, so 43.5 / 116.
        second[10].cpu_us_per_query = Some(116.0);
        rows.extend(second);
        let refs: Vec<&LevelResult> = rows.iter().collect();
        let p4: Vec<f64> = pipelining(&refs)
            .into_iter()
            .filter(|p| p.pool == 4)
            .map(|p| p.ratio)
            .collect();
        assert_eq!(p4, [0.75, 0.375]);
        let meta = meta(&refs);
        let get = |k: &str| values_of(&meta, k);
        let key = "overhead_cpu_ratio_sluice_p4_over_serial_64_clients";
        assert_eq!(get(key), ["0.5625"]);
        assert_eq!(get(&format!("{key}_round1")), ["0.7500"]);
        assert_eq!(get(&format!("{key}_round2")), ["0.3750"]);
        // The goals' keys appear once each too, though every round repeats them.
        assert_eq!(
            get("overhead_cpu_ratio_sluice_p64_over_haproxy_64_clients_round2").len(),
            1
        );
    }

    /// [`with_serial`] with the busy-polling rows, at 1 client only: HAProxy busy-polling
    /// at +0.030 ms over direct (HAProxy +0.040), sluice P=4 with busy polling off at +0.065
    /// (with it, +0.035).
    fn with_busy_poll(round: usize) -> Vec<LevelResult> {
        let mut rows = with_serial(round);
        let row = |target: &str, pool, qps, p50_ms, cpu| LevelResult {
            experiment: "overhead".into(),
            target: target.into(),
            clients: ONE,
            pool_size: pool,
            qps,
            p50_ms,
            cpu_us_per_query: Some(cpu),
            round: Some(round),
            ..LevelResult::default()
        };
        rows.extend([
            row(HAPROXY_BUSY, None, 12500.0, 0.075, 80.0),
            row(SLEEP, Some(4), 8000.0, 0.110, 60.0),
        ]);
        rows
    }

    #[test]
    fn busy_polling_rows_give_their_lines_and_leave_the_goal_to_plain_haproxy() {
        let rows = with_busy_poll(1);
        let refs: Vec<&LevelResult> = rows.iter().collect();
        assert_eq!(key_of(&rows[12]), "haproxy_busy");
        assert_eq!(key_of(&rows[13]), "sluice_sleep_p4");
        assert_eq!(key(SLEEP, Some(4)), "sluice_sleep_p4");
        // Neither is a pipelined sluice nor HAProxy: goals and pipelining as without them.
        assert_eq!(sluice_pools(&refs), [4, 64]);
        let plain = relay_cost_run(1);
        let plain_refs: Vec<&LevelResult> = plain.iter().collect();
        assert_eq!(goals(&refs), goals(&plain_refs));
        let serial = with_serial(1);
        let serial_refs: Vec<&LevelResult> = serial.iter().collect();
        assert_eq!(pipelining(&refs), pipelining(&serial_refs));
        // At P=4 only (the one pool size with busy polling off): polling saves 0.030 ms,
        // and sluice is 0.005 ms behind HAProxy busy-polling.
        let b = busy_poll(&refs);
        assert_eq!(b.len(), 2, "{b:?}");
        assert_eq!((b[0].kind, b[0].pool), (BusyPollKind::OverSleeping, 4));
        assert!((b[0].value + 0.030).abs() < 1e-9, "{b:?}");
        assert_eq!((b[1].kind, b[1].pool), (BusyPollKind::OverHaProxyBusy, 4));
        assert!((b[1].value - 0.005).abs() < 1e-9, "{b:?}");
        assert_eq!(
            b[0].key(),
            "overhead_added_p50_ms_sluice_p4_minus_sluice_sleep_p4_1_client"
        );
        assert_eq!(
            b[1].key(),
            "overhead_added_p50_ms_sluice_p4_minus_haproxy_busy_1_client"
        );
        assert!(busy_poll(&serial_refs).is_empty());
        let meta = meta(&refs);
        let get = |k: &str| {
            meta.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get(&b[0].key()), Some("-0.0300"));
        assert_eq!(get(&b[1].key()), Some("0.0050"));
        assert_eq!(
            get("overhead_haproxy_busy_added_p50_ms_1_client"),
            Some("0.0300")
        );
        assert_eq!(
            get("overhead_sluice_sleep_p4_cpu_us_per_query_1_clients"),
            Some("60.00")
        );
        assert_eq!(
            get("overhead_haproxy_busy_cpu_us_per_query_64_clients"),
            None
        );
        // The goals' metadata is the same as without the new rows.
        let goal_keys = |m: &[(String, String)]| -> Vec<(String, String)> {
            m.iter()
                .filter(|(k, _)| {
                    k.contains("_over_haproxy_") || k.ends_with("_minus_haproxy_1_client")
                })
                .cloned()
                .collect()
        };
        assert_eq!(goal_keys(&meta), goal_keys(&super::meta(&plain_refs)));
        assert_keys_once(&meta);
    }

    #[test]
    fn busy_pollings_lines_stay_within_a_round_and_need_direct_and_sluice() {
        let mut rows = with_busy_poll(1);
        let mut second = with_busy_poll(2);
        // Round 2: sluice P=4 with busy polling off at +0.045 ms, so polling saves 0.010.
        second[13].p50_ms = 0.090;
        rows.extend(second);
        let refs: Vec<&LevelResult> = rows.iter().collect();
        let off: Vec<f64> = busy_poll(&refs)
            .into_iter()
            .filter(|b| b.kind == BusyPollKind::OverSleeping)
            .map(|b| b.value)
            .collect();
        assert_eq!(off.len(), 2);
        assert!(
            (off[0] + 0.030).abs() < 1e-9 && (off[1] + 0.010).abs() < 1e-9,
            "{off:?}"
        );
        let meta = meta(&refs);
        let get = |k: &str| values_of(&meta, k);
        let key = "overhead_added_p50_ms_sluice_p4_minus_sluice_sleep_p4_1_client";
        assert_eq!(get(key), ["-0.0200"]);
        assert_eq!(get(&format!("{key}_round1")), ["-0.0300"]);
        assert_eq!(get(&format!("{key}_round2")), ["-0.0100"]);
        // Without direct there is no added p50; without pipelined sluice nothing to compare.
        let no_direct: Vec<&LevelResult> = refs
            .iter()
            .copied()
            .filter(|r| r.target != "direct")
            .collect();
        assert!(busy_poll(&no_direct).is_empty());
        let no_sluice: Vec<&LevelResult> = refs
            .iter()
            .copied()
            .filter(|r| r.target != "sluice")
            .collect();
        assert!(busy_poll(&no_sluice).is_empty());
        // Without HAProxy busy-polling, the line against sluice with busy polling off alone.
        let no_busy: Vec<&LevelResult> = refs
            .iter()
            .copied()
            .filter(|r| r.target != HAPROXY_BUSY)
            .collect();
        let b = busy_poll(&no_busy);
        assert!(
            b.len() == 2 && b.iter().all(|b| b.kind == BusyPollKind::OverSleeping),
            "{b:?}"
        );
    }

    #[test]
    fn nothing_is_judged_without_haproxy_or_direct() {
        let rows: Vec<LevelResult> = relay_cost_run(1)
            .into_iter()
            .filter(|r| r.target != "haproxy")
            .collect();
        let refs: Vec<&LevelResult> = rows.iter().collect();
        assert!(goals(&refs).is_empty());
        let no_direct: Vec<LevelResult> = relay_cost_run(1)
            .into_iter()
            .filter(|r| r.target != "direct")
            .collect();
        let refs: Vec<&LevelResult> = no_direct.iter().collect();
        assert!(goals(&refs).iter().all(|g| g.kind != GoalKind::AddedP50));
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
    }
}
