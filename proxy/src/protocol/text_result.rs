//! A small text result set read whole, for sluice's own queries (the topology monitor's
//! `SELECT @@read_only, ...` and `SHOW SLAVE STATUS`): the column count, the column names,
//! the rows, and the terminator. Fed one logical packet at a time, like `ResponseTracker`,
//! but it keeps what it reads; relayed results never come here.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_query_response_text_resultset.html>,
//! <https://mariadb.com/kb/en/result-set-packets/>.

use super::column_def::{column_count, ColumnDef};
use super::eof::{is_eof, EofPacket};
use super::err::ErrPacket;
use super::error::{Error, Result};
use super::flags::{Capabilities, StatusFlags};
use super::frame::MAX_CHUNK;
use super::ok::OkPacket;
use super::text_row::decode_text_row;

const OK_HEADER: u8 = 0x00;
const EOF_HEADER: u8 = 0xFE;
const ERR_HEADER: u8 = 0xFF;
/// Header, two 1-byte lenenc ints, status and warnings.
const MIN_OK_LEN: usize = 7;
/// sluice's own queries return a handful of rows; more means the wrong query or server.
pub const MAX_ROWS: usize = 10_000;

/// The rows of a text result set; values are text as the server sent them, `None` is NULL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextResult {
    pub columns: Vec<Vec<u8>>,
    pub rows: Vec<Vec<Option<Vec<u8>>>>,
}

impl TextResult {
    /// The index of the column named `name` (ASCII case-insensitive, as MySQL compares
    /// column names).
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.eq_ignore_ascii_case(name.as_bytes()))
    }

    /// The value of column `name` in row `row`: `None` if there is no such row or column,
    /// `Some(None)` for NULL.
    pub fn get(&self, row: usize, name: &str) -> Option<Option<&[u8]>> {
        let col = self.column(name)?;
        self.rows
            .get(row)
            .and_then(|r| r.get(col))
            .map(|v| v.as_deref())
    }
}

/// Whether the response has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Feed the next packet.
    More,
    /// That was the last packet.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Start,
    Columns { left: u64 },
    ColumnsEof,
    Rows,
    Done,
}

/// Assembles one [`TextResult`] (or the server's ERR) from the packets of a COM_QUERY
/// response.
#[derive(Debug, Clone)]
pub struct TextResultReader {
    caps: Capabilities,
    state: State,
    result: TextResult,
    error: Option<ErrPacket>,
}

impl TextResultReader {
    /// `caps` = what sluice and the server negotiated (decides EOF vs OK terminators).
    pub fn new(caps: Capabilities) -> Self {
        TextResultReader {
            caps,
            state: State::Start,
            result: TextResult::default(),
            error: None,
        }
    }

    pub fn feed(&mut self, payload: &[u8]) -> Result<Step> {
        let first = *payload.first().ok_or(Error::Truncated {
            what: "result packet",
        })?;
        if first == ERR_HEADER && self.state != State::Done {
            self.error = Some(ErrPacket::decode(payload, self.caps)?);
            self.state = State::Done;
            return Ok(Step::Done);
        }
        match self.state {
            State::Start if first == OK_HEADER => {
                // A statement without a result set: no columns, no rows.
                let ok = OkPacket::decode(payload, self.caps)?;
                self.end(ok.status)
            }
            State::Start => {
                let count = column_count(payload)?;
                self.result.columns.reserve(count as usize);
                self.state = State::Columns { left: count };
                Ok(Step::More)
            }
            State::Columns { left } => {
                self.result.columns.push(ColumnDef::decode(payload)?.name);
                self.state = match left - 1 {
                    0 if self.caps.contains(Capabilities::CLIENT_DEPRECATE_EOF) => State::Rows,
                    0 => State::ColumnsEof,
                    left => State::Columns { left },
                };
                Ok(Step::More)
            }
            State::ColumnsEof => {
                EofPacket::decode(payload)?;
                self.state = State::Rows;
                Ok(Step::More)
            }
            State::Rows if self.is_terminator(first, payload) => {
                // Under DEPRECATE_EOF the terminator is an OK with the 0xFE header.
                let deprecate_eof = self.caps.contains(Capabilities::CLIENT_DEPRECATE_EOF);
                let status = if deprecate_eof && payload.len() >= MIN_OK_LEN {
                    OkPacket::decode(payload, self.caps)?.status
                } else {
                    EofPacket::decode(payload)?.status
                };
                self.end(status)
            }
            State::Rows => {
                if self.result.rows.len() >= MAX_ROWS {
                    return Err(Error::Malformed {
                        what: "result set larger than sluice reads for itself",
                    });
                }
                let row = decode_text_row(payload, self.result.columns.len())?;
                self.result
                    .rows
                    .push(row.into_iter().map(|v| v.map(<[u8]>::to_vec)).collect());
                Ok(Step::More)
            }
            State::Done => Err(Error::Malformed {
                what: "packet after the end of the response",
            }),
        }
    }

    /// The result, or the server's refusal. Only meaningful after [`Step::Done`].
    pub fn into_result(self) -> std::result::Result<TextResult, ErrPacket> {
        match self.error {
            Some(err) => Err(err),
            None => Ok(self.result),
        }
    }

    /// 0xFE and short: an EOF, or under DEPRECATE_EOF an OK-0xFE (a row starts with 0xFE
    /// only when its first value is at least 16 MiB long).
    fn is_terminator(&self, first: u8, payload: &[u8]) -> bool {
        first == EOF_HEADER
            && (is_eof(payload)
                || (self.caps.contains(Capabilities::CLIENT_DEPRECATE_EOF)
                    && payload.len() < MAX_CHUNK))
    }

