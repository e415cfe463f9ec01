//! Fairness: which closed-loop rows served only some clients, and how to read them.

use std::fmt::Write as _;

use crate::measure::level::LevelResult;

/// Writes the fairness notes for `rows`.
pub fn fairness(out: &mut String, rows: &[LevelResult]) {
    let poor: Vec<&LevelResult> = rows
        .iter()
        // Open-loop counts follow the Poisson arrivals, so uneven counts there are expected.
        .filter(|r| r.arrival == "closed")
        .filter(|r| r.clients > 1 && (r.clients_served < r.clients || r.jain_index < 0.8))
        .collect();
    let _ = writeln!(out, "\nFairness");
    let _ = writeln!(
        out,
        "(Open-loop rows and F's closed+open rows are not judged here: Poisson arrivals and shed statements make\n\
         uneven counts expected; F's summary above gives its clients served.)"
    );
    if poor.is_empty() {
        let _ = writeln!(out, "Every client of every row finished queries in its window, and Jain's index stayed >= 0.8.");
        return;
    }
    let _ = writeln!(
        out,
        "A row's QPS and percentiles describe only the queries that finished. When some clients finished nothing\n\
         (served < clients) or the counts are lopsided (low Jain index), the percentiles are those of the lucky clients;\n\
         the starved clients' waits show up only in 'inflt', 'oldest ms' and 'p99+inflt'. Read those rows as\n\
         'this many users were served at this latency while the rest waited at least this long', not as everyone's experience."
    );
    for r in poor {
        let _ = writeln!(
            out,
            "  {} {} C={}{}: {} of {} clients served, queries per client {}..{} (median {}), Jain {:.2}; oldest unfinished {:.0} ms",
            r.experiment, r.target, r.clients,
            r.pool_size.map(|p| format!(" P={p}")).unwrap_or_default(),
            r.clients_served, r.clients, r.client_queries_min, r.client_queries_max, r.client_queries_median,
            r.jain_index, r.oldest_inflight_ms
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::row;
    use super::*;

    #[test]
    fn only_closed_loop_rows_with_starved_clients_are_named() {
        let mut starved = row("A", "direct", 512, 177.0, 8356.0);
        (starved.clients_served, starved.jain_index) = (334, 0.31);
        let mut open = starved.clone();
        open.arrival = "open".into();
        let mut out = String::new();
        fairness(
            &mut out,
            &[row("A", "direct", 8, 185.0, 78.0), starved, open],
        );
        assert!(
            out.contains("  A direct C=512: 334 of 512 clients served"),
            "{out}"
        );
        assert_eq!(out.matches("C=512").count(), 1, "{out}");
        let mut fine = String::new();
        fairness(&mut fine, &[row("A", "direct", 8, 185.0, 78.0)]);
        assert!(
            fine.contains("Every client of every row finished queries"),
            "{fine}"
        );
    }
}
