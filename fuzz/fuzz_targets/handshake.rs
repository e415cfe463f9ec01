//! The connection-phase parsers: the server greeting, the client's handshake response and
//! SSLRequest, auth switch / more data, and COM_CHANGE_USER. The first byte picks the parser
//! (and, for COM_CHANGE_USER, the capability set). Whatever decodes must survive
//! encode -> decode unchanged.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use sluice::protocol::{
    AuthMoreData, AuthSwitchRequest, Capabilities, ChangeUser, Handshake, HandshakeResponse,
    SslRequest,
};

fuzz_target!(|data: &[u8]| {
    let Some((&pick, payload)) = data.split_first() else {
        return;
    };
    let mut out = BytesMut::new();
    match pick % 6 {
        0 => {
            if let Ok(hs) = Handshake::decode(payload) {
                hs.encode(&mut out);
                assert_eq!(Handshake::decode(&out).as_ref(), Ok(&hs));
            }
        }
        1 => {
            if let Ok(resp) = HandshakeResponse::decode(payload) {
                resp.encode(&mut out);
                assert_eq!(HandshakeResponse::decode(&out).as_ref(), Ok(&resp));
            }
        }
        2 => {
            if let Ok(req) = SslRequest::decode(payload) {
                req.encode(&mut out);
                assert_eq!(SslRequest::decode(&out), Ok(req));
            }
        }
        3 => {
            if let Ok(switch) = AuthSwitchRequest::decode(payload) {
                switch.encode(&mut out);
                assert_eq!(AuthSwitchRequest::decode(&out).as_ref(), Ok(&switch));
                let _ = switch.nonce();
            }
        }
        4 => {
            if let Ok(more) = AuthMoreData::decode(payload) {
                more.encode(&mut out);
                assert_eq!(AuthMoreData::decode(&out).as_ref(), Ok(&more));
            }
        }
        _ => {
            let Some((caps, body)) = payload.split_first_chunk::<4>() else {
                return;
            };
            let caps = Capabilities::from_bits_truncate(u32::from_le_bytes(*caps));
            let _ = ChangeUser::decode(body, caps);
        }
    }
});
