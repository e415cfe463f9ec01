//! The monitor connection's queries: the server's thread counts mid-window, and cancelling
//! our statements still running when a window closes.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

/// Threads_connected and Threads_running right now (None if the monitor failed).
pub async fn server_threads(monitor: &mut Conn) -> (Option<u64>, Option<u64>) {
    let rows: Vec<(String, String)> = monitor
        .query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Threads_connected', 'Threads_running')")
        .await
        .unwrap_or_default();
    let get = |name: &str| {
        rows.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.parse().ok())
    };
    (get("Threads_connected"), get("Threads_running"))
}

/// `KILL QUERY` every statement of ours still running on the server (by its text, so it
/// also reaches the backend connections of a proxy). No client starts a query after the
/// window closes, so these are exactly the unfinished ones.
pub async fn kill_running_queries(monitor: &mut Conn) {
    // Give clients that were between queries a moment to notice the window closed.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let ids: Vec<u64> = monitor
        .query(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() \
             AND COMMAND = 'Query' AND INFO LIKE 'SELECT id, val FROM reads_test WHERE%'",
        )
        .await
        .unwrap_or_default();
    for id in ids {
        // ER_NO_SUCH_THREAD when it just finished: fine.
        let _ = monitor.query_drop(format!("KILL QUERY {id}")).await;
    }
}
