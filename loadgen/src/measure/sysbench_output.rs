//! What sysbench 1.0 prints for a `run`, read back into numbers: its final statistics
//! ([`Summary`]), its latency histogram (`--histogram=on`) and the percentiles sysbench itself
//! would compute from it ([`percentile`]), its per-second lines (`--report-interval`,
//! [`Interval`]), the connections it could not open (`FATAL` lines), and the per-thread event
//! counts loadgen's wrapper script prints to stderr ([`thread_events`]).
//!
//! Every number is sysbench's own; nothing here measures. The parsers are tested on output
//! captured from the sysbench 1.0.20 installed by `scripts/install-test-deps.sh`
//! (`loadgen/testdata/sysbench/`).

/// The prefix of the wrapper script's per-thread line on stderr: `loadgen-thread <tid> <events>`.
pub const THREAD_LINE: &str = "loadgen-thread";

/// The line sysbench prints once every thread has connected and the clock starts.
pub const STARTED: &str = "Threads started!";

/// Whether `line` opens sysbench's final report: the histogram, else the SQL statistics.
/// Every event has finished by then.
pub fn is_report_start(line: &str) -> bool {
    line.starts_with("Latency histogram") || line.starts_with("SQL statistics:")
}

/// One `run`'s output.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Output {
    /// `sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)`.
    pub version: Option<String>,
    /// `Number of threads: N`.
    pub threads: Option<usize>,
    /// Whether every thread connected and the run started (`Threads started!`).
    pub started: bool,
    /// The final statistics; `None` when the run aborted.
    pub summary: Option<Summary>,
    /// `(value ms, count)` of every non-empty histogram bucket, in order.
    pub histogram: Vec<(f64, u64)>,
    /// The per-second lines.
    pub intervals: Vec<Interval>,
    /// Connections that could not be opened, by server error (`code`, message, how many);
    /// a connect that failed without an error line counts under code 0.
    pub refused: Vec<(u32, String, u64)>,
    /// Other MySQL errors sysbench gave up on (a prepare at a thread's start, a statement
    /// outside `--mysql-ignore-errors`), the same way.
    pub errors: Vec<(u32, String, u64)>,
    /// Threads whose start (`thread_init`: connect, prepare) failed.
    pub failed_threads: u64,
    /// Every `FATAL:` line, in order (sysbench's `(last message repeated N times)` not
    /// expanded).
    pub fatal: Vec<String>,
}

/// The last `FATAL:` line's kind, for sysbench's `(last message repeated N times)`.
#[derive(Debug, Clone, PartialEq)]
enum Last {
    Connect,
    Error {
        code: u32,
        message: String,
        refused: bool,
    },
    ThreadInit,
    Other,
}

/// The final statistics of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// `queries performed: read / write / other / total`.
    pub reads: u64,
    pub writes: u64,
    pub other: u64,
    pub total_queries: u64,
    /// `transactions: N (R per sec.)`: events, for the OLTP scripts.
    pub transactions: u64,
    pub tps: f64,
    /// `queries: N (R per sec.)`.
    pub queries: u64,
    pub qps: f64,
    /// `ignored errors: N`: statements that failed with an error in `--mysql-ignore-errors`
    /// (deadlocks by default); the event was restarted.
    pub ignored_errors: u64,
    /// `reconnects: N`.
    pub reconnects: u64,
    /// `total time: Ns`: from the start until the last event finished.
    pub total_time_s: f64,
    /// `total number of events`.
    pub events: u64,
    /// Latency of an event (a transaction), ms.
    pub lat_min_ms: f64,
    pub lat_avg_ms: f64,
    pub lat_max_ms: f64,
    /// `Nth percentile: V`: `(N, V ms)`.
    pub percentile: Option<(f64, f64)>,
    /// `events (avg/stddev)` per thread.
    pub thread_events_avg: f64,
    pub thread_events_stddev: f64,
}

