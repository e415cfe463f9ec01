//! Prepared statements with replicas: an execution without a cursor routes by its text, as
//! the same query would (a read to a replica, a write to the primary); an execution that opens
//! a cursor runs on the writer; a session reads back its own prepared writes; and a replica
//! killed under prepared reads costs none of them an error.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dbkit::replication::{APP_PASSWORD, APP_USER};
use mysql_async::prelude::*;

use super::common::wire::Wire;
use super::common::{blocking, cluster_with};
use super::{client, replicas_of, start};

/// The executions of each route (`replica`, `writer`, ...) counted so far.
fn routed(proxy: &sluice::ProxyHandle, route: &str) -> u64 {
    proxy
        .context()
        .stats
        .routed_snapshot()
        .iter()
        .filter(|((_, r, _), _)| *r == route)
        .map(|(_, n)| n)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_reads_run_on_replicas_and_prepared_writes_on_the_primary() {
    let cluster = cluster_with(&[]).await;
    let proxy = start(&cluster, |_| {}).await;
    let primary = cluster.server_id(0);
    let mut c = client(&proxy).await;

    let read = c.prep("SELECT @@server_id").await.expect("prepare read");
    let before = routed(&proxy, "replica");
    let mut seen = BTreeSet::new();
    for _ in 0..40 {
        let id: u32 = c
            .exec_first(&read, ())
            .await
            .expect("execute")
            .expect("row");
        seen.insert(id);
    }
    assert_eq!(seen, replicas_of(&cluster), "prepared reads by server_id");
    assert!(routed(&proxy, "replica") - before >= 40);

    // A prepared write runs on the primary, once; reading it back through the same session
    // (prepared too) finds it, although both replicas apply it 3 s late.
    blocking(|| {
        for i in [1, 2] {
            cluster.set_delay(i, Duration::from_secs(3)).expect("delay");
        }
    });
    let insert = c
        .prep("INSERT INTO t VALUES (?)")
        .await
        .expect("prepare insert");
    let select = c
        .prep("SELECT id FROM t WHERE id = ?")
        .await
        .expect("prepare select");
    for id in 0..50 {
        c.exec_drop(&insert, (id,)).await.expect("insert");
        let got: Option<i32> = c.exec_first(&select, (id,)).await.expect("select");
        assert_eq!(got, Some(id), "read-your-writes lost prepared row {id}");
    }
    let fallbacks = proxy.context().stats.ryw_fallbacks.load(Ordering::Relaxed);
    assert!(
        fallbacks > 0,
        "the delayed replicas lacked the writes: reads went to the writer"
    );
    let rows = blocking(|| cluster.query(0, "SELECT COUNT(*) FROM app.t")).expect("count");
    assert_eq!(
        format!("{:?}", rows[0][0]),
        "Some(\"50\")",
        "the inserts on the primary"
    );

    // Locking reads and reads in a read-write transaction stay on the primary, prepared or not.
    let locking = c
        .prep("SELECT @@server_id FROM t LIMIT 1 FOR UPDATE")
        .await
        .expect("prepare locking read");
    let id: u32 = c
        .exec_first(&locking, ())
        .await
        .expect("execute")
        .expect("row");
    assert_eq!(id, primary, "SELECT ... FOR UPDATE");
    c.query_drop("BEGIN").await.expect("begin");
    let id: u32 = c
        .exec_first(&read, ())
        .await
        .expect("execute")
        .expect("row");
    assert_eq!(id, primary, "a read in a read-write transaction");
    c.query_drop("COMMIT").await.expect("commit");
    drop(c);
    proxy.shutdown().await;
}

/// `SELECT CAST(@@server_id AS CHAR)`'s one value, from a binary row (header 0x00, a
/// one-byte NULL bitmap, a length-encoded string).
fn server_id_of_row(row: &[u8]) -> u32 {
    assert_eq!(row.first(), Some(&0x00), "a binary row: {row:?}");
    let len = row[2] as usize;
    std::str::from_utf8(&row[3..3 + len])
        .expect("digits")
        .parse()
        .expect("a server id")
}

/// The packets up to and including the next EOF (0xFE, shorter than 9 bytes).
async fn until_eof(w: &mut Wire) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    loop {
        let (_, p) = w.packet(Duration::from_secs(10)).await.expect("a packet");
        assert_ne!(<[u8]>::first(&p), Some(&0xFF), "an error: {p:?}");
        let eof = <[u8]>::first(&p) == Some(&0xFE) && p.len() < 9;
        got.push(p);
        if eof {
            return got;
        }
    }
}

