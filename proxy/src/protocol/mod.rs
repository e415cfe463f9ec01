//! The MySQL/MariaDB wire format, pure: no sockets, no async, no pool, no config.
//!
//! Decoders take untrusted bytes and return `protocol::Error`, never panic. Encoders write
//! payloads only; `frame::write_packet` adds headers and sequence ids.
//!
//! | file | contents |
//! | --- | --- |
//! | `error` | `Error`, `Result` |
//! | `buf` | checked `Reader`, length-encoded writers |
//! | `frame` | 4-byte headers, 16 MiB split/join (`scan_logical`, `payload`, `write_packet`) |
//! | `flags` | `Capabilities`, `StatusFlags`, `CommandCode`, the capabilities sluice offers |
//! | `handshake` | `Handshake` (HandshakeV10) |
//! | `handshake_response` | `HandshakeResponse` (41), `SslRequest` |
//! | `auth_switch` | `AuthSwitchRequest`, `AuthMoreData` |
//! | `auth` | nonces, native and caching_sha2 scrambles and verification, RSA |
//! | `command` | `Command` parsed from a client packet, `ChangeUser`, `set_stmt_id` |
//! | `ok` | `OkPacket`, `SessionStateChange`, `strip_session_track` |
//! | `session_gtid` | `GtidReport`: a write's GTID in the session-state block (MariaDB `last_gtid`, MySQL SESSION_TRACK_GTIDS) |
//! | `err` | `ErrPacket` |
//! | `eof` | `EofPacket` |
//! | `prepare_ok` | `PrepareOk`, `patch_stmt_id` |
//! | `stmt_execute` | COM_STMT_EXECUTE layout: `layout`, `bound_types`, `with_types` |
//! | `stmt_bulk_execute` | COM_STMT_BULK_EXECUTE types: `sent_types`, `with_types` |
//! | `request` | payloads sluice builds: `query`, `init_db`, `set_option`, `stmt_prepare` |
//! | `column_def` | `column_count`, `ColumnDef` (the name only), for results sluice reads itself |
//! | `text_row` | `decode_text_row`: a text result row (lenenc strings, NULL) |
//! | `text_result` | `TextResultReader`, `TextResult`: a small text result set read whole |
//! | `response` | `ResponseTracker`: where a backend response ends |
//! | `codes` | `ErrorCode`s sluice sends |
//! | `charset` | handshake collations a server refuses for the client |

pub mod auth;
pub mod auth_switch;
pub mod buf;
pub mod charset;
pub mod codes;
pub mod column_def;
pub mod command;
pub mod eof;
pub mod err;
pub mod error;
pub mod flags;
pub mod frame;
pub mod handshake;
pub mod handshake_response;
pub mod ok;
pub mod prepare_ok;
pub mod request;
pub mod response;
pub mod session_gtid;
pub mod stmt_bulk_execute;
pub mod stmt_execute;
pub mod text_result;
pub mod text_row;

pub use auth::RsaKeyPair;
pub use auth_switch::{AuthMoreData, AuthSwitchRequest};
pub use buf::{put_lenenc_bytes, put_lenenc_int, put_nul_bytes, Reader};
pub use codes::ErrorCode;
pub use command::{set_stmt_id, ChangeUser, Command};
pub use eof::{is_eof, EofPacket};
pub use err::{is_err, ErrPacket};
pub use error::{Error, Result};
pub use flags::{server_capabilities, shaping_mask, Capabilities, CommandCode, StatusFlags};
pub use frame::{payload, scan_logical, write_packet, LogicalSpan, HEADER_LEN, MAX_CHUNK};
pub use handshake::Handshake;
pub use handshake_response::{is_ssl_request, HandshakeResponse, SslRequest};
pub use ok::{
    is_ok, is_ok_terminator, strip_session_track, OkPacket, SessionStateChange, Trackers,
};
pub use prepare_ok::PrepareOk;
pub use response::{Feed, ResponseKind, ResponseSummary, ResponseTracker};
pub use session_gtid::{last_write_gtid, GtidReport};
pub use text_result::{TextResult, TextResultReader};

#[cfg(test)]
pub(crate) mod testutil {
    /// Bytes from a hex string (test fixtures only; panics on bad hex).
    pub(crate) fn hex(s: &str) -> Vec<u8> {
        assert!(s.len().is_multiple_of(2), "odd hex length");
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use rand::{Rng, SeedableRng};

    /// Every decoder on random bytes (biased towards protocol-looking first bytes): errors
    /// are fine, panics are not.
    #[test]
    fn decoders_never_panic_on_random_input() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5EED);
        let all_caps = Capabilities::from_bits_truncate(u32::MAX);
        for _ in 0..20_000 {
            let len = rng.gen_range(0..64);
            let mut buf: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            if let Some(first) = buf.first_mut() {
                *first = [0x00, 0x01, 0x0a, 0xfb, 0xfe, 0xff, *first][rng.gen_range(0..7)];
            }
            let caps = if rng.gen() {
                all_caps
            } else {
                Capabilities::CLIENT_PROTOCOL_41
            };
            let _ = Handshake::decode(&buf);
            let _ = HandshakeResponse::decode(&buf);
            let _ = SslRequest::decode(&buf);
            let _ = AuthSwitchRequest::decode(&buf);
            let _ = AuthMoreData::decode(&buf);
            let _ = OkPacket::decode(&buf, caps);
            let _ = strip_session_track(&buf, &mut BytesMut::new());
            let _ = ErrPacket::decode(&buf, caps);
            let _ = EofPacket::decode(&buf);
            let _ = PrepareOk::decode(&buf);
            let _ = ChangeUser::decode(&buf, caps);
            let _ = Command::parse(&buf);
            let _ = column_def::column_count(&buf);
            let _ = column_def::ColumnDef::decode(&buf);
            let _ = text_row::decode_text_row(&buf, rng.gen_range(0..8));
            let _ = TextResultReader::new(caps).feed(&buf);
            let _ = scan_logical(&buf, 1 << 20);
            for kind in [
                ResponseKind::Query,
                ResponseKind::Execute,
                ResponseKind::Prepare,
                ResponseKind::Fetch,
            ] {
                let mut tracker = ResponseTracker::new(kind, caps);
                for chunk in buf.chunks(rng.gen_range(1..8)) {
                    let _ = tracker.feed(chunk);
                }
            }
        }
    }
}
