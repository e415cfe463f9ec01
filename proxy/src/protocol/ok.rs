//! OK packets (0x00, and the 0xFE result-set terminator under CLIENT_DEPRECATE_EOF), with the
//! session-state information of CLIENT_SESSION_TRACK.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_ok_packet.html>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/mysql__com_8h.html> (enum_session_state_type),
//! <https://mariadb.com/kb/en/ok_packet/>.
//!
//! Backends always run with CLIENT_SESSION_TRACK and track more than a client asked for;
//! `strip_session_track` rewrites their OKs for clients that did not negotiate it, and
//! `filter_session_state` keeps only what a client's own `session_track_*` settings
//! ([`Trackers`]) report for those that did.

use bytes::{BufMut, BytesMut};

use super::buf::{put_lenenc_bytes, put_lenenc_int, Reader};
use super::error::{Error, Result};
use super::flags::{Capabilities, StatusFlags};

const OK_HEADER: u8 = 0x00;
const TERMINATOR_HEADER: u8 = 0xFE;
/// Header, two 1-byte lenenc ints, status and warnings.
const MIN_OK_LEN: usize = 7;

const TRACK_SYSTEM_VARIABLES: u8 = 0;
const TRACK_SCHEMA: u8 = 1;
const TRACK_STATE_CHANGE: u8 = 2;
const TRACK_GTIDS: u8 = 3;
const TRACK_TRANSACTION_CHARACTERISTICS: u8 = 4;
const TRACK_TRANSACTION_STATE: u8 = 5;

/// One entry of the session-state block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionStateChange {
    SystemVariable {
        name: Vec<u8>,
        value: Vec<u8>,
    },
    Schema(Vec<u8>),
    /// Some state changed that has no entry of its own (user variables, temporary tables, ...).
    StateChanged,
    /// SESSION_TRACK_GTIDS (MySQL `session_track_gtids`): the GTID set text, in encoding
    /// specification 0, the only one servers use. `session_gtid` reads a write's GTID from
    /// it (and MariaDB's from the `last_gtid` system variable).
    Gtids(Vec<u8>),
    TransactionCharacteristics(Vec<u8>),
    TransactionState(Vec<u8>),
    /// An entry type this version does not know; its data is skipped (and not re-encoded).
    Unknown(u8),
}

/// An OK packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OkPacket {
    /// 0x00, or 0xFE for the end of a result set under CLIENT_DEPRECATE_EOF.
    pub header: u8,
    pub affected_rows: u64,
    pub last_insert_id: u64,
    pub status: StatusFlags,
    pub warnings: u16,
    pub info: Vec<u8>,
    pub session_state: Vec<SessionStateChange>,
}

impl OkPacket {
    pub fn new(status: StatusFlags) -> Self {
        OkPacket {
            header: OK_HEADER,
            affected_rows: 0,
            last_insert_id: 0,
            status,
            warnings: 0,
            info: Vec::new(),
            session_state: Vec::new(),
        }
    }

