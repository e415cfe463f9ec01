//! The topology's metrics: each server's role, lag, check state and exclusion reason, the
//! writer's presence and the alerts, all read from the monitor's last snapshot through
//! [`crate::topology_report`] (the same reports SHOW SERVERS shows).
//!
//! Routing is here too: `routed_total{server,address,route,why}` (every routed statement),
//! `reads_total{server,address}` (statements routed as reads, wherever they ran) and
//! `ryw_fallbacks_total` (reads sent to the writer because no replica had the session's
//! last write, or a wait for it timed out).
//!
//! Every series carries `server` (the index in `servers`) and `address`; a role or reason
//! is a label whose series is 1 for the current value, so `sluice_server_role{role="writer"}
//! == 1` finds the writer and an alert on `sluice_writer_present == 0` finds a cluster that
//! takes no writes.

use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use crate::context::Context;
use crate::topology_report::{
    alerts, exclusion_label, role_label, servers, CheckState, ALERT_KINDS, ROLE_LABELS,
};

/// Writes the topology families.
pub(super) fn encode(e: &mut DescriptorEncoder, ctx: &Context) -> fmt::Result {
    let config = ctx.config();
    let monitored = config.uses_topology();
    let addresses: Vec<String> = config.endpoints().iter().map(|x| x.to_string()).collect();
    let snapshot = ctx.topology();
    let reports = servers(&snapshot, &addresses, monitored);
    let index_text: Vec<String> = reports.iter().map(|r| r.index.to_string()).collect();

    {
        let mut m = e.encode_descriptor(
            "server_role",
            "Each server's role as the monitor last decided it (1 for the current role)",
            None,
            MetricType::Gauge,
        )?;
        for (r, index) in reports.iter().zip(&index_text) {
            let current = role_label(r.role);
            for role in ROLE_LABELS {
                let labels = [
                    ("server", index.as_str()),
                    ("address", r.address.as_str()),
                    ("role", role),
                ];
                let v = i64::from(role == current);
                ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
            }
        }
    }
    {
        let mut m = e.encode_descriptor(
            "server_up",
            "1 while the server's last monitor check answered (without a monitor: while its pool reaches it)",
            None,
            MetricType::Gauge,
        )?;
        for (r, index) in reports.iter().zip(&index_text) {
            let up = match r.state {
                CheckState::Up => true,
                CheckState::Down | CheckState::Unknown => false,
                CheckState::Unmonitored => ctx.pool_for(r.index).is_some_and(|p| p.backend_up()),
            };
            let labels = [("server", index.as_str()), ("address", r.address.as_str())];
            ConstGauge::new(i64::from(up)).encode(m.encode_family(&labels)?)?;
        }
    }
    {
        let mut m = e.encode_descriptor(
            "server_lag",
            "Replication lag along the server's chain of sources (0 for the writer; absent while unknown, e.g. Seconds_Behind_Master NULL)",
            Some(&Unit::Seconds),
            MetricType::Gauge,
        )?;
        for (r, index) in reports.iter().zip(&index_text) {
            if let Some(lag) = r.lag {
                let labels = [("server", index.as_str()), ("address", r.address.as_str())];
                ConstGauge::new(lag.as_secs_f64()).encode(m.encode_family(&labels)?)?;
            }
        }
    }
    {
        let mut m = e.encode_descriptor(
            "server_excluded",
            "1 while the server takes neither reads nor writes, labelled with why (reason=\"none\" and 0 otherwise)",
            None,
            MetricType::Gauge,
        )?;
        for (r, index) in reports.iter().zip(&index_text) {
            let (reason, v) = match r.excluded() {
                Some(why) => (exclusion_label(why), 1i64),
                None => ("none", 0),
            };
            let labels = [
                ("server", index.as_str()),
                ("address", r.address.as_str()),
                ("reason", reason),
            ];
            ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
        }
    }
    super::gauge(
        e,
        "writer_present",
        "1 while exactly one server is the writer; 0 while writes wait (no writer, or split brain)",
        i64::from(snapshot.topology.writer().is_some()),
    )?;
    let found = alerts(&snapshot, monitored);
    let by_kind = ALERT_KINDS
        .iter()
        .map(|k| (*k, found.iter().filter(|a| a.kind == *k).count() as i64));
    super::gauge_family(
        e,
        "topology_alerts",
        "Topology alerts in force, by kind (split brain, no writer, a writable replica, ...)",
        "kind",
        by_kind,
    )?;
    routing(e, ctx, &addresses)?;
    super::counter(
        e,
        "monitor_rounds",
        "Monitor rounds finished (stays 0 without a monitor)",
        snapshot.round,
    )
}

/// Why-labels of a statement routed to the writer that was still a read (it could have gone
/// to a replica): the session's write was not on any replica yet, no replica was usable,
/// `primary_reads = always`, or an unreadable `sluice:min_gtid` token.
const READ_FALLBACKS: [&str; 4] = [
    "ryw_fallback",
    "no_replica",
    "primary_reads",
    "unreadable_token",
];

fn is_read(route: &str, why: &str) -> bool {
    route == "replica" || route == "held" || READ_FALLBACKS.contains(&why)
}

/// The routing counters (C1's `Stats::routed` and `Stats::ryw_fallbacks`).
fn routing(e: &mut DescriptorEncoder, ctx: &Context, addresses: &[String]) -> fmt::Result {
    let routed = ctx.stats.routed_snapshot();
    let address = |i: usize| addresses.get(i).map_or("", String::as_str);
    {
        let mut m = e.encode_descriptor(
            "routed",
            "Statements routed, by server, route (writer, replica, held: a read-only transaction's server) and why",
            None,
            MetricType::Counter,
        )?;
        for ((server, route, why), n) in &routed {
            let index = server.to_string();
            let labels = [
                ("server", index.as_str()),
                ("address", address(*server)),
                ("route", route),
                ("why", why),
            ];
            ConstCounter::new(*n).encode(m.encode_family(&labels)?)?;
        }
    }
    {
        let mut m = e.encode_descriptor(
            "reads",
            "Statements routed as reads, by the server that ran them (replicas, and the writer when a read fell back to it)",
            None,
            MetricType::Counter,
        )?;
        for (index, addr) in addresses.iter().enumerate() {
            let n: u64 = routed
                .iter()
                .filter(|((server, route, why), _)| *server == index && is_read(route, why))
                .map(|(_, n)| n)
                .sum();
            let index = index.to_string();
            let labels = [("server", index.as_str()), ("address", addr.as_str())];
            ConstCounter::new(n).encode(m.encode_family(&labels)?)?;
        }
    }
    super::counter(
        e,
        "ryw_fallbacks",
        "Reads sent to the writer because no replica had the session's last write (read_your_writes), or a wait for it timed out",
        ctx.stats.ryw_fallbacks.load(std::sync::atomic::Ordering::Relaxed),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_replica_routes_and_read_fallbacks_to_the_writer() {
        assert!(is_read("replica", "read"));
        assert!(is_read("held", "read_only_transaction"));
        assert!(is_read("writer", "ryw_fallback"));
        assert!(is_read("writer", "no_replica"));
        assert!(!is_read("writer", "not_safe"));
        assert!(!is_read("writer", "in_transaction"));
        assert!(!is_read("writer", "split_off"));
    }
}
