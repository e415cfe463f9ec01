//! The digest table: keys, totals, the bound and its evictions, reset and resize.

use super::*;
use crate::classify::{digest, Quoting};

fn record(t: &Digests, d: &Digest, user: &str, schema: Option<&str>, server: usize, ms: u64) {
    t.record(&StatementRecord {
        digest: d,
        user,
        schema: schema.map(str::as_bytes),
        server,
        queued: Duration::from_micros(ms * 10),
        server_time: Duration::from_millis(ms),
        rows_sent: 2,
        rows_affected: 0,
        error: ms == 0,
        pinned: false,
        replica: server > 0,
        pipelined: true,
        retried: false,
        at: Instant::now(),
    });
}

fn d(sql: &str) -> Digest {
    digest(sql.as_bytes(), Quoting::Backslash)
}

#[test]
fn rows_are_per_digest_user_schema_and_server() {
    let t = Digests::new(true, 100);
    let a = d("SELECT c FROM t WHERE id = 1");
    for ms in [1, 2, 3] {
        record(&t, &a, "app", Some("shop"), 0, ms);
    }
    record(
        &t,
        &d("SELECT c FROM t WHERE id = 99"),
        "app",
        Some("shop"),
        0,
        4,
    );
    record(&t, &a, "app", Some("other"), 0, 1);
    record(&t, &a, "app", None, 0, 1);
    record(&t, &a, "report", Some("shop"), 0, 1);
    record(&t, &a, "app", Some("shop"), 1, 1);
    record(&t, &d("UPDATE t SET c = 2"), "app", Some("shop"), 0, 0);
    assert_eq!(t.len(), 6);
    let rows = t.rows(Order::Count, None);
    let top = &rows[0];
    assert_eq!(top.digest, Some(a.id));
    assert_eq!(
        (&*top.user, top.schema.as_deref()),
        ("app", Some(&b"shop"[..]))
    );
    assert_eq!(&*top.text, b"SELECT c FROM t WHERE id = ?");
    let n = &top.totals;
    assert_eq!((n.count, n.errors, n.rows_sent, n.pipelined), (4, 0, 8, 4));
    // The id = 99 statement has the same digest: four statements of 1-4 ms, queued 1 %.
    assert_eq!(n.total_us, 10_100, "queued + server time");
    assert_eq!(n.queued_us, 100);
    assert_eq!((n.min_us, n.max_us), (1_010, 4_040));
    assert!(top.first_seen.is_some() && top.first_seen.unwrap() <= top.last_seen);
    let replica: Vec<_> = rows.iter().filter(|r| r.server == 1).collect();
    assert_eq!((replica.len(), replica[0].totals.replica), (1, 1));
    let update = rows.iter().find(|r| r.text.starts_with(b"UPDATE")).unwrap();
    assert_eq!(update.totals.errors, 1);
    assert_eq!(t.rows(Order::TotalTime, Some(2)).len(), 2);
    assert!(
        rows.iter().all(|r| r.digest.is_some()),
        "no overflow row yet"
    );
}

#[test]
fn ordering_is_largest_first() {
    let t = Digests::new(true, 100);
    let (slow, many) = (d("SELECT SLEEP(1)"), d("SELECT 1"));
    record(&t, &slow, "app", None, 0, 900);
    for _ in 0..10 {
        record(&t, &many, "app", None, 0, 1);
    }
    let first = |o| t.rows(o, None)[0].digest;
    assert_eq!(first(Order::TotalTime), Some(slow.id));
    assert_eq!(first(Order::P99), Some(slow.id));
    assert_eq!(first(Order::Queued), Some(slow.id));
    assert_eq!(first(Order::Count), Some(many.id));
}

#[test]
fn a_hundred_thousand_unique_statements_keep_the_table_at_its_bound() {
    let t = Digests::new(true, 10_000);
    let hot = d("SELECT c FROM hot WHERE id = 1");
    for i in 0..100_000 {
        // Generated identifiers: no normalising folds these.
        record(
            &t,
            &d(&format!("SELECT c FROM t_{i} WHERE id = 1")),
            "app",
            None,
            0,
            1,
        );
        if i % 100 == 0 {
            record(&t, &hot, "app", None, 0, 1);
        }
    }
    assert_eq!(t.len(), 10_000);
    let rows = t.rows(Order::Count, None);
    assert_eq!(rows.len(), 10_001, "the rows and the overflow row");
    let overflow = rows.last().unwrap();
    assert_eq!(overflow.digest, None);
    // 100,001 rows (the hot one too) through 10,000 places.
    assert_eq!(t.evicted(), 90_001);
    let total: u64 = rows.iter().map(|r| r.totals.count).sum();
    assert_eq!(
        total, 101_000,
        "evicted rows' counts live on in the overflow row"
    );
    assert_eq!(overflow.totals.count, 90_001);
    assert_eq!(
        rows[0].digest,
        Some(hot.id),
        "a row seen often is never the least recent"
    );
    assert_eq!(rows[0].totals.count, 1000);
}

