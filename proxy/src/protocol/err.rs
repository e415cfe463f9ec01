//! ERR packets.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_err_packet.html>,
//! <https://mariadb.com/kb/en/err_packet/>.
//!
//! An ERR carries no status flags: the transaction state after an error is only known from the
//! next OK.

use bytes::{BufMut, BytesMut};

use super::buf::Reader;
use super::codes::{self, ErrorCode};
use super::error::{Error, Result};
use super::flags::Capabilities;

const HEADER: u8 = 0xFF;
const STATE_MARKER: u8 = b'#';
/// The SQLSTATE of errors that have none of their own ("general error").
const GENERAL_STATE: [u8; 5] = *b"HY000";

/// An ERR packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrPacket {
    pub code: u16,
    pub sql_state: [u8; 5],
    pub message: Vec<u8>,
}

impl ErrPacket {
    /// `sql_state` must be 5 ASCII characters; anything else becomes "HY000".
    pub fn new(code: u16, sql_state: &str, message: impl Into<Vec<u8>>) -> Self {
        let sql_state = <[u8; 5]>::try_from(sql_state.as_bytes()).unwrap_or(GENERAL_STATE);
        ErrPacket {
            code,
            sql_state,
            message: message.into(),
        }
    }

    /// An error sluice itself raises, from its `codes` table.
    pub fn from_code(code: ErrorCode, message: impl Into<Vec<u8>>) -> Self {
        Self::new(code.code, code.sql_state, message)
    }

    pub fn decode(payload: &[u8], caps: Capabilities) -> Result<Self> {
        let mut r = Reader::named(payload, "ERR packet");
        if r.u8()? != HEADER {
            return Err(Error::Malformed {
                what: "ERR packet header",
            });
        }
        let code = r.u16()?;
        let mut sql_state = GENERAL_STATE;
        // The marker is optional: servers omit it for errors raised before the handshake
        // finished (e.g. "Too many connections"), when the client's caps are not known yet.
        if caps.contains(Capabilities::CLIENT_PROTOCOL_41) && r.peek_u8() == Some(STATE_MARKER) {
            r.skip(1)?;
            sql_state.copy_from_slice(r.bytes(5)?);
        }
        Ok(ErrPacket {
            code,
            sql_state,
            message: r.rest().to_vec(),
        })
    }

    /// Writes the payload (no header), always in the 4.1 form with the SQLSTATE.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u8(HEADER);
        out.put_u16_le(self.code);
        out.put_u8(STATE_MARKER);
        out.put_slice(&self.sql_state);
        out.put_slice(&self.message);
    }

    /// The SQLSTATE as text ("HY000" if the bytes are not ASCII).
    pub fn sql_state_str(&self) -> &str {
        std::str::from_utf8(&self.sql_state).unwrap_or("HY000")
    }
}

impl std::fmt::Display for ErrPacket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ERROR {} ({}): {}",
            self.code,
            self.sql_state_str(),
            String::from_utf8_lossy(&self.message)
        )
    }
}

/// Is this payload an ERR packet (first byte 0xFF)?
pub fn is_err(payload: &[u8]) -> bool {
    payload.first() == Some(&HEADER)
}

/// The code of an ERR payload (`None` for any other packet).
pub fn code_of(payload: &[u8]) -> Option<u16> {
    match payload {
        [HEADER, lo, hi, ..] => Some(u16::from_le_bytes([*lo, *hi])),
        _ => None,
    }
}

/// Whether an ERR payload is a parse error: the statement was refused before anything of
/// it ran (ER_PARSE_ERROR, ER_SYNTAX_ERROR).
pub fn is_parse_error(payload: &[u8]) -> bool {
    code_of(payload).is_some_and(|c| c == codes::PARSE_ERROR.code || c == codes::SYNTAX_ERROR.code)
}

