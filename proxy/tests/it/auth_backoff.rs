//! The per-address login backoff: repeated failures from one address slow its
//! logins down, a correct password still gets in, and a success clears the address.

use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use sluice::conn::auth_failures::FIRST_DELAY;

use crate::harness::*;

async fn timed_login(proxy: &sluice::ProxyHandle, password: &str) -> (Duration, Option<Conn>) {
    let started = Instant::now();
    let result = Conn::new(opts(proxy, "app", password, None)).await;
    let took = started.elapsed();
    match result {
        Ok(c) => (took, Some(c)),
        Err(e) => {
            assert_eq!(code_of(&e), Some(1045), "a wrong password gets 1045: {e}");
            (took, None)
        }
    }
}

#[tokio::test]
async fn repeated_failures_slow_down_and_a_correct_login_still_works() {
    let mut cfg = config(2);
    cfg.auth_failure_threshold = 3;
    cfg.auth_failure_max_delay = Duration::from_secs(2);
    let proxy = start(cfg).await;
    let failures = &proxy.context().handshake.auth_failures;

    // Up to the threshold: plain 1045s, nothing waits.
    for _ in 0..3 {
        let (_, conn) = timed_login(&proxy, "wrong").await;
        assert!(conn.is_none());
    }
    assert_eq!(failures.len(), 1, "one address tracked (127.0.0.1)");
    // Beyond it each attempt waits before its verdict, twice as long each time.
    let (fourth, conn) = timed_login(&proxy, "wrong").await;
    assert!(conn.is_none());
    assert!(
        fourth >= FIRST_DELAY,
        "4th failure answered after {fourth:?}"
    );
    let (fifth, conn) = timed_login(&proxy, "wrong").await;
    assert!(conn.is_none());
    assert!(
        fifth >= 2 * FIRST_DELAY,
        "5th failure answered after {fifth:?}"
    );

    // The right password from the same address still gets in (after the same wait, so the
    // timing does not give a correct guess away), and clears the address.
    let (took, conn) = timed_login(&proxy, "secret").await;
    let mut conn = conn.expect("the correct password logs in during the backoff");
    assert!(took >= 4 * FIRST_DELAY, "verdict after {took:?}");
    let one: Option<u32> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    assert!(failures.is_empty(), "a success clears the address");
    conn.disconnect().await.unwrap();

    // COM_CHANGE_USER with a wrong password counts as a failed login too. (Both sessions log
    // in first: a successful login clears the address.)
    let conns = [connect(&proxy, None).await, connect(&proxy, None).await];
    for mut conn in conns {
        let err = conn
            .change_user(
                mysql_async::ChangeUserOpts::new()
                    .with_user(Some("app".into()))
                    .with_pass(Some("wrong".into())),
            )
            .await
            .expect_err("wrong password");
        assert_eq!(code_of(&err), Some(1045), "{err}");
    }
    assert_eq!(failures.len(), 1, "change-user failures are counted");
    proxy.shutdown().await;
}
