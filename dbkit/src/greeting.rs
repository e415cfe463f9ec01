//! Waiting for a server: connect over TCP and read its initial handshake packet.
//!
//! A server sends its greeting only once it accepts connections (after the init file ran),
//! so a greeting that parses is our definition of "up". Only the first few fields are read:
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase_packets_protocol_handshake_v10.html>

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// The part of a server greeting dbkit cares about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Greeting {
    /// Protocol version, 10 for every server since MySQL 3.21.
    pub protocol: u8,
    /// The version string as sent, e.g. `5.5.5-10.11.19-MariaDB-0+deb12u1`.
    pub server_version: String,
}

impl Greeting {
    /// The version without MariaDB's `5.5.5-` replication-compatibility prefix.
    pub fn version(&self) -> &str {
        self.server_version
            .strip_prefix("5.5.5-")
            .unwrap_or(&self.server_version)
    }
}

/// Why a greeting could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GreetingError {
    /// Connecting or reading failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The server answered with an ERR packet (e.g. too many connections, host blocked).
    #[error("server refused the connection: {code} {message}")]
    Refused {
        /// MySQL error code.
        code: u16,
        /// Error text.
        message: String,
    },
    /// The bytes are not a protocol-10 greeting.
    #[error("not a MySQL greeting: {0}")]
    Malformed(&'static str),
}

/// Connects to `addr` and reads one greeting, each step bounded by `timeout`.
pub fn read_greeting(addr: SocketAddr, timeout: Duration) -> Result<Greeting, GreetingError> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    let mut header = [0u8; 4];
    stream.read_exact(&mut header)?;
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    if len > 64 * 1024 {
        return Err(GreetingError::Malformed("greeting longer than 64 KiB"));
    }
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload)?;
    parse_greeting(&payload)
}

/// Parses a greeting payload (the packet without its 4-byte header).
pub fn parse_greeting(payload: &[u8]) -> Result<Greeting, GreetingError> {
    match payload.first() {
        None => Err(GreetingError::Malformed("empty packet")),
        Some(0xff) => Err(parse_err(payload)),
        Some(&protocol) => {
            if protocol != 10 {
                return Err(GreetingError::Malformed("protocol version is not 10"));
            }
            let rest = &payload[1..];
            let end = rest
                .iter()
                .position(|&b| b == 0)
                .ok_or(GreetingError::Malformed("unterminated version string"))?;
            Ok(Greeting {
                protocol,
                server_version: String::from_utf8_lossy(&rest[..end]).into_owned(),
            })
        }
    }
}

fn parse_err(payload: &[u8]) -> GreetingError {
    if payload.len() < 3 {
        return GreetingError::Malformed("truncated ERR packet");
    }
    let code = u16::from_le_bytes([payload[1], payload[2]]);
    // Before the handshake there is no SQLSTATE marker; skip it if present anyway.
    let mut msg = &payload[3..];
    if msg.first() == Some(&b'#') && msg.len() >= 6 {
        msg = &msg[6..];
    }
    GreetingError::Refused {
        code,
        message: String::from_utf8_lossy(msg).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Start of a real MariaDB 10.11 greeting (captured on this machine; salt bytes zeroed).
    const MARIADB: &[u8] = b"\x0a5.5.5-10.11.19-MariaDB-0+deb12u1\x00\x03\x00\x00\x00\
\x00\x00\x00\x00\x00\x00\x00\x00\x00\xfe\xf7\x2d\x02\x00\xff\x81\x15";

    #[test]
    fn parses_a_mariadb_greeting_and_strips_the_prefix() {
        let g = parse_greeting(MARIADB).expect("parse");
        assert_eq!(g.protocol, 10);
        assert_eq!(g.server_version, "5.5.5-10.11.19-MariaDB-0+deb12u1");
        assert_eq!(g.version(), "10.11.19-MariaDB-0+deb12u1");
    }

    #[test]
    fn parses_a_too_many_connections_error() {
        let bytes = b"\xff\x10\x04Too many connections";
        match parse_greeting(bytes) {
            Err(GreetingError::Refused { code, message }) => {
                assert_eq!(code, 1040);
                assert_eq!(message, "Too many connections");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn rejects_truncated_and_foreign_bytes() {
        assert!(parse_greeting(b"").is_err());
        assert!(parse_greeting(b"\x0a5.5.5").is_err());
        assert!(parse_greeting(b"\x09abc\x00").is_err());
        assert!(parse_greeting(b"\xff\x10").is_err());
    }
}
