//! Login and re-login behaviours that MariaDB's own C API test suite (`mariadb-client-test`)
//! showed differing through sluice: the scramble COM_CHANGE_USER is answered with, a client
//! character set the server refuses, and the greeting of a server whose autocommit is off.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use sluice::protocol::{auth, Capabilities, StatusFlags};

use crate::bad_input::{Raw, Read};
use crate::harness::*;

/// COM_CHANGE_USER as Connector/C sends it: native password over the login's scramble.
fn change_user(user: &[u8], auth_response: &[u8]) -> Vec<u8> {
    let mut p = vec![0x11];
    p.extend_from_slice(user);
    p.push(0);
    p.push(auth_response.len() as u8);
    p.extend_from_slice(auth_response);
    p.push(0); // no schema
    p.extend_from_slice(&45u16.to_le_bytes());
    p.extend_from_slice(auth::NATIVE.as_bytes());
    p.push(0);
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_user_is_verified_against_the_login_scramble_without_a_switch() {
    let proxy = start(config(2)).await;
    let (mut raw, hs, verdict) = Raw::login_with(&proxy, 45).await;
    assert!(
        matches!(verdict, Read::Packet(2, ref p) if p[0] == 0x00),
        "{verdict:?}"
    );
    assert_eq!(
        raw.scalar("SELECT @before := 1").await,
        Ok(Some("1".into()))
    );

    // The server keeps the login's scramble; Connector/C answers with it in the request and
    // ignores the data of any switch that follows, so sluice must accept it as it is.
    raw.send(
        0,
        &change_user(b"app", &auth::native_scramble(&hs.nonce, b"secret")),
    )
    .await;
    match raw.read().await {
        Read::Packet(1, p) => assert_eq!(p[0], 0x00, "OK at once, no auth switch: {p:?}"),
        other => panic!("expected OK, got {other:?}"),
    }
    assert_eq!(
        raw.scalar("SELECT @before").await,
        Ok(None),
        "a fresh session"
    );
    assert_eq!(raw.scalar("SELECT 41 + 1").await, Ok(Some("42".into())));

    raw.send(
        0,
        &change_user(b"app", &auth::native_scramble(&hs.nonce, b"wrong")),
    )
    .await;
    let (seq, err) = raw.expect_err().await;
    assert_eq!((seq, err.code), (1, 1045));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_character_set_the_server_refuses_fails_its_login_and_no_one_else() {
    let proxy = start(config(2)).await;
    // ucs2_general_ci: the server cannot parse statements in it.
    let (_raw, _, verdict) = Raw::login_with(&proxy, 35).await;
    let Read::Packet(2, p) = verdict else {
        panic!("expected an ERR, got {verdict:?}");
    };
    let err = sluice::protocol::ErrPacket::decode(&p, Capabilities::CLIENT_PROTOCOL_41)
        .expect("ERR packet");
    assert_eq!(err.code, 1231);
    assert!(String::from_utf8_lossy(&err.message).contains("'ucs2'"));
    // Others are served at once: the backend was never marked down.
    let started = Instant::now();
    let mut c = connect(&proxy, None).await;
    let one: u32 = c.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    c.disconnect().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_autocommit_is_presented_as_one() {
    let server = private_server_with(vec!["--autocommit=0".into()]).await;
    let proxy = start(config_for_local(&server, 2)).await;
    let (mut raw, hs, verdict) = Raw::login_with(&proxy, 45).await;
    assert!(!hs.status.contains(StatusFlags::SERVER_STATUS_AUTOCOMMIT));
    let Read::Packet(2, ok) = verdict else {
        panic!("expected OK, got {verdict:?}");
    };
    // OK: header, affected rows, insert id, then the status flags.
    let status = u16::from_le_bytes([ok[3], ok[4]]);
    assert_eq!(status & StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits(), 0);
    assert_eq!(
        raw.scalar("SELECT @@autocommit").await,
        Ok(Some("0".into()))
    );
}
