//! Digests and query rules in /metrics.
//!
//! Digests: the table's size and evictions, and for the top `metrics_digest_top` rows by
//! total time (so the number of series stays bounded whatever the workload) their
//! statements, errors, time, queued time, rows and p99, labelled `digest`, `user`, `schema`
//! and `server`; `digest_info{digest,digest_text}` names each shown digest once.
//!
//! Rules: `rule_hits_total{rule,name}` and `rule_events_total{rule,name,event}` with event
//! `blocked`, `timed_out`, `throttled`, `queue_timeout`, `overridden`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::Ordering::Relaxed;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use crate::context::Context;
use crate::digests::{DigestRow, Order};

/// Characters of a digest's text in its `digest_info` label.
const LABEL_TEXT: usize = 100;

pub(super) fn encode(e: &mut DescriptorEncoder, ctx: &Context) -> fmt::Result {
    {
        let m = e.encode_descriptor(
            "digests",
            "Rows in the digest table",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(ctx.digests.len() as i64).encode(m)?;
    }
    {
        let help = "Digest rows evicted (least recently seen) to keep digest_table_size; their numbers join the overflow row";
        let m = e.encode_descriptor("digests_evicted", help, None, MetricType::Counter)?;
        ConstCounter::new(ctx.digests.evicted()).encode(m)?;
    }
    let top = ctx.config().metrics_digest_top as usize;
    if top > 0 {
        let rows: Vec<DigestRow> = ctx
            .digests
            .rows(Order::TotalTime, Some(top))
            .into_iter()
            .filter(|r| r.digest.is_some())
            .collect();
        digest_families(e, &rows)?;
    }
    rule_families(e, ctx)
}

fn digest_families(e: &mut DescriptorEncoder, rows: &[DigestRow]) -> fmt::Result {
    let labels: Vec<[(&str, String); 4]> = rows
        .iter()
        .map(|r| {
            [
                (
                    "digest",
                    r.digest.map(|d| d.to_string()).unwrap_or_default(),
                ),
                ("user", r.user.to_string()),
                (
                    "schema",
                    r.schema
                        .as_deref()
                        .map(|s| String::from_utf8_lossy(s).into_owned())
                        .unwrap_or_default(),
                ),
                ("server", r.server.to_string()),
            ]
        })
        .collect();
    let seconds = |us: u64| us as f64 / 1e6;
    type Pick = fn(&DigestRow) -> u64;
    let counts: [(&str, &str, Pick); 3] = [
        (
            "digest_statements",
            "Statements of the digest (top digests by total time)",
            |r| r.totals.count,
        ),
        (
            "digest_errors",
            "Statements of the digest answered with an error",
            |r| r.totals.errors,
        ),
        (
            "digest_rows_sent",
            "Result rows the digest's statements sent",
            |r| r.totals.rows_sent,
        ),
    ];
    for (name, help, pick) in counts {
        let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (r, l) in rows.iter().zip(&labels) {
            ConstCounter::new(pick(r)).encode(m.encode_family(l)?)?;
        }
    }
    let times: [(&str, &str, Pick); 2] = [
        (
            "digest_time",
            "Time of the digest's statements, queued and on the server",
            |r| r.totals.total_us,
        ),
        (
            "digest_queued",
            "Time the digest's statements queued for an execution slot",
            |r| r.totals.queued_us,
        ),
    ];
    for (name, help, pick) in times {
        let mut m = e.encode_descriptor(name, help, Some(&Unit::Seconds), MetricType::Counter)?;
        for (r, l) in rows.iter().zip(&labels) {
            ConstCounter::new(seconds(pick(r))).encode(m.encode_family(l)?)?;
        }
    }
    {
        let help = "The digest's p99 statement time since its row began (25 % buckets)";
        let mut m =
            e.encode_descriptor("digest_p99", help, Some(&Unit::Seconds), MetricType::Gauge)?;
        for (r, l) in rows.iter().zip(&labels) {
            ConstGauge::new(seconds(r.totals.p99_us)).encode(m.encode_family(l)?)?;
        }
    }
    let mut texts = BTreeMap::new();
    for r in rows {
        if let Some(d) = r.digest {
            let text: String = String::from_utf8_lossy(&r.text)
                .chars()
                .take(LABEL_TEXT)
                .collect();
            texts.entry(d.to_string()).or_insert(text);
        }
    }
    let help = "The normalised text of each digest shown (its first characters); always 1";
    let mut m = e.encode_descriptor("digest_info", help, None, MetricType::Gauge)?;
    for (digest, text) in &texts {
        let l = [("digest", digest.as_str()), ("digest_text", text.as_str())];
        ConstGauge::new(1i64).encode(m.encode_family(&l)?)?;
    }
    Ok(())
}

fn rule_families(e: &mut DescriptorEncoder, ctx: &Context) -> fmt::Result {
    let Some(set) = ctx.rules() else {
        return Ok(());
    };
    let labels: Vec<(String, String)> = set
        .rules()
        .iter()
        .enumerate()
        .map(|(i, r)| (i.to_string(), r.label(i)))
        .collect();
    {
        let help = "Statements each query rule decided";
        let mut m = e.encode_descriptor("rule_hits", help, None, MetricType::Counter)?;
        for (r, (i, name)) in set.rules().iter().zip(&labels) {
            let l = [("rule", i.as_str()), ("name", name.as_str())];
            ConstCounter::new(r.counters.hits.load(Relaxed)).encode(m.encode_family(&l)?)?;
        }
    }
    let help = "What query rules did to their statements: blocked, timed_out, throttled (queued at max_concurrency), queue_timeout, overridden (route not followed)";
    let mut m = e.encode_descriptor("rule_events", help, None, MetricType::Counter)?;
    for (r, (i, name)) in set.rules().iter().zip(&labels) {
        let c = &r.counters;
        for (event, n) in [
            ("blocked", &c.blocked),
            ("timed_out", &c.timed_out),
            ("throttled", &c.throttled),
            ("queue_timeout", &c.queue_timeouts),
            ("overridden", &c.overridden),
        ] {
            let l = [
                ("rule", i.as_str()),
                ("name", name.as_str()),
                ("event", event),
            ];
            ConstCounter::new(n.load(Relaxed)).encode(m.encode_family(&l)?)?;
        }
    }
    Ok(())
}