    pub fn decode(payload: &[u8], caps: Capabilities) -> Result<Self> {
        // The OK most statements end with (7 bytes: 1-byte ints, status, warnings), read
        // directly: the same packet as the general path below gives, at a fraction of it.
        if let [header @ (OK_HEADER | TERMINATOR_HEADER), affected, last_id, s0, s1, w0, w1] =
            *payload
        {
            if affected < 0xFB && last_id < 0xFB && caps.contains(Capabilities::CLIENT_PROTOCOL_41)
            {
                return Ok(OkPacket {
                    header,
                    affected_rows: affected.into(),
                    last_insert_id: last_id.into(),
                    status: StatusFlags::from_bits_truncate(u16::from_le_bytes([s0, s1])),
                    warnings: u16::from_le_bytes([w0, w1]),
                    info: Vec::new(),
                    session_state: Vec::new(),
                });
            }
        }
        let mut r = Reader::named(payload, "OK packet");
        let header = r.u8()?;
        if header != OK_HEADER && header != TERMINATOR_HEADER {
            return Err(Error::Malformed {
                what: "OK packet header",
            });
        }
        let mut ok = OkPacket::new(StatusFlags::empty());
        ok.header = header;
        ok.affected_rows = r.lenenc_int()?;
        ok.last_insert_id = r.lenenc_int()?;
        if caps.contains(Capabilities::CLIENT_PROTOCOL_41) {
            ok.status = StatusFlags::from_bits_truncate(r.u16()?);
            ok.warnings = r.u16()?;
        } else if caps.contains(Capabilities::CLIENT_TRANSACTIONS) {
            ok.status = StatusFlags::from_bits_truncate(r.u16()?);
        }
        if !caps.contains(Capabilities::CLIENT_SESSION_TRACK) {
            // The docs say string<EOF>, but MySQL and MariaDB write string<lenenc> (sql
            // `net_send_ok`); accept the bare form too.
            let rest = r.rest();
            let mut lenenc = Reader::named(rest, "OK info");
            ok.info = match lenenc.lenenc_bytes() {
                Ok(info) if lenenc.is_empty() => info.to_vec(),
                _ => rest.to_vec(),
            };
            return Ok(ok);
        }
        // Servers omit the info string when it is empty and nothing changed.
        if r.is_empty() {
            return Ok(ok);
        }
        ok.info = r.lenenc_bytes()?.to_vec();
        if ok
            .status
            .contains(StatusFlags::SERVER_SESSION_STATE_CHANGED)
            && !r.is_empty()
        {
            // Lenient by design: a state block we cannot fully parse must not cost the
            // caller the status flags, so keep what parsed and drop the rest.
            let _ = decode_state_block(&mut r, &mut ok.session_state);
        }
        Ok(ok)
    }

    /// Writes the payload (no header). Without CLIENT_SESSION_TRACK in `caps` the state block
    /// is dropped and SERVER_SESSION_STATE_CHANGED cleared, as such clients expect.
    pub fn encode(&self, caps: Capabilities, out: &mut BytesMut) {
        let track = caps.contains(Capabilities::CLIENT_SESSION_TRACK);
        let mut status = self.status;
        if !track {
            status.remove(StatusFlags::SERVER_SESSION_STATE_CHANGED);
        }
        out.put_u8(self.header);
        put_lenenc_int(out, self.affected_rows);
        put_lenenc_int(out, self.last_insert_id);
        if caps.contains(Capabilities::CLIENT_PROTOCOL_41) {
            out.put_u16_le(status.bits());
            out.put_u16_le(self.warnings);
        } else if caps.contains(Capabilities::CLIENT_TRANSACTIONS) {
            out.put_u16_le(status.bits());
        }
        if !track {
            // string<lenenc>, as servers write it and clients (libmysqlclient, mysql_common)
            // read it; a bare string<EOF> would be misread as a length prefix.
            if !self.info.is_empty() {
                put_lenenc_bytes(out, &self.info);
            }
            return;
        }
        let changed = status.contains(StatusFlags::SERVER_SESSION_STATE_CHANGED);
        if changed || !self.info.is_empty() {
            put_lenenc_bytes(out, &self.info);
        }
        if changed {
            let mut block = BytesMut::new();
            for change in &self.session_state {
                encode_change(change, &mut block);
            }
            put_lenenc_bytes(out, &block);
        }
    }
}

/// Rewrite an OK payload the backend encoded WITH CLIENT_SESSION_TRACK into what a client that did not negotiate it
/// expects (info as a lenenc string only, no session-state block, SESSION_STATE_CHANGED flag cleared).
pub fn strip_session_track(payload: &[u8], out: &mut BytesMut) -> Result<()> {
    let from = Capabilities::CLIENT_PROTOCOL_41 | Capabilities::CLIENT_SESSION_TRACK;
    let ok = OkPacket::decode(payload, from)?;
    ok.encode(Capabilities::CLIENT_PROTOCOL_41, out);
    Ok(())
}

/// What a client's session tracks (its `session_track_*` settings), and so which entries
/// of an OK's session-state block it gets: sluice's backends track more than a client asked
/// for, and [`filter_session_state`] drops the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trackers {
    /// `session_track_schema`.
    pub schema: bool,
    /// `session_track_state_change`.
    pub state_change: bool,
    /// `session_track_system_variables` in lower case; `None`: every variable (`*`).
    pub variables: Option<Vec<Vec<u8>>>,
    /// MySQL `session_track_gtids` other than OFF.
    pub gtids: bool,
    /// `session_track_transaction_info`: 0 OFF, 1 STATE, 2 CHARACTERISTICS (which adds the
    /// characteristics to the state).
    pub transaction_info: u8,
}