    fn end(&mut self, status: StatusFlags) -> Result<Step> {
        self.state = State::Done;
        // sluice sends one statement at a time; a second result would be left unread.
        if status.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS) {
            return Err(Error::Malformed {
                what: "more than one result set for an internal query",
            });
        }
        Ok(Step::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::testutil::hex;

    const DEFS: [&str; 4] = [
        "036465660000000b40407365727665725f6964000c3f001500000008a000000000",
        "036465660000000b4040726561645f6f6e6c79000c3f0001000000088000000000",
        "03646566000000114040677469645f62696e6c6f675f706f73000c210021000000fd0000270000",
        "03646566000000044e554c4c000c3f0000000000068000000000",
    ];
    const ROW: &str = "013101300b302d312d332c372d312d31fb";

    /// MariaDB 10.11's whole response to `SELECT @@server_id, @@read_only,
    /// @@gtid_binlog_pos, NULL`, with and without CLIENT_DEPRECATE_EOF.
    fn response(deprecate_eof: bool) -> Vec<Vec<u8>> {
        let mut packets = vec![hex("04")];
        packets.extend(DEFS.iter().map(|d| hex(d)));
        if !deprecate_eof {
            packets.push(hex("fe00000200"));
        }
        packets.push(hex(ROW));
        packets.push(hex(if deprecate_eof {
            "fe000002000000"
        } else {
            "fe00000200"
        }));
        packets
    }

    fn caps(deprecate_eof: bool) -> Capabilities {
        let base = Capabilities::CLIENT_PROTOCOL_41 | Capabilities::CLIENT_SESSION_TRACK;
        if deprecate_eof {
            base | Capabilities::CLIENT_DEPRECATE_EOF
        } else {
            base
        }
    }

    fn read(packets: &[Vec<u8>], caps: Capabilities) -> std::result::Result<TextResult, ErrPacket> {
        let mut reader = TextResultReader::new(caps);
        for (i, p) in packets.iter().enumerate() {
            let step = reader.feed(p).unwrap();
            assert_eq!(step == Step::Done, i + 1 == packets.len(), "packet {i}");
        }
        reader.into_result()
    }

    #[test]
    fn reads_a_captured_result_both_ways() {
        for deprecate_eof in [true, false] {
            let result = read(&response(deprecate_eof), caps(deprecate_eof)).unwrap();
            assert_eq!(result.columns.len(), 4);
            assert_eq!(result.rows.len(), 1);
            assert_eq!(result.get(0, "@@SERVER_ID"), Some(Some(&b"1"[..])));
            assert_eq!(result.get(0, "@@read_only"), Some(Some(&b"0"[..])));
            assert_eq!(
                result.get(0, "@@gtid_binlog_pos"),
                Some(Some(&b"0-1-3,7-1-1"[..]))
            );
            assert_eq!(result.get(0, "NULL"), Some(None));
            assert_eq!(result.get(0, "missing"), None);
            assert_eq!(result.get(1, "NULL"), None);
        }
    }

    #[test]
    fn no_rows_an_ok_and_an_err() {
        // SHOW SLAVE STATUS on a server that replicates from nobody: columns, no rows.
        let mut packets = response(true);
        packets.remove(5);
        let result = read(&packets, caps(true)).unwrap();
        assert_eq!((result.columns.len(), result.rows.len()), (4, 0));
        let result = read(&[hex("00000002000000")], caps(true)).unwrap();
        assert_eq!(result, TextResult::default());
        // Error 1227 for a monitor account without SLAVE MONITOR.
        let mut err = hex("ffcb0423343230303041636365737320");
        err.extend_from_slice(b"denied");
        let refused = read(&[err], caps(true)).unwrap_err();
        assert_eq!(refused.code, 1227);
        assert_eq!(refused.sql_state_str(), "42000");
        // An ERR after some rows (a query killed while streaming).
        let mut packets = response(true);
        packets.pop();
        packets.push(hex("ff1d0523373030303071756572792073746f70706564"));
        assert_eq!(read(&packets, caps(true)).unwrap_err().code, 1309);
    }

    #[test]
    fn malformed_responses_are_errors_not_panics() {
        // A second result set would be left on the wire.
        let mut packets = response(true);
        *packets.last_mut().unwrap() = hex("fe00000a00000000");
        let mut reader = TextResultReader::new(caps(true));
        let errors = packets.iter().filter(|p| reader.feed(p).is_err()).count();
        assert_eq!(errors, 1);
        // A row with the wrong number of values.
        let mut reader = TextResultReader::new(caps(true));
        let mut bad = response(true);
        bad[5] = hex("0131");
        let failed = bad.iter().any(|p| reader.feed(p).is_err());
        assert!(failed);
        // A packet after the end.
        let mut reader = TextResultReader::new(caps(true));
        assert_eq!(reader.feed(&hex("00000002000000")), Ok(Step::Done));
        assert!(reader.feed(&hex("00000002000000")).is_err());
        assert!(TextResultReader::new(caps(true)).feed(&[]).is_err());
        // Every prefix of every packet.
        for p in response(false) {
            for end in 0..p.len() {
                let _ = TextResultReader::new(caps(false)).feed(&p[..end]);
            }
        }
    }
}
