//! Pipelining (`pipeline_depth`): stateless reads of several sessions written to one
//! backend at once. Each test holds the only execution slot (P=1) with a statement that is
//! never pipelined, so that the reads queued behind it form one batch whose make-up the
//! test knows, then checks what each client got.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use sluice::config::ServerCpus;
use sluice::{Config, ProxyHandle};

use crate::harness::*;

/// A read that takes a while on the server and is pipelined (a join of two sequences:
/// builtins only, no SLEEP()), and its answer.
const SLOW_READ: &str = "SELECT SUM(a.seq * b.seq) FROM seq_1_to_2500 a, seq_1_to_2500 b";
const SLOW_SUM: i64 = 3_126_250 * 3_126_250;

async fn proxy(pool_size: u32) -> ProxyHandle {
    let mut cfg = config(pool_size);
    cfg.pipeline_depth = 8;
    start(cfg).await
}

fn batches(proxy: &ProxyHandle) -> u64 {
    proxy.context().stats.pipeline.batches.load(Relaxed)
}

/// Holds the only slot for `secs` with a statement that is never pipelined.
fn hold_slot(mut c: Conn, secs: f64) -> tokio::task::JoinHandle<Conn> {
    tokio::spawn(async move {
        c.query_drop(format!("DO SLEEP({secs})")).await.unwrap();
        c
    })
}

/// What a queued read's task gives back: its connection, its result, and how long it took.
type Read = tokio::task::JoinHandle<(Conn, Result<Option<i64>, mysql_async::Error>, Duration)>;

/// Starts each `(connection, sql)` 50 ms after the previous one, so that the reads queue for
/// the slot in this order (and, behind a held slot, form one batch).
async fn queued_reads(reads: Vec<(Conn, &'static str)>) -> Vec<Read> {
    let mut tasks = Vec::new();
    for (mut c, sql) in reads {
        if !tasks.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tasks.push(tokio::spawn(async move {
            let at = Instant::now();
            let r = c.query_first(sql).await;
            (c, r, at.elapsed())
        }));
    }
    tasks
}

/// `clients` connections reading as fast as they can until `stop`, each checking that every
/// answer is its own; each task gives back how many reads it made.
async fn readers(
    proxy: &ProxyHandle,
    clients: u64,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<u64>> {
    let mut tasks = Vec::new();
    for client in 0..clients {
        let mut c = connect(proxy, None).await;
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Relaxed) {
                let v: u64 = c
                    .query_first(format!("SELECT {client} * 1000000 + {n}"))
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(
                    v,
                    client * 1_000_000 + n,
                    "every answer is the client's own"
                );
                n += 1;
            }
            c.disconnect().await.unwrap();
            n
        }));
    }
    tasks
}

/// A fresh database `db` with table `t`: 300 rows of `id`, a string `v` of `id % 3000`
/// letters and `d = id / 4`; the connection that made it.
async fn rows_table(proxy: &ProxyHandle, db: &str) -> Conn {
    fresh_db(db).await;
    let mut setup = connect(proxy, Some(db)).await;
    setup
        .query_drop("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(3000), d DOUBLE)")
        .await
        .unwrap();
    setup
        .query_drop(
            "INSERT INTO t SELECT seq, REPEAT(CHAR(65 + seq % 26), seq % 3000), seq / 4 \
             FROM seq_1_to_300",
        )
        .await
        .unwrap();
    setup
}

