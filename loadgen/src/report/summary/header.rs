//! The summary's head: the run, the server and its pinning, the table and query, the host's load, notes, the calibration, and what the table columns mean.

use std::fmt::Write as _;

use crate::report::results::Report;

/// Writes the head.
pub fn header(out: &mut String, rep: &Report) {
    let meta = |k: &str| rep.meta_value(k).unwrap_or("?");
    let _ = writeln!(
        out,
        "sluice loadgen run {}",
        rep.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "server: {} {} pinned to CPUs {}; loadgen on CPUs {} ({} runtime workers); host has {} cores ({})",
        meta("server_kind"), meta("server_version"), meta("server_cpus"), meta("loadgen_cpus"),
        meta("loadgen_worker_threads"), meta("host_cores"), meta("arch")
    );
    // A sysbench-only run has neither loadgen's table nor its columns.
    let sysbench_only = rep.sysbench_only();
    if !sysbench_only {
        let _ = writeln!(
            out,
            "table: {} rows, SCAN_W {}; query: {}",
            meta("rows"),
            meta("scan_w"),
            meta("query")
        );
    }
    let _ = writeln!(
        out,
        "host load average: {} at start, {} at end (other work on the host skews every number)",
        meta("host_loadavg_at_start"),
        meta("host_loadavg_at_end")
    );
    for note in &rep.notes {
        let _ = writeln!(out, "note: {note}");
    }
    if let Some(c) = &rep.calibration {
        let _ = writeln!(
            out,
            "calibration: serial single connection p50 {:.2} ms, p99 {:.2} ms, mean {:.2} ms over {} queries ({} rows per answer)",
            c.p50_ms, c.p99_ms, c.mean_ms, c.queries,
            c.rows_returned.map_or_else(|| "?".to_string(), |n| n.to_string())
        );
    }
    if sysbench_only {
        return;
    }
    let _ = writeln!(
        out,
        "\nColumns: served = clients that finished >= 1 query in the window; min/med/max = queries per client;\n\
         jain = Jain's fairness index (1 = even); inflt = requests unfinished when the window closed, oldest ms = the\n\
         oldest one's age then; p99+inflt = p99 counting those at their age; L/C = Little's law (QPS x mean latency)\n\
         over offered clients, ~1.0 in a closed loop when no time is lost; T_con/T_run = Threads_connected/running\n\
         sampled mid-window by a monitor connection (it counts itself)."
    );
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::report;
    use super::*;

    #[test]
    fn the_head_names_the_server_and_unknowns_show_as_question_marks() {
        let mut rep = report(
            vec![],
            &[("server_kind", "local"), ("server_version", "10.11")],
        );
        rep.notes.push("kept the existing reads_test".into());
        let mut out = String::new();
        header(&mut out, &rep);
        assert!(
            out.contains("server: local 10.11 pinned to CPUs ?"),
            "{out}"
        );
        assert!(out.contains("note: kept the existing reads_test"), "{out}");
        assert!(out.contains("Columns: served ="), "{out}");
        assert!(!out.contains("calibration:"), "{out}");
    }
}
