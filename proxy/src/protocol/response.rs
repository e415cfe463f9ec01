//! Where does a backend response end? A state machine fed one logical packet at a time.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_query_response.html>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_stmt_execute.html>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_stmt_prepare.html>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_stmt_fetch.html>,
//! <https://mariadb.com/kb/en/result-set-packets/>.
//!
//! Only the packets that decide the shape are decoded (first packets, terminators, OK, ERR);
//! column definitions and rows are counted, never parsed. An ERR anywhere ends the response.

use super::buf::Reader;
use super::eof::{is_eof, EofPacket};
use super::err::ErrPacket;
use super::error::{Error, Result};
use super::flags::{Capabilities, StatusFlags};
use super::frame::MAX_CHUNK;
use super::ok::{OkPacket, SessionStateChange};
use super::prepare_ok::PrepareOk;

const OK_HEADER: u8 = 0x00;
const LOCAL_INFILE_HEADER: u8 = 0xFB;
const EOF_HEADER: u8 = 0xFE;
const ERR_HEADER: u8 = 0xFF;
/// Header, two 1-byte lenenc ints, status and warnings.
const MIN_OK_LEN: usize = 7;

/// The shape of the response a command gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseKind {
    /// No response: QUIT, STMT_CLOSE, SEND_LONG_DATA.
    None,
    /// One OK/ERR (also SET_OPTION's EOF/OK).
    Simple,
    /// COM_QUERY.
    Query,
    /// COM_STMT_EXECUTE (binary rows; cursor case).
    Execute,
    /// COM_STMT_FETCH.
    Fetch,
    Prepare,
    FieldList,
    /// One raw string packet.
    Statistics,
}

impl ResponseKind {
    /// Every kind (property tests and fuzzing pick from these).
    pub const ALL: [ResponseKind; 8] = [
        ResponseKind::None,
        ResponseKind::Simple,
        ResponseKind::Query,
        ResponseKind::Execute,
        ResponseKind::Fetch,
        ResponseKind::Prepare,
        ResponseKind::FieldList,
        ResponseKind::Statistics,
    ];
}

/// What the caller should do with the packet it just fed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// Forward unchanged, keep reading.
    Continue,
    /// An OK-format packet (0x00 OK, or the OK-0xFE terminator under DEPRECATE_EOF) that the
    /// caller may need to rewrite for the client; more packets follow.
    ContinueOk,
    /// The server sent 0xFB: relay the client's file packets, then keep feeding.
    LocalInfile,
    /// The last packet of the response.
    Done,
    /// The last packet, and it is OK-format (see `ContinueOk`).
    DoneOk,
}

/// What a response said, collected while it streamed by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseSummary {
    /// Status of the last OK or EOF seen.
    pub status: Option<StatusFlags>,
    pub error: Option<ErrPacket>,
    /// Session-state entries of every OK in the response, in order.
    pub state_changes: Vec<SessionStateChange>,
    pub prepare_ok: Option<PrepareOk>,
    /// From the last OK.
    pub affected_rows: u64,
    /// From the last OK.
    pub last_insert_id: u64,
    /// From the last OK or EOF.
    pub warnings: u16,
    /// Some OK or EOF of the response (of a multi-result, any statement's) counted warnings.
    pub any_warnings: bool,
    /// Some OK of the response carried an insert id (`last_insert_id` is only the last's).
    pub any_insert_id: bool,
    /// Result sets with columns.
    pub result_sets: u32,
    /// Rows of every result set.
    pub rows: u64,
    /// `rows` before the last result set began (`last_set_rows`).
    pub rows_before_last_set: u64,
    /// The response's last result is an OK (a statement's end), not a result set; after
    /// result sets: the OK that ends a CALL, or a multi-statement's last statement's.
    pub ends_with_ok: bool,
}

