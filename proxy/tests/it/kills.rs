//! KILL QUERY through sluice stops the statement on the server, as it does directly: a
//! pipelined batch's leader, a member whose statement runs, a member still waiting behind
//! another, and a stored procedure's loop (whose every statement has a new query id on
//! MariaDB). The victim's next statement and the statements batched behind it do not wait
//! for the killed one.

use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use sluice::ProxyHandle;

use crate::harness::*;

/// Reads of several seconds (the sequence engine, no SLEEP: they are pipelined), with texts
/// of their own so that the test can find each in PROCESSLIST.
const LONG_A: &str = "SELECT SUM(a.seq * b.seq) FROM test.seq_1_to_7000 a, test.seq_1_to_7000 b";
const LONG_B: &str = "SELECT SUM(c.seq + d.seq) FROM test.seq_1_to_7000 c, test.seq_1_to_7000 d";

async fn proxy(pool_size: u32, depth: u32) -> ProxyHandle {
    let mut root = direct_root(None).await;
    root.query_drop("CREATE DATABASE IF NOT EXISTS test")
        .await
        .unwrap();
    root.disconnect().await.unwrap();
    let mut cfg = config(pool_size);
    cfg.pipeline_depth = depth;
    // Statements queue behind the long joins, which take seconds on a slow host; these tests
    // check kills, not the queue's timeout.
    cfg.queue_timeout = Duration::from_secs(60);
    start(cfg).await
}

async fn id_of(c: &mut Conn) -> u64 {
    c.query_first("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap()
}

/// Holds every slot for `secs` with statements that are never pipelined.
async fn hold_slots(proxy: &ProxyHandle, n: u32, secs: f64) -> Vec<tokio::task::JoinHandle<Conn>> {
    let mut held = Vec::new();
    for _ in 0..n {
        let mut c = connect(proxy, None).await;
        held.push(tokio::spawn(async move {
            c.query_drop(format!("DO SLEEP({secs})")).await.unwrap();
            c
        }));
    }
    held
}

/// Is a statement with this text running on the server (any connection)?
async fn running(root: &mut Conn, sql: &str) -> bool {
    let n: Option<u64> = root
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = ?",
            (sql,),
        )
        .await
        .unwrap();
    n.unwrap_or(0) > 0
}

