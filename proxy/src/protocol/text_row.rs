//! A row of a text result set (ProtocolText::ResultsetRow): one length-encoded string per
//! column, or 0xFB for SQL NULL.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_query_response_text_resultset_row.html>,
//! <https://mariadb.com/kb/en/resultset-row/>.

use super::buf::Reader;
use super::error::{Error, Result};

const NULL: u8 = 0xFB;

/// Decodes a row of `columns` values, borrowing from the payload; `None` is NULL.
pub fn decode_text_row(payload: &[u8], columns: usize) -> Result<Vec<Option<&[u8]>>> {
    let mut r = Reader::named(payload, "text row");
    let mut values = Vec::with_capacity(columns.min(payload.len()));
    for _ in 0..columns {
        if r.peek_u8() == Some(NULL) {
            r.skip(1)?;
            values.push(None);
        } else {
            values.push(Some(r.lenenc_bytes()?));
        }
    }
    if !r.is_empty() {
        return Err(Error::Malformed {
            what: "text row longer than its columns",
        });
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::testutil::hex;

    /// MariaDB 10.11's row for `SELECT @@server_id, @@read_only, @@gtid_binlog_pos, NULL`
    /// on a primary that wrote in domains 0 and 7.
    pub(crate) const ROW: &str = "013101300b302d312d332c372d312d31fb";

    #[test]
    fn decodes_a_captured_row_with_null() {
        let row = hex(ROW);
        let values = decode_text_row(&row, 4).unwrap();
        assert_eq!(
            values,
            vec![
                Some(&b"1"[..]),
                Some(&b"0"[..]),
                Some(&b"0-1-3,7-1-1"[..]),
                None
            ]
        );
    }

    #[test]
    fn empty_strings_and_long_values() {
        let mut row = vec![0x00, 0xfc, 0x2c, 0x01];
        row.extend(std::iter::repeat_n(b'x', 300));
        let values = decode_text_row(&row, 2).unwrap();
        assert_eq!(values[0], Some(&b""[..]));
        assert_eq!(values[1].map(<[u8]>::len), Some(300));
    }

    #[test]
    fn a_wrong_column_count_or_truncation_is_an_error() {
        let row = hex(ROW);
        assert!(decode_text_row(&row, 3).is_err(), "bytes left over");
        assert!(decode_text_row(&row, 5).is_err(), "a column missing");
        for end in 0..row.len() {
            assert!(decode_text_row(&row[..end], 4).is_err(), "{end}");
        }
        assert_eq!(
            decode_text_row(&[], 0).unwrap(),
            Vec::<Option<&[u8]>>::new()
        );
    }
}
