//! The small set of tests whose backend account is privileged (the server's own account,
//! which may set `pseudo_thread_id` and take instance-wide locks): what those privileges buy.
//! Everything else runs as the application account (`harness::APP_USER`).

use mysql_async::prelude::*;
use sluice::conn::identity::IdentityMode;

use crate::harness::*;

/// With the privilege, sluice sets pseudo_thread_id: the client's id is seen everywhere,
/// inside a stored procedure too (where the text rewrite cannot reach).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_privileged_backend_account_presents_the_id_inside_routines_too() {
    fresh_db("t_priv_id").await;
    let proxy = start(config_privileged(2)).await;
    let mut other = connect(&proxy, Some("t_priv_id")).await;
    let mut c = connect(&proxy, Some("t_priv_id")).await;
    let me = u64::from(c.id());
    c.query_drop("CREATE PROCEDURE p() SELECT CONNECTION_ID()")
        .await
        .unwrap();
    for _ in 0..5 {
        other.query_drop("DO 1").await.unwrap();
        let in_call: u64 = c.query_first("CALL p()").await.unwrap().unwrap();
        assert_eq!(in_call, me);
        let direct_call: u64 = c
            .query_first("SELECT CONNECTION_ID()")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(direct_call, me);
        let binary: u64 = c
            .exec_first("SELECT CONNECTION_ID()", ())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(binary, me);
    }
    let s = server();
    assert_eq!(
        proxy.context().identity.mode(&s.user),
        Some(IdentityMode::PseudoThreadId)
    );
    c.disconnect().await.unwrap();
    other.disconnect().await.unwrap();
    proxy.shutdown().await;
}
