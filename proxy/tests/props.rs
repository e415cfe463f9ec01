//! Property tests for the pure parsers (no database): decode(encode(x)) == x for the frame
//! layer and every packet type sluice both writes and reads, and no decoder, the response
//! tracker or the SQL classifier panics on any input.

use bytes::BytesMut;
use proptest::collection::vec;
use proptest::prelude::*;
use sluice::classify::{classify, classify_in, Quoting};
use sluice::protocol::{
    payload, scan_logical, set_stmt_id, write_packet, AuthMoreData, AuthSwitchRequest,
    Capabilities, ChangeUser, Command, EofPacket, ErrPacket, Handshake, HandshakeResponse,
    OkPacket, PrepareOk, ResponseKind, ResponseTracker, SslRequest, StatusFlags, MAX_CHUNK,
};
use sluice::protocol::{strip_session_track, Error};

/// Bytes without NUL (for NUL-terminated fields).
fn no_nul(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(1u8..=255, 0..max)
}

/// Frames `data` at `seq`, then scans and joins it back.
fn frame_round_trip(data: &[u8], seq: u8) {
    let mut out = BytesMut::new();
    let next = write_packet(&mut out, seq, data);
    let span = scan_logical(&out, usize::MAX)
        .expect("a valid frame")
        .expect("a complete frame");
    assert_eq!(span.raw_len, out.len());
    assert_eq!(span.payload_len, data.len());
    assert_eq!(span.first_seq, seq);
    assert_eq!(span.next_seq(), next);
    assert_eq!(span.chunks, data.len() / MAX_CHUNK + 1);
    assert!(payload(&out, &span).as_ref() == data, "payload differs");
    // Any strict prefix is "need more bytes", never a wrong packet.
    for cut in [0, 1, 3, 4, out.len() / 2, out.len() - 1] {
        if cut < out.len() {
            assert_eq!(scan_logical(&out[..cut], usize::MAX), Ok(None), "cut {cut}");
        }
    }
}

/// The 16 MiB boundaries, where the split and the trailing empty chunk matter.
#[test]
fn frames_around_the_16mib_chunk_boundary_round_trip() {
    for len in [
        MAX_CHUNK - 1,
        MAX_CHUNK,
        MAX_CHUNK + 1,
        2 * MAX_CHUNK,
        2 * MAX_CHUNK + 7,
    ] {
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        frame_round_trip(&data, 0xFE);
    }
}

#[test]
fn a_frame_over_the_limit_is_refused_from_its_first_header() {
    let mut out = BytesMut::new();
    write_packet(&mut out, 0, &vec![0u8; 1000]);
    assert_eq!(
        scan_logical(&out[..4], 999),
        Err(Error::PacketTooLarge {
            len: 1000,
            max: 999
        })
    );
}

fn caps() -> impl Strategy<Value = Capabilities> {
    any::<u32>().prop_map(Capabilities::from_bits_truncate)
}

