//! The head of a text result set: the column count packet and the column definitions
//! (ColumnDefinition41), read only as far as the column's name.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_query_response_text_resultset.html>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_query_response_text_resultset_column_definition.html>,
//! <https://mariadb.com/kb/en/result-set-packets/>.
//!
//! Relayed results are never decoded (`response.rs` counts them); this is for the few
//! result sets sluice reads for itself, where columns are found by name (`SHOW SLAVE
//! STATUS` has ~60 columns whose order differs between versions).

use super::buf::Reader;
use super::error::{Error, Result};

/// Result sets sluice reads for itself never have more columns than this.
pub const MAX_COLUMNS: u64 = 4096;

/// The column count that starts a result set (a length-encoded integer, never 0).
pub fn column_count(payload: &[u8]) -> Result<u64> {
    let mut r = Reader::named(payload, "column count");
    let count = r.lenenc_int()?;
    if count == 0 || count > MAX_COLUMNS || !r.is_empty() {
        return Err(Error::Malformed {
            what: "column count",
        });
    }
    Ok(count)
}

/// The parts of a column definition sluice uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDef {
    /// The column's name as the query shows it (`AS` alias, or e.g. `@@read_only`).
    pub name: Vec<u8>,
}

impl ColumnDef {
    /// Reads catalog, schema, table and original table (skipped), then the name; the rest
    /// (original name, charset, length, type, flags, decimals) is not needed.
    pub fn decode(payload: &[u8]) -> Result<Self> {
        let mut r = Reader::named(payload, "column definition");
        for _ in 0..4 {
            r.lenenc_bytes()?;
        }
        Ok(ColumnDef {
            name: r.lenenc_bytes()?.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::testutil::hex;

    /// MariaDB 10.11 answering `SELECT @@server_id, @@read_only, @@gtid_binlog_pos, NULL`:
    /// the column count and the four definitions.
    pub(crate) const COUNT: &str = "04";
    pub(crate) const DEFS: [&str; 4] = [
        "036465660000000b40407365727665725f6964000c3f001500000008a000000000",
        "036465660000000b4040726561645f6f6e6c79000c3f0001000000088000000000",
        "03646566000000114040677469645f62696e6c6f675f706f73000c210021000000fd0000270000",
        "03646566000000044e554c4c000c3f0000000000068000000000",
    ];

    #[test]
    fn decodes_captured_column_names() {
        assert_eq!(column_count(&hex(COUNT)), Ok(4));
        let names: Vec<Vec<u8>> = DEFS
            .iter()
            .map(|d| ColumnDef::decode(&hex(d)).unwrap().name)
            .collect();
        assert_eq!(
            names,
            [
                b"@@server_id".to_vec(),
                b"@@read_only".to_vec(),
                b"@@gtid_binlog_pos".to_vec(),
                b"NULL".to_vec()
            ]
        );
    }

    #[test]
    fn bad_counts_and_truncated_definitions_are_errors() {
        assert!(column_count(&[0x00]).is_err());
        assert!(column_count(&[0xfb]).is_err());
        assert!(column_count(&[0x04, 0x00]).is_err());
        assert!(column_count(&[0xfc, 0x01, 0x10]).is_err()); // 4097 columns
        assert!(column_count(&[]).is_err());
        let def = hex(DEFS[0]);
        for end in 0..17 {
            assert!(ColumnDef::decode(&def[..end]).is_err(), "{end}");
        }
    }
}
