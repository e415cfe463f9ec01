//! EOF packets (0xFE, shorter than 9 bytes): the end of column definitions and rows for
//! clients without CLIENT_DEPRECATE_EOF, and the reply to COM_SET_OPTION and COM_DEBUG.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_eof_packet.html>,
//! <https://mariadb.com/kb/en/eof_packet/>.

use bytes::{BufMut, BytesMut};

use super::buf::Reader;
use super::error::{Error, Result};
use super::flags::StatusFlags;

const HEADER: u8 = 0xFE;
/// An EOF is at most 5 bytes; anything of 9 or more starting with 0xFE is a row or an OK.
const MAX_EOF_LEN: usize = 9;

/// An EOF packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EofPacket {
    pub warnings: u16,
    pub status: StatusFlags,
}

impl EofPacket {
    pub fn decode(payload: &[u8]) -> Result<Self> {
        if !is_eof(payload) {
            return Err(Error::Malformed { what: "EOF packet" });
        }
        let mut r = Reader::named(payload, "EOF packet");
        r.skip(1)?;
        // Pre-4.1 servers send the bare 0xFE.
        if r.is_empty() {
            return Ok(EofPacket {
                warnings: 0,
                status: StatusFlags::empty(),
            });
        }
        let warnings = r.u16()?;
        let status = StatusFlags::from_bits_truncate(r.u16()?);
        Ok(EofPacket { warnings, status })
    }

    /// Writes the payload (no header).
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u8(HEADER);
        out.put_u16_le(self.warnings);
        out.put_u16_le(self.status.bits());
    }
}

/// 0xFE and shorter than 9 bytes.
pub fn is_eof(payload: &[u8]) -> bool {
    payload.first() == Some(&HEADER) && payload.len() < MAX_EOF_LEN
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MariaDB 10.11 after the first of two result sets: AUTOCOMMIT|MORE_RESULTS_EXISTS.
    const MORE_RESULTS: &[u8] = &[0xfe, 0x00, 0x00, 0x0a, 0x00];
    /// MariaDB 10.11 after the column definitions of a cursor: AUTOCOMMIT|CURSOR_EXISTS.
    const CURSOR: &[u8] = &[0xfe, 0x00, 0x00, 0x42, 0x00];

    #[test]
    fn decodes_status_flags() {
        let eof = EofPacket::decode(MORE_RESULTS).unwrap();
        assert!(eof.status.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS));
        assert_eq!(eof.warnings, 0);
        let eof = EofPacket::decode(CURSOR).unwrap();
        assert!(eof
            .status
            .contains(StatusFlags::SERVER_STATUS_CURSOR_EXISTS));
        let mut out = BytesMut::new();
        eof.encode(&mut out);
        assert_eq!(&out[..], CURSOR);
    }

    #[test]
    fn tells_eof_from_ok_terminator_and_rows() {
        assert!(is_eof(CURSOR));
        assert!(is_eof(&[0xfe]));
        assert!(!is_eof(&[0xfe, 0, 0, 2, 0, 0, 0, 0, 0]));
        assert!(!is_eof(&[0x00, 0, 0, 2, 0]));
    }

    #[test]
    fn no_prefix_panics() {
        for end in 0..CURSOR.len() {
            let _ = EofPacket::decode(&CURSOR[..end]);
        }
        assert!(EofPacket::decode(&[]).is_err());
        assert!(EofPacket::decode(&CURSOR[..3]).is_err());
    }
}