fn status() -> impl Strategy<Value = StatusFlags> {
    any::<u16>().prop_map(StatusFlags::from_bits_truncate)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn frames_round_trip(data in vec(any::<u8>(), 0..70_000), seq in any::<u8>()) {
        frame_round_trip(&data, seq);
    }

    /// Several packets back to back: each scan finds exactly the next one.
    #[test]
    fn packet_streams_split_where_they_were_joined(
        packets in vec((vec(any::<u8>(), 0..300), any::<u8>()), 1..8),
    ) {
        let mut out = BytesMut::new();
        for (p, seq) in &packets {
            write_packet(&mut out, *seq, p);
        }
        let mut rest = &out[..];
        for (p, seq) in &packets {
            let span = scan_logical(rest, 1 << 20).unwrap().unwrap();
            prop_assert_eq!(span.first_seq, *seq);
            let joined = payload(rest, &span);
            prop_assert_eq!(joined.as_ref(), &p[..]);
            rest = &rest[span.raw_len..];
        }
        prop_assert!(rest.is_empty());
    }

    #[test]
    fn ok_packets_round_trip(
        terminator in any::<bool>(),
        affected_rows in any::<u64>(),
        last_insert_id in any::<u64>(),
        status in status(),
        warnings in any::<u16>(),
        info in vec(any::<u8>(), 0..100),
        track in any::<bool>(),
    ) {
        let caps = if track {
            Capabilities::CLIENT_PROTOCOL_41 | Capabilities::CLIENT_SESSION_TRACK
        } else {
            Capabilities::CLIENT_PROTOCOL_41
        };
        let mut ok = OkPacket::new(status);
        ok.header = if terminator { 0xFE } else { 0x00 };
        ok.affected_rows = affected_rows;
        ok.last_insert_id = last_insert_id;
        ok.warnings = warnings;
        ok.info = info;
        let mut out = BytesMut::new();
        ok.encode(caps, &mut out);
        let mut expected = ok.clone();
        if !track {
            expected.status.remove(StatusFlags::SERVER_SESSION_STATE_CHANGED);
        }
        prop_assert_eq!(OkPacket::decode(&out, caps).unwrap(), expected.clone());
        // Stripping the tracking block of a tracked OK yields the untracked encoding.
        if track {
            let mut stripped = BytesMut::new();
            strip_session_track(&out, &mut stripped).unwrap();
            expected.status.remove(StatusFlags::SERVER_SESSION_STATE_CHANGED);
            expected.session_state.clear();
            prop_assert_eq!(
                OkPacket::decode(&stripped, Capabilities::CLIENT_PROTOCOL_41).unwrap(),
                expected
            );
        }
    }

    #[test]
    fn err_packets_round_trip(
        code in any::<u16>(),
        sql_state in any::<[u8; 5]>(),
        message in vec(any::<u8>(), 0..200),
    ) {
        let err = ErrPacket { code, sql_state, message };
        let mut out = BytesMut::new();
        err.encode(&mut out);
        prop_assert_eq!(ErrPacket::decode(&out, Capabilities::CLIENT_PROTOCOL_41).unwrap(), err);
    }

    #[test]
    fn eof_and_prepare_ok_round_trip(
        warnings in any::<u16>(),
        status in status(),
        stmt_id in any::<u32>(),
        columns in any::<u16>(),
        params in any::<u16>(),
    ) {
        let eof = EofPacket { warnings, status };
        let mut out = BytesMut::new();
        eof.encode(&mut out);
        prop_assert_eq!(EofPacket::decode(&out).unwrap(), eof);
        let prep = PrepareOk { stmt_id, columns, params, warnings };
        let mut out = BytesMut::new();
        prep.encode(&mut out);
        prop_assert_eq!(PrepareOk::decode(&out).unwrap(), prep);
    }

    #[test]
    fn handshakes_round_trip(
        server_version in no_nul(60),
        connection_id in any::<u32>(),
        nonce in any::<[u8; 20]>(),
        capabilities in caps(),
        collation in any::<u8>(),
        status in status(),
        auth_plugin in no_nul(40),
        mariadb_caps in any::<u32>(),
    ) {
        let capabilities = capabilities | Capabilities::CLIENT_SECURE_CONNECTION;
        // MariaDB's extended capabilities travel only when CLIENT_LONG_PASSWORD is clear.
        let mariadb_caps = if capabilities.contains(Capabilities::CLIENT_LONG_PASSWORD) { 0 } else { mariadb_caps };
        let auth_plugin = if capabilities.contains(Capabilities::CLIENT_PLUGIN_AUTH) {
            auth_plugin
        } else {
            Vec::new()
        };
        let hs = Handshake {
            server_version,
            connection_id,
            nonce,
            capabilities,
            collation,
            status,
            auth_plugin,
            mariadb_caps,
        };
        let mut out = BytesMut::new();
        hs.encode(&mut out);
        prop_assert_eq!(Handshake::decode(&out).unwrap(), hs);
    }

    #[test]
    fn handshake_responses_round_trip(
        capabilities in caps(),
        max_packet in any::<u32>(),
        collation in any::<u8>(),
        user in no_nul(40),
        auth in vec(any::<u8>(), 0..300),
        database in no_nul(40),
        auth_plugin in no_nul(40),
        connect_attrs in vec((vec(any::<u8>(), 0..20), vec(any::<u8>(), 0..300)), 0..5),
        mariadb_caps in any::<u32>(),
    ) {
        let caps = capabilities | Capabilities::CLIENT_PROTOCOL_41;
        let mariadb_caps = if caps.contains(Capabilities::CLIENT_LONG_PASSWORD) { 0 } else { mariadb_caps };
        let auth_response = if caps.contains(Capabilities::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA) {
            auth
        } else if caps.contains(Capabilities::CLIENT_SECURE_CONNECTION) {
            auth.into_iter().take(255).collect()
        } else {
            auth.into_iter().filter(|b| *b != 0).collect()
        };
        let database = (caps.contains(Capabilities::CLIENT_CONNECT_WITH_DB) && !database.is_empty())
            .then_some(database);
        // An empty plugin name decodes as none (fuzz/regressions/handshake-empty-plugin).
        let auth_plugin = (caps.contains(Capabilities::CLIENT_PLUGIN_AUTH) && !auth_plugin.is_empty())
            .then_some(auth_plugin);
        let connect_attrs = if caps.contains(Capabilities::CLIENT_CONNECT_ATTRS) {
            connect_attrs
        } else {
            Vec::new()
        };
        let hr = HandshakeResponse {
            capabilities: caps,
            max_packet,
            collation,
            user,
            auth_response,
            database,
            auth_plugin,
            connect_attrs,
            mariadb_caps,
        };
        let mut out = BytesMut::new();
        hr.encode(&mut out);
        prop_assert_eq!(HandshakeResponse::decode(&out).unwrap(), hr);
        let ssl = SslRequest { capabilities: caps, max_packet, collation };
        let mut out = BytesMut::new();
        ssl.encode(&mut out);
        prop_assert_eq!(SslRequest::decode(&out).unwrap(), ssl);
    }

    #[test]
    fn auth_switch_round_trips(plugin in no_nul(40), data in vec(any::<u8>(), 0..64)) {
        let req = AuthSwitchRequest { plugin, data };
        let mut out = BytesMut::new();
        req.encode(&mut out);
        prop_assert_eq!(AuthSwitchRequest::decode(&out).unwrap(), req.clone());
        let more = AuthMoreData(req.data.clone());
        let mut out = BytesMut::new();
        more.encode(&mut out);
        prop_assert_eq!(AuthMoreData::decode(&out).unwrap(), more);
    }

    /// Client commands, encoded as a client writes them, parse back to what was sent.
    #[test]
    fn commands_round_trip(
        text in vec(any::<u8>(), 0..200),
        id in any::<u32>(),
        other in any::<u32>(),
        param in any::<u16>(),
        new_id in any::<u32>(),
    ) {
        let with = |code: u8, body: &[u8]| -> Vec<u8> {
            let mut p = vec![code];
            p.extend_from_slice(body);
            p
        };
        let id_le = id.to_le_bytes();
        let q = with(0x03, &text);
        prop_assert_eq!(Command::parse(&q).unwrap(), Command::Query(&text));
        let p = with(0x02, &text);
        prop_assert_eq!(Command::parse(&p).unwrap(), Command::InitDb(&text));
        let p = with(0x16, &text);
        prop_assert_eq!(Command::parse(&p).unwrap(), Command::StmtPrepare(&text));
        let mut exec = with(0x17, &id_le);
        exec.extend_from_slice(&text);
        prop_assert_eq!(
            Command::parse(&exec).unwrap(),
            Command::StmtExecute { stmt_id: id, body: &text }
        );
        let mut long = with(0x18, &id_le);
        long.extend_from_slice(&param.to_le_bytes());
        long.extend_from_slice(&text);
        prop_assert_eq!(
            Command::parse(&long).unwrap(),
            Command::StmtSendLongData { stmt_id: id, param, data: &text }
        );
        let p = with(0x19, &id_le);
        prop_assert_eq!(Command::parse(&p).unwrap(), Command::StmtClose(id));
        let p = with(0x1a, &id_le);
        prop_assert_eq!(Command::parse(&p).unwrap(), Command::StmtReset(id));
        let mut fetch = with(0x1c, &id_le);
        fetch.extend_from_slice(&other.to_le_bytes());
        prop_assert_eq!(
            Command::parse(&fetch).unwrap(),
            Command::StmtFetch { stmt_id: id, rows: other }
        );
        let p = with(0x0c, &id_le);
        prop_assert_eq!(Command::parse(&p).unwrap(), Command::ProcessKill(id));
        let p = with(0x1b, &param.to_le_bytes());
        prop_assert_eq!(Command::parse(&p).unwrap(), Command::SetOption(param));
        // Rewriting the statement id of an EXECUTE touches only the id.
        set_stmt_id(&mut exec, new_id).unwrap();
        prop_assert_eq!(
            Command::parse(&exec).unwrap(),
            Command::StmtExecute { stmt_id: new_id, body: &text }
        );
    }

    /// Every decoder on arbitrary bytes: an error is fine, a panic is not.
    #[test]
    fn no_decoder_panics(data in vec(any::<u8>(), 0..512), caps in caps()) {
        let _ = scan_logical(&data, 1 << 20);
        if let Ok(Some(span)) = scan_logical(&data, usize::MAX) {
            let _ = payload(&data, &span);
        }
        let _ = Handshake::decode(&data);
        let _ = HandshakeResponse::decode(&data);
        let _ = SslRequest::decode(&data);
        let _ = AuthSwitchRequest::decode(&data);
        let _ = AuthMoreData::decode(&data);
        let _ = OkPacket::decode(&data, caps);
        let _ = strip_session_track(&data, &mut BytesMut::new());
        let _ = ErrPacket::decode(&data, caps);
        let _ = EofPacket::decode(&data);
        let _ = PrepareOk::decode(&data);
        let _ = ChangeUser::decode(&data, caps);
        if let Ok(cmd) = Command::parse(&data) {
            let _ = cmd.response_kind();
        }
        let mut copy = data.clone();
        let _ = set_stmt_id(&mut copy, 7);
    }

    /// The same with a protocol-looking first byte, so the decoders get past their header checks.
    #[test]
    fn no_decoder_panics_past_the_header(
        first in prop::sample::select(vec![0x00u8, 0x01, 0x0a, 0x03, 0x16, 0x17, 0x11, 0xfb, 0xfe, 0xff]),
        rest in vec(any::<u8>(), 0..256),
        caps in caps(),
    ) {
        let mut data = vec![first];
        data.extend_from_slice(&rest);
        let _ = Handshake::decode(&data);
        let _ = AuthSwitchRequest::decode(&data);
        let _ = OkPacket::decode(&data, caps);
        let _ = strip_session_track(&data, &mut BytesMut::new());
        let _ = ErrPacket::decode(&data, caps);
        let _ = EofPacket::decode(&data);
        let _ = PrepareOk::decode(&data);
        let _ = Command::parse(&data);
    }

    /// The response-end state machine fed arbitrary backend packets never panics, and once it
    /// says Done it stays done (or errors) rather than wandering on.
    #[test]
    fn response_tracker_never_panics(
        packets in vec(
            (prop::sample::select(vec![0x00u8, 0x01, 0x02, 0x05, 0xfb, 0xfc, 0xfe, 0xff]),
             vec(any::<u8>(), 0..40)),
            0..40,
        ),
        caps in caps(),
        kind in prop::sample::select(ResponseKind::ALL.to_vec()),
    ) {
        let mut tracker = ResponseTracker::new(kind, caps);
        for (first, rest) in &packets {
            let mut p = vec![*first];
            p.extend_from_slice(rest);
            let _ = tracker.feed(&p);
            let _ = tracker.is_done();
        }
        let _ = tracker.feed(&[]);
        let _ = tracker.into_summary();
    }

    #[test]
    fn classify_never_panics(sql in vec(any::<u8>(), 0..300)) {
        let _ = classify(&sql);
        let _ = classify_in(&sql, Quoting::QuotesOnly);
    }

    /// SQL-looking input reaches deeper into the lexer than random bytes do.
    #[test]
    fn classify_never_panics_on_sql_like_text(
        words in vec(prop::sample::select(vec![
            "SELECT", "SET", "@@session.", "@x", "=", "BEGIN", "START", "TRANSACTION", "COMMIT",
            "LOCK", "TABLES", "GET_LOCK(", ")", "'", "\"", "`", "/*", "*/", "/*!", "-- ", "#",
            "\n", ";", "PREPARE", "USE", "KILL", "QUERY", "CREATE", "TEMPORARY", "TABLE", ",",
            "\\", "x'", "0x", "1", "NAMES", "utf8mb4", "AUTOCOMMIT", "XA", "HANDLER", "FOR UPDATE",
        ]), 0..30),
    ) {
        let sql = words.join(" ");
        let _ = classify(sql.as_bytes());
        let _ = classify(words.concat().as_bytes());
        let _ = classify_in(sql.as_bytes(), Quoting::QuotesOnly);
    }
}