/// Waits until `sql` runs on the server.
async fn until_running(root: &mut Conn, sql: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !running(root, sql).await {
        assert!(Instant::now() < deadline, "{sql} never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How long `sql` stays in PROCESSLIST from now (up to `within`).
async fn gone_after(root: &mut Conn, sql: &str, within: Duration) -> Duration {
    let at = Instant::now();
    while running(root, sql).await && at.elapsed() < within {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    at.elapsed()
}

type Timed = tokio::task::JoinHandle<(Conn, Result<Option<i64>, mysql_async::Error>, Instant)>;

fn timed_read(mut c: Conn, sql: &'static str) -> Timed {
    tokio::spawn(async move {
        let r = c.query_first(sql).await;
        (c, r, Instant::now())
    })
}

/// Which statement of a batch of three is killed, and when.
#[derive(Clone, Copy, Debug)]
enum Victim {
    /// The leader, while its statement runs.
    Leader,
    /// The middle member, while its own statement runs (the leader's was short).
    RunningMember,
    /// The middle member, while the leader's long statement still runs before it.
    WaitingMember,
}

/// Every slot held, then three reads queued 50 ms apart (one batch at depth 16): the
/// victim is killed, and each client's answer and the server's PROCESSLIST are checked.
async fn kill_in_a_batch(pool_size: u32, victim: Victim) {
    let proxy = proxy(pool_size, 16).await;
    let mut root = direct_root(None).await;
    let mut conns = Vec::new();
    for _ in 0..4 {
        conns.push(connect(&proxy, None).await);
    }
    let mut killer = conns.pop().unwrap();
    let [c0, c1, c2]: [Conn; 3] = conns.try_into().ok().unwrap();
    let (first_sql, victim_sql) = match victim {
        Victim::Leader => (LONG_A, LONG_A),
        Victim::RunningMember => ("SELECT 40", LONG_B),
        Victim::WaitingMember => (LONG_A, LONG_B),
    };
    let (mut first, mut middle) = (c0, c1);
    let first_id = id_of(&mut first).await;
    let middle_id = id_of(&mut middle).await;
    let held = hold_slots(&proxy, pool_size, 0.5).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let batches_before = proxy
        .context()
        .stats
        .pipeline
        .batches
        .load(std::sync::atomic::Ordering::Relaxed);
    let t_first = timed_read(first, first_sql);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let t_middle = timed_read(
        middle,
        if victim_sql == first_sql {
            "SELECT 41"
        } else {
            victim_sql
        },
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    let t_last = timed_read(c2, "SELECT 42");
    // The statement to kill runs (for a waiting member, the leader's runs before it).
    let running_sql = match victim {
        Victim::RunningMember => victim_sql,
        _ => first_sql,
    };
    until_running(&mut root, running_sql).await;
    let victim_id = match victim {
        Victim::Leader => first_id,
        _ => middle_id,
    };
    let killed_at = Instant::now();
    killer
        .query_drop(format!("KILL QUERY {victim_id}"))
        .await
        .unwrap();
    let (victim_task, other_task) = match victim {
        Victim::Leader => (t_first, t_middle),
        _ => (t_middle, t_first),
    };
    let (mut v, vr, v_at) = victim_task.await.unwrap();
    let err = vr.expect_err("the killed statement fails");
    assert_eq!(code_of(&err), Some(1317), "{err}");
    let answered = v_at - killed_at;
    // The victim's next statement does not wait for its killed one; meanwhile the killed
    // statement leaves PROCESSLIST (for a waiting member: as soon as its turn comes, after
    // the leader's).
    let next = tokio::spawn(async move {
        let at = Instant::now();
        let seven: Option<i64> = v.query_first("SELECT 7").await.unwrap();
        assert_eq!(seven, Some(7));
        (v, at.elapsed())
    });
    let (other, or, _) = match victim {
        Victim::WaitingMember => other_task.await.unwrap(),
        _ => {
            let gone = gone_after(&mut root, victim_sql, Duration::from_secs(30)).await;
            eprintln!(
                "P={pool_size} {victim:?}: the statement left PROCESSLIST {gone:?} after the kill"
            );
            assert!(
                gone < Duration::from_secs(2),
                "the killed statement ran on for {gone:?} on the server"
            );
            other_task.await.unwrap()
        }
    };
    let from = Instant::now();
    // It may take a moment to start once its turn comes.
    let mut seen = false;
    while !seen && from.elapsed() < Duration::from_millis(300) {
        seen = running(&mut root, victim_sql).await;
    }
    let ran_for = gone_after(&mut root, victim_sql, Duration::from_secs(30)).await;
    let (v, next_took) = next.await.unwrap();
    let (last, lr, l_at) = t_last.await.unwrap();
    assert_eq!(lr.unwrap(), Some(42), "the read behind the victim is whole");
    let batched = proxy
        .context()
        .stats
        .pipeline
        .batches
        .load(std::sync::atomic::Ordering::Relaxed)
        > batches_before;
    eprintln!(
        "P={pool_size} {victim:?}: 1317 after {answered:?}, the victim's next statement took \
         {next_took:?}, the killed statement ran {ran_for:?} more once its turn came, the last \
         read answered {:?} after that; batched: {batched}",
        l_at.saturating_duration_since(from)
    );
    assert!(batched, "the reads formed a batch");
    assert!(or.is_ok(), "the other read of the batch is whole: {or:?}");
    assert!(answered < Duration::from_secs(1), "1317 took {answered:?}");
    let limit = Duration::from_secs(2);
    assert!(
        ran_for < limit,
        "the killed statement ran {ran_for:?} on the server"
    );
    assert!(
        l_at.saturating_duration_since(from) < limit,
        "the read behind the victim waited {:?}",
        l_at.saturating_duration_since(from)
    );
    if !matches!(victim, Victim::WaitingMember) || pool_size > 1 {
        assert!(
            next_took < limit,
            "the victim's next statement waited {next_took:?}"
        );
    }
    for h in held {
        h.await.unwrap().disconnect().await.unwrap();
    }
    for c in [v, other, last, killer] {
        c.disconnect().await.unwrap();
    }
    root.disconnect().await.unwrap();
    assert_drained(&proxy, Duration::from_secs(10)).await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_of_a_batch_leader_stops_it_on_the_server_p1() {
    kill_in_a_batch(1, Victim::Leader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_of_a_batch_leader_stops_it_on_the_server_p4() {
    kill_in_a_batch(4, Victim::Leader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_of_a_running_middle_member_stops_it_on_the_server_p1() {
    kill_in_a_batch(1, Victim::RunningMember).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_of_a_running_middle_member_stops_it_on_the_server_p4() {
    kill_in_a_batch(4, Victim::RunningMember).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_of_a_waiting_middle_member_never_lets_it_run_on_p1() {
    kill_in_a_batch(1, Victim::WaitingMember).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_of_a_waiting_middle_member_never_lets_it_run_on_p4() {
    kill_in_a_batch(4, Victim::WaitingMember).await;
}

/// A stored procedure's loop, killed by KILL QUERY: directly and through sluice it stops
/// with 1317 at once, and the session goes on.
async fn kill_query_stops_a_procedure_loop(pool_size: u32, depth: u32) {
    let db = "t_kill_loop";
    let mut setup = direct(Some(db)).await;
    setup
        .query_drop(
            "CREATE PROCEDURE IF NOT EXISTS spin() BEGIN DECLARE i BIGINT DEFAULT 0; \
             WHILE i < 10000000000 DO SET i = i + 1; END WHILE; END",
        )
        .await
        .unwrap();
    setup.disconnect().await.unwrap();
    let proxy = proxy(pool_size, depth).await;
    // Directly first: the reference.
    let mut d = direct(Some(db)).await;
    let mut d_killer = direct(Some(db)).await;
    let d_id = id_of(&mut d).await;
    let direct_took = kill_a_loop(d, &mut d_killer, d_id).await;
    let v = connect(&proxy, Some(db)).await;
    let mut killer = connect(&proxy, Some(db)).await;
    let mut v = v;
    let v_id = id_of(&mut v).await;
    let via_took = kill_a_loop(v, &mut killer, v_id).await;
    eprintln!(
        "P={pool_size} depth={depth}: a procedure loop killed by KILL QUERY stopped after \
         {direct_took:?} directly, {via_took:?} through sluice"
    );
    assert!(via_took < Duration::from_secs(2), "{via_took:?}");
    let mut root = direct_root(None).await;
    assert!(
        !running(&mut root, "CALL spin()").await,
        "the loop still runs on the server"
    );
    for c in [killer, d_killer, root] {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

/// Runs `CALL spin()` on `c`, kills it from `killer` once it runs, and checks 1317 and that
/// the session goes on; how long the kill took to stop it.
async fn kill_a_loop(mut c: Conn, killer: &mut Conn, id: u64) -> Duration {
    let task = tokio::spawn(async move {
        let r = c.query_drop("CALL spin()").await;
        (c, r, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    let at = Instant::now();
    killer.query_drop(format!("KILL QUERY {id}")).await.unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(10), task).await;
    let Ok(done) = answered else {
        // Leaves nothing running behind the failing test.
        let mut root = direct_root(None).await;
        let ids: Vec<u64> = root
            .query("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO = 'CALL spin()'")
            .await
            .unwrap();
        for i in ids {
            let _ = root.query_drop(format!("KILL {i}")).await;
        }
        panic!("KILL QUERY {id} did not stop the loop within 10 s");
    };
    let (mut c, r, stopped) = done.unwrap();
    let err = r.expect_err("the killed loop fails");
    assert_eq!(code_of(&err), Some(1317), "{err}");
    let one: Option<u32> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1), "the session goes on");
    c.disconnect().await.unwrap();
    stopped - at
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_stops_a_procedure_loop_p1_depth16() {
    fresh_db("t_kill_loop").await;
    kill_query_stops_a_procedure_loop(1, 16).await;
    kill_query_stops_a_procedure_loop(4, 1).await;
}
