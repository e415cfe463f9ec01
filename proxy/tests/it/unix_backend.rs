//! `backend = unix:/path`: sluice reaches the server through its Unix socket, and clients
//! cannot tell (results, transactions, prepared statements, pooling).

use mysql_async::prelude::*;

use crate::harness::*;

/// The test server's socket, when it is a local one this process can reach.
async fn server_socket() -> Option<String> {
    let mut c = direct(None).await;
    let path: Option<String> = c.query_first("SELECT @@socket").await.unwrap();
    c.disconnect().await.unwrap();
    path.filter(|p| std::path::Path::new(p).exists())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unix_socket_backend_serves_clients_like_tcp() {
    let Some(socket) = server_socket().await else {
        skip_or_fail("the test server's Unix socket is not reachable from here");
        return;
    };
    let mut cfg = config_for(format!("unix:{socket}"), APP_USER, APP_PASSWORD, 2);
    cfg.backend_tls = sluice::config::BackendTlsMode::Preferred;
    let proxy = start(cfg).await;
    fresh_db("t_unix").await;

    let mut a = connect(&proxy, Some("t_unix")).await;
    // The statement's own processlist row shows how its backend connection came in: a
    // socket login has host "localhost", a TCP one "host:port".
    let host: String = a
        .query_first(
            "SELECT host FROM information_schema.processlist WHERE info LIKE 'SELECT host FROM information_schema.processlist%'",
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        host, "localhost",
        "the backend connection is not on the socket"
    );

    a.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
        .await
        .unwrap();
    a.query_drop("BEGIN").await.unwrap();
    a.exec_drop("INSERT INTO t VALUES (?, ?)", (1, "one"))
        .await
        .unwrap();
    let mut b = connect(&proxy, Some("t_unix")).await;
    let seen: Option<i64> = b.query_first("SELECT COUNT(*) FROM t").await.unwrap();
    assert_eq!(seen, Some(0), "uncommitted row visible to another client");
    a.query_drop("COMMIT").await.unwrap();
    let v: Option<String> = b
        .exec_first("SELECT v FROM t WHERE id = ?", (1,))
        .await
        .unwrap();
    assert_eq!(v.as_deref(), Some("one"));

    // Many clients over two backends, each answer its own.
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let opts = opts(&proxy, "app", "secret", Some("t_unix"));
            tokio::spawn(async move {
                let mut c = mysql_async::Conn::new(opts).await.unwrap();
                let got: Option<i64> = c.exec_first("SELECT ? * 2", (i,)).await.unwrap();
                c.disconnect().await.unwrap();
                assert_eq!(got, Some(i * 2));
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let open = proxy.context().pool.snapshot().open;
    assert!(open <= 2, "{open} backends open for pool_size 2");
    a.disconnect().await.unwrap();
    b.disconnect().await.unwrap();
    proxy.shutdown().await;
}