/// One `--report-interval` line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Interval {
    /// `[ Ns ]`: seconds since the start.
    pub t_s: f64,
    /// `thds:` threads running.
    pub threads: usize,
    pub tps: f64,
    pub qps: f64,
    /// `(r/w/o: a/b/c)` per second.
    pub reads_ps: f64,
    pub writes_ps: f64,
    pub other_ps: f64,
    /// `lat (ms,N%): V`: `(N, V)`.
    pub lat_pct: f64,
    pub lat_ms: f64,
    pub err_ps: f64,
    pub reconn_ps: f64,
}

/// Reads a run's stdout.
pub fn parse(stdout: &str) -> Output {
    let mut out = Output::default();
    let mut summary = Summary::default();
    let mut has_summary = false;
    let mut in_histogram = false;
    let mut pending_connect = 0u64;
    let mut last = Last::Other;
    for line in stdout.lines() {
        let t = line.trim();
        if in_histogram {
            match histogram_line(t) {
                Some(bucket) => {
                    out.histogram.push(bucket);
                    continue;
                }
                None if t.starts_with("value") => continue,
                None => in_histogram = false,
            }
        }
        if t.starts_with("sysbench ") && out.version.is_none() {
            out.version = Some(t.to_string());
        } else if let Some(n) = t.strip_prefix("Number of threads:") {
            out.threads = n.trim().parse().ok();
        } else if t == STARTED {
            out.started = true;
        } else if t.starts_with("Latency histogram") {
            in_histogram = true;
        } else if t.starts_with('[') {
            out.intervals.extend(interval(t));
        } else if let Some(fatal) = t.strip_prefix("FATAL:") {
            let fatal = fatal.trim();
            out.fatal.push(fatal.to_string());
            last = fatal_kind(fatal, pending_connect);
            out.count(&last, 1, &mut pending_connect);
        } else if let Some(n) = repeated(t) {
            out.count(&last, n, &mut pending_connect);
        } else {
            has_summary |= summary_line(&mut summary, t);
        }
    }
    if pending_connect > 0 {
        tally(&mut out.refused, 0, "no error reported", pending_connect);
    }
    if has_summary {
        out.summary = Some(summary);
    }
    out
}

impl Output {
    /// Connections refused, in all.
    pub fn refused_total(&self) -> u64 {
        self.refused.iter().map(|(_, _, n)| n).sum()
    }

    /// Connections refused with `code`.
    pub fn refused_with(&self, code: u32) -> u64 {
        self.refused
            .iter()
            .filter(|(c, _, _)| *c == code)
            .map(|(_, _, n)| n)
            .sum()
    }

    /// Why the run has no statistics, in one line; `None` when it has them.
    pub fn failure(&self) -> Option<String> {
        if self.summary.is_some() {
            return None;
        }
        let threads = self.threads.map(|n| n.to_string()).unwrap_or("?".into());
        if !self.refused.is_empty() {
            let why: Vec<String> = self
                .refused
                .iter()
                .map(|(code, msg, n)| match code {
                    0 => format!("{n} {msg}"),
                    _ => format!("{n} with error {code} ({msg})"),
                })
                .collect();
            return Some(format!(
                "{} of {threads} connections refused: {}",
                self.refused_total(),
                why.join(", ")
            ));
        }
        if !self.errors.is_empty() {
            let why: Vec<String> = self
                .errors
                .iter()
                .map(|(code, msg, n)| format!("MySQL error {code} ({msg}) x{n}"))
                .collect();
            let threads = match self.failed_threads {
                0 => String::new(),
                n => format!("{n} of {threads} threads failed to start; "),
            };
            return Some(format!("sysbench aborted: {threads}{}", why.join(", ")));
        }
        Some(match self.fatal.last() {
            Some(last) => format!("sysbench aborted: {last}"),
            None => "sysbench printed no statistics".into(),
        })
    }
}

impl Output {
    /// Counts `n` lines of kind `last`.
    fn count(&mut self, last: &Last, n: u64, pending_connect: &mut u64) {
        match last {
            Last::Connect => *pending_connect += n,
            Last::Error {
                code,
                message,
                refused: true,
            } => {
                *pending_connect -= n.min(*pending_connect);
                tally(&mut self.refused, *code, message, n);
            }
            Last::Error { code, message, .. } => tally(&mut self.errors, *code, message, n),
            Last::ThreadInit => self.failed_threads += n,
            Last::Other => {}
        }
    }
}