/// COM_STMT_EXECUTE of statement `id` (no parameters) with cursor flags `flags`.
fn execute(id: u32, flags: u8) -> Vec<u8> {
    let mut body = id.to_le_bytes().to_vec();
    body.push(flags);
    body.extend_from_slice(&1u32.to_le_bytes());
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_that_opens_a_cursor_runs_on_the_writer() {
    let cluster = cluster_with(&[]).await;
    let proxy = start(&cluster, |_| {}).await;
    let primary = cluster.server_id(0);
    let mut w = Wire::login(proxy.local_addr(), APP_USER, APP_PASSWORD)
        .await
        .expect("raw login through sluice");
    w.command(0x16, b"SELECT CAST(@@server_id AS CHAR)")
        .await
        .expect("prepare");
    let (_, ok) = w.packet(Duration::from_secs(10)).await.expect("PREPARE_OK");
    assert_eq!(ok[0], 0x00, "PREPARE_OK: {ok:?}");
    let id = u32::from_le_bytes([ok[1], ok[2], ok[3], ok[4]]);
    until_eof(&mut w).await; // one column definition, EOF

    // Without a cursor: the result set comes at once, from a replica.
    w.command(0x17, &execute(id, 0)).await.expect("execute");
    let answer = until_eof(&mut w).await; // column count, definition, EOF
    assert_eq!(answer[0], [1], "one column");
    let rows = until_eof(&mut w).await;
    let on = server_id_of_row(&rows[0]);
    assert!(
        replicas_of(&cluster).contains(&on),
        "no cursor: ran on {on}"
    );

    // CURSOR_TYPE_READ_ONLY: the rows stay on the server for FETCH, which must find them on
    // the same backend: the writer's, where the session's later writes can go too.
    w.command(0x17, &execute(id, 0x01))
        .await
        .expect("execute with a cursor");
    let head = until_eof(&mut w).await;
    let eof = head.last().expect("EOF");
    let status = u16::from_le_bytes([eof[3], eof[4]]);
    assert_ne!(
        status & 0x0040,
        0,
        "SERVER_STATUS_CURSOR_EXISTS: {status:#x}"
    );
    let mut fetch = id.to_le_bytes().to_vec();
    fetch.extend_from_slice(&10u32.to_le_bytes());
    w.command(0x1C, &fetch).await.expect("fetch");
    let rows = until_eof(&mut w).await;
    assert_eq!(rows.len(), 2, "one row and EOF: {rows:?}");
    assert_eq!(server_id_of_row(&rows[0]), primary, "a cursor's rows");
    w.command(0x01, b"").await.expect("quit");
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replica_costs_no_prepared_read_errors() {
    let mut cluster = cluster_with(&[]).await;
    let proxy = start(&cluster, |c| {
        c.pool_size = sluice::config::PoolSize::Fixed(8);
    })
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..32 {
        let mut c = client(&proxy).await;
        let stop = stop.clone();
        readers.push(tokio::spawn(async move {
            let read = c.prep("SELECT @@server_id").await.expect("prepare");
            let (mut ok, mut errors) = (0u64, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                match c.exec_first::<u32, _, _>(&read, ()).await {
                    Ok(Some(_)) => ok += 1,
                    Ok(None) => errors.push("no row".to_string()),
                    Err(e) => errors.push(e.to_string()),
                }
            }
            (ok, errors, c, read)
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let on_replicas = routed(&proxy, "replica");
    blocking(|| cluster.kill(2));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut ok, mut errors, mut kept) = (0, Vec::new(), Vec::new());
    for r in readers {
        let (o, e, c, read) = r.await.expect("reader");
        ok += o;
        errors.extend(e);
        kept.push((c, read));
    }
    assert!(ok > 100, "executions ran: {ok}");
    assert!(on_replicas > 100, "executions on replicas: {on_replicas}");
    // 16 sessions on each replica's 8 slots: the executions were pipelined, so the kill
    // failed batches too.
    let batches = proxy
        .context()
        .stats
        .pipeline
        .batches
        .load(Ordering::Relaxed);
    assert!(batches > 0, "no batch");
    assert!(
        errors.is_empty(),
        "{} prepared read errors, e.g. {:?}",
        errors.len(),
        errors.first()
    );
    // Every session's statement, prepared on the dead replica too, runs on the one left.
    for (c, read) in kept.iter_mut().take(4) {
        let id: u32 = c
            .exec_first(&*read, ())
            .await
            .expect("execute")
            .expect("row");
        assert_eq!(id, cluster.server_id(1));
    }
    drop(kept);
    proxy.shutdown().await;
}