impl Trackers {
    /// Records a new value of the `session_track_*` variable `name`, as a server reports it
    /// (`ON`/`1`, a list, `OWN_GTID` ...); false if `name` is no tracker setting.
    pub fn set(&mut self, name: &[u8], value: &[u8]) -> bool {
        let on = |v: &[u8]| v.eq_ignore_ascii_case(b"on") || v == b"1";
        let name = name.to_ascii_lowercase();
        match name.as_slice() {
            b"session_track_schema" => self.schema = on(value),
            b"session_track_state_change" => self.state_change = on(value),
            b"session_track_gtids" => self.gtids = !value.eq_ignore_ascii_case(b"off"),
            b"session_track_transaction_info" => {
                self.transaction_info = if value.eq_ignore_ascii_case(b"characteristics") {
                    2
                } else {
                    u8::from(value.eq_ignore_ascii_case(b"state"))
                }
            }
            b"session_track_system_variables" => {
                let names = value
                    .split(|&b| b == b',')
                    .map(|n| n.trim_ascii().to_ascii_lowercase())
                    .filter(|n| !n.is_empty());
                let names: Vec<Vec<u8>> = names.collect();
                self.variables = (!names.iter().any(|n| n == b"*")).then_some(names);
            }
            _ => return false,
        }
        true
    }

    /// Copies the setting `name` from `from` (a `SET ... = DEFAULT`); false if `name` is
    /// no tracker setting.
    pub fn take(&mut self, from: &Trackers, name: &[u8]) -> bool {
        match name.to_ascii_lowercase().as_slice() {
            b"session_track_schema" => self.schema = from.schema,
            b"session_track_state_change" => self.state_change = from.state_change,
            b"session_track_gtids" => self.gtids = from.gtids,
            b"session_track_transaction_info" => self.transaction_info = from.transaction_info,
            b"session_track_system_variables" => self.variables.clone_from(&from.variables),
            _ => return false,
        }
        true
    }

    /// Whether a session tracking this gets `change`.
    pub fn keeps(&self, change: &SessionStateChange) -> bool {
        match change {
            SessionStateChange::SystemVariable { name, .. } => self
                .variables
                .as_ref()
                .is_none_or(|list| list.iter().any(|v| v.eq_ignore_ascii_case(name))),
            SessionStateChange::Schema(_) => self.schema,
            SessionStateChange::StateChanged => self.state_change,
            SessionStateChange::Gtids(_) => self.gtids,
            SessionStateChange::TransactionState(_) => self.transaction_info >= 1,
            SessionStateChange::TransactionCharacteristics(_) => self.transaction_info >= 2,
            SessionStateChange::Unknown(_) => false,
        }
    }
}

/// Does this OK payload carry session state (SERVER_SESSION_STATE_CHANGED)? Only such OKs
/// are worth decoding for [`filter_session_state`].
pub fn carries_state(payload: &[u8]) -> bool {
    let mut r = Reader::named(payload, "OK packet");
    let status = r
        .u8()
        .and_then(|_| r.lenenc_int())
        .and_then(|_| r.lenenc_int())
        .and_then(|_| r.u16());
    status.is_ok_and(|s| s & StatusFlags::SERVER_SESSION_STATE_CHANGED.bits() != 0)
}

/// An OK payload the backend encoded with CLIENT_SESSION_TRACK, with only the state entries
/// `trackers` keeps, for a client that negotiated it too: with none left, no state block and
/// SERVER_SESSION_STATE_CHANGED cleared, as a server that tracked nothing writes it.
pub fn filter_session_state(payload: &[u8], trackers: &Trackers, out: &mut BytesMut) -> Result<()> {
    let caps = Capabilities::CLIENT_PROTOCOL_41 | Capabilities::CLIENT_SESSION_TRACK;
    let mut ok = OkPacket::decode(payload, caps)?;
    ok.session_state.retain(|c| trackers.keeps(c));
    if ok.session_state.is_empty() {
        ok.status.remove(StatusFlags::SERVER_SESSION_STATE_CHANGED);
    }
    ok.encode(caps, out);
    Ok(())
}