/// What a `FATAL:` line says. A connect failure is followed by its error line; while one
/// waits for it (`pending_connect`), an error counts as a refusal.
fn fatal_kind(fatal: &str, pending_connect: u64) -> Last {
    if fatal.starts_with("unable to connect") {
        return Last::Connect;
    }
    if fatal.starts_with("`thread_init' function failed") {
        return Last::ThreadInit;
    }
    match sql_error(fatal) {
        Some((code, message)) => Last::Error {
            code,
            message,
            refused: pending_connect > 0,
        },
        None => Last::Other,
    }
}

/// `(last message repeated 2 times)` as 2.
fn repeated(t: &str) -> Option<u64> {
    let n = t
        .strip_prefix("(last message repeated ")?
        .strip_suffix(" times)")?;
    n.trim().parse().ok()
}

fn tally(into: &mut Vec<(u32, String, u64)>, code: u32, message: &str, n: u64) {
    match into.iter_mut().find(|(c, _, _)| *c == code) {
        Some(entry) => entry.2 += n,
        None => into.push((code, message.to_string(), n)),
    }
}

/// The server error in a `FATAL:` line: `error 1040: Too many connections`, `MySQL error:
/// 1461 "Can't create ..."`, or `mysql_stmt_execute() returned error 2013 (Lost connection
/// ...) for query '...'`.
fn sql_error(fatal: &str) -> Option<(u32, String)> {
    if let Some(rest) = fatal.strip_prefix("MySQL error:") {
        let (code, message) = rest.trim().split_once(' ')?;
        return Some((
            code.parse().ok()?,
            message.trim().trim_matches('"').to_string(),
        ));
    }
    if let Some(rest) = fatal.strip_prefix("error ") {
        let (code, message) = rest.split_once(':')?;
        return Some((code.trim().parse().ok()?, message.trim().to_string()));
    }
    let rest = &fatal[fatal.find("returned error ")? + "returned error ".len()..];
    let (code, rest) = rest.split_once(' ')?;
    let message = rest.strip_prefix('(')?.split_once(')')?.0;
    Some((code.parse().ok()?, message.to_string()))
}

/// `0.021 |****   3` as `(0.021, 3)`.
fn histogram_line(t: &str) -> Option<(f64, u64)> {
    let (value, rest) = t.split_once('|')?;
    let value = value.trim().parse().ok()?;
    let count = rest.split_whitespace().last()?.parse().ok()?;
    Some((value, count))
}

/// The first number in `s` (`171883 (57138.60 per sec.)` → 171883, `3.0073s` → 3.0073).
fn first_number(s: &str) -> Option<f64> {
    let token = s.split_whitespace().next()?;
    token.trim_end_matches('s').parse().ok()
}

/// The rate in `N (R per sec.)`.
fn per_sec(s: &str) -> Option<f64> {
    let inner = s.split_once('(')?.1;
    inner.split_whitespace().next()?.parse().ok()
}

