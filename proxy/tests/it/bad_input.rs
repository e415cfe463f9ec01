//! Hostile input on raw TCP: garbage handshakes, wrong sequence ids, truncated, oversized and
//! stalled packets, unknown commands, and clients that vanish mid-result. Each case expects the
//! ERR the protocol allows, a disconnect of that client only, no panic, and 20 well-behaved
//! clients running checked queries meanwhile that only ever see correct answers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use sluice::protocol::{write_packet, Capabilities, ErrPacket, Handshake};
use sluice::stats::{BackendCloseReason, ClientCloseReason};
use sluice::{Config, ProxyHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::harness::*;
use crate::wire::{native_response, plain_caps, take_packet};

/// How long any single read of an expected answer may take.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
const LOGIN_TIMEOUT: Duration = Duration::from_millis(800);
const MAX_PACKET: u32 = 16 << 10;

fn hostile_config(pool_size: u32) -> Config {
    let mut cfg = config(pool_size);
    cfg.max_allowed_packet = MAX_PACKET;
    cfg.client_login_timeout = LOGIN_TIMEOUT;
    cfg
}

/// A hand-driven MySQL client: bytes exactly as the test writes them.
pub(crate) struct Raw {
    socket: TcpStream,
    buf: Vec<u8>,
}

/// What a read ended with.
#[derive(Debug)]
pub(crate) enum Read {
    Packet(u8, Vec<u8>),
    /// EOF or connection reset: sluice dropped us.
    Closed,
}

impl Raw {
    async fn connect(proxy: &ProxyHandle) -> Raw {
        // A small receive buffer, so that a client that stops reading stalls sluice's writes
        // after kilobytes, not after the tens of megabytes loopback autotuning allows.
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(32 << 10).expect("SO_RCVBUF");
        let socket = socket
            .connect(proxy.local_addr())
            .await
            .expect("tcp connect to sluice");
        Raw {
            socket,
            buf: Vec::new(),
        }
    }

    /// Connects and logs in as `app`/`secret` with mysql_native_password, without
    /// CLIENT_DEPRECATE_EOF (so result sets end with EOF packets).
    pub(crate) async fn login(proxy: &ProxyHandle) -> Raw {
        match Raw::login_with(proxy, 45).await {
            (raw, _, Read::Packet(2, p)) if p.first() == Some(&0x00) => raw,
            (_, _, other) => panic!("login through sluice failed: {other:?}"),
        }
    }

    /// Logs in as `app`/`secret` asking for handshake `collation`; returns the greeting and
    /// sluice's verdict.
    pub(crate) async fn login_with(proxy: &ProxyHandle, collation: u8) -> (Raw, Handshake, Read) {
        let mut raw = Raw::connect(proxy).await;
        let hs = raw.greeting().await;
        let payload = native_response(&hs, plain_caps(), collation, "app", "secret");
        raw.send(1, &payload).await;
        let verdict = raw.read().await;
        (raw, hs, verdict)
    }

    async fn greeting(&mut self) -> Handshake {
        match self.read().await {
            Read::Packet(0, p) => Handshake::decode(&p).expect("a valid greeting"),
            other => panic!("expected the greeting, got {other:?}"),
        }
    }

    /// Sends one packet with header `seq`.
    pub(crate) async fn send(&mut self, seq: u8, payload: &[u8]) {
        let mut out = BytesMut::new();
        write_packet(&mut out, seq, payload);
        self.send_bytes(&out).await;
    }

    async fn send_bytes(&mut self, bytes: &[u8]) {
        self.socket.write_all(bytes).await.expect("write to sluice");
    }

    /// The next packet (single-chunk), or `Closed`.
    pub(crate) async fn read(&mut self) -> Read {
        self.read_within(READ_TIMEOUT)
            .await
            .unwrap_or_else(|| panic!("sluice said nothing for {READ_TIMEOUT:?}"))
    }

    async fn read_within(&mut self, within: Duration) -> Option<Read> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some((seq, payload)) = take_packet(&mut self.buf) {
                return Some(Read::Packet(seq, payload));
            }
            let mut chunk = [0u8; 16 << 10];
            match tokio::time::timeout_at(deadline, self.socket.read(&mut chunk)).await {
                Err(_) => return None,
                Ok(Ok(0)) | Ok(Err(_)) => return Some(Read::Closed),
                Ok(Ok(n)) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// The next packet must be an ERR; returns it with its sequence id.
    pub(crate) async fn expect_err(&mut self) -> (u8, ErrPacket) {
        match self.read().await {
            Read::Packet(seq, p) if p.first() == Some(&0xFF) => (
                seq,
                ErrPacket::decode(&p, Capabilities::CLIENT_PROTOCOL_41)
                    .expect("a valid ERR packet"),
            ),
            other => panic!("expected an ERR packet, got {other:?}"),
        }
    }

    /// Sluice must close the connection within `within` (after any packets it still sends).
    pub(crate) async fn expect_closed_within(&mut self, within: Duration) {
        let start = Instant::now();
        loop {
            match self
                .read_within(within.saturating_sub(start.elapsed()))
                .await
            {
                Some(Read::Closed) => return,
                Some(Read::Packet(..)) => continue,
                None => panic!("sluice kept the connection open for {within:?}"),
            }
        }
    }

    /// Runs a COM_QUERY that returns one row with one column; returns that value (None =
    /// NULL) or the ERR code.
    pub(crate) async fn scalar(&mut self, sql: &str) -> Result<Option<String>, u16> {
        let mut payload = vec![0x03];
        payload.extend_from_slice(sql.as_bytes());
        self.send(0, &payload).await;
        let first = self.packet().await;
        match first.first() {
            Some(0xFF) => {
                let err = ErrPacket::decode(&first, Capabilities::CLIENT_PROTOCOL_41).expect("ERR");
                return Err(err.code);
            }
            Some(0x00) => panic!("{sql}: expected a result set, got OK"),
            _ => {}
        }
        // Column definitions up to the EOF, then rows up to the EOF.
        while !is_eof(&self.packet().await) {}
        let mut value = None;
        loop {
            let row = self.packet().await;
            if is_eof(&row) {
                return Ok(value);
            }
            value = match row.first() {
                Some(0xFB) => None,
                Some(&len) if len < 0xFB => {
                    Some(String::from_utf8_lossy(&row[1..1 + len as usize]).into_owned())
                }
                _ => panic!("{sql}: unexpected row {row:?}"),
            };
        }
    }

    pub(crate) async fn packet(&mut self) -> Vec<u8> {
        match self.read().await {
            Read::Packet(_, p) => p,
            Read::Closed => panic!("sluice closed the connection mid-response"),
        }
    }
}

fn is_eof(p: &[u8]) -> bool {
    p.first() == Some(&0xFE) && p.len() < 9
}

/// Well-behaved clients that run checked queries until stopped.
struct Checkers {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<u64>>,
}

impl Checkers {
    async fn start(proxy: &ProxyHandle, n: u64) -> Checkers {
        count_worker_panics();
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for c in 0..n {
            let opts = opts(proxy, "app", "secret", None);
            let stop = stop.clone();
            tasks.push(tokio::spawn(async move {
                let mut conn = Conn::new(opts).await.expect("checker connects");
                let mut i = 0u64;
                // At least a few queries each, however fast the hostile part is.
                while i < 3 || !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let (n, s): (u64, String) = conn
                        .query_first(format!(
                            "SELECT {c} * 1000000 + {i}, CONCAT('c{c}-', {i}, REPEAT('.', {i} % 40))"
                        ))
                        .await
                        .unwrap_or_else(|e| panic!("checker {c} query {i} failed: {e}"))
                        .expect("one row");
                    assert_eq!(n, c * 1_000_000 + i, "checker {c} got another client's answer");
                    assert_eq!(s, format!("c{c}-{i}{}", ".".repeat((i % 40) as usize)));
                }
                conn.disconnect().await.expect("checker disconnects");
                i
            }));
        }
        Checkers { stop, tasks }
    }

    /// Stops the checkers; every one must have finished cleanly.
    async fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        let mut total = 0;
        for t in self.tasks {
            total += t.await.expect("a checker failed");
        }
        assert!(total > 0);
    }
}