/// Would `strip_session_track` give `payload` back unchanged? True for the OK most
/// statements end with: 7 bytes (two 1-byte lenenc ints, status, warnings: no info, no
/// state block) without SERVER_SESSION_STATE_CHANGED. Decoding and re-encoding it only to
/// get the same bytes costs far more than this check, which reads a few bytes.
pub fn strip_keeps(payload: &[u8]) -> bool {
    match payload {
        [header, affected, last_id, s0, s1, _, _] => {
            (*header == OK_HEADER || *header == TERMINATOR_HEADER)
                // A 1-byte lenenc int is re-encoded as itself (0xFB and up are prefixes).
                && *affected < 0xFB
                && *last_id < 0xFB
                && u16::from_le_bytes([*s0, *s1]) & StatusFlags::SERVER_SESSION_STATE_CHANGED.bits()
                    == 0
        }
        _ => false,
    }
}

/// Is this the first packet of a response and an OK? (0x00 and at least 7 bytes.) Only
/// meaningful where a row cannot appear: a text row may also start with 0x00.
pub fn is_ok(payload: &[u8]) -> bool {
    payload.first() == Some(&OK_HEADER) && payload.len() >= MIN_OK_LEN
}

/// Is this the OK-format 0xFE terminator that ends a result set under CLIENT_DEPRECATE_EOF?
/// A row can start with 0xFE only when it is at least 16 MiB long.
pub fn is_ok_terminator(payload: &[u8]) -> bool {
    payload.first() == Some(&TERMINATOR_HEADER)
        && payload.len() >= MIN_OK_LEN
        && payload.len() < super::frame::MAX_CHUNK
}

fn decode_state_block(r: &mut Reader<'_>, out: &mut Vec<SessionStateChange>) -> Result<()> {
    let mut block = Reader::named(r.lenenc_bytes()?, "session state");
    while !block.is_empty() {
        let kind = block.u8()?;
        let mut data = Reader::named(block.lenenc_bytes()?, "session state entry");
        match kind {
            // MySQL and MariaDB send one entry per variable; tolerate several pairs in one.
            TRACK_SYSTEM_VARIABLES => {
                while !data.is_empty() {
                    let name = data.lenenc_bytes()?.to_vec();
                    let value = data.lenenc_bytes()?.to_vec();
                    out.push(SessionStateChange::SystemVariable { name, value });
                }
            }
            TRACK_SCHEMA => out.push(SessionStateChange::Schema(data.lenenc_bytes()?.to_vec())),
            // The data is "1" (MariaDB and MySQL send it bare, the docs say lenenc); either way
            // the entry only says "something changed".
            TRACK_STATE_CHANGE => out.push(SessionStateChange::StateChanged),
            TRACK_GTIDS => match data.u8()? {
                // Encoding specification 0: a length-encoded GTID set string.
                0 => out.push(SessionStateChange::Gtids(data.lenenc_bytes()?.to_vec())),
                // Another encoding would be misread as text; say only that it was there.
                _ => out.push(SessionStateChange::Unknown(TRACK_GTIDS)),
            },
            TRACK_TRANSACTION_CHARACTERISTICS => {
                out.push(SessionStateChange::TransactionCharacteristics(
                    data.lenenc_bytes()?.to_vec(),
                ));
            }
            TRACK_TRANSACTION_STATE => {
                out.push(SessionStateChange::TransactionState(
                    data.lenenc_bytes()?.to_vec(),
                ));
            }
            other => out.push(SessionStateChange::Unknown(other)),
        }
    }
    Ok(())
}