impl ResponseSummary {
    /// The rows of the response's last result set.
    pub fn last_set_rows(&self) -> u64 {
        self.rows - self.rows_before_last_set
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// First packet of a result: OK, ERR, LOCAL INFILE request or column count.
    ResultStart,
    ColumnDefs {
        left: u64,
    },
    /// The EOF after column definitions (clients without DEPRECATE_EOF).
    ColumnsEof,
    Rows,
    PrepareStart,
    /// Parameter and column definitions, plus their EOFs, still to come.
    PrepareDefs {
        left: u32,
    },
    FieldDefs,
    /// Exactly one packet.
    Single,
    Done,
}

/// Follows one command's response packet by packet.
#[derive(Debug, Clone)]
pub struct ResponseTracker {
    kind: ResponseKind,
    caps: Capabilities,
    deprecate_eof: bool,
    state: State,
    summary: ResponseSummary,
}

impl ResponseTracker {
    /// `caps` = the capabilities negotiated between sluice and the backend (CLIENT_SESSION_TRACK is always on there).
    pub fn new(kind: ResponseKind, caps: Capabilities) -> Self {
        let state = match kind {
            ResponseKind::None => State::Done,
            ResponseKind::Simple | ResponseKind::Statistics => State::Single,
            ResponseKind::Query | ResponseKind::Execute => State::ResultStart,
            ResponseKind::Fetch => State::Rows,
            ResponseKind::Prepare => State::PrepareStart,
            ResponseKind::FieldList => State::FieldDefs,
        };
        ResponseTracker {
            kind,
            caps,
            deprecate_eof: caps.contains(Capabilities::CLIENT_DEPRECATE_EOF),
            state,
            summary: ResponseSummary::default(),
        }
    }

    pub fn kind(&self) -> ResponseKind {
        self.kind
    }

    pub fn feed(&mut self, payload: &[u8]) -> Result<Feed> {
        let first = *payload.first().ok_or(Error::Truncated {
            what: "response packet",
        })?;
        if self.state == State::Done {
            return Err(Error::Malformed {
                what: "packet after the end of the response",
            });
        }
        // No column definition, row or count starts with 0xFF, so this is always an ERR.
        if first == ERR_HEADER {
            self.summary.error = Some(ErrPacket::decode(payload, self.caps)?);
            self.state = State::Done;
            return Ok(Feed::Done);
        }
        match self.state {
            State::ResultStart => self.result_start(first, payload),
            State::ColumnDefs { left } => {
                self.state = match left.saturating_sub(1) {
                    0 if self.deprecate_eof => State::Rows,
                    0 => State::ColumnsEof,
                    left => State::ColumnDefs { left },
                };
                Ok(Feed::Continue)
            }
            State::ColumnsEof => {
                let eof = EofPacket::decode(payload).map_err(|_| Error::Malformed {
                    what: "EOF after column definitions",
                })?;
                self.record_eof(&eof);
                // A cursor was opened instead of sending rows; they come with COM_STMT_FETCH.
                if self.kind == ResponseKind::Execute
                    && eof
                        .status
                        .contains(StatusFlags::SERVER_STATUS_CURSOR_EXISTS)
                {
                    self.state = State::Done;
                    return Ok(Feed::Done);
                }
                self.state = State::Rows;
                Ok(Feed::Continue)
            }
            State::Rows => {
                if !self.is_terminator(first, payload) {
                    self.summary.rows += 1;
                    return Ok(Feed::Continue);
                }
                let (status, ok_format) = self.terminator(payload)?;
                let more = status.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS);
                if more && self.kind != ResponseKind::Fetch {
                    self.state = State::ResultStart;
                    Ok(if ok_format {
                        Feed::ContinueOk
                    } else {
                        Feed::Continue
                    })
                } else {
                    self.state = State::Done;
                    Ok(if ok_format { Feed::DoneOk } else { Feed::Done })
                }
            }
            State::PrepareStart => {
                let ok = PrepareOk::decode(payload)?;
                self.summary.prepare_ok = Some(ok);
                self.summary.warnings = ok.warnings;
                self.summary.any_warnings |= ok.warnings > 0;
                let eofs = u32::from(!self.deprecate_eof);
                let group = |n: u16| if n == 0 { 0 } else { u32::from(n) + eofs };
                self.state = match group(ok.params) + group(ok.columns) {
                    0 => State::Done,
                    left => State::PrepareDefs { left },
                };
                Ok(if self.state == State::Done {
                    Feed::Done
                } else {
                    Feed::Continue
                })
            }
            State::PrepareDefs { left } => {
                self.state = match left.saturating_sub(1) {
                    0 => State::Done,
                    left => State::PrepareDefs { left },
                };
                Ok(if self.state == State::Done {
                    Feed::Done
                } else {
                    Feed::Continue
                })
            }
            State::FieldDefs => {
                if !self.is_terminator(first, payload) {
                    return Ok(Feed::Continue);
                }
                let (_, ok_format) = self.terminator(payload)?;
                self.state = State::Done;
                Ok(if ok_format { Feed::DoneOk } else { Feed::Done })
            }
            State::Single => {
                self.state = State::Done;
                if self.kind == ResponseKind::Statistics {
                    return Ok(Feed::Done);
                }
                match first {
                    OK_HEADER if payload.len() >= MIN_OK_LEN => {
                        self.record_ok(OkPacket::decode(payload, self.caps)?);
                        Ok(Feed::DoneOk)
                    }
                    EOF_HEADER => Ok(if self.terminator(payload)?.1 {
                        Feed::DoneOk
                    } else {
                        Feed::Done
                    }),
                    _ => Ok(Feed::Done),
                }
            }
            State::Done => Err(Error::Malformed {
                what: "packet after the end of the response",
            }),
        }
    }

