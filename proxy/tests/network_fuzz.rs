//! Network fuzz next to 50 checked clients: hostile frames (flipped bytes, wrong sequence ids and
//! lengths, truncations, garbage) from ten fuzzers while 50 well-behaved clients check every
//! answer. It is a binary of its own so that the process's VmRSS is sluice's and its clients'
//! alone: in the shared integration binary, other tests' result sets and buffers move it.

#[path = "it/harness.rs"]
mod harness;
#[path = "common/wire.rs"]
mod wire;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use mysql_async::prelude::*;
use mysql_async::Conn;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice::protocol::write_packet;
use sluice::ProxyHandle;
use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;

use harness::*;
use wire::Wire;

fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// Valid client packets to mutate: (sequence id, payload).
fn valid_traffic(rng: &mut StdRng) -> Vec<(u8, Vec<u8>)> {
    let n: u32 = rng.gen_range(0..1000);
    let with = |code: u8, body: &[u8]| {
        let mut p = vec![code];
        p.extend_from_slice(body);
        (0u8, p)
    };
    let mut execute = vec![0x17];
    execute.extend_from_slice(&1u32.to_le_bytes());
    execute.extend_from_slice(&[0, 1, 0, 0, 0, 0, 1, 8, 0]);
    execute.extend_from_slice(&u64::from(n).to_le_bytes());
    vec![
        with(0x03, format!("SELECT {n} + 1").as_bytes()),
        with(0x03, b"SELECT 'abc', REPEAT('x', 300)"),
        with(0x03, b"SET @fuzz = 1"),
        with(0x03, b"BEGIN"),
        with(0x03, b"ROLLBACK"),
        with(0x03, b"DO 1; SELECT 2"),
        with(0x0e, b""),
        with(0x02, b"mysql"),
        with(0x16, b"SELECT ? + 1"),
        (0, execute),
        with(0x18, &[1, 0, 0, 0, 0, 0, b'x']),
        with(0x1c, &[1, 0, 0, 0, 5, 0, 0, 0]),
        with(0x1a, &[1, 0, 0, 0]),
        with(0x19, &[1, 0, 0, 0]),
        with(0x11, b"app\0\x14abcdefghijklmnopqrst"),
        with(0x1f, b""),
        with(0x1b, &[1, 0]),
        with(0x04, b"dual\0"),
        with(0x09, b""),
    ]
}

/// One fuzz session: log in (usually), then send mutated valid traffic until sluice hangs
/// up or the budget is spent. Returns how many frames were sent.
async fn fuzz_session(addr: std::net::SocketAddr, rng: &mut StdRng) -> u64 {
    let mut w = if rng.gen_bool(0.85) {
        // Another user than the checkers': a flipped byte can make a COM_PROCESS_KILL, and a
        // user may kill its own sessions (as in MySQL), not other users'.
        match Wire::login(addr, "fuzz", "fuzz-pw").await {
            Some(w) => w,
            None => return 0,
        }
    } else {
        // Mutate the handshake response instead.
        let Some(mut w) = Wire::connect(addr).await else {
            return 0;
        };
        if w.packet(Duration::from_secs(2)).await.is_none() {
            return 0;
        }
        w
    };
    let traffic = valid_traffic(rng);
    let mut sent = 0;
    for _ in 0..rng.gen_range(1..12) {
        let (mut seq, mut payload) = traffic[rng.gen_range(0..traffic.len())].clone();
        let mut raw = BytesMut::new();
        match rng.gen_range(0..8) {
            // Flipped bytes.
            0 | 1 => {
                for _ in 0..rng.gen_range(1..4) {
                    let i = rng.gen_range(0..payload.len());
                    payload[i] ^= 1 << rng.gen_range(0..8);
                }
                write_packet(&mut raw, seq, &payload);
            }
            // Wrong sequence id.
            2 => {
                seq = rng.gen_range(1..=255);
                write_packet(&mut raw, seq, &payload);
            }
            // Truncated: the header promises more than is sent (sluice must wait, not misparse).
            3 => {
                write_packet(&mut raw, seq, &payload);
                let cut = rng.gen_range(1..raw.len());
                raw.truncate(cut);
            }
            // Wrong length: shorter than the payload, so the rest is read as a next header.
            4 => {
                write_packet(&mut raw, seq, &payload);
                let len = rng.gen_range(0..payload.len()) as u32;
                raw[..3].copy_from_slice(&len.to_le_bytes()[..3]);
            }
            // Huge length field (a 16 MiB chunk that never arrives, or a continuation chain).
            5 => {
                raw.extend_from_slice(&[0xFF, 0xFF, 0xFF, seq]);
                raw.extend_from_slice(&payload);
            }
            // Random garbage.
            6 => {
                let n = rng.gen_range(1..64);
                raw.extend((0..n).map(|_| rng.gen::<u8>()));
            }
            // Valid, but out of order (the traffic list mixes stmt ids that do not exist,
            // fetches without cursors, change-user with a bad scramble...).
            _ => {
                write_packet(&mut raw, seq, &payload);
            }
        }
        if w.socket.write_all(&raw).await.is_err() {
            break;
        }
        sent += 1;
        // Read what comes; a short wait keeps the test busy rather than waiting on stalls.
        w.drain(Duration::from_millis(40)).await;
        if rng.gen_bool(0.3) {
            break;
        }
    }
    sent
}

