//! What loadgen itself cost at its largest level, and a warning for rows where it may have shaped the result.

use std::fmt::Write as _;

use crate::measure::level::LevelResult;

/// Writes the load generator's cost for `rows`.
pub fn cost(out: &mut String, rows: &[LevelResult]) {
    let _ = writeln!(out, "\nLoad generator cost");
    let Some(biggest) = rows
        .iter()
        .filter(|r| r.experiment == "A" || r.experiment == "C")
        .max_by_key(|r| r.clients)
    else {
        return;
    };
    let _ =
        writeln!(
        out,
        "At {} clients ({} {}): {:.1} us loadgen CPU per query, {:.1}% of one core, RSS {:.1} MiB.",
        biggest.clients, biggest.experiment, biggest.target, biggest.loadgen_cpu_us_per_query,
        biggest.loadgen_cpu_pct, biggest.loadgen_rss_mib
    );
    for r in rows.iter().filter(|r| r.loadgen_cpu_pct > 30.0) {
        let _ = writeln!(
            out,
            "WARNING: {} {} C={}: loadgen used {:.0}% of a core (> 30%); it may have shaped this row.",
            r.experiment, r.target, r.clients, r.loadgen_cpu_pct
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::row;
    use super::*;

    #[test]
    fn the_largest_level_is_reported_and_a_busy_loadgen_warned_about() {
        let mut big = row("C", "pool", 512, 179.0, 3752.0);
        (
            big.loadgen_cpu_us_per_query,
            big.loadgen_cpu_pct,
            big.loadgen_rss_mib,
        ) = (99.0, 1.8, 32.0);
        let mut busy = row("overhead", "direct", 64, 15000.0, 9.7);
        busy.loadgen_cpu_pct = 45.0;
        let mut out = String::new();
        cost(&mut out, &[row("A", "direct", 1, 118.0, 10.8), big, busy]);
        assert!(out.contains("At 512 clients (C pool): 99.0 us loadgen CPU per query, 1.8% of one core, RSS 32.0 MiB."), "{out}");
        assert!(
            out.contains("WARNING: overhead direct C=64: loadgen used 45% of a core"),
            "{out}"
        );
    }
}
