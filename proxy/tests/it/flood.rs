//! Slow-login flood: thousands of connections that never finish the handshake are
//! dropped after `client_login_timeout`, and real clients log in and query normally while
//! the flood holds its sockets.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use sluice::stats::ClientCloseReason;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use crate::harness::*;

const FLOOD: usize = 5_000;
const REAL_CLIENTS: usize = 20;
const LOGIN_TIMEOUT: Duration = Duration::from_secs(4);
/// Flood sockets on both ends live in this process, plus what concurrent tests use.
const FDS_NEEDED: u64 = 2 * FLOOD as u64 + 2_000;

/// What one flood socket does after connecting.
#[derive(Clone, Copy)]
enum Stall {
    /// Sends nothing at all.
    Silent,
    /// Sends a header announcing 100 bytes, then 10 of them.
    HalfPacket,
    /// Sends two bytes of a header.
    HalfHeader,
}

/// Connects and stalls; returns the socket and when the connect started (sluice's login
/// timer cannot start earlier).
async fn open_flood_socket(
    addr: std::net::SocketAddr,
    stall: Stall,
) -> std::io::Result<(TcpStream, Instant)> {
    let opened = Instant::now();
    let mut s = TcpStream::connect(addr).await?;
    match stall {
        Stall::Silent => {}
        Stall::HalfPacket => {
            let mut bytes = vec![100, 0, 0, 1];
            bytes.extend_from_slice(&[0x0d; 10]);
            s.write_all(&bytes).await?;
        }
        Stall::HalfHeader => s.write_all(&[0x20, 0x00]).await?,
    }
    Ok((s, opened))
}

/// Reads (the greeting) until the peer closes with EOF or a reset; when it did, if within
/// `within`.
async fn closed_by_peer(mut s: TcpStream, within: Duration) -> Option<Instant> {
    let mut buf = [0u8; 512];
    tokio::time::timeout(within, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return Instant::now(),
                Ok(_) => {}
            }
        }
    })
    .await
    .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_flood_is_dropped_after_login_timeout_and_real_clients_get_through() {
    let limit = dbkit::raise_nofile_limit();
    if limit < FDS_NEEDED {
        skip_or_fail(&format!(
            "handshake flood: RLIMIT_NOFILE is {limit}, the test needs {FDS_NEEDED} \
             (raise the hard limit, e.g. `ulimit -Hn 20000`)"
        ));
        return;
    }
    let mut cfg = config(4);
    cfg.client_login_timeout = LOGIN_TIMEOUT;
    cfg.max_client_connections = (FLOOD + REAL_CLIENTS + 100) as u32;
    let proxy = start(cfg).await;
    let addr = proxy.local_addr();
    let ctx = proxy.context().clone();

    // Open the flood, a few hundred connects at a time (the listen backlog is 4096).
    let started = Instant::now();
    let gate = Arc::new(Semaphore::new(256));
    let opens: Vec<_> = (0..FLOOD)
        .map(|i| {
            let gate = gate.clone();
            let stall = [Stall::Silent, Stall::HalfPacket, Stall::HalfHeader][i % 3];
            tokio::spawn(async move {
                let _permit = gate.acquire_owned().await.expect("gate open");
                open_flood_socket(addr, stall).await
            })
        })
        .collect();
    let mut flood = Vec::with_capacity(FLOOD);
    for open in opens {
        flood.push(open.await.expect("open task").expect("flood connect"));
    }
    let opened_in = started.elapsed();

    // Real clients, while every flood socket is still open on sluice's side.
    let real: Vec<_> = (0..REAL_CLIENTS)
        .map(|i| {
            let opts = opts(&proxy, "app", "secret", None);
            tokio::spawn(async move {
                let mut c = mysql_async::Conn::new(opts).await?;
                for q in 0..5u64 {
                    let want = i as u64 * 100 + q;
                    let got: Option<u64> = c.query_first(format!("SELECT {want}")).await?;
                    assert_eq!(got, Some(want), "client {i} got a wrong answer");
                }
                c.disconnect().await?;
                Ok::<_, mysql_async::Error>(())
            })
        })
        .collect();
    for (i, r) in real.into_iter().enumerate() {
        r.await
            .expect("client task")
            .unwrap_or_else(|e| panic!("real client {i} failed during the flood: {e}"));
    }
    let real_done = started.elapsed();
    let login_timeouts_so_far = ctx.stats.client_closes_by(ClientCloseReason::LoginTimeout);
    assert!(
        login_timeouts_so_far < FLOOD as u64 / 2,
        "the real clients finished only after the flood timed out ({real_done:?}; flood opened \
         in {opened_in:?}): they did not run during the flood"
    );

    // Every flood socket is closed by sluice after the login timeout, none before it.
    let waits: Vec<_> = flood
        .into_iter()
        .map(|(s, opened)| {
            let wait = closed_by_peer(s, LOGIN_TIMEOUT + Duration::from_secs(15));
            tokio::spawn(async move { (opened, wait.await) })
        })
        .collect();
    let (mut still_open, mut early) = (0, 0);
    for w in waits {
        match w.await.expect("wait task") {
            (_, None) => still_open += 1,
            (opened, Some(closed)) if closed < opened + LOGIN_TIMEOUT => early += 1,
            _ => {}
        }
    }
    assert_eq!(still_open, 0, "flood sockets sluice never closed");
    assert_eq!(early, 0, "flood sockets closed before client_login_timeout");
    assert_eq!(
        ctx.stats.client_closes_by(ClientCloseReason::LoginTimeout),
        FLOOD as u64,
        "every flood socket ends as a login timeout"
    );
    assert_drained(&proxy, Duration::from_secs(10)).await;
    eprintln!(
        "handshake flood: {FLOOD} stalled logins opened in {opened_in:?}, {REAL_CLIENTS} real \
         clients done at {real_done:?}, all stalled sockets closed by {:?}",
        started.elapsed()
    );
    proxy.shutdown().await;
}
