//! A client that negotiated CLIENT_SESSION_TRACK gets in its OK packets what its own
//! session's `session_track_*` settings produce directly (the server's defaults, or what
//! the client set), never sluice's own trackers: the OK packets of one statement sequence
//! from a raw client directly and through sluice, with and without CLIENT_DEPRECATE_EOF,
//! field by field and entry by entry (the server lists system variables in an order of its
//! own, which differs with the tracked set, so their order is not compared), and of the
//! same length.

use std::time::Duration;

use sluice::protocol::{Capabilities, Handshake, OkPacket, SessionStateChange};

use crate::harness::*;
use crate::wire::{native_response, plain_caps, Wire};

/// Logs in to `addr` with `caps`; None if refused.
async fn login(addr: std::net::SocketAddr, caps: Capabilities, user: &str, pw: &str) -> Wire {
    let mut w = Wire::connect(addr).await.expect("connect");
    let (_, greeting) = w.packet(Duration::from_secs(5)).await.expect("greeting");
    let hs = Handshake::decode(&greeting).expect("handshake");
    let payload = native_response(&hs, caps, 45, user, pw);
    w.send(1, &payload).await.unwrap();
    match w.packet(Duration::from_secs(5)).await {
        Some((2, p)) if p.first() == Some(&0x00) => w,
        other => panic!("login refused: {other:?}"),
    }
}

async fn next(w: &mut Wire) -> Vec<u8> {
    w.packet(Duration::from_secs(10))
        .await
        .expect("an answer")
        .1
}

/// The packets of one answer that are OK-format (the OK, or under DEPRECATE_EOF the 0xFE
/// terminator), or the ERR, as hex; result rows and definitions are skipped.
async fn answer(w: &mut Wire, sql: &str, deprecate_eof: bool) -> Vec<String> {
    w.command(0x03, sql.as_bytes()).await.unwrap();
    let first = next(w).await;
    match first.first() {
        Some(0x00) | Some(0xff) => return vec![described(&first)],
        _ => {}
    }
    // A result set: column definitions, (EOF), rows, terminator.
    let columns = first[0] as usize;
    for _ in 0..columns {
        next(w).await;
    }
    if !deprecate_eof {
        next(w).await;
    }
    loop {
        let p = next(w).await;
        if p.first() == Some(&0xfe) && p.len() < 0xffffff {
            return vec![described(&p)];
        }
    }
}

fn entry(e: &SessionStateChange) -> String {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match e {
        SessionStateChange::SystemVariable { name, value } => format!("{}={}", s(name), s(value)),
        SessionStateChange::Schema(db) => format!("schema {}", s(db)),
        SessionStateChange::Gtids(g) => format!("gtids {}", s(g)),
        SessionStateChange::TransactionState(t) => format!("trx state {}", s(t)),
        SessionStateChange::TransactionCharacteristics(t) => format!("trx chars {}", s(t)),
        other => format!("{other:?}"),
    }
}

/// An OK-format packet field by field, its state entries sorted; anything else as hex.
fn described(p: &[u8]) -> String {
    let caps = Capabilities::CLIENT_PROTOCOL_41 | Capabilities::CLIENT_SESSION_TRACK;
    let ok_format = matches!(p.first(), Some(0x00)) || (p.first() == Some(&0xfe) && p.len() >= 7);
    match OkPacket::decode(p, caps).ok().filter(|_| ok_format) {
        Some(ok) => {
            let mut entries: Vec<String> = ok.session_state.iter().map(entry).collect();
            entries.sort();
            format!(
                "{:02x} rows={} id={} status={:#06x} warnings={} info={:?} state={entries:?} len={}",
                ok.header,
                ok.affected_rows,
                ok.last_insert_id,
                ok.status.bits(),
                ok.warnings,
                String::from_utf8_lossy(&ok.info),
                p.len()
            )
        }
        None => p.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

const SEQUENCE: &[&str] = &[
    "SET NAMES utf8mb4",
    "SET NAMES latin1 COLLATE latin1_bin",
    "SET time_zone = '+01:00'",
    "SET sql_mode = 'ANSI'",
    "USE t_trackers",
    "SET autocommit = 0",
    "INSERT INTO t VALUES (1)",
    "COMMIT",
    "SET autocommit = 1",
    "SELECT 1",
    "SET @a = 1",
    "SELECT @b := 2",
    "SET character_set_results = NULL",
    "SET session_track_system_variables = 'sql_mode,time_zone'",
    "SET sql_mode = ''",
    "SET time_zone = '+02:00'",
    "SET NAMES utf8mb4",
    "SET session_track_state_change = ON",
    "SET @c = 3",
    "SELECT @d := 4",
    "SET session_track_schema = OFF",
    "USE t_trackers",
    "SET session_track_system_variables = '*'",
    "SET div_precision_increment = 5",
];

async fn transcript(addr: std::net::SocketAddr, user: &str, pw: &str, eof: bool) -> Vec<String> {
    let mut caps = plain_caps() | Capabilities::CLIENT_SESSION_TRACK;
    if eof {
        caps |= Capabilities::CLIENT_DEPRECATE_EOF;
    }
    let mut w = login(addr, caps, user, pw).await;
    let mut out = Vec::new();
    for sql in SEQUENCE {
        for p in answer(&mut w, sql, eof).await {
            out.push(format!("{sql}: {p}"));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ok_packets_carry_only_the_clients_own_trackers() {
    fresh_db("t_trackers").await;
    let mut d = direct(Some("t_trackers")).await;
    mysql_async::prelude::Queryable::query_drop(&mut d, "CREATE TABLE t (a INT)")
        .await
        .unwrap();
    d.disconnect().await.unwrap();
    let s = server();
    let backend: std::net::SocketAddr = format!("{}:{}", s.host, s.port).parse().unwrap();
    for (pool, depth) in [(1, 1), (4, 16)] {
        let proxy = crate::reference::sluice_at(pool, depth).await;
        for eof in [false, true] {
            let direct = transcript(backend, APP_USER, APP_PASSWORD, eof).await;
            let through = transcript(proxy.local_addr(), "app", "secret", eof).await;
            let diff: Vec<String> = direct
                .iter()
                .zip(&through)
                .filter(|(a, b)| a != b)
                .map(|(a, b)| format!("direct {a}\nsluice {b}"))
                .collect();
            assert!(
                diff.is_empty() && direct.len() == through.len(),
                "pool {pool}, depth {depth}, deprecate_eof {eof}:\n{}",
                diff.join("\n")
            );
        }
        proxy.shutdown().await;
    }
}
