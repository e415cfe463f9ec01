//! ERR packets.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_err_packet.html>,
//! <https://mariadb.com/kb/en/err_packet/>.
//!
//! An ERR carries no status flags: the transaction state after an error is only known from the
//! next OK.

use bytes::{BufMut, BytesMut};

use super::buf::Reader;
use super::codes::ErrorCode;
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
}