/// 50 well-behaved clients verifying every answer: text queries and `SELECT ? + 1`.
fn checked_clients(proxy: &ProxyHandle, n: u64, stop: Arc<AtomicBool>) -> Vec<JoinHandle<u64>> {
    (0..n)
        .map(|c| {
            let opts = opts(proxy, "app", "secret", None);
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut conn = Conn::new(opts).await.expect("checker connects");
                let mut i = 0u64;
                while i < 3 || !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let want = c * 1_000_000 + i;
                    if i.is_multiple_of(3) {
                        let got: Option<u64> = conn
                            .exec_first("SELECT ? + 1", (want - 1,))
                            .await
                            .unwrap_or_else(|e| panic!("checker {c} execute {i} failed: {e}"));
                        assert_eq!(got, Some(want), "checker {c} got another answer");
                    } else {
                        let (n, s): (u64, String) = conn
                            .query_first(format!(
                                "SELECT {c} * 1000000 + {i}, CONCAT('c{c}-', {i}, REPEAT('.', {i} % 50))"
                            ))
                            .await
                            .unwrap_or_else(|e| panic!("checker {c} query {i} failed: {e}"))
                            .expect("one row");
                        assert_eq!(n, want, "checker {c} got another client's answer");
                        assert_eq!(s, format!("c{c}-{i}{}", ".".repeat((i % 50) as usize)));
                    }
                }
                conn.disconnect().await.expect("checker disconnects");
                i
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_fuzz_next_to_50_checked_clients() {
    count_worker_panics();
    let secs: u64 = std::env::var("SLUICE_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let mut cfg = config(8);
    cfg.max_allowed_packet = 1 << 20;
    cfg.client_login_timeout = Duration::from_secs(1);
    let mut fuzz_user = cfg.users[0].clone();
    fuzz_user.name = "fuzz".into();
    fuzz_user.password = sluice::config::Secret::new("fuzz-pw".to_string());
    cfg.users.push(fuzz_user);
    let proxy = start(cfg).await;
    let addr = proxy.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let checkers = checked_clients(&proxy, 50, stop.clone());
    // Warm up (checkers connected, pool open) before the baseline.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let rss_before = vm_rss_kib();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let frames = Arc::new(AtomicU64::new(0));
    let fuzzers: Vec<_> = (0..10u64)
        .map(|f| {
            let frames = frames.clone();
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(0xF022 + f);
                while Instant::now() < deadline {
                    let n = fuzz_session(addr, &mut rng).await;
                    frames.fetch_add(n, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for f in fuzzers {
        f.await.expect("a fuzzer task panicked");
    }
    tokio::time::sleep_until(deadline.into()).await;
    stop.store(true, Ordering::Relaxed);
    let mut answers = 0;
    for t in checkers {
        answers += t.await.expect("a checker saw a wrong answer or an error");
    }
    assert_drained(&proxy, Duration::from_secs(5)).await;
    let rss_after = vm_rss_kib();
    let frames = frames.load(Ordering::Relaxed);
    eprintln!(
        "network fuzz: {secs} s, {frames} hostile frames, {answers} checked answers, \
         VmRSS {rss_before} -> {rss_after} KiB"
    );
    assert!(frames > 100, "the fuzzers sent only {frames} frames");
    // The bound: 1 MiB max_allowed_packet per hostile session plus buffers; 64 MiB of growth
    // would mean input is being retained.
    assert!(
        rss_after < rss_before + 64 * 1024,
        "VmRSS grew from {rss_before} to {rss_after} KiB"
    );
    assert_still_serves(&proxy).await;
    assert_no_worker_panics();
    proxy.shutdown().await;
}