async fn id_of(c: &mut Conn) -> u64 {
    c.query_first("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_gets_its_own_answer_from_a_shared_backend() {
    let proxy = proxy(2).await;
    let setup = rows_table(&proxy, "t_pipe_answers").await;
    // One client in another time zone: its reads must never batch with the others'.
    let mut zoned = connect(&proxy, Some("t_pipe_answers")).await;
    zoned.query_drop("SET time_zone = '+05:00'").await.unwrap();
    let zoned_task = tokio::spawn(async move {
        for _ in 0..300 {
            let tz: String = zoned
                .query_first("SELECT @@time_zone")
                .await
                .unwrap()
                .unwrap();
            assert_eq!(tz, "+05:00");
        }
        zoned
    });
    let mut tasks = Vec::new();
    for client in 0..24u32 {
        let mut c = connect(&proxy, Some("t_pipe_answers")).await;
        tasks.push(tokio::spawn(async move {
            for i in 0..150u32 {
                let id = (client * 37 + i) % 300 + 1;
                match i % 4 {
                    // A row of varying size, the client's own marker beside it.
                    0 | 1 => {
                        let row: (u32, u32, String) = c
                            .query_first(format!("SELECT {client}, id, v FROM t WHERE id = {id}"))
                            .await
                            .unwrap()
                            .unwrap();
                        assert_eq!((row.0, row.1, row.2.len() as u32), (client, id, id % 3000));
                    }
                    // Several rows.
                    2 => {
                        let rows: Vec<(u32, u32)> = c
                            .query(format!(
                                "SELECT {client}, id FROM t WHERE id <= {}",
                                i % 7 + 1
                            ))
                            .await
                            .unwrap();
                        assert_eq!(rows.len() as u32, i % 7 + 1);
                        assert!(rows.iter().all(|r| r.0 == client));
                    }
                    // An error in the middle of a batch answers only its own client.
                    _ => {
                        let err = c
                            .query_drop(format!("SELECT {client} FROM no_such_table_{client}"))
                            .await
                            .unwrap_err();
                        assert_eq!(code_of(&err), Some(1146), "{err}");
                        assert!(err.to_string().contains(&format!("no_such_table_{client}")));
                    }
                }
            }
            c
        }));
    }
    for t in tasks {
        t.await.unwrap().disconnect().await.unwrap();
    }
    zoned_task.await.unwrap().disconnect().await.unwrap();
    let s = &proxy.context().stats.pipeline;
    eprintln!(
        "24 clients x 150 reads at P=2: {} batches carrying {} statements, {} retries",
        s.batches.load(Relaxed),
        s.statements.load(Relaxed),
        s.retries.load(Relaxed)
    );
    assert!(batches(&proxy) > 0, "the reads were pipelined");
    setup.disconnect().await.unwrap();
    assert_drained(&proxy, Duration::from_secs(5)).await;
    proxy.shutdown().await;
}

/// A statement queued for the slot between a batch's leader and a later read keeps its
/// place: the read does not join the batch, and sees the write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_never_overtakes_a_statement_queued_before_it() {
    fresh_db("t_pipe_fifo").await;
    let proxy = proxy(1).await;
    let mut setup = connect(&proxy, Some("t_pipe_fifo")).await;
    setup.query_drop("CREATE TABLE t (id INT)").await.unwrap();
    let holder = hold_slot(connect(&proxy, Some("t_pipe_fifo")).await, 0.6);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut leader = connect(&proxy, Some("t_pipe_fifo")).await;
    let leader_task = tokio::spawn(async move {
        let n: i64 = leader
            .query_first("SELECT COUNT(*) FROM t")
            .await
            .unwrap()
            .unwrap();
        (leader, n)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut writer = connect(&proxy, Some("t_pipe_fifo")).await;
    let writer_task = tokio::spawn(async move {
        writer.query_drop("INSERT INTO t VALUES (1)").await.unwrap();
        writer
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut reader = connect(&proxy, Some("t_pipe_fifo")).await;
    let n: i64 = reader
        .query_first("SELECT COUNT(*) FROM t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 1, "the read queued after the INSERT saw it");
    let (leader, before) = leader_task.await.unwrap();
    assert_eq!(before, 0, "the read queued before the INSERT ran before it");
    for c in [
        holder.await.unwrap(),
        writer_task.await.unwrap(),
        leader,
        reader,
        setup,
    ] {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

/// KILL QUERY of a read pipelined between two others: its client gets 1317 at once, the
/// others their full answers (on the server only the victim's statement is stopped, by its
/// query id: another session's may run on that backend next). The killed session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_of_a_pipelined_read_interrupts_it_and_nothing_else() {
    fresh_db("t_pipe_kill").await;
    let db = Some("t_pipe_kill");
    let proxy = proxy(1).await;
    let first = connect(&proxy, db).await;
    let mut victim = connect(&proxy, db).await;
    let last = connect(&proxy, db).await;
    let mut killer = connect(&proxy, db).await;
    let victim_id = id_of(&mut victim).await;
    let holder = hold_slot(connect(&proxy, db).await, 0.8);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let before = batches(&proxy);
    let reads = vec![(first, SLOW_READ), (victim, SLOW_READ), (last, "SELECT 42")];
    let mut reads = queued_reads(reads).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    killer
        .query_drop(format!("KILL QUERY {victim_id}"))
        .await
        .unwrap();
    let within = Duration::from_secs(30);
    let mut done = Vec::new();
    for r in reads.drain(..) {
        done.push(tokio::time::timeout(within, r).await.unwrap().unwrap());
    }
    let [(first, r1, t1), (mut victim, rv, tv), (last, r3, _)]: [_; 3] =
        done.try_into().ok().unwrap();
    eprintln!("the victim got its answer after {tv:?}; the read before it took {t1:?}");
    assert_eq!(
        r1.unwrap(),
        Some(SLOW_SUM),
        "the read before the victim is whole"
    );
    let err = rv.expect_err("the killed read fails");
    assert_eq!(code_of(&err), Some(1317), "{err}");
    assert_eq!(state_of(&err).as_deref(), Some("70100"));
    assert_eq!(r3.unwrap(), Some(42), "the read after the victim is whole");
    assert!(batches(&proxy) > before, "the three reads formed a batch");
    assert!(proxy.context().stats.pipeline.interrupts.load(Relaxed) >= 1);
    // The killed session goes on, and so does its backend.
    let again: i64 = victim.query_first("SELECT 7").await.unwrap().unwrap();
    assert_eq!(again, 7);
    for c in [holder.await.unwrap(), first, victim, last, killer] {
        c.disconnect().await.unwrap();
    }
    assert_drained(&proxy, Duration::from_secs(5)).await;
    proxy.shutdown().await;
}

/// A batch member whose client vanished while it waited: the reads before and after it
/// still get their answers (the one after runs on its own if the backend had to go).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_client_vanished_harms_no_other() {
    let proxy = proxy(1).await;
    let holder = hold_slot(connect(&proxy, None).await, 0.6);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut reads = queued_reads(vec![
        (connect(&proxy, None).await, "SELECT 1"),
        (
            connect(&proxy, None).await,
            "SELECT LENGTH(REPEAT('x', 2000000))",
        ),
        (connect(&proxy, None).await, "SELECT 3"),
    ])
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Drops the connection mid-wait: its socket closes under the waiting member.
    reads[1].abort();
    let (last, r3, _) = reads.pop().unwrap().await.unwrap();
    let (first, r1, _) = reads.remove(0).await.unwrap();
    assert_eq!((r1.unwrap(), r3.unwrap()), (Some(1), Some(3)));
    for c in [holder.await.unwrap(), first, last] {
        c.disconnect().await.unwrap();
    }
    assert_drained(&proxy, Duration::from_secs(5)).await;
    assert_still_serves(&proxy).await;
    proxy.shutdown().await;
}

/// Many clients of pipelined reads never hold up a login or a statement that is not
/// pipelined, and nothing is answered twice or lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_load_keeps_every_client_served() {
    let proxy = proxy(2).await;
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = readers(&proxy, 64, &stop).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let at = Instant::now();
    let mut late = connect(&proxy, None).await;
    late.query_drop("DO 1").await.unwrap();
    let login_and_do = at.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Relaxed);
    let mut counts = Vec::new();
    for t in tasks {
        counts.push(t.await.unwrap());
    }
    eprintln!(
        "64 clients at P=2: {} reads, fewest per client {}, {} batches; a login + DO 1 meanwhile took {login_and_do:?}",
        counts.iter().sum::<u64>(),
        counts.iter().min().unwrap(),
        batches(&proxy)
    );
    assert!(counts.iter().all(|&n| n > 0), "every client was served");
    assert!(login_and_do < Duration::from_secs(5));
    late.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// Warnings of pipelined reads: the batch's last statement keeps its own for SHOW WARNINGS
/// (its session keeps the backend), one before it finds them replaced on the backend by the
/// next statement (its session raises its own again), and no session ever reads another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_warnings_stay_with_their_session_or_are_dropped() {
    let proxy = proxy(1).await;
    let holder = hold_slot(connect(&proxy, None).await, 0.6);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut reads = queued_reads(vec![
        (connect(&proxy, None).await, "SELECT CAST('7x' AS SIGNED)"),
        (connect(&proxy, None).await, "SELECT 8"),
        (connect(&proxy, None).await, "SELECT CAST('9y' AS SIGNED)"),
    ])
    .await;
    let (mut warned_last, vc, _) = reads.pop().unwrap().await.unwrap();
    let (mut clean, vb, _) = reads.pop().unwrap().await.unwrap();
    let (mut warned, va, _) = reads.pop().unwrap().await.unwrap();
    assert_eq!(
        (va.unwrap(), vb.unwrap(), vc.unwrap()),
        (Some(7), Some(8), Some(9))
    );
    let shown = |rows: Vec<(String, u32, String)>| -> Vec<String> {
        rows.into_iter().map(|r| r.2).collect()
    };
    // The last of the batch sees its own warning.
    let last: Vec<(String, u32, String)> = warned_last.query("SHOW WARNINGS").await.unwrap();
    assert_eq!(
        shown(last),
        vec!["Truncated incorrect INTEGER value: '9y'".to_string()]
    );
    // The others see none: not their own (replaced on the backend), never another's.
    for c in [&mut warned, &mut clean] {
        let rows: Vec<(String, u32, String)> = c.query("SHOW WARNINGS").await.unwrap();
        assert!(
            rows.iter().all(|r| !r.2.contains("'9y'")),
            "another session's warning leaked: {rows:?}"
        );
    }
    assert!(
        proxy
            .context()
            .stats
            .pipeline
            .warnings_dropped
            .load(Relaxed)
            >= 1
    );
    for c in [holder.await.unwrap(), warned, clean, warned_last] {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

/// With a slot free, a read batches only while the batch holds it back by less than
/// pipeline_max_delay, counting one statement's own server time: the mean statement time
/// shared among the statements running on each of the server's CPUs (`server_cpus`).
/// 24 clients read as fast as they can through 32 slots, so a slot is always free, while
/// the test switches the settings under them.
///
/// `server_cpus = 32` comes before `1`: on this 2-CPU host it is untrue, and once reads batch
/// their slot times are their own server times (no CPU wait inside a batch), short enough to
/// keep batching under the claim too (seen: 405-1,231 batches when 32 came after 1). On a
/// server with the CPUs it claims both ways of running give the same mean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_server_gets_batches_even_with_slots_free() {
    let settings = |cpus: u32, max_delay: Duration| {
        let mut cfg = config(32);
        cfg.pipeline_depth = 8;
        cfg.server_cpus = ServerCpus::Fixed(cpus);
        cfg.pipeline_max_delay = max_delay;
        cfg
    };
    let proxy = start(settings(32, Duration::ZERO)).await;
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = readers(&proxy, 24, &stop).await;
    // Batches formed over a phase's second half (the first lets the mean settle).
    let phase = |cfg: Config| {
        let proxy = &proxy;
        async move {
            proxy.context().replace_config(cfg);
            tokio::time::sleep(Duration::from_millis(400)).await;
            let before = batches(proxy);
            tokio::time::sleep(Duration::from_millis(400)).await;
            batches(proxy) - before
        }
    };
    // pipeline_max_delay = 0: only reads that would queue batch, so none here.
    assert_eq!(phase(settings(32, Duration::ZERO)).await, 0);
    let mean = proxy.context().pool.slots().mean_service();
    // Between 8 x one statement's slot time and 8 x its share of one CPU among the ~24
    // running: two slot times.
    let max_delay = mean * 2;
    let many_cpus = phase(settings(32, max_delay)).await;
    let one_cpu = phase(settings(1, max_delay)).await;
    let one_cpu_again = phase(settings(1, max_delay)).await;
    // And off again, live: with no delay allowed nothing batches at a free slot.
    let off = phase(settings(1, Duration::ZERO)).await;
    stop.store(true, Relaxed);
    for t in tasks {
        assert!(t.await.unwrap() > 0, "every client was served");
    }
    eprintln!(
        "24 clients at P=32, mean statement {mean:?}, pipeline_max_delay {max_delay:?}: \
         {many_cpus} batches with server_cpus = 32, then {one_cpu} and {one_cpu_again} with 1, \
         then {off} with no delay"
    );
    assert!(
        one_cpu > 0 && one_cpu_again > 0,
        "one CPU for 24 statements: reads batch with slots free"
    );
    assert!(
        many_cpus * 10 < one_cpu.min(one_cpu_again),
        "more CPUs than statements: each statement's time is its slot time, too long to batch"
    );
    assert_eq!(
        off, 0,
        "pipeline_max_delay = 0 again: no batch at free slots"
    );
    proxy.shutdown().await;
}

/// `server_cpus = auto` on MariaDB is its @@thread_pool_size, read on the first backend
/// connection with max_connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_cpus_auto_reads_the_servers_cpu_count() {
    let mut direct = direct(None).await;
    let cpus: u32 = direct
        .query_first("SELECT @@GLOBAL.thread_pool_size")
        .await
        .unwrap()
        .unwrap();
    direct.disconnect().await.unwrap();
    let proxy = proxy(2).await;
    let mut c = connect(&proxy, None).await;
    c.query_drop("DO 1").await.unwrap();
    let slots = proxy.context().pool.slots();
    assert_eq!(slots.reported_cpus(), Some(cpus));
    assert_eq!(slots.server_cpus(ServerCpus::Auto), Some(cpus));
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// Prepared reads (COM_STMT_EXECUTE without cursor) are pipelined as queries are: each
/// member's execution names its statement by the batch backend's own id, and one not
/// prepared on that backend runs on its own. Binary rows, NULLs, several rows and errors
/// each reach only their own client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_reads_are_pipelined_with_their_own_answers() {
    let proxy = proxy(2).await;
    let setup = rows_table(&proxy, "t_pipe_prepared").await;
    let mut clients = Vec::new();
    for _ in 0..16 {
        clients.push(connect(&proxy, Some("t_pipe_prepared")).await);
    }
    let before = proxy.context().stats.pipeline.statements.load(Relaxed);
    let mut tasks = Vec::new();
    for (client, mut c) in clients.into_iter().enumerate() {
        let client = client as u32;
        tasks.push(tokio::spawn(async move {
            for i in 0..120u32 {
                let id = (client * 37 + i) % 300 + 1;
                match i % 4 {
                    0 | 1 => {
                        let row: (u32, u32, String, f64, Option<u32>) = c
                            .exec_first(
                                "SELECT ?, id, v, d, ? FROM t WHERE id = ?",
                                (client, None::<u32>, id),
                            )
                            .await
                            .unwrap()
                            .unwrap();
                        assert_eq!((row.0, row.1, row.2.len() as u32), (client, id, id % 3000));
                        assert_eq!((row.3, row.4), (f64::from(id) / 4.0, None));
                    }
                    2 => {
                        let rows: Vec<(u32, u32)> = c
                            .exec("SELECT ?, id FROM t WHERE id <= ?", (client, i % 7 + 1))
                            .await
                            .unwrap();
                        assert_eq!(rows.len() as u32, i % 7 + 1);
                        assert!(rows.iter().all(|r| r.0 == client));
                    }
                    // Fails as it runs (a subquery of two rows): only this client sees it.
                    _ => {
                        let err = c
                            .exec_drop(
                                "SELECT id FROM t WHERE id = ? AND id = (SELECT 1 UNION SELECT 2)",
                                (id,),
                            )
                            .await
                            .unwrap_err();
                        assert_eq!(code_of(&err), Some(1242), "{err}");
                    }
                }
            }
            c.disconnect().await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let pipelined = proxy.context().stats.pipeline.statements.load(Relaxed) - before;
    eprintln!(
        "16 clients x 120 prepared reads at P=2: {pipelined} pipelined, {} retries",
        proxy.context().stats.pipeline.retries.load(Relaxed)
    );
    assert!(
        pipelined > 100,
        "prepared reads were pipelined: {pipelined}"
    );
    setup.disconnect().await.unwrap();
    proxy.shutdown().await;
}