fn encode_change(change: &SessionStateChange, out: &mut BytesMut) {
    let mut data = BytesMut::new();
    let kind = match change {
        SessionStateChange::SystemVariable { name, value } => {
            put_lenenc_bytes(&mut data, name);
            put_lenenc_bytes(&mut data, value);
            TRACK_SYSTEM_VARIABLES
        }
        SessionStateChange::Schema(schema) => {
            put_lenenc_bytes(&mut data, schema);
            TRACK_SCHEMA
        }
        SessionStateChange::StateChanged => {
            data.put_u8(b'1');
            TRACK_STATE_CHANGE
        }
        SessionStateChange::Gtids(gtids) => {
            data.put_u8(0);
            put_lenenc_bytes(&mut data, gtids);
            TRACK_GTIDS
        }
        SessionStateChange::TransactionCharacteristics(s) => {
            put_lenenc_bytes(&mut data, s);
            TRACK_TRANSACTION_CHARACTERISTICS
        }
        SessionStateChange::TransactionState(s) => {
            put_lenenc_bytes(&mut data, s);
            TRACK_TRANSACTION_STATE
        }
        SessionStateChange::Unknown(_) => return,
    };
    out.put_u8(kind);
    put_lenenc_bytes(out, &data);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::testutil::hex;

    fn backend_caps() -> Capabilities {
        Capabilities::CLIENT_PROTOCOL_41
            | Capabilities::CLIENT_SESSION_TRACK
            | Capabilities::CLIENT_DEPRECATE_EOF
    }

    /// MariaDB 10.11 answering `USE mysql` with session tracking on: schema + state change.
    const USE_MYSQL: &str = "00000002400000000b0106056d7973716c020131";
    /// MariaDB 10.11 answering `SET SESSION session_track_system_variables='*', ...`: two
    /// system-variable entries, a state change and a transaction-state entry.
    const SET_TRACKING: &str = "00000002400000005800211e73657373696f6e5f747261636b5f73797374656d\
        5f7661726961626c6573012a00251e73657373696f6e5f747261636b5f7472616e73616374696f6e5f696e666f\
        0553544154450201310509085f5f5f5f5f5f5f5f";
    /// MariaDB 10.11 after `LOAD DATA LOCAL INFILE`: an info string and no state block.
    const LOAD_DATA_OK: &str = "000000020000002f5265636f7264733a2030202044656c657465643a20302020\
        536b69707065643a203020205761726e696e67733a2030";

    /// A MySQL 8.0 OK written from the docs: 1 affected row, last id 5, IN_TRANS|AUTOCOMMIT|
    /// SESSION_STATE_CHANGED, schema "test", `autocommit=ON`, `sql_mode=''` in one entry
    /// (two pairs), GTID, characteristics and state.
    const MYSQL8_OK: &[u8] = &[
        0x00, 0x01, 0x05, 0x03, 0x40, 0x00, 0x00, // header, rows, id, status, warnings
        0x00, // info ""
        0x41, // state block: 65 bytes
        0x01, 0x05, 0x04, b't', b'e', b's', b't', // SCHEMA "test"
        0x00, 0x18, 0x0a, b'a', b'u', b't', b'o', b'c', b'o', b'm', b'm', b'i', b't', 0x02, b'O',
        b'N', 0x08, b's', b'q', b'l', b'_', b'm', b'o', b'd', b'e', 0x00, // two variables
        0x03, 0x06, 0x00, 0x04, b'a', b':', b'1', b'5', // GTIDS "a:15"
        0x04, 0x08, 0x07, b'S', b'T', b'A', b'R', b'T', b' ', b'T', // characteristics
        0x05, 0x09, 0x08, b'T', b'_', b'_', b'_', b'_', b'_', b'W', b'_', // transaction state
        0x02, 0x01, b'1', // state changed
    ];

    #[test]
    fn decodes_mariadb_schema_change() {
        let ok = OkPacket::decode(&hex(USE_MYSQL), backend_caps()).unwrap();
        assert_eq!(ok.status.bits(), 0x4002);
        assert_eq!(
            ok.session_state,
            vec![
                SessionStateChange::Schema(b"mysql".to_vec()),
                SessionStateChange::StateChanged
            ]
        );
        let mut out = BytesMut::new();
        ok.encode(backend_caps(), &mut out);
        assert_eq!(&out[..], &hex(USE_MYSQL)[..]);
    }

    #[test]
    fn decodes_mariadb_system_variables_and_transaction_state() {
        let ok = OkPacket::decode(&hex(SET_TRACKING), backend_caps()).unwrap();
        assert_eq!(ok.session_state.len(), 4);
        assert_eq!(
            ok.session_state[0],
            SessionStateChange::SystemVariable {
                name: b"session_track_system_variables".to_vec(),
                value: b"*".to_vec()
            }
        );
        assert_eq!(
            ok.session_state[3],
            SessionStateChange::TransactionState(b"________".to_vec())
        );
        let mut out = BytesMut::new();
        ok.encode(backend_caps(), &mut out);
        assert_eq!(&out[..], &hex(SET_TRACKING)[..]);
    }

    #[test]
    fn decodes_mysql8_state_block() {
        let ok = OkPacket::decode(MYSQL8_OK, backend_caps()).unwrap();
        assert_eq!((ok.affected_rows, ok.last_insert_id), (1, 5));
        assert!(ok.status.contains(StatusFlags::SERVER_STATUS_IN_TRANS));
        use SessionStateChange::*;
        assert_eq!(
            ok.session_state,
            vec![
                Schema(b"test".to_vec()),
                SystemVariable {
                    name: b"autocommit".to_vec(),
                    value: b"ON".to_vec()
                },
                SystemVariable {
                    name: b"sql_mode".to_vec(),
                    value: Vec::new()
                },
                Gtids(b"a:15".to_vec()),
                TransactionCharacteristics(b"START T".to_vec()),
                TransactionState(b"T_____W_".to_vec()),
                StateChanged,
            ]
        );
    }

    #[test]
    fn gtids_in_an_unknown_encoding_are_not_read_as_text() {
        // A GTIDS entry with encoding specification 1, then the state-change entry.
        let raw = [
            0x00, 0x00, 0x00, 0x02, 0x40, 0x00, 0x00, 0x00, 0x09, 0x03, 0x04, 0x01, 0x02, b'a',
            b'b', 0x02, 0x01, b'1',
        ];
        let ok = OkPacket::decode(&raw, backend_caps()).unwrap();
        assert_eq!(
            ok.session_state,
            vec![
                SessionStateChange::Unknown(TRACK_GTIDS),
                SessionStateChange::StateChanged
            ]
        );
    }

    #[test]
    fn strips_session_track_for_old_clients() {
        let mut out = BytesMut::new();
        strip_session_track(&hex(USE_MYSQL), &mut out).unwrap();
        assert_eq!(&out[..], &[0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00]);
        out.clear();
        strip_session_track(&hex(LOAD_DATA_OK), &mut out).unwrap();
        let mut expected = hex("000000020000002f");
        expected.extend_from_slice(b"Records: 0  Deleted: 0  Skipped: 0  Warnings: 0");
        assert_eq!(&out[..], &expected[..]);
        let old_client = OkPacket::decode(&expected, Capabilities::CLIENT_PROTOCOL_41).unwrap();
        assert_eq!(
            old_client.info,
            b"Records: 0  Deleted: 0  Skipped: 0  Warnings: 0"
        );
        // The OK-0xFE terminator keeps its header.
        out.clear();
        strip_session_track(&hex("fe000002400000000b0106056d7973716c020131"), &mut out).unwrap();
        assert_eq!(&out[..], &[0xfe, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00]);
    }

    /// MariaDB 10.11's defaults for a new session.
    fn mariadb_defaults() -> Trackers {
        Trackers {
            schema: true,
            state_change: false,
            variables: Some(
                [
                    "autocommit",
                    "character_set_client",
                    "character_set_connection",
                    "character_set_results",
                    "time_zone",
                ]
                .iter()
                .map(|v| v.as_bytes().to_vec())
                .collect(),
            ),
            gtids: false,
            transaction_info: 0,
        }
    }

    /// MariaDB 10.11 (tracking schema, state change and '*') answering `SET NAMES utf8mb4`:
    /// character_set_results, character_set_connection, character_set_client, state change.
    const SET_NAMES_ALL: &str = "000000024000000065001e156368617261637465725f7365745f726573756c747307757466386d62340021186368617261637465725f7365745f636f6e6e656374696f6e07757466386d6234001d146368617261637465725f7365745f636c69656e7407757466386d6234020131";

    #[test]
    fn a_client_gets_only_what_its_own_trackers_report() {
        let mut out = BytesMut::new();
        // The defaults: the three character-set variables, no state-change entry.
        filter_session_state(&hex(SET_NAMES_ALL), &mariadb_defaults(), &mut out).unwrap();
        let without_state_change = SET_NAMES_ALL[..SET_NAMES_ALL.len() - 6].replacen(
            "000000024000000065",
            "000000024000000062",
            1,
        );
        assert_eq!(&out[..], &hex(&without_state_change)[..]);
        // Nothing tracked: a plain OK, flag cleared, no state block.
        let none = Trackers {
            schema: false,
            variables: Some(Vec::new()),
            ..mariadb_defaults()
        };
        out.clear();
        filter_session_state(&hex(SET_NAMES_ALL), &none, &mut out).unwrap();
        assert_eq!(&out[..], &[0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00]);
        // USE under the defaults: the schema, no state change.
        out.clear();
        filter_session_state(&hex(USE_MYSQL), &mariadb_defaults(), &mut out).unwrap();
        assert_eq!(&out[..], &hex("0000000240000000080106056d7973716c")[..]);
        // Tracking state changes too: the OK as the backend sent it.
        let more = Trackers {
            state_change: true,
            ..mariadb_defaults()
        };
        out.clear();
        filter_session_state(&hex(USE_MYSQL), &more, &mut out).unwrap();
        assert_eq!(&out[..], &hex(USE_MYSQL)[..]);
        assert!(carries_state(&hex(USE_MYSQL)) && !carries_state(&[0, 0, 0, 2, 0, 0, 0]));
    }

    /// MySQL 8.0's defaults: schema, no state change, five variables, no GTIDs, no
    /// transaction info; MYSQL8_OK keeps its schema and `autocommit` (in one entry each).
    #[test]
    fn a_mysql8_client_gets_its_defaults_and_gtids_only_when_asked() {
        let mut t = Trackers {
            schema: false,
            state_change: true,
            variables: None,
            gtids: true,
            transaction_info: 2,
        };
        for (name, value) in [
            ("session_track_schema", "ON"),
            ("session_track_state_change", "OFF"),
            (
                "session_track_system_variables",
                "time_zone,autocommit,character_set_client,character_set_results,character_set_connection",
            ),
            ("session_track_gtids", "OFF"),
            ("session_track_transaction_info", "OFF"),
        ] {
            assert!(t.set(name.as_bytes(), value.as_bytes()));
        }
        assert!(!t.set(b"sql_mode", b""));
        let mut out = BytesMut::new();
        filter_session_state(MYSQL8_OK, &t, &mut out).unwrap();
        let mut want = vec![0x00, 0x01, 0x05, 0x03, 0x40, 0x00, 0x00, 0x00, 0x17];
        want.extend_from_slice(&[0x01, 0x05, 0x04, b't', b'e', b's', b't']);
        want.extend_from_slice(&[0x00, 0x0e, 0x0a]);
        want.extend_from_slice(b"autocommit");
        want.extend_from_slice(&[0x02, b'O', b'N']);
        assert_eq!(&out[..], &want[..]);
        // With session_track_gtids=OWN_GTID the GTID entry goes along (after the variables).
        assert!(t.set(b"SESSION_TRACK_GTIDS", b"OWN_GTID"));
        out.clear();
        filter_session_state(MYSQL8_OK, &t, &mut out).unwrap();
        want[8] = 0x17 + 8;
        want.extend_from_slice(&[0x03, 0x06, 0x00, 0x04, b'a', b':', b'1', b'5']);
        assert_eq!(&out[..], &want[..]);
        // '*' and STATE: every variable, and the transaction state without its characteristics.
        assert!(t.set(b"session_track_system_variables", b"*"));
        assert!(t.set(b"session_track_transaction_info", b"STATE"));
        let ok = OkPacket::decode(MYSQL8_OK, backend_caps()).unwrap();
        let kept: Vec<_> = ok.session_state.iter().filter(|c| t.keeps(c)).collect();
        assert_eq!(kept.len(), 5, "{kept:?}");
        assert!(!kept
            .iter()
            .any(|c| matches!(c, SessionStateChange::TransactionCharacteristics(_))));
    }

    #[test]
    fn minimal_ok_without_info_under_session_track() {
        let ok = OkPacket::decode(&[0, 0, 0, 2, 0, 0, 0], backend_caps()).unwrap();
        assert_eq!(ok, OkPacket::new(StatusFlags::SERVER_STATUS_AUTOCOMMIT));
        let mut out = BytesMut::new();
        ok.encode(backend_caps(), &mut out);
        assert_eq!(&out[..], &[0, 0, 0, 2, 0, 0, 0]);
    }

    #[test]
    fn broken_state_block_keeps_the_flags() {
        // The block claims 11 bytes but only 5 follow.
        let raw = hex("00000003400000000b0109056d7973");
        let ok = OkPacket::decode(&raw, backend_caps()).unwrap();
        assert!(ok.status.contains(StatusFlags::SERVER_STATUS_IN_TRANS));
        assert!(ok.session_state.is_empty());
        // The second entry claims 7 bytes but only 4 follow: the first one is kept.
        let raw = hex("0000000340000000090201310107056d7973");
        let ok = OkPacket::decode(&raw, backend_caps()).unwrap();
        assert_eq!(ok.session_state, vec![SessionStateChange::StateChanged]);
    }

    #[test]
    fn cheap_checks() {
        assert!(is_ok(&hex(USE_MYSQL)));
        assert!(!is_ok(&[0x00, 0x01]));
        assert!(is_ok_terminator(&[0xfe, 0, 0, 2, 0, 0, 0]));
        assert!(!is_ok_terminator(&[0xfe, 0, 0, 2, 0]));
        assert!(!is_ok(&[0xff, 0, 0, 0, 0, 0, 0]));
    }

    #[test]
    fn no_prefix_panics() {
        for sample in [
            hex(USE_MYSQL),
            hex(SET_TRACKING),
            hex(LOAD_DATA_OK),
            MYSQL8_OK.to_vec(),
        ] {
            for end in 0..sample.len() {
                let _ = OkPacket::decode(&sample[..end], backend_caps());
                let _ = strip_session_track(&sample[..end], &mut BytesMut::new());
                let t = mariadb_defaults();
                let _ = filter_session_state(&sample[..end], &t, &mut BytesMut::new());
                let _ = carries_state(&sample[..end]);
            }
            for end in 0..MIN_OK_LEN {
                assert!(OkPacket::decode(&sample[..end], backend_caps()).is_err());
            }
        }
    }

    #[test]
    fn strip_keeps_only_what_the_strip_gives_back_unchanged() {
        let statuses = [0x0000u16, 0x0002, 0x0003, 0x4002, 0x4000, 0x0022, 0xffff];
        let ints = [0x00u8, 0x01, 0xfa, 0xfb, 0xfc, 0xfe];
        for header in [0x00u8, 0xfe, 0x01] {
            for &a in &ints {
                for &b in &ints {
                    for status in statuses {
                        let mut p = vec![header, a, b];
                        p.extend_from_slice(&status.to_le_bytes());
                        p.extend_from_slice(&[3, 0]);
                        if !strip_keeps(&p) {
                            continue;
                        }
                        let mut out = BytesMut::new();
                        strip_session_track(&p, &mut out).unwrap();
                        assert_eq!(&out[..], &p[..], "{p:02x?}");
                    }
                }
            }
        }
        // The answer of most statements: kept. With info or a state block: rewritten.
        assert!(strip_keeps(&[0xfe, 0, 0, 0x02, 0, 0, 0]));
        assert!(!strip_keeps(&[0xfe, 0, 0, 0x02, 0x40, 0, 0]));
        assert!(!strip_keeps(&[0x00, 0, 0, 0x02, 0, 0, 0, 0]));
        assert!(!strip_keeps(&[0x00, 0, 0, 0x02, 0, 0]));
    }

    #[test]
    fn the_short_ok_reads_as_the_general_decoder_does() {
        // The general path, reached by the same packet with an empty info string appended
        // under CLIENT_SESSION_TRACK (which it reads and drops).
        let track = Capabilities::CLIENT_PROTOCOL_41 | Capabilities::CLIENT_SESSION_TRACK;
        for header in [0x00u8, 0xfe] {
            for (a, b) in [(0u8, 0u8), (1, 0), (0xfa, 7)] {
                for status in [0x0002u16, 0x4003, 0x0000] {
                    let mut p = vec![header, a, b];
                    p.extend_from_slice(&status.to_le_bytes());
                    p.extend_from_slice(&[5, 0]);
                    let fast = OkPacket::decode(&p, track).unwrap();
                    let mut longer = p.clone();
                    longer.push(0);
                    let general = OkPacket::decode(&longer, track).unwrap();
                    assert_eq!(fast, general, "{p:02x?}");
                    assert_eq!(
                        fast,
                        OkPacket::decode(&p, Capabilities::CLIENT_PROTOCOL_41).unwrap()
                    );
                }
            }
        }
        assert!(OkPacket::decode(&[0x01, 0, 0, 2, 0, 0, 0], track).is_err());
    }
}
