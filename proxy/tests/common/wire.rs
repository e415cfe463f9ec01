//! A raw client for the tests: bytes exactly as the test writes them, for traffic no driver
//! sends (fuzz, aborts) or that mysql_async cannot (executions that open a cursor).

// Each test binary includes this module and uses the parts it needs.
#![allow(dead_code)]

use std::time::Duration;

use bytes::BytesMut;
use sluice::protocol::{auth, write_packet, Capabilities, Handshake, HandshakeResponse};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A raw client for traffic no driver would send: bytes exactly as the test writes them.
pub struct Wire {
    pub socket: TcpStream,
    buf: Vec<u8>,
}

impl Wire {
    pub async fn connect(addr: std::net::SocketAddr) -> Option<Wire> {
        let socket = TcpStream::connect(addr).await.ok()?;
        // An abort is an RST, as when a process dies, not a polite FIN. (The deprecation is
        // about lingering drops blocking; a zero linger never blocks.)
        #[allow(deprecated)]
        socket.set_linger(Some(Duration::ZERO)).ok()?;
        Some(Wire {
            socket,
            buf: Vec::new(),
        })
    }

    /// Connects and logs in as `user`/`password`; None if anything is off.
    pub async fn login(addr: std::net::SocketAddr, user: &str, password: &str) -> Option<Wire> {
        let mut w = Wire::connect(addr).await?;
        let (_, greeting) = w.packet(Duration::from_secs(5)).await?;
        let hs = Handshake::decode(&greeting).ok()?;
        let payload = native_response(&hs, plain_caps(), 45, user, password);
        w.send(1, &payload).await.ok()?;
        match w.packet(Duration::from_secs(5)).await? {
            (2, p) if p.starts_with(&[0x00]) => Some(w),
            _ => None,
        }
    }

    pub async fn send(&mut self, seq: u8, payload: &[u8]) -> std::io::Result<()> {
        let mut out = BytesMut::new();
        write_packet(&mut out, seq, payload);
        self.socket.write_all(&out).await
    }

    /// A command (sequence id 0).
    pub async fn command(&mut self, code: u8, body: &[u8]) -> std::io::Result<()> {
        let mut p = vec![code];
        p.extend_from_slice(body);
        self.send(0, &p).await
    }

    /// The next single-chunk packet, or None on timeout or close.
    pub async fn packet(&mut self, within: Duration) -> Option<(u8, Vec<u8>)> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(packet) = take_packet(&mut self.buf) {
                return Some(packet);
            }
            let mut chunk = [0u8; 16 << 10];
            match tokio::time::timeout_at(deadline, self.socket.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => self.buf.extend_from_slice(&chunk[..n]),
                _ => return None,
            }
        }
    }

    /// Reads and discards whatever arrives within `within` (or until close).
    pub async fn drain(&mut self, within: Duration) {
        while self.packet(within).await.is_some() {}
    }
}

/// Capabilities of a plain 4.1 client without CLIENT_DEPRECATE_EOF (result sets end with EOF).
pub fn plain_caps() -> Capabilities {
    Capabilities::CLIENT_PROTOCOL_41
        | Capabilities::CLIENT_SECURE_CONNECTION
        | Capabilities::CLIENT_PLUGIN_AUTH
        | Capabilities::CLIENT_LONG_PASSWORD
        | Capabilities::CLIENT_TRANSACTIONS
        | Capabilities::CLIENT_MULTI_RESULTS
}

/// A mysql_native_password handshake response to `hs` for `user`/`password`, encoded.
pub fn native_response(
    hs: &Handshake,
    capabilities: Capabilities,
    collation: u8,
    user: &str,
    password: &str,
) -> BytesMut {
    let response = HandshakeResponse {
        capabilities,
        max_packet: 1 << 24,
        collation,
        user: user.as_bytes().to_vec(),
        auth_response: auth::native_scramble(&hs.nonce, password.as_bytes()),
        database: None,
        auth_plugin: Some(auth::NATIVE.as_bytes().to_vec()),
        connect_attrs: Vec::new(),
        mariadb_caps: 0,
    };
    let mut payload = BytesMut::new();
    response.encode(&mut payload);
    payload
}

/// Takes the first whole single-chunk packet off `buf`: its sequence id and payload.
pub fn take_packet(buf: &mut Vec<u8>) -> Option<(u8, Vec<u8>)> {
    let len = u32::from_le_bytes([*buf.first()?, *buf.get(1)?, *buf.get(2)?, 0]) as usize;
    if buf.len() < 4 + len {
        return None;
    }
    let seq = buf[3];
    let payload = buf[4..4 + len].to_vec();
    buf.drain(..4 + len);
    Some((seq, payload))
}
