//! The GTID of a session's last write, as the OK packet's session-state block reports it.
//!
//! - MariaDB: with `last_gtid` in `session_track_system_variables` (sluice tracks `*`), an
//!   OK that committed a transaction carries a SESSION_TRACK_SYSTEM_VARIABLES entry
//!   `last_gtid = domain-server-seq`.
//! - MySQL 8: with `session_track_gtids = OWN_GTID`, it carries a SESSION_TRACK_GTIDS (type 3)
//!   entry: `[3][lenenc entry length][encoding specification, 0][lenenc GTID set text]`, the
//!   GTIDs the session's last transaction produced (`uuid:n`).
//!
//! Both arrive in the OK that ends the writing statement or its COMMIT; `ok.rs` decodes the
//! block into [`SessionStateChange`]s and this file picks the report out. The text is
//! parsed into a position by `topology::gtid`, not here.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_ok_packet.html>,
//! <https://dev.mysql.com/doc/refman/8.0/en/server-system-variables.html#sysvar_session_track_gtids>,
//! <https://mariadb.com/kb/en/ok_packet/>, <https://mariadb.com/kb/en/gtid/#last_gtid>.

use super::ok::SessionStateChange;

/// MariaDB's session variable holding the GTID of the session's last transaction.
pub const LAST_GTID: &[u8] = b"last_gtid";

/// A GTID report from one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GtidReport<'a> {
    /// MariaDB `last_gtid` (e.g. `0-1-42`); empty before the session's first write.
    MariaDbLastGtid(&'a [u8]),
    /// MySQL SESSION_TRACK_GTIDS text (e.g. `3e11fa47-71ca-11e1-9e33-c80aa9429562:23`).
    MySqlGtids(&'a [u8]),
}

impl<'a> GtidReport<'a> {
    /// The reported text.
    pub fn text(&self) -> &'a [u8] {
        match self {
            GtidReport::MariaDbLastGtid(t) | GtidReport::MySqlGtids(t) => t,
        }
    }
}

