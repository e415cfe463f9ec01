//! The operator's takeaway: where the knee is, which pool size to run (the smallest whose
//! QPS is within the measured noise of the best), how wide that noise is, and what to expect.

use std::fmt::Write as _;

use crate::analysis::curve::{collapse_of, knee, Collapse};
use crate::analysis::pool::{band, recommend, Recommendation, NOISE_SIGMAS};
use crate::measure::level::LevelResult;
use crate::report::results::Report;

/// Writes the recommendation.
pub fn recommendation(out: &mut String, rep: &Report) {
    let a = rep.rows_of("A");
    let Some(Collapse { peak, worst, .. }) = collapse_of(&a) else {
        return;
    };
    let peak = knee(&a).cloned().unwrap_or(peak);
    let px = rep.rows_of("proxy");
    let c = rep.rows_of("C");
    let (source, rows) = if px.is_empty() {
        ("the in-process pool", c)
    } else {
        ("sluice", px)
    };
    let Some(rec) = recommend(&rows) else { return };
    let chosen = rec.chosen;
    let _ = writeln!(out, "\nRecommendation");
    let _ = writeln!(
        out,
        "The server's throughput knee is at about {} concurrent queries ({:.0} QPS, p99 {:.1} ms with one connection per client).\n\
         Run sluice with pool_size = {} in front of it: with {} clients through {} this run measured {:.0} QPS at a {:.1} ms p99,\n\
         {} of {} clients served, against {:.0} QPS at a {:.1} ms p99 for the same {} clients connecting directly.",
        peak.clients, peak.qps, peak.p99_ms,
        p(chosen), chosen.clients, source, chosen.qps, chosen.p99_ms, chosen.clients_served, chosen.clients,
        worst.qps, worst.p99_ms, worst.clients
    );
    let _ = writeln!(out, "{}", noise_words(&rec, &rows));
    let _ = writeln!(
        out,
        "Expect that QPS and tail while the query mix stays like this one; re-run `just bench` (or `loadgen bench --mysql-url ...`)\n\
         after hardware or workload changes, and keep max_backend_connections above pool_size by the sessions you expect to pin."
    );
}

fn p(r: &LevelResult) -> String {
    r.pool_size
        .map(|p| p.to_string())
        .unwrap_or_else(|| "?".into())
}

fn qps(r: &LevelResult) -> String {
    match r.qps_se {
        Some(se) => format!("P={} {:.0} +- {:.0} QPS", p(r), r.qps, se),
        None => format!("P={} {:.0} QPS", p(r), r.qps),
    }
}

/// How the pick relates to the noise: which P could not be told apart, and the band.
fn noise_words(rec: &Recommendation, rows: &[&LevelResult]) -> String {
    let how = format!(
        "{NOISE_SIGMAS:.0} standard errors of the difference,\neach from the QPS of the window's one-second slices"
    );
    let Some(band_qps) = rec.band else {
        return format!(
            "Noise: these rows carry no noise measurement (written before qps_se), so this is the pool with the most QPS,\n\
             or within 3 % of it the lowest p99 ({}); smaller pools may be as fast within this host's noise.",
            qps(rec.chosen)
        );
    };
    if rec.tied.len() > 1 {
        let list: Vec<String> = rec.tied.iter().map(|r| qps(r)).collect();
        let best = if std::ptr::eq(rec.chosen, rec.best) {
            String::new()
        } else {
            format!(
                ":\nthe best, P={}, is {:.0} QPS ahead, inside the band of +-{band_qps:.0} QPS between the two ({how})",
                p(rec.best),
                rec.best.qps - rec.chosen.qps
            )
        };
        return format!(
            "Noise: {} are indistinguishable within this run's noise{best}.\n\
             The smallest of them is recommended: a larger pool adds backend connections (and contention) for a gain\n\
             this run cannot show.",
            list.join(", ")
        );
    }
    // The pick is the best and nothing else is close: name the runner-up and its distance.
    let next = rows
        .iter()
        .filter(|r| !std::ptr::eq(**r, rec.best))
        .max_by(|x, y| x.qps.total_cmp(&y.qps));
    match next.and_then(|n| band(n, rec.best).map(|b| (n, b))) {
        Some((n, b)) => format!(
            "Noise: no other P is within it: the next best, {}, is {:.0} QPS behind {},\noutside the band of +-{b:.0} QPS ({how}).",
            qps(n),
            rec.best.qps - n.qps,
            qps(rec.best)
        ),
        None => format!("Noise: {} was the only pool size measured (band: {how}).", qps(rec.best)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{pooled, report, seed_curve};
    use super::*;

    #[test]
    fn sluice_rows_are_preferred_over_the_in_process_pool() {
        let mut rows = seed_curve();
        rows.extend([
            pooled("C", "pool", 8, 957.0, 42.06),
            pooled("proxy", "proxy", 4, 990.0, 30.0),
        ]);
        let mut out = String::new();
        recommendation(&mut out, &report(rows, &[]));
        assert!(
            out.contains("knee is at about 4 concurrent queries (1137 QPS"),
            "{out}"
        );
        assert!(
            out.contains("pool_size = 4 in front of it: with 512 clients through sluice"),
            "{out}"
        );
        let mut none = String::new();
        recommendation(&mut none, &report(vec![], &[]));
        assert!(none.is_empty());
    }

    /// A pool-size sweep whose knee is at 2 concurrent queries, and P=16's 140 QPS ahead of
    /// P=2's 106 QPS by noise. The summary must recommend 2 and say the two cannot be told apart.
    #[test]
    fn a_knee_of_2_and_p16_ahead_by_noise_recommends_2() {
        let curve = [
            (1, 60.0, 20.0),
            (2, 106.0, 25.0),
            (4, 104.0, 45.0),
            (512, 98.0, 9000.0),
        ];
        let mut rows: Vec<_> = curve
            .into_iter()
            .map(|(c, q, p99)| super::super::fixtures::row("A", "direct", c, q, p99))
            .collect();
        for (p, q, se) in [
            (1, 70.0, 6.0),
            (2, 106.0, 17.0),
            (4, 118.0, 16.0),
            (16, 140.0, 18.0),
        ] {
            let mut r = pooled("proxy", "proxy", p, q, 4000.0);
            r.qps_se = Some(se);
            rows.push(r);
        }
        let mut out = String::new();
        recommendation(&mut out, &report(rows, &[]));
        assert!(
            out.contains("knee is at about 2 concurrent queries"),
            "{out}"
        );
        assert!(
            out.contains("Run sluice with pool_size = 2 in front of it"),
            "{out}"
        );
        assert!(
            out.contains(
                "P=2 106 +- 17 QPS, P=4 118 +- 16 QPS, P=16 140 +- 18 QPS are indistinguishable"
            ),
            "{out}"
        );
        assert!(
            out.contains("the best, P=16, is 34 QPS ahead, inside the band of +-50 QPS"),
            "{out}"
        );
    }

    #[test]
    fn a_clear_winner_names_the_runner_up_outside_the_band() {
        let mut rows = seed_curve();
        for (p, q) in [(2, 106.0), (16, 140.0)] {
            let mut r = pooled("proxy", "proxy", p, q, 4000.0);
            r.qps_se = Some(2.0);
            rows.push(r);
        }
        let mut out = String::new();
        recommendation(&mut out, &report(rows, &[]));
        assert!(out.contains("pool_size = 16"), "{out}");
        assert!(out.contains("the next best, P=2 106 +- 2 QPS, is 34 QPS behind P=16 140 +- 2 QPS,\noutside the band of +-6 QPS"), "{out}");
    }
}