    /// Feeds the framed packets at the start of `buf` for as long as each is one complete
    /// chunk within `max_payload` whose feed is a plain `Feed::Continue` known without
    /// decoding anything (a column count, a column definition, a row), and until they take
    /// `limit` bytes or more. Returns the bytes they take and the last one's sequence id
    /// (`None`: nothing was fed). The packet it stops before is left unfed, for `feed`.
    /// What a relay does with each of them is to pass it on as it is: a result set's rows
    /// go through this tight loop instead of one `feed` call each.
    pub fn skim(&mut self, buf: &[u8], max_payload: usize, limit: usize) -> (usize, Option<u8>) {
        let (mut pos, mut last) = (0usize, None);
        while pos < limit {
            let Some((len, seq)) = buf.get(pos..).and_then(super::frame::peek_header) else {
                break;
            };
            let Some(payload) = buf
                .get(pos + super::frame::HEADER_LEN..)
                .and_then(|rest| rest.get(..len))
                .filter(|p| !p.is_empty() && len < MAX_CHUNK && len <= max_payload)
            else {
                break;
            };
            let first = payload[0];
            if first == ERR_HEADER {
                break;
            }
            match self.state {
                // As `feed`: a definition ends the run of them at the last one.
                State::ColumnDefs { left } => {
                    self.state = match left.saturating_sub(1) {
                        0 if self.deprecate_eof => State::Rows,
                        0 => State::ColumnsEof,
                        left => State::ColumnDefs { left },
                    };
                }
                State::Rows if !self.is_terminator(first, payload) => self.summary.rows += 1,
                // A column count (not OK, not LOCAL INFILE, not a 0xFB `feed` refuses).
                State::ResultStart if first != OK_HEADER && first != LOCAL_INFILE_HEADER => {
                    match Reader::named(payload, "column count").lenenc_int() {
                        Ok(columns) if columns > 0 => {
                            self.set_begins();
                            self.state = State::ColumnDefs { left: columns };
                        }
                        _ => break,
                    }
                }
                _ => break,
            }
            pos += super::frame::HEADER_LEN + len;
            last = Some(seq);
        }
        (pos, last)
    }

