//! Read-your-writes across sessions: a write's GTID, passed to another session's read as a
//! `/* sluice:min_gtid=... */` token, sends that read only where the write is, for a query and
//! for a prepared statement's executions alike; without the token a delayed replica serves it
//! without the write (so the test can fail).

use std::time::Duration;

use mysql_async::prelude::*;

use super::common::{blocking, cluster_with};
use super::{client, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_min_gtid_token_reads_another_sessions_write() {
    let cluster = cluster_with(&[]).await;
    let proxy = start(&cluster, |_| {}).await;
    blocking(|| {
        for i in [1, 2] {
            cluster.set_delay(i, Duration::from_secs(3)).expect("delay");
        }
    });
    let mut writer = client(&proxy).await;
    let mut reader = client(&proxy).await;
    let (mut missed, mut found) = (0, 0);
    for id in 0..10 {
        writer
            .query_drop(format!("INSERT INTO t VALUES ({id})"))
            .await
            .expect("insert");
        // The GTID the write got, as the writing service would pass it on.
        let rows = blocking(|| cluster.query(0, "SELECT @@gtid_binlog_pos")).expect("gtid");
        let gtid = rows[0][0].clone().expect("a position");
        let token = format!("/* sluice:min_gtid={gtid} */");

        let plain: Option<i32> = reader
            .query_first(format!("SELECT id FROM t WHERE id = {id}"))
            .await
            .expect("read without token");
        missed += usize::from(plain.is_none());
        let got: Option<i32> = reader
            .query_first(format!("{token} SELECT id FROM t WHERE id = {id}"))
            .await
            .expect("read with token");
        assert_eq!(got, Some(id), "the token's query missed row {id} ({gtid})");
        let stmt = reader
            .prep(format!("{token} SELECT id FROM t WHERE id = ?"))
            .await
            .expect("prepare with token");
        let got: Option<i32> = reader.exec_first(&stmt, (id,)).await.expect("execute");
        assert_eq!(
            got,
            Some(id),
            "the token's execution missed row {id} ({gtid})"
        );
        found += 1;
    }
    assert_eq!(found, 10);
    assert!(
        missed > 0,
        "without a token another session's read may miss the write on a delayed replica"
    );
    drop((writer, reader));
    proxy.shutdown().await;
}