/// The last non-empty GTID report among `changes` (the entries of one OK, or of a whole
/// response in order), or `None` if nothing was written.
pub fn last_write_gtid(changes: &[SessionStateChange]) -> Option<GtidReport<'_>> {
    changes.iter().rev().find_map(|change| match change {
        SessionStateChange::SystemVariable { name, value }
            if name.eq_ignore_ascii_case(LAST_GTID) && !value.is_empty() =>
        {
            Some(GtidReport::MariaDbLastGtid(value))
        }
        SessionStateChange::Gtids(set) if !set.is_empty() => Some(GtidReport::MySqlGtids(set)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::testutil::hex;
    use crate::protocol::{Capabilities, OkPacket, StatusFlags};

    fn caps() -> Capabilities {
        Capabilities::CLIENT_PROTOCOL_41
            | Capabilities::CLIENT_SESSION_TRACK
            | Capabilities::CLIENT_DEPRECATE_EOF
    }

    /// MariaDB 10.11 with log_bin, `session_track_system_variables='last_gtid'`:
    /// `INSERT INTO app.t VALUES (1)` (1 row, AUTOCOMMIT|SESSION_STATE_CHANGED, last_gtid
    /// `0-1-3`), and after `SET SESSION gtid_domain_id=7` another insert (`7-1-1`).
    const MARIADB_INSERT: &str = "0001000240000000120010096c6173745f6774696405302d312d33";
    const MARIADB_INSERT_DOMAIN_7: &str = "0001000240000000120010096c6173745f6774696405372d312d31";
    /// The same server's `CREATE TABLE` (DDL has a GTID too): 0 rows, `0-1-2`.
    const MARIADB_DDL: &str = "0000000240000000120010096c6173745f6774696405302d312d32";

    /// MySQL 8.0 with `session_track_gtids=OWN_GTID`, written from the protocol docs and the
    /// server's encoder (Session_gtids_ctx_encoder_string): an autocommit INSERT of 1 row
    /// whose transaction got `3e11fa47-71ca-11e1-9e33-c80aa9429562:23`.
    const MYSQL_UUID: &[u8] = b"3e11fa47-71ca-11e1-9e33-c80aa9429562:23";

    fn mysql8_insert_ok() -> Vec<u8> {
        let gtid_len = MYSQL_UUID.len() as u8; // 39
        let mut entry = vec![0x03, gtid_len + 2, 0x00, gtid_len];
        entry.extend_from_slice(MYSQL_UUID);
        // header, 1 affected row, last insert id 0, AUTOCOMMIT|SESSION_STATE_CHANGED,
        // 0 warnings, info "" (lenenc), then the state block (lenenc).
        let mut ok = vec![0x00, 0x01, 0x00, 0x02, 0x40, 0x00, 0x00, 0x00];
        ok.push(entry.len() as u8);
        ok.extend_from_slice(&entry);
        ok
    }

    #[test]
    fn mariadb_last_gtid_from_captured_oks() {
        for (raw, gtid, rows) in [
            (MARIADB_INSERT, &b"0-1-3"[..], 1),
            (MARIADB_INSERT_DOMAIN_7, b"7-1-1", 1),
            (MARIADB_DDL, b"0-1-2", 0),
        ] {
            let ok = OkPacket::decode(&hex(raw), caps()).unwrap();
            assert_eq!(ok.affected_rows, rows);
            assert!(ok
                .status
                .contains(StatusFlags::SERVER_SESSION_STATE_CHANGED));
            assert_eq!(
                last_write_gtid(&ok.session_state),
                Some(GtidReport::MariaDbLastGtid(gtid))
            );
        }
    }

    #[test]
    fn mysql8_own_gtid_entry() {
        let raw = mysql8_insert_ok();
        // The entry bytes exactly as the server lays them out.
        assert_eq!(&raw[8..13], &[0x2b, 0x03, 0x29, 0x00, 0x27]);
        let ok = OkPacket::decode(&raw, caps()).unwrap();
        assert_eq!(ok.affected_rows, 1);
        assert_eq!(
            ok.session_state,
            vec![SessionStateChange::Gtids(MYSQL_UUID.to_vec())]
        );
        let report = last_write_gtid(&ok.session_state).unwrap();
        assert_eq!(report, GtidReport::MySqlGtids(MYSQL_UUID));
        assert_eq!(report.text(), MYSQL_UUID);
        // sluice re-encodes it byte for byte (clients with CLIENT_SESSION_TRACK see it).
        let mut out = bytes::BytesMut::new();
        ok.encode(caps(), &mut out);
        assert_eq!(&out[..], &raw[..]);
    }

    #[test]
    fn mysql8_gtids_next_to_other_entries() {
        // A COMMIT OK: transaction state back to empty, then the GTID, then a variable.
        let mut block = vec![0x05, 0x09, 0x08];
        block.extend_from_slice(b"________");
        block.extend_from_slice(&[0x03, 0x0a, 0x00, 0x08]);
        block.extend_from_slice(b"abcd:1-2"); // not a real UUID: ok.rs does not parse it
        block.extend_from_slice(&[0x00, 0x0f, 0x0a]);
        block.extend_from_slice(b"autocommit");
        block.extend_from_slice(&[0x03]);
        block.extend_from_slice(b"OFF");
        let mut raw = vec![
            0x00,
            0x00,
            0x00,
            0x00,
            0x40,
            0x00,
            0x00,
            0x00,
            block.len() as u8,
        ];
        raw.extend_from_slice(&block);
        let ok = OkPacket::decode(&raw, caps()).unwrap();
        assert_eq!(ok.session_state.len(), 3);
        assert_eq!(
            last_write_gtid(&ok.session_state),
            Some(GtidReport::MySqlGtids(b"abcd:1-2"))
        );
    }

    /// MySQL 8 OWN_GTID after a transaction that wrote through several sources' GTIDs is
    /// one `uuid:n` entry; with ALL_GTIDS (or many sources) the text passes 250 bytes, so
    /// both lengths become 3-byte length-encoded integers (`0xfc` + u16 LE).
    #[test]
    fn mysql8_gtids_longer_than_250_bytes() {
        let sources: Vec<String> = (0..7)
            .map(|i| format!("3e11fa47-71ca-11e1-9e33-c80aa942956{i}:1-{}", 10 + i))
            .collect();
        let text = sources.join(",\n").into_bytes();
        assert!(text.len() > 250, "{}", text.len());
        let lenenc = |n: usize| -> Vec<u8> {
            if n < 251 {
                vec![n as u8]
            } else {
                vec![0xfc, n as u8, (n >> 8) as u8]
            }
        };
        let mut entry_data = vec![0x00]; // encoding specification: whole set as text
        entry_data.extend(lenenc(text.len()));
        entry_data.extend_from_slice(&text);
        let mut block = vec![0x03];
        block.extend(lenenc(entry_data.len()));
        block.extend_from_slice(&entry_data);
        // COMMIT: 0 rows, status AUTOCOMMIT | SESSION_STATE_CHANGED, no warnings, info "".
        let mut raw = vec![0x00, 0x00, 0x00, 0x02, 0x40, 0x00, 0x00, 0x00];
        raw.extend(lenenc(block.len()));
        raw.extend_from_slice(&block);
        assert_eq!(raw[8], 0xfc, "the block length takes three bytes");
        assert_eq!(&raw[11..13], &[0x03, 0xfc]);
        let ok = OkPacket::decode(&raw, caps()).unwrap();
        assert_eq!(
            ok.session_state,
            vec![SessionStateChange::Gtids(text.clone())]
        );
        assert_eq!(
            last_write_gtid(&ok.session_state),
            Some(GtidReport::MySqlGtids(&text[..]))
        );
        // Truncated anywhere inside the state block: an error or no report, never a panic
        // and never a wrong GTID.
        for cut in 9..raw.len() {
            if let Ok(ok) = OkPacket::decode(&raw[..cut], caps()) {
                assert_ne!(
                    last_write_gtid(&ok.session_state),
                    Some(GtidReport::MySqlGtids(&text[..])),
                    "cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn nothing_written_means_no_report() {
        // MariaDB `USE mysql`: schema and state change only.
        let ok =
            OkPacket::decode(&hex("00000002400000000b0106056d7973716c020131"), caps()).unwrap();
        assert_eq!(last_write_gtid(&ok.session_state), None);
        let empty = [
            SessionStateChange::SystemVariable {
                name: b"LAST_GTID".to_vec(),
                value: Vec::new(),
            },
            SessionStateChange::Gtids(Vec::new()),
        ];
        assert_eq!(last_write_gtid(&empty), None);
        // Several OKs of one response: the last report wins.
        let both = [
            SessionStateChange::SystemVariable {
                name: b"last_gtid".to_vec(),
                value: b"0-1-5".to_vec(),
            },
            SessionStateChange::StateChanged,
            SessionStateChange::SystemVariable {
                name: b"Last_Gtid".to_vec(),
                value: b"0-1-6".to_vec(),
            },
        ];
        assert_eq!(
            last_write_gtid(&both),
            Some(GtidReport::MariaDbLastGtid(b"0-1-6"))
        );
    }
}