/// Afterwards: no panic, every client gone, no slot held, and sluice still serves.
async fn assert_healthy(proxy: &ProxyHandle) {
    assert_drained(proxy, Duration::from_secs(3)).await;
    assert_still_serves(proxy).await;
    assert_no_worker_panics();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_instead_of_the_handshake_response_gets_1043() {
    let proxy = start(hostile_config(4)).await;
    let checkers = Checkers::start(&proxy, 20).await;
    // A framed packet with nonsense inside (not even PROTOCOL_41).
    let mut raw = Raw::connect(&proxy).await;
    raw.greeting().await;
    raw.send(1, b"\xde\xad\xbe\xef garbage, not a handshake response")
        .await;
    let (seq, err) = raw.expect_err().await;
    assert_eq!((seq, err.code), (2, 1043), "{err:?}");
    raw.expect_closed_within(Duration::from_secs(2)).await;
    // A handshake response cut short inside the user name.
    let mut raw = Raw::connect(&proxy).await;
    raw.greeting().await;
    raw.send(
        1,
        &[0x8d, 0xa6, 0x0f, 0x00, 0, 0, 0, 1, 45, 0, 0, 0, b'a', b'p'],
    )
    .await;
    let (_, err) = raw.expect_err().await;
    assert_eq!(err.code, 1043, "{err:?}");
    raw.expect_closed_within(Duration::from_secs(2)).await;
    // Not MySQL at all: an HTTP request (its first bytes read as a 5.5 MB packet).
    let mut raw = Raw::connect(&proxy).await;
    raw.greeting().await;
    raw.send_bytes(b"GET / HTTP/1.1\r\nHost: sluice\r\n\r\n")
        .await;
    let (_, err) = raw.expect_err().await;
    assert!(matches!(err.code, 1043 | 1153), "{err:?}");
    raw.expect_closed_within(Duration::from_secs(2)).await;
    checkers.finish().await;
    assert_healthy(&proxy).await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_before_reading_the_greeting_is_rejected() {
    let proxy = start(hostile_config(4)).await;
    let checkers = Checkers::start(&proxy, 20).await;
    // A well-framed packet with the wrong sequence id (0), sent before the greeting arrives.
    let mut raw = Raw::connect(&proxy).await;
    raw.send(0, &[0x42; 40]).await;
    raw.greeting().await;
    let (_, err) = raw.expect_err().await;
    assert_eq!(err.code, 1043, "{err:?}");
    raw.expect_closed_within(Duration::from_secs(2)).await;
    // Random bytes, sent at once, then the client goes away.
    let mut raw = Raw::connect(&proxy).await;
    let noise: Vec<u8> = (0..300u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    raw.send_bytes(&noise).await;
    raw.greeting().await;
    drop(raw);
    // The same noise, but the client stays: dropped at client_login_timeout at the latest.
    let mut raw = Raw::connect(&proxy).await;
    raw.send_bytes(&noise[..7]).await;
    raw.greeting().await;
    raw.expect_closed_within(LOGIN_TIMEOUT + Duration::from_secs(2))
        .await;
    checkers.finish().await;
    assert_healthy(&proxy).await;
    assert!(
        proxy
            .context()
            .stats
            .client_closes_by(ClientCloseReason::HandshakeFailed)
            >= 1
    );
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_with_a_wrong_sequence_id_gets_1156_and_a_disconnect() {
    let proxy = start(hostile_config(4)).await;
    let checkers = Checkers::start(&proxy, 20).await;
    let mut raw = Raw::login(&proxy).await;
    assert_eq!(
        raw.scalar("SELECT 'in sync'").await,
        Ok(Some("in sync".into()))
    );
    raw.send(5, b"\x03SELECT 1").await;
    let (_, err) = raw.expect_err().await;
    assert_eq!(err.code, 1156, "{err:?}");
    assert_eq!(&err.sql_state, b"08S01");
    raw.expect_closed_within(Duration::from_secs(2)).await;
    checkers.finish().await;
    assert_healthy(&proxy).await;
    assert!(
        proxy
            .context()
            .stats
            .client_closes_by(ClientCloseReason::ProtocolError)
            >= 1
    );
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_packet_then_close_ends_only_that_session() {
    let proxy = start(hostile_config(4)).await;
    let checkers = Checkers::start(&proxy, 20).await;
    for cut in [1usize, 3, 4, 10] {
        let mut raw = Raw::login(&proxy).await;
        let mut packet = BytesMut::new();
        write_packet(&mut packet, 0, b"\x03SELECT 'this packet is cut short'");
        raw.send_bytes(&packet[..cut]).await;
        raw.socket.shutdown().await.expect("half-close");
        // sluice notices the EOF mid-packet and closes its side.
        raw.expect_closed_within(Duration::from_secs(2)).await;
    }
    checkers.finish().await;
    assert_healthy(&proxy).await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_packet_over_max_allowed_packet_gets_1153() {
    let proxy = start(hostile_config(4)).await;
    let checkers = Checkers::start(&proxy, 20).await;
    // Only the header: sluice must refuse from the length alone, without buffering it.
    let mut raw = Raw::login(&proxy).await;
    let len = MAX_PACKET as usize + 1;
    raw.send_bytes(&[len as u8, (len >> 8) as u8, (len >> 16) as u8, 0, 0x03])
        .await;
    let (_, err) = raw.expect_err().await;
    assert_eq!(err.code, 1153, "{err:?}");
    raw.expect_closed_within(Duration::from_secs(2)).await;
    // The whole oversized query.
    let mut raw = Raw::login(&proxy).await;
    let sql = format!("\x03SELECT '{}'", "x".repeat(MAX_PACKET as usize));
    raw.send(0, sql.as_bytes()).await;
    let (_, err) = raw.expect_err().await;
    assert_eq!(err.code, 1153, "{err:?}");
    raw.expect_closed_within(Duration::from_secs(2)).await;
    // A query just under the limit still works.
    let mut raw = Raw::login(&proxy).await;
    let fits = "y".repeat(MAX_PACKET as usize - 64);
    assert_eq!(
        raw.scalar(&format!("SELECT LENGTH('{fits}')")).await,
        Ok(Some(fits.len().to_string()))
    );
    drop(raw);
    checkers.finish().await;
    assert_healthy(&proxy).await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_unsupported_commands_get_1047_and_the_session_continues() {
    let proxy = start(hostile_config(4)).await;
    let checkers = Checkers::start(&proxy, 20).await;
    let mut raw = Raw::login(&proxy).await;
    // 0x42: no such command. 0x12: COM_BINLOG_DUMP (position, flags, server id, file name).
    let binlog_dump = [
        &[0x12u8, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0][..],
        b"mysql-bin.000001",
    ]
    .concat();
    for payload in [
        &[0x42u8, 1, 2, 3][..],
        &binlog_dump,
        &[0x42][..],
        &[0x0f][..],
    ] {
        raw.send(0, payload).await;
        let (seq, err) = raw.expect_err().await;
        assert_eq!(
            (seq, err.code),
            (1, 1047),
            "command 0x{:02x}: {err:?}",
            payload[0]
        );
        assert_eq!(
            raw.scalar("SELECT CONCAT('still', ' here')").await,
            Ok(Some("still here".into()))
        );
    }
    // Some state, then more refused commands: the session keeps it.
    assert_eq!(
        raw.scalar("SELECT @kept := 'kept'").await,
        Ok(Some("kept".into()))
    );
    raw.send(0, &[0x42]).await;
    assert_eq!(raw.expect_err().await.1.code, 1047);
    assert_eq!(raw.scalar("SELECT @kept").await, Ok(Some("kept".into())));
    drop(raw);
    checkers.finish().await;
    assert_healthy(&proxy).await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_stalling_mid_packet_is_dropped_after_client_login_timeout() {
    let proxy = start(hostile_config(4)).await;
    let checkers = Checkers::start(&proxy, 20).await;
    // Mid-command.
    let mut raw = Raw::login(&proxy).await;
    let mut packet = BytesMut::new();
    write_packet(&mut packet, 0, b"\x03SELECT 'never finished'");
    raw.send_bytes(&packet[..9]).await;
    let start = Instant::now();
    let (_, err) = raw.expect_err().await;
    let waited = start.elapsed();
    assert_eq!(err.code, 1159, "{err:?}");
    assert!(
        waited >= LOGIN_TIMEOUT - Duration::from_millis(100),
        "dropped too early: {waited:?}"
    );
    raw.expect_closed_within(Duration::from_secs(2)).await;
    // Mid-handshake response.
    let mut raw = Raw::connect(&proxy).await;
    raw.greeting().await;
    raw.send_bytes(&[60, 0, 0, 1, 0x8d, 0xa6]).await;
    let start = Instant::now();
    raw.expect_closed_within(LOGIN_TIMEOUT + Duration::from_secs(2))
        .await;
    assert!(start.elapsed() >= LOGIN_TIMEOUT - Duration::from_millis(100));
    checkers.finish().await;
    assert_healthy(&proxy).await;
    assert!(
        proxy
            .context()
            .stats
            .client_closes_by(ClientCloseReason::LoginTimeout)
            >= 1
    );
    proxy.shutdown().await;
}

/// A ~20 MB result, so the client vanishes while sluice is still relaying it (the sequence
/// table of a database the application account may read).
const BIG_RESULT: &str = "SELECT seq, REPEAT('x', 1000) FROM bench.seq_1_to_20000";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_vanishing_mid_result_never_leaves_a_dirty_backend() {
    let proxy = start(hostile_config(2)).await;
    let checkers = Checkers::start(&proxy, 20).await;
    let stats = proxy.context().stats.clone();
    let broken_before = stats.backend_closes_by(BackendCloseReason::Broken);
    for _ in 0..3 {
        let mut raw = Raw::login(&proxy).await;
        let mut payload = vec![0x03];
        payload.extend_from_slice(BIG_RESULT.as_bytes());
        raw.send(0, &payload).await;
        let mut some = [0u8; 100];
        tokio::time::timeout(READ_TIMEOUT, raw.socket.read_exact(&mut some))
            .await
            .expect("the result starts in time")
            .expect("the result starts");
        // Unread data in our receive buffer: close() sends a RST.
        drop(raw);
    }
    // Each half-relayed backend is closed, not returned to the pool.
    assert!(
        eventually(Duration::from_secs(5), || stats
            .backend_closes_by(BackendCloseReason::Broken)
            >= broken_before + 3)
        .await,
        "backends closed as broken: {}",
        stats.backend_closes_by(BackendCloseReason::Broken) - broken_before
    );
    // The server is not still sending those results to anyone.
    let mut d = direct(None).await;
    let q =
        "SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE '%seq_1_to_20000%' \
             AND info NOT LIKE '%processlist%'";
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut busy = true;
    while busy && Instant::now() < deadline {
        busy = d.query_first::<u64, _>(q).await.unwrap() != Some(0);
        if busy {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert!(!busy, "the abandoned query still runs on the server");
    d.disconnect().await.unwrap();
    // The next client gets a whole, correct big result on the same pool.
    let mut c = connect(&proxy, None).await;
    let rows: Vec<(u32, String)> = c.query(BIG_RESULT).await.unwrap();
    assert_eq!(rows.len(), 20000);
    assert!(rows
        .iter()
        .enumerate()
        .all(|(i, (n, s))| *n as usize == i + 1 && s.len() == 1000));
    c.disconnect().await.unwrap();
    checkers.finish().await;
    assert_healthy(&proxy).await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_dropped_after_client_write_timeout() {
    let mut cfg = hostile_config(2);
    cfg.client_write_timeout = Duration::from_millis(700);
    let proxy = start(cfg).await;
    let checkers = Checkers::start(&proxy, 20).await;
    let stats = proxy.context().stats.clone();
    let mut raw = Raw::login(&proxy).await;
    let mut payload = vec![0x03];
    payload.extend_from_slice(BIG_RESULT.as_bytes());
    raw.send(0, &payload).await;
    // Never read: the socket buffers fill up and sluice's write stalls.
    assert!(
        eventually(Duration::from_secs(5), || stats
            .client_closes_by(ClientCloseReason::WriteTimeout)
            >= 1)
        .await,
        "the stalled reader was not dropped"
    );
    assert!(
        eventually(Duration::from_secs(2), || stats
            .backend_closes_by(BackendCloseReason::Broken)
            >= 1)
        .await
    );
    drop(raw);
    checkers.finish().await;
    assert_healthy(&proxy).await;
    proxy.shutdown().await;
}