/// `a/b` as two numbers.
fn pair(s: &str) -> Option<(f64, f64)> {
    let (a, b) = s.trim().split_once('/')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

/// Folds one line of the final statistics into `s`; returns whether it was one.
fn summary_line(s: &mut Summary, t: &str) -> bool {
    let Some((key, value)) = t.split_once(':') else {
        return false;
    };
    let value = value.trim();
    let n = || first_number(value);
    let count = || n().map(|v| v as u64);
    match key.trim() {
        "read" => s.reads = count().unwrap_or(0),
        "write" => s.writes = count().unwrap_or(0),
        "other" => s.other = count().unwrap_or(0),
        "total" => s.total_queries = count().unwrap_or(0),
        "transactions" => {
            s.transactions = count().unwrap_or(0);
            s.tps = per_sec(value).unwrap_or(0.0);
        }
        "queries" => {
            s.queries = count().unwrap_or(0);
            s.qps = per_sec(value).unwrap_or(0.0);
        }
        "ignored errors" => s.ignored_errors = count().unwrap_or(0),
        "reconnects" => s.reconnects = count().unwrap_or(0),
        "total time" => s.total_time_s = n().unwrap_or(0.0),
        "total number of events" => s.events = count().unwrap_or(0),
        "min" => s.lat_min_ms = n().unwrap_or(0.0),
        "avg" => s.lat_avg_ms = n().unwrap_or(0.0),
        "max" => s.lat_max_ms = n().unwrap_or(0.0),
        "events (avg/stddev)" => {
            (s.thread_events_avg, s.thread_events_stddev) = pair(value).unwrap_or_default();
        }
        k if k.ends_with("percentile") => {
            let pct = k.trim_end_matches("percentile").trim();
            let pct = pct.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            match (pct.parse::<f64>(), n()) {
                (Ok(p), Some(v)) => s.percentile = Some((p, v)),
                _ => return false,
            }
        }
        _ => return false,
    }
    true
}

/// The token right after `label` in `t`.
fn after<'a>(t: &'a str, label: &str) -> Option<&'a str> {
    let at = t.find(label)? + label.len();
    t[at..].split_whitespace().next()
}

/// `[ 1s ] thds: 16 tps: 57576.00 qps: 57576.00 (r/w/o: 57576.00/0.00/0.00) lat (ms,99%):
/// 0.92 err/s: 0.00 reconn/s: 0.00`.
fn interval(t: &str) -> Option<Interval> {
    let (stamp, rest) = t.strip_prefix('[')?.split_once(']')?;
    let num = |label: &str| after(rest, label).and_then(|v| v.parse::<f64>().ok());
    let rwo: Vec<f64> = after(rest, "(r/w/o:")?
        .trim_end_matches(')')
        .split('/')
        .filter_map(|v| v.parse().ok())
        .collect();
    let (lat_label, lat) = rest.split_once("lat (ms,")?;
    let _ = lat_label;
    let (pct, lat) = lat.split_once("%):")?;
    Some(Interval {
        t_s: stamp.trim().trim_end_matches('s').parse().ok()?,
        threads: num("thds:")? as usize,
        tps: num("tps:")?,
        qps: num("qps:")?,
        reads_ps: *rwo.first()?,
        writes_ps: *rwo.get(1)?,
        other_ps: *rwo.get(2)?,
        lat_pct: pct.trim().parse().ok()?,
        lat_ms: lat.split_whitespace().next()?.parse().ok()?,
        err_ps: num("err/s:")?,
        reconn_ps: num("reconn/s:")?,
    })
}

/// The `pct` percentile of the histogram, as sysbench computes its own from the same
/// buckets: the first bucket at which the running count reaches `round(events * pct / 100)`.
/// The buckets are the printed ones (their values rounded to a microsecond), so this agrees
/// with sysbench's own `--percentile` to its printed two decimals, give or take the rounding.
pub fn percentile(histogram: &[(f64, u64)], pct: f64) -> Option<f64> {
    let total: u64 = histogram.iter().map(|(_, n)| n).sum();
    if total == 0 {
        return None;
    }
    let want = (total as f64 * pct / 100.0 + 0.5).floor() as u64;
    let mut seen = 0;
    for &(value, n) in histogram {
        seen += n;
        if seen >= want {
            return Some(value);
        }
    }
    histogram.last().map(|(v, _)| *v)
}

