//! Experiment S: text and prepared statements, direct and through sluice, with and without session state; the replays sluice needed.

use std::fmt::Write as _;

use super::table::table;
use crate::measure::stats::ratio;
use crate::report::results::Report;

/// Writes S's table and lines.
pub fn sessions(out: &mut String, rep: &Report) {
    let sx = rep.rows_of("S");
    if !sx.is_empty() {
        let _ = writeln!(
            out,
            "\nExperiment S: the knee query as SQL text and as prepared statements, directly over P \
             connections and through sluice; `+set` clients first set their own time zone and NAMES"
        );
        table(out, &sx, "target", |r| r.target.clone());
        for r in sx.iter().filter(|r| r.target.starts_with("sluice")) {
            let get = |what: &str| rep.meta_value(&format!("sessions_{}_{what}", r.target));
            if let (Some(ratio), Some(replays), Some(pins), Some(opened)) = (
                get("replays_per_statement"),
                get("replays"),
                get("pins"),
                get("backends_opened"),
            ) {
                let _ = writeln!(
                    out,
                    "  {}: {replays} replays ({ratio} per statement), {pins} pins, {opened} backend connections opened",
                    r.target
                );
            }
        }
        let qps = |t: &str| sx.iter().find(|r| r.target == t).map(|r| r.qps);
        for (a, b) in [
            ("sluice-text", "direct-text"),
            ("sluice-prepared", "direct-prepared"),
            ("sluice-prepared", "sluice-text"),
            ("sluice-prepared+set", "sluice-prepared"),
        ] {
            if let (Some(x), Some(y)) = (qps(a), qps(b)) {
                let _ = writeln!(out, "  QPS {a} / {b}: {:.3}", ratio(x, y));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{report, row};
    use super::*;

    #[test]
    fn sluice_rows_report_replays_and_the_ratios() {
        let rep = report(
            vec![
                row("S", "direct-text", 4, 98.0, 60.0),
                row("S", "sluice-text", 512, 96.0, 6000.0),
            ],
            &[
                ("sessions_sluice-text_replays", "4"),
                ("sessions_sluice-text_replays_per_statement", "0.0027"),
                ("sessions_sluice-text_pins", "0"),
                ("sessions_sluice-text_backends_opened", "4"),
            ],
        );
        let mut out = String::new();
        sessions(&mut out, &rep);
        assert!(out.contains("  sluice-text: 4 replays (0.0027 per statement), 0 pins, 4 backend connections opened"), "{out}");
        assert!(
            out.contains("  QPS sluice-text / direct-text: 0.980"),
            "{out}"
        );
        assert!(!out.contains("sluice-prepared /"), "{out}");
    }
}
