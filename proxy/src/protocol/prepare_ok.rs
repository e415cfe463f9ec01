//! COM_STMT_PREPARE_OK: the first packet of a successful prepare.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_stmt_prepare.html#sect_protocol_com_stmt_prepare_response_ok>,
//! <https://mariadb.com/kb/en/com_stmt_prepare/#com_stmt_prepare_ok>.
//!
//! It carries no status flags. The parameter and column definitions that follow are counted
//! by `ResponseTracker`.

use bytes::{BufMut, BytesMut};

use super::buf::Reader;
use super::error::{Error, Result};

const HEADER: u8 = 0x00;

/// COM_STMT_PREPARE_OK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrepareOk {
    pub stmt_id: u32,
    pub columns: u16,
    pub params: u16,
    pub warnings: u16,
}

impl PrepareOk {
    pub fn decode(payload: &[u8]) -> Result<Self> {
        let mut r = Reader::named(payload, "prepare OK");
        if r.u8()? != HEADER {
            return Err(Error::Malformed {
                what: "prepare OK header",
            });
        }
        let stmt_id = r.u32()?;
        let columns = r.u16()?;
        let params = r.u16()?;
        // Very old servers stop after the counts; the filler and warnings are optional.
        let warnings = if r.remaining() >= 3 {
            r.skip(1)?;
            r.u16()?
        } else {
            0
        };
        Ok(PrepareOk {
            stmt_id,
            columns,
            params,
            warnings,
        })
    }

    /// Writes the payload (no header).
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u8(HEADER);
        out.put_u32_le(self.stmt_id);
        out.put_u16_le(self.columns);
        out.put_u16_le(self.params);
        out.put_u8(0);
        out.put_u16_le(self.warnings);
    }
}

/// Sets the statement id in a framed PREPARE_OK (`raw`: 4-byte header, then the payload)
/// to `id`, as the client must see it. A PREPARE_OK is always a single-chunk packet; `raw`
/// that is not one (an ERR, a truncated packet) is left as it is.
pub fn patch_stmt_id(raw: &mut [u8], id: u32) {
    if raw.len() >= 9 && raw[4] == HEADER {
        raw[5..9].copy_from_slice(&id.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MariaDB 10.11 preparing `SELECT ? + 1 AS c, 'a' AS d`: statement 1, 2 columns, 1 param.
    const MARIADB: &[u8] = &[
        0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn decodes_and_encodes() {
        let ok = PrepareOk::decode(MARIADB).unwrap();
        assert_eq!(
            ok,
            PrepareOk {
                stmt_id: 1,
                columns: 2,
                params: 1,
                warnings: 0
            }
        );
        let mut out = BytesMut::new();
        ok.encode(&mut out);
        assert_eq!(&out[..], MARIADB);
        let with_warning = PrepareOk {
            warnings: 3,
            stmt_id: 0x0102_0304,
            ..ok
        };
        out.clear();
        with_warning.encode(&mut out);
        assert_eq!(PrepareOk::decode(&out).unwrap(), with_warning);
    }

    #[test]
    fn no_prefix_panics() {
        for end in 0..9 {
            assert!(PrepareOk::decode(&MARIADB[..end]).is_err(), "prefix {end}");
        }
        for end in 9..MARIADB.len() {
            assert_eq!(PrepareOk::decode(&MARIADB[..end]).unwrap().stmt_id, 1);
        }
        assert!(PrepareOk::decode(&[0xff, 0x28, 0x04]).is_err());
    }

    #[test]
    fn patches_the_id_of_a_framed_prepare_ok_only() {
        let mut raw = [&[12, 0, 0, 1][..], MARIADB].concat();
        patch_stmt_id(&mut raw, 0x0A0B_0C0D);
        assert_eq!(&raw[..5], &[12, 0, 0, 1, 0x00]);
        assert_eq!(&raw[5..9], &[0x0D, 0x0C, 0x0B, 0x0A]);
        assert_eq!(&raw[9..], &MARIADB[5..]);
        // An ERR and a short packet pass unchanged.
        let err = [9, 0, 0, 1, 0xff, 0x28, 0x04, b'#', b'4'];
        let mut copy = err;
        patch_stmt_id(&mut copy, 7);
        assert_eq!(copy, err);
        let mut short = [1, 0, 0, 1, 0x00];
        patch_stmt_id(&mut short, 7);
        assert_eq!(short, [1, 0, 0, 1, 0x00]);
    }
}