/// Writes to `out` the ERR payload `payload` of a command on a prepared statement with the
/// statement named by `id`: the errors that name one (ER_UNKNOWN_STMT_HANDLER,
/// ER_STMT_HAS_NO_OPEN_CURSOR) quote the id in parentheses, "The statement (12) has no open
/// cursor". False, and `out` untouched, for any other payload.
pub fn with_stmt_id(payload: &[u8], id: u32, out: &mut BytesMut) -> bool {
    let names = code_of(payload).is_some_and(|c| {
        c == codes::UNKNOWN_STMT_HANDLER.code || c == codes::STMT_HAS_NO_OPEN_CURSOR.code
    });
    if !names {
        return false;
    }
    // The first "(digits)" of the message (after the code and the SQLSTATE).
    let text = if payload.get(3) == Some(&STATE_MARKER) {
        9
    } else {
        3
    };
    let Some(rest) = payload.get(text..) else {
        return false;
    };
    let found = rest.iter().enumerate().find_map(|(i, &b)| {
        let digits = rest[i + 1..]
            .iter()
            .take_while(|d| d.is_ascii_digit())
            .count();
        (b == b'(' && digits > 0 && rest.get(i + 1 + digits) == Some(&b')'))
            .then_some((text + i + 1, digits))
    });
    let Some((at, len)) = found else {
        return false;
    };
    out.put_slice(&payload[..at]);
    out.put_slice(id.to_string().as_bytes());
    out.put_slice(&payload[at + len..]);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::codes;
    use crate::protocol::testutil::hex;

    /// MariaDB 10.11 in the middle of a result set: 1242 Subquery returns more than 1 row.
    const SUBQUERY_ERR: &str =
        "ffda0423323130303053756271756572792072657475726e73206d6f7265207468616e203120726f77";

    #[test]
    fn decodes_mariadb_err_and_encodes_it_back() {
        let raw = hex(SUBQUERY_ERR);
        let err = ErrPacket::decode(&raw, Capabilities::CLIENT_PROTOCOL_41).unwrap();
        assert_eq!(err.code, 1242);
        assert_eq!(&err.sql_state, b"21000");
        assert_eq!(err.message, b"Subquery returns more than 1 row");
        assert_eq!(
            err.to_string(),
            "ERROR 1242 (21000): Subquery returns more than 1 row"
        );
        let mut out = BytesMut::new();
        err.encode(&mut out);
        assert_eq!(&out[..], &raw[..]);
        assert!(is_err(&raw));
    }

    #[test]
    fn state_marker_is_optional() {
        // MariaDB refusing a connection before the handshake: 1040 without '#'.
        let raw = [&[0xff, 0x10, 0x04][..], b"Too many connections"].concat();
        let err = ErrPacket::decode(&raw, Capabilities::CLIENT_PROTOCOL_41).unwrap();
        assert_eq!((err.code, &err.sql_state), (1040, b"HY000"));
        assert_eq!(err.message, b"Too many connections");
    }

    #[test]
    fn builds_sluice_errors() {
        let err = ErrPacket::from_code(codes::ACCESS_DENIED, "Access denied for user 'bob'");
        assert_eq!((err.code, err.sql_state_str()), (1045, "28000"));
        assert_eq!(ErrPacket::new(1, "bad", "x").sql_state_str(), "HY000");
    }

    #[test]
    fn no_prefix_panics() {
        let raw = hex(SUBQUERY_ERR);
        for end in 0..raw.len() {
            let _ = ErrPacket::decode(&raw[..end], Capabilities::CLIENT_PROTOCOL_41);
        }
        for end in 0..3 {
            assert!(ErrPacket::decode(&raw[..end], Capabilities::CLIENT_PROTOCOL_41).is_err());
        }
        // The marker is there but the state is cut short.
        assert!(ErrPacket::decode(&raw[..6], Capabilities::CLIENT_PROTOCOL_41).is_err());
    }

    #[test]
    fn errors_that_name_a_statement_name_the_clients_id() {
        let payload = |code, msg: &str| {
            let mut out = BytesMut::new();
            ErrPacket::new(code, "HY000", msg).encode(&mut out);
            out
        };
        let fetch = payload(1421, "The statement (34) has no open cursor");
        let mut out = BytesMut::new();
        assert!(with_stmt_id(&fetch, 4, &mut out));
        assert_eq!(out, payload(1421, "The statement (4) has no open cursor"));
        let unknown = payload(
            1243,
            "Unknown prepared statement handler (7) given to mysqld_stmt_fetch",
        );
        out.clear();
        assert!(with_stmt_id(&unknown, 123, &mut out));
        assert_eq!(
            out,
            payload(
                1243,
                "Unknown prepared statement handler (123) given to mysqld_stmt_fetch"
            )
        );
        // Other errors, other packets, and messages without a number stay.
        out.clear();
        for other in [
            payload(1064, "near '(3)' at line 1"),
            payload(1421, "The statement () has no open cursor"),
            BytesMut::from(&b"\x00\x00\x00"[..]),
            BytesMut::new(),
        ] {
            assert!(!with_stmt_id(&other, 4, &mut out));
        }
        assert!(out.is_empty());
        assert!(is_parse_error(&payload(1064, "x")) && is_parse_error(&payload(1149, "x")));
        assert!(!is_parse_error(&payload(1054, "x")) && !is_parse_error(b"\x00"));
    }
}