    fn result_start(&mut self, first: u8, payload: &[u8]) -> Result<Feed> {
        match first {
            OK_HEADER => {
                let ok = OkPacket::decode(payload, self.caps)?;
                let more = ok.status.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS);
                self.record_ok(ok);
                self.summary.ends_with_ok = true;
                if more {
                    return Ok(Feed::ContinueOk);
                }
                self.state = State::Done;
                Ok(Feed::DoneOk)
            }
            // The state stays ResultStart: after the file the server answers OK or ERR.
            LOCAL_INFILE_HEADER if self.kind == ResponseKind::Query => Ok(Feed::LocalInfile),
            _ => {
                let columns = Reader::named(payload, "column count").lenenc_int()?;
                if columns == 0 {
                    return Err(Error::Malformed {
                        what: "column count",
                    });
                }
                self.set_begins();
                self.state = State::ColumnDefs { left: columns };
                Ok(Feed::Continue)
            }
        }
    }

    /// 0xFE and short: an EOF (< 9 bytes), or under DEPRECATE_EOF an OK-0xFE (< 16 MiB). A
    /// row can start with 0xFE only when its first value is at least 16 MiB long.
    fn is_terminator(&self, first: u8, payload: &[u8]) -> bool {
        first == EOF_HEADER
            && (is_eof(payload) || (self.deprecate_eof && payload.len() < MAX_CHUNK))
    }

    /// Decodes a terminator; returns its status and whether it is OK-format.
    fn terminator(&mut self, payload: &[u8]) -> Result<(StatusFlags, bool)> {
        if self.deprecate_eof && payload.len() >= MIN_OK_LEN {
            let ok = OkPacket::decode(payload, self.caps)?;
            let status = ok.status;
            self.record_ok(ok);
            Ok((status, true))
        } else {
            let eof = EofPacket::decode(payload)?;
            self.record_eof(&eof);
            Ok((eof.status, false))
        }
    }

    /// A result set begins (its column count was read).
    fn set_begins(&mut self) {
        let s = &mut self.summary;
        s.result_sets += 1;
        s.rows_before_last_set = s.rows;
        s.ends_with_ok = false;
    }

    fn record_ok(&mut self, ok: OkPacket) {
        let s = &mut self.summary;
        s.status = Some(ok.status);
        s.affected_rows = ok.affected_rows;
        s.last_insert_id = ok.last_insert_id;
        s.warnings = ok.warnings;
        s.any_warnings |= ok.warnings > 0;
        s.any_insert_id |= ok.last_insert_id != 0;
        if !ok.session_state.is_empty() {
            s.state_changes.extend(ok.session_state);
        }
    }

    fn record_eof(&mut self, eof: &EofPacket) {
        self.summary.status = Some(eof.status);
        self.summary.warnings = eof.warnings;
        self.summary.any_warnings |= eof.warnings > 0;
    }

    pub fn summary(&self) -> &ResponseSummary {
        &self.summary
    }

    pub fn into_summary(self) -> ResponseSummary {
        self.summary
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::testutil::hex;
    use bytes::BytesMut;

    fn caps(deprecate_eof: bool) -> Capabilities {
        let mut caps = Capabilities::CLIENT_PROTOCOL_41
            | Capabilities::CLIENT_SESSION_TRACK
            | Capabilities::CLIENT_MULTI_RESULTS
            | Capabilities::CLIENT_LOCAL_FILES;
        caps.set(Capabilities::CLIENT_DEPRECATE_EOF, deprecate_eof);
        caps
    }

    /// Feeds hex packets; returns every `Feed` and the final summary. Also feeds every
    /// truncated prefix of every packet to a copy of the tracker: errors are fine, panics not.
    fn run(
        kind: ResponseKind,
        deprecate_eof: bool,
        packets: &[&str],
    ) -> (Vec<Feed>, ResponseSummary) {
        let mut tracker = ResponseTracker::new(kind, caps(deprecate_eof));
        let mut feeds = Vec::new();
        for packet in packets {
            let bytes = hex(packet);
            for end in 0..bytes.len() {
                let _ = tracker.clone().feed(&bytes[..end]);
            }
            feeds.push(tracker.feed(&bytes).unwrap());
        }
        assert!(tracker.is_done());
        assert!(
            tracker.feed(&[0x00, 0, 0, 2, 0, 0, 0]).is_err(),
            "fed past the end"
        );
        let summary = tracker.into_summary();
        assert_eq!(skimmed(kind, deprecate_eof, packets, &feeds), summary);
        (feeds, summary)
    }

    /// The same packets framed in one buffer, relayed as `session::relay` does: `skim` as
    /// far as it goes, then one `feed`, and again. Every packet skimmed must be one `feed`
    /// calls `Continue`; the summary must come out the same.
    fn skimmed(
        kind: ResponseKind,
        deprecate_eof: bool,
        packets: &[&str],
        feeds: &[Feed],
    ) -> ResponseSummary {
        let mut buf = BytesMut::new();
        let mut ends = Vec::new();
        for (i, packet) in packets.iter().enumerate() {
            super::super::frame::write_packet(&mut buf, i as u8 + 1, &hex(packet));
            ends.push(buf.len());
        }
        let mut tracker = ResponseTracker::new(kind, caps(deprecate_eof));
        let (mut pos, mut i) = (0, 0);
        while i < packets.len() {
            let (bytes, _) = tracker.skim(&buf[pos..], 1 << 30, usize::MAX);
            pos += bytes;
            while i < packets.len() && ends[i] <= pos {
                assert_eq!(feeds[i], Feed::Continue, "packet {i} skimmed");
                i += 1;
            }
            if i < packets.len() {
                assert_eq!(tracker.feed(&hex(packets[i])).unwrap(), feeds[i]);
                pos = ends[i];
                i += 1;
            }
        }
        tracker.into_summary()
    }

    use Feed::{Continue as C, ContinueOk as CO, Done as D, DoneOk as DO};

    const COL_A: &str = "036465660000000161000c3f0001000000038100000000";
    const COL_B: &str = "036465660000000162000c2d0004000000fd0100270000";

    #[test]
    fn mariadb_text_result_set_with_deprecate_eof() {
        // SELECT 1 AS a, 'x' AS b: count, two definitions, one row, OK-0xFE terminator.
        let (feeds, s) = run(
            ResponseKind::Query,
            true,
            &["02", COL_A, COL_B, "01310178", "fe000002000000"],
        );
        assert_eq!(feeds, [C, C, C, C, DO]);
        assert_eq!((s.result_sets, s.rows), (1, 1));
        assert_eq!(s.status, Some(StatusFlags::SERVER_STATUS_AUTOCOMMIT));
    }

    #[test]
    fn mariadb_text_result_set_with_eof_packets() {
        let packets = ["02", COL_A, COL_B, "fe00000200", "01310178", "fe00000200"];
        let (feeds, s) = run(ResponseKind::Query, false, &packets);
        assert_eq!(feeds, [C, C, C, C, C, D]);
        assert_eq!((s.result_sets, s.rows), (1, 1));
    }

    #[test]
    fn mysql8_result_set_whose_terminator_carries_session_state() {
        // SELECT 1 AS a after USE test: the terminator reports schema "test".
        let col = [
            "03646566", "00", "00", "00", "0161", "00", "0c", "3f00", "01000000", "08", "8100",
            "00", "0000",
        ]
        .concat();
        let end = "fe000002400000000701050474657374";
        let (feeds, s) = run(ResponseKind::Query, true, &["01", &col, "0131", end]);
        assert_eq!(feeds, [C, C, C, DO]);
        assert_eq!(
            s.state_changes,
            [SessionStateChange::Schema(b"test".to_vec())]
        );
    }

    #[test]
    fn multi_statement_result_sets() {
        // SELECT 1; SELECT 2 on MariaDB: MORE_RESULTS_EXISTS on the first terminator.
        let col1 = "036465660000000131000c3f0001000000038100000000";
        let col2 = "036465660000000132000c3f0001000000038100000000";
        let with_ok = [
            "01",
            col1,
            "0131",
            "fe00000a000000",
            "01",
            col2,
            "0132",
            "fe000002000000",
        ];
        let (feeds, s) = run(ResponseKind::Query, true, &with_ok);
        assert_eq!(feeds, [C, C, C, CO, C, C, C, DO]);
        assert_eq!((s.result_sets, s.rows), (2, 2));
        assert_eq!((s.last_set_rows(), s.ends_with_ok), (1, false));
        let with_eof = [
            "01",
            col1,
            "fe00000a00",
            "0131",
            "fe00000a00",
            "01",
            col2,
            "fe00000200",
            "0132",
            "fe00000200",
        ];
        let (feeds, _) = run(ResponseKind::Query, false, &with_eof);
        assert_eq!(feeds, [C, C, C, C, C, C, C, C, C, D]);
    }

    #[test]
    fn call_ends_with_a_final_ok() {
        // MySQL 8 CALL p() where p runs SELECT 1 and an UPDATE of 3 rows.
        let col = "036465660000000131000c3f0001000000088100000000";
        let packets = ["01", col, "0131", "fe00000a000000", "00030000020000"];
        let (feeds, s) = run(ResponseKind::Query, true, &packets);
        assert_eq!(feeds, [C, C, C, CO, DO]);
        assert_eq!((s.affected_rows, s.result_sets), (3, 1));
        assert_eq!(
            (s.last_set_rows(), s.ends_with_ok),
            (1, true),
            "a statement's OK last"
        );
    }

    #[test]
    fn multi_statement_oks() {
        // INSERT ...; INSERT ... (last id 7): two OKs, the first with MORE_RESULTS_EXISTS.
        let (feeds, s) = run(
            ResponseKind::Query,
            true,
            &["0001050a000000", "00010702000000"],
        );
        assert_eq!(feeds, [CO, DO]);
        assert_eq!(
            (s.affected_rows, s.last_insert_id, s.result_sets),
            (1, 7, 0)
        );
        assert!(s.ends_with_ok);
    }

    #[test]
    fn err_in_the_middle_of_rows_ends_everything() {
        let col = "036465660000000176000c3f0015000000f68000000000";
        let err =
            "ffda0423323130303053756271756572792072657475726e73206d6f7265207468616e203120726f77";
        let (feeds, s) = run(ResponseKind::Query, true, &["01", col, "0131", "0132", err]);
        assert_eq!(feeds, [C, C, C, C, D]);
        assert_eq!(s.rows, 2);
        assert_eq!(s.error.map(|e| e.code), Some(1242));
        assert_eq!(s.status, None);
    }

    #[test]
    fn err_as_first_packet() {
        let err = "ff7a042334325330325461626c65202774272e277827206465736e2774206578697374";
        let (feeds, s) = run(ResponseKind::Execute, true, &[err]);
        assert_eq!(feeds, [D]);
        assert_eq!(s.error.map(|e| e.code), Some(1146));
    }

    #[test]
    fn local_infile_request_then_final_ok() {
        let ok =
            "000000020000002f5265636f7264733a2030202044656c657465643a20302020536b69707065643a20\
            3020205761726e696e67733a2030";
        let (feeds, s) = run(ResponseKind::Query, true, &["fb2f78", ok]);
        assert_eq!(feeds, [Feed::LocalInfile, DO]);
        assert_eq!(s.status, Some(StatusFlags::SERVER_STATUS_AUTOCOMMIT));
    }

    #[test]
    fn prepare_with_and_without_deprecate_eof() {
        // SELECT ? + 1 AS c, 'a' AS d: one parameter, two columns.
        let ok = "000100000002000100000000";
        let param = "03646566000000013f000c3f0000000000068000000000";
        let col_c = "036465660000000163000c3f0011000000058000000000";
        let col_d = "036465660000000164000c2d0004000000fd0100270000";
        let (feeds, s) = run(ResponseKind::Prepare, true, &[ok, param, col_c, col_d]);
        assert_eq!(feeds, [C, C, C, D]);
        assert_eq!(
            s.prepare_ok,
            Some(PrepareOk {
                stmt_id: 1,
                columns: 2,
                params: 1,
                warnings: 0
            })
        );
        let packets = [ok, param, "fe00000200", col_c, col_d, "fe00000200"];
        let (feeds, _) = run(ResponseKind::Prepare, false, &packets);
        assert_eq!(feeds, [C, C, C, C, C, D]);
        // DO 1: no parameters, no columns.
        let (feeds, _) = run(ResponseKind::Prepare, false, &["000200000000000000000000"]);
        assert_eq!(feeds, [D]);
    }

    #[test]
    fn execute_that_opens_a_cursor_ends_after_the_definitions() {
        let col_c = "03646566000000016301630c3f0016000000080000000000";
        let col_d = "03646566000000016401640c2d0004000000fd0100000000";
        let (feeds, s) = run(
            ResponseKind::Execute,
            true,
            &["02", col_c, col_d, "fe000042000000"],
        );
        assert_eq!(feeds, [C, C, C, DO]);
        assert!(s
            .status
            .unwrap()
            .contains(StatusFlags::SERVER_STATUS_CURSOR_EXISTS));
        assert_eq!(s.rows, 0);
        let (feeds, s) = run(
            ResponseKind::Execute,
            false,
            &["02", col_c, col_d, "fe00004200"],
        );
        assert_eq!(feeds, [C, C, C, D]);
        assert!(s
            .status
            .unwrap()
            .contains(StatusFlags::SERVER_STATUS_CURSOR_EXISTS));
    }

    #[test]
    fn execute_with_binary_rows() {
        let col_c = "03646566000000016301630c3f0016000000080000000000";
        let row = "00002a00000000000000";
        let (feeds, s) = run(
            ResponseKind::Execute,
            false,
            &["01", col_c, "fe00000200", row, "fe00000200"],
        );
        assert_eq!(feeds, [C, C, C, C, D]);
        assert_eq!(s.rows, 1);
    }

    #[test]
    fn fetch_rows_then_last_row_sent() {
        let row = "00002a000000000000000161";
        let (feeds, s) = run(ResponseKind::Fetch, true, &[row, "fe000082000000"]);
        assert_eq!(feeds, [C, DO]);
        assert!(s
            .status
            .unwrap()
            .contains(StatusFlags::SERVER_STATUS_LAST_ROW_SENT));
        let (feeds, _) = run(ResponseKind::Fetch, false, &[row, row, "fe00008200"]);
        assert_eq!(feeds, [C, C, D]);
    }

    #[test]
    fn field_list_until_terminator() {
        let host = "03646566056d7973716c0475736572047573657204486f737404486f73740c2d00fc030000fe810027000000";
        let (feeds, _) = run(
            ResponseKind::FieldList,
            true,
            &[host, host, "fe000002000000"],
        );
        assert_eq!(feeds, [C, C, DO]);
        let (feeds, _) = run(ResponseKind::FieldList, false, &[host, "fe00000200"]);
        assert_eq!(feeds, [C, D]);
    }

    #[test]
    fn single_packet_responses() {
        let (feeds, s) = run(
            ResponseKind::Simple,
            true,
            &["00000002400000000b0106056d7973716c020131"],
        );
        assert_eq!(feeds, [DO]);
        assert_eq!(s.state_changes.len(), 2);
        // COM_SET_OPTION answers with an EOF, or an OK-0xFE under DEPRECATE_EOF.
        assert_eq!(run(ResponseKind::Simple, true, &["fe000002000000"]).0, [DO]);
        assert_eq!(run(ResponseKind::Simple, false, &["fe00000200"]).0, [D]);
        // COM_STATISTICS: "Uptime: 24  Threads: 1 ..."
        assert_eq!(
            run(ResponseKind::Statistics, true, &["557074696d653a203234"]).0,
            [D]
        );
    }

    #[test]
    fn no_response_commands_are_done_at_once() {
        let tracker = ResponseTracker::new(ResponseKind::None, caps(true));
        assert!(tracker.is_done());
    }

    #[test]
    fn row_starting_with_0xfe_is_a_row_only_when_16_mib_or_longer() {
        let mut tracker = ResponseTracker::new(ResponseKind::Query, caps(true));
        for packet in ["01", COL_A] {
            tracker.feed(&hex(packet)).unwrap();
        }
        // A text row whose first value has an 8-byte length prefix.
        let mut big = vec![0xFE];
        big.extend_from_slice(&(MAX_CHUNK as u64).to_le_bytes());
        big.resize(9 + MAX_CHUNK, b'x');
        assert_eq!(tracker.feed(&big).unwrap(), C);
        assert_eq!(tracker.feed(&hex("fe000002000000")).unwrap(), DO);
        assert_eq!(tracker.summary().rows, 1);
    }

    #[test]
    fn rejects_garbage() {
        let mut tracker = ResponseTracker::new(ResponseKind::Query, caps(false));
        assert!(tracker.feed(&[]).is_err());
        assert!(tracker.feed(&[0x00]).is_err(), "OK too short");
        let mut tracker = ResponseTracker::new(ResponseKind::Query, caps(false));
        tracker.feed(&[0x01]).unwrap();
        tracker.feed(&hex(COL_A)).unwrap();
        assert!(
            tracker.feed(&hex("0131")).is_err(),
            "row where the EOF belongs"
        );
        let mut tracker = ResponseTracker::new(ResponseKind::Execute, caps(true));
        assert!(
            tracker.feed(&hex("fb2f78")).is_err(),
            "LOCAL INFILE is a COM_QUERY thing"
        );
    }
}