#[test]
fn reset_resize_and_off() {
    let t = Digests::new(true, 50);
    for i in 0..60 {
        record(&t, &d(&format!("SELECT {i} FROM t{i}")), "app", None, 0, 1);
    }
    assert_eq!((t.len(), t.evicted()), (50, 10));
    t.configure(true, 20);
    assert_eq!((t.len(), t.evicted()), (20, 40));
    t.reset();
    assert!(t.is_empty());
    assert!(
        t.rows(Order::TotalTime, None).is_empty(),
        "the overflow row goes too"
    );
    assert_eq!(t.evicted(), 40, "a total since start");
    t.configure(false, 20);
    assert!(!t.enabled());
    record(&t, &d("SELECT 1"), "app", None, 0, 1);
    assert!(t.is_empty());
    t.configure(true, 0);
    assert!(!t.enabled(), "size 0 is off");
    t.configure(true, 5);
    record(&t, &d("SELECT 1"), "app", None, 0, 1);
    assert_eq!(t.len(), 1);
}

#[test]
fn sessions_on_many_threads_count_exactly_while_readers_read() {
    let t = Arc::new(Digests::new(true, 1000));
    let shared = Arc::new(d("SELECT c FROM t WHERE id = 1"));
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (t, stop) = (t.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(Relaxed) {
                reads += t.rows(Order::TotalTime, Some(5)).len().min(1);
            }
            reads
        })
    };
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (t, shared) = (t.clone(), shared.clone());
            std::thread::spawn(move || {
                for i in 0..5_000 {
                    record(&t, &shared, "app", None, 0, 1);
                    record(
                        &t,
                        &d(&format!("SELECT {w} FROM t{}", i % 50)),
                        "app",
                        None,
                        0,
                        1,
                    );
                }
            })
        })
        .collect();
    writers.into_iter().for_each(|w| w.join().unwrap());
    stop.store(true, Relaxed);
    assert!(reader.join().unwrap() > 0);
    let rows = t.rows(Order::Count, None);
    assert_eq!(rows[0].digest, Some(shared.id));
    assert_eq!(rows[0].totals.count, 20_000);
    assert_eq!(rows.iter().map(|r| r.totals.count).sum::<u64>(), 40_000);
}

#[test]
fn stored_text_is_cut_on_a_character_boundary() {
    let text = "é".repeat(600);
    assert_eq!(cut(text.as_bytes(), 1024), 1024);
    assert_eq!(cut(text.as_bytes(), 1023), 1022);
    assert_eq!(cut(b"abc", 1024), 3);
    let t = Digests::new(true, 10);
    record(
        &t,
        &d(&format!("SELECT a{} FROM t", "é".repeat(900))),
        "app",
        None,
        0,
        1,
    );
    let row = &t.rows(Order::TotalTime, None)[0];
    assert!(row.text.len() <= STORED_TEXT);
    assert!(std::str::from_utf8(&row.text).is_ok());
}

/// What recording costs per statement, printed (`cargo test --release -p sluice --lib
/// digests::tests::record_cost -- --nocapture`); a benchmark, so it asserts only that it ran.
#[test]
fn record_cost() {
    let rounds = if cfg!(debug_assertions) {
        2_000
    } else {
        1_000_000
    };
    let t = Digests::new(true, 10_000);
    let known = d("SELECT c FROM sbtest1 WHERE id = 1");
    let at = Instant::now();
    let r = StatementRecord {
        digest: &known,
        user: "sbtest",
        schema: Some(b"sbtest"),
        server: 0,
        queued: Duration::from_micros(3),
        server_time: Duration::from_micros(80),
        rows_sent: 1,
        rows_affected: 0,
        error: false,
        pinned: false,
        replica: false,
        pipelined: false,
        retried: false,
        at,
    };
    let start = Instant::now();
    for _ in 0..rounds {
        t.record(std::hint::black_box(&r));
    }
    let known_row = start.elapsed() / rounds;
    t.configure(false, 10_000);
    let start = Instant::now();
    for _ in 0..rounds {
        t.record(std::hint::black_box(&r));
    }
    let off = start.elapsed() / rounds;
    println!("record into a known row: {known_row:?}; with digests off: {off:?}");
    assert_eq!(
        t.rows(Order::Count, None)[0].totals.count,
        u64::from(rounds)
    );
}