/// The wrapper's per-thread event counts from stderr, indexed by thread id (0 for a thread
/// that printed nothing: it never finished); other lines are ignored.
pub fn thread_events(stderr: &str, threads: usize) -> Vec<u64> {
    let mut counts = vec![0; threads];
    for line in stderr.lines() {
        let mut parts = line.split_whitespace();
        if parts.next() != Some(THREAD_LINE) {
            continue;
        }
        let tid = parts.next().and_then(|v| v.parse::<usize>().ok());
        let events = parts.next().and_then(|v| v.parse::<u64>().ok());
        if let (Some(tid), Some(events)) = (tid, events) {
            if let Some(slot) = counts.get_mut(tid) {
                *slot = events;
            }
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    const POINT_SELECT_16: &str = include_str!("../../testdata/sysbench/point_select_16.out");
    const POINT_SELECT_16_ERR: &str = include_str!("../../testdata/sysbench/point_select_16.err");
    const READ_WRITE_64: &str = include_str!("../../testdata/sysbench/read_write_64.out");
    const READ_ONLY_1024: &str = include_str!("../../testdata/sysbench/read_only_1024.out");
    const READ_ONLY_1024_ERR: &str = include_str!("../../testdata/sysbench/read_only_1024.err");
    const REFUSED_1040: &str = include_str!("../../testdata/sysbench/refused_1040.out");
    const PREPARED_LIMIT: &str = include_str!("../../testdata/sysbench/prepared_limit_1024.out");

    #[test]
    fn a_point_select_run_reads_back_as_sysbench_printed_it() {
        let out = parse(POINT_SELECT_16);
        assert_eq!(
            out.version.as_deref(),
            Some("sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)")
        );
        assert_eq!(out.threads, Some(16));
        assert!(out.started);
        assert!(out.fatal.is_empty() && out.refused.is_empty());
        assert_eq!(out.failure(), None);
        let s = out.summary.clone().expect("statistics");
        assert_eq!((s.reads, s.writes, s.other), (103512, 0, 0));
        assert_eq!(s.total_queries, 103512);
        assert_eq!(
            (s.transactions, s.queries, s.events),
            (103512, 103512, 103512)
        );
        assert_eq!((s.tps, s.qps), (34402.26, 34402.26));
        assert_eq!((s.ignored_errors, s.reconnects), (0, 0));
        assert_eq!(s.total_time_s, 3.008);
        assert_eq!(
            (s.lat_min_ms, s.lat_avg_ms, s.lat_max_ms),
            (0.02, 0.46, 45.14)
        );
        assert_eq!(s.percentile, Some((99.0, 1.32)));
        assert_eq!(
            (s.thread_events_avg, s.thread_events_stddev),
            (6469.5, 73.87)
        );
        // Three per-second lines, one per second of --time=3.
        assert_eq!(out.intervals.len(), 3);
        let first = &out.intervals[0];
        assert_eq!((first.t_s, first.threads), (1.0, 16));
        assert_eq!(
            (first.lat_pct, first.err_ps, first.reconn_ps),
            (99.0, 0.0, 0.0)
        );
        assert_eq!(first.qps, first.reads_ps);
        // The histogram holds every event.
        let events: u64 = out.histogram.iter().map(|(_, n)| n).sum();
        assert_eq!(events, s.events);
        assert!(out.histogram.windows(2).all(|w| w[0].0 <= w[1].0));
    }

    #[test]
    fn the_histograms_percentile_is_sysbenchs_own() {
        // sysbench prints its --percentile with two decimals, from the same buckets the
        // histogram prints with three: the two agree to the rounding.
        for sample in [POINT_SELECT_16, READ_WRITE_64, READ_ONLY_1024] {
            let out = parse(sample);
            let (pct, reported) = out.summary.as_ref().unwrap().percentile.unwrap();
            let ours = percentile(&out.histogram, pct).unwrap();
            assert!(
                (ours - reported).abs() <= 0.006 + reported * 1e-4,
                "p{pct}: histogram {ours}, sysbench {reported}"
            );
            let p95 = percentile(&out.histogram, 95.0).unwrap();
            let p50 = percentile(&out.histogram, 50.0).unwrap();
            assert!(p50 <= p95 && p95 <= ours, "{p50} {p95} {ours}");
        }
        assert_eq!(percentile(&[], 99.0), None);
        let flat = [(1.0, 50), (2.0, 49), (3.0, 1)];
        assert_eq!(percentile(&flat, 50.0), Some(1.0));
        assert_eq!(percentile(&flat, 99.0), Some(2.0));
        assert_eq!(percentile(&flat, 100.0), Some(3.0));
    }

    #[test]
    fn ignored_errors_and_write_counts_are_read() {
        let s = parse(READ_WRITE_64).summary.unwrap();
        assert_eq!(s.ignored_errors, 1);
        assert_eq!((s.reads, s.writes, s.other), (34454, 9841, 4921));
        assert_eq!(s.reads + s.writes + s.other, s.total_queries);
        assert_eq!(s.total_queries, s.queries);
        assert!(s.tps > 0.0 && s.qps > s.tps * 15.0, "{s:?}");
    }

    #[test]
    fn every_thread_of_a_1024_thread_run_is_counted() {
        let out = parse(READ_ONLY_1024);
        let s = out.summary.unwrap();
        let counts = thread_events(READ_ONLY_1024_ERR, 1024);
        assert_eq!(counts.len(), 1024);
        assert_eq!(counts.iter().sum::<u64>(), s.transactions);
        assert!(counts.iter().all(|&n| n > 0));
        let small = thread_events(POINT_SELECT_16_ERR, 16);
        assert_eq!(small.iter().sum::<u64>(), 103512);
        // A thread that printed nothing counts as unserved; strangers are ignored.
        let partial = thread_events("loadgen-thread 1 7\nnoise\nloadgen-thread 9 3\n", 3);
        assert_eq!(partial, [0, 7, 0]);
    }

    #[test]
    fn a_prepare_over_the_servers_limit_is_counted_with_its_repeats() {
        // 1024 threads x 22 prepared statements each (oltp_read_only on 4 tables) against
        // MariaDB's default max_prepared_stmt_count of 16382.
        let out = parse(PREPARED_LIMIT);
        assert_eq!(
            (out.threads, out.started, out.summary.is_some()),
            (Some(1024), false, false)
        );
        assert!(out.refused.is_empty());
        let msg =
            "Can't create more than max_prepared_stmt_count statements (current value: 16382)";
        // 318 error lines; 314 thread_init lines and "(last message repeated 2 times)" after
        // one. Lines of different threads interleave, so the two counts need not agree.
        assert_eq!(out.errors, [(1461, msg.to_string(), 318)]);
        assert_eq!(out.failed_threads, 316);
        assert_eq!(
            out.failure().unwrap(),
            format!("sysbench aborted: 316 of 1024 threads failed to start; MySQL error 1461 ({msg}) x318")
        );
    }

    #[test]
    fn refused_connections_are_counted_by_error() {
        let out = parse(REFUSED_1040);
        assert_eq!(out.threads, Some(64));
        assert!(!out.started);
        assert_eq!(out.summary, None);
        assert_eq!(out.refused_total(), 24);
        assert_eq!(out.refused_with(1040), 24);
        assert_eq!(
            out.failure().unwrap(),
            "24 of 64 connections refused: 24 with error 1040 (Too many connections)"
        );
        assert_eq!(
            out.fatal.last().map(String::as_str),
            Some("Thread initialization failed!")
        );
        assert_eq!((out.failed_threads, out.errors.len()), (24, 0));
        let aborted = parse("sysbench 1.0.20\nFATAL: mysql_stmt_execute() returned error 2013\n");
        assert_eq!(
            aborted.failure().unwrap(),
            "sysbench aborted: mysql_stmt_execute() returned error 2013"
        );
        let lost = parse(
            "FATAL: mysql_stmt_execute() returned error 2013 (Lost connection to MySQL server during query) for query 'SELECT 1'\n\
             (last message repeated 2 times)\n",
        );
        assert_eq!(
            lost.errors,
            [(
                2013,
                "Lost connection to MySQL server during query".into(),
                3
            )]
        );
        assert_eq!(
            parse("").failure().unwrap(),
            "sysbench printed no statistics"
        );
        assert!(is_report_start(
            "Latency histogram (values are in milliseconds)"
        ));
        assert!(is_report_start("SQL statistics:"));
        assert!(!is_report_start("Threads started!"));
    }
}
