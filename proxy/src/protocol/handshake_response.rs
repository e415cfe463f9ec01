//! The client's reply to the greeting (Protocol::HandshakeResponse41) and the SSLRequest that
//! precedes it when the client switches to TLS.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase_packets_protocol_handshake_response.html>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase_packets_protocol_ssl_request.html>,
//! <https://mariadb.com/kb/en/connection/#handshake-response-packet>.
//!
//! MariaDB puts its extended client capabilities in the last 4 of the 23 filler bytes, when
//! CLIENT_LONG_PASSWORD (its "CLIENT_MYSQL") is clear.

use bytes::{BufMut, BytesMut};

use super::buf::{put_lenenc_bytes, put_lenenc_int, put_nul_bytes, Reader};
use super::error::{Error, Result};
use super::flags::{mariadb_caps, Capabilities};

const FILLER_LEN: usize = 23;
/// Length of an SSLRequest (and of the fixed head of a HandshakeResponse41).
pub const SSL_REQUEST_LEN: usize = 32;

/// HandshakeResponse41.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HandshakeResponse {
    pub capabilities: Capabilities,
    pub max_packet: u32,
    pub collation: u8,
    pub user: Vec<u8>,
    pub auth_response: Vec<u8>,
    /// `None` without CLIENT_CONNECT_WITH_DB, or when the name is empty.
    pub database: Option<Vec<u8>>,
    /// `None` without CLIENT_PLUGIN_AUTH.
    pub auth_plugin: Option<Vec<u8>>,
    pub connect_attrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// MariaDB's extended capabilities (`flags::mariadb_caps`).
    pub mariadb_caps: u32,
}

impl HandshakeResponse {
    pub fn decode(payload: &[u8]) -> Result<Self> {
        let mut r = Reader::named(payload, "handshake response");
        let capabilities = Capabilities::from_bits_truncate(r.u32()?);
        if !capabilities.contains(Capabilities::CLIENT_PROTOCOL_41) {
            return Err(Error::Malformed {
                what: "pre-4.1 handshake response",
            });
        }
        let max_packet = r.u32()?;
        let collation = r.u8()?;
        let filler = r.bytes(FILLER_LEN)?;
        let mariadb_caps = if mariadb_caps::carried(capabilities) {
            u32::from_le_bytes([filler[19], filler[20], filler[21], filler[22]])
        } else {
            0
        };
        let user = r.nul_bytes()?.to_vec();
        let auth_response =
            if capabilities.contains(Capabilities::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA) {
                r.lenenc_bytes()?
            } else if capabilities.contains(Capabilities::CLIENT_SECURE_CONNECTION) {
                let len = r.u8()?;
                r.bytes(usize::from(len))?
            } else {
                r.nul_bytes()?
            }
            .to_vec();
        // Connectors disagree on whether trailing optional fields are present when empty,
        // so each one is read only if bytes remain.
        let mut database = None;
        if capabilities.contains(Capabilities::CLIENT_CONNECT_WITH_DB) && !r.is_empty() {
            database = non_empty(r.nul_or_eof_bytes());
        }
        // An empty plugin name means "none given", as an absent one does (and as `encode`
        // writes `None`), so the default plugin applies.
        let mut auth_plugin = None;
        if capabilities.contains(Capabilities::CLIENT_PLUGIN_AUTH) && !r.is_empty() {
            auth_plugin = non_empty(r.nul_or_eof_bytes());
        }
        let mut connect_attrs = Vec::new();
        if capabilities.contains(Capabilities::CLIENT_CONNECT_ATTRS) && !r.is_empty() {
            connect_attrs = decode_connect_attrs(&mut r)?;
        }
        Ok(HandshakeResponse {
            capabilities,
            max_packet,
            collation,
            user,
            auth_response,
            database,
            auth_plugin,
            connect_attrs,
            mariadb_caps,
        })
    }

    /// Writes the payload (no header). The layout follows `self.capabilities`.
    pub fn encode(&self, out: &mut BytesMut) {
        let caps = self.capabilities;
        out.put_u32_le(caps.bits());
        out.put_u32_le(self.max_packet);
        out.put_u8(self.collation);
        out.put_bytes(0, FILLER_LEN - 4);
        let carried = mariadb_caps::carried(caps);
        out.put_u32_le(if carried { self.mariadb_caps } else { 0 });
        put_nul_bytes(out, &self.user);
        if caps.contains(Capabilities::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA) {
            put_lenenc_bytes(out, &self.auth_response);
        } else if caps.contains(Capabilities::CLIENT_SECURE_CONNECTION) {
            // The one-byte length form cannot carry more; scrambles are 20 or 32 bytes.
            let len = self.auth_response.len().min(255);
            out.put_u8(len as u8);
            out.put_slice(&self.auth_response[..len]);
        } else {
            put_nul_bytes(out, &self.auth_response);
        }
        if caps.contains(Capabilities::CLIENT_CONNECT_WITH_DB) {
            put_nul_bytes(out, self.database.as_deref().unwrap_or_default());
        }
        if caps.contains(Capabilities::CLIENT_PLUGIN_AUTH) {
            put_nul_bytes(out, self.auth_plugin.as_deref().unwrap_or_default());
        }
        if caps.contains(Capabilities::CLIENT_CONNECT_ATTRS) {
            encode_connect_attrs(&self.connect_attrs, out);
        }
    }
}

/// True for a 32-byte payload with CLIENT_SSL: the client wants TLS before the real response.
pub fn is_ssl_request(payload: &[u8]) -> bool {
    payload.len() == SSL_REQUEST_LEN
        && Reader::new(payload)
            .u32()
            .map(|c| Capabilities::from_bits_truncate(c).contains(Capabilities::CLIENT_SSL))
            .unwrap_or(false)
}

/// Protocol::SSLRequest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SslRequest {
    pub capabilities: Capabilities,
    pub max_packet: u32,
    pub collation: u8,
}

impl SslRequest {
    pub fn decode(payload: &[u8]) -> Result<Self> {
        let mut r = Reader::named(payload, "SSL request");
        let capabilities = Capabilities::from_bits_truncate(r.u32()?);
        let max_packet = r.u32()?;
        let collation = r.u8()?;
        r.skip(FILLER_LEN)?;
        Ok(SslRequest {
            capabilities,
            max_packet,
            collation,
        })
    }

    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.capabilities.bits());
        out.put_u32_le(self.max_packet);
        out.put_u8(self.collation);
        out.put_bytes(0, FILLER_LEN);
    }
}

fn non_empty(s: &[u8]) -> Option<Vec<u8>> {
    (!s.is_empty()).then(|| s.to_vec())
}

/// Connection attributes: a length-encoded block of (key, value) length-encoded strings.
/// Shared with COM_CHANGE_USER.
pub(crate) fn decode_connect_attrs(r: &mut Reader<'_>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let block = r.lenenc_bytes()?;
    let mut attrs = Reader::named(block, "connection attributes");
    let mut out = Vec::new();
    while !attrs.is_empty() {
        let key = attrs.lenenc_bytes()?.to_vec();
        let value = attrs.lenenc_bytes()?.to_vec();
        out.push((key, value));
    }
    Ok(out)
}

pub(crate) fn encode_connect_attrs(attrs: &[(Vec<u8>, Vec<u8>)], out: &mut BytesMut) {
    let mut block = BytesMut::new();
    for (key, value) in attrs {
        put_lenenc_bytes(&mut block, key);
        put_lenenc_bytes(&mut block, value);
    }
    put_lenenc_int(out, block.len() as u64);
    out.put_slice(&block);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::testutil::hex;

    /// Captured from the `mariadb` CLI 10.11 (libmariadb 3.3) answering a MySQL 8.0-like
    /// greeting: `mariadb -ualice -psecret -D shop` (the scramble is tested in auth.rs).
    const MARIADB_CLI: &str = "8da2bf0000001000210000000000000000000000000000000000000000000000\
        616c69636500147931cdfc44f9e063934a93deba3edcac05f035e673686f70006d7973716c5f6e61746976\
        655f70617373776f7264007f035f6f73054c696e75780c5f636c69656e745f6e616d650a6c69626d617269\
        616462045f7069640531373031330f5f636c69656e745f76657273696f6e06332e332e3230095f706c6174\
        666f726d067838365f36340c70726f6772616d5f6e616d65056d7973716c0c5f7365727665725f686f7374\
        093132372e302e302e31";

    #[test]
    fn decodes_mariadb_cli_response_and_re_encodes_it_identically() {
        let raw = hex(MARIADB_CLI);
        let hr = HandshakeResponse::decode(&raw).unwrap();
        assert_eq!(hr.capabilities.bits(), 0x00bf_a28d);
        assert!(!hr.capabilities.contains(Capabilities::CLIENT_DEPRECATE_EOF));
        assert_eq!(hr.max_packet, 1 << 20);
        assert_eq!(hr.collation, 33);
        assert_eq!(hr.user, b"alice");
        assert_eq!(hr.auth_response.len(), 20);
        assert_eq!(hr.database.as_deref(), Some(&b"shop"[..]));
        assert_eq!(
            hr.auth_plugin.as_deref(),
            Some(&b"mysql_native_password"[..])
        );
        assert_eq!(hr.connect_attrs.len(), 7);
        assert_eq!(
            hr.connect_attrs[1],
            (b"_client_name".to_vec(), b"libmariadb".to_vec())
        );
        let mut out = BytesMut::new();
        hr.encode(&mut out);
        assert_eq!(&out[..], &raw[..]);
        assert!(!is_ssl_request(&raw));
    }

    #[test]
    fn one_byte_auth_length_without_lenenc_capability() {
        let caps = Capabilities::CLIENT_PROTOCOL_41 | Capabilities::CLIENT_SECURE_CONNECTION;
        let hr = HandshakeResponse {
            capabilities: caps,
            max_packet: 1 << 24,
            collation: 45,
            user: b"bob".to_vec(),
            auth_response: vec![0xAA; 20],
            ..Default::default()
        };
        let mut out = BytesMut::new();
        hr.encode(&mut out);
        assert_eq!(out.len(), 32 + 4 + 1 + 20);
        assert_eq!(out[36], 20);
        assert_eq!(HandshakeResponse::decode(&out).unwrap(), hr);
    }

    #[test]
    fn ssl_request_bytes() {
        // caps 0x01aaa201 incl. CLIENT_SSL (0x800), max packet 16 MiB, utf8mb4_general_ci.
        let mut raw = vec![0x01, 0xaa, 0xaa, 0x01, 0x00, 0x00, 0x00, 0x01, 0x2d];
        raw.resize(32, 0);
        assert!(is_ssl_request(&raw));
        let req = SslRequest::decode(&raw).unwrap();
        assert!(req.capabilities.contains(Capabilities::CLIENT_SSL));
        assert_eq!((req.max_packet, req.collation), (1 << 24, 45));
        let mut out = BytesMut::new();
        req.encode(&mut out);
        assert_eq!(&out[..], &raw[..]);
        assert!(!is_ssl_request(&raw[..31]));
    }

    #[test]
    fn rejects_pre_41_clients() {
        let raw = [0x05, 0x00, 0x00, 0x00, 0, 0, 0, 1, 8];
        assert!(matches!(
            HandshakeResponse::decode(&raw),
            Err(Error::Malformed { .. })
        ));
    }

    #[test]
    fn no_prefix_panics() {
        let raw = hex(MARIADB_CLI);
        for end in 0..raw.len() {
            let _ = HandshakeResponse::decode(&raw[..end]);
            let _ = SslRequest::decode(&raw[..end]);
        }
        // Up to the end of the auth response every prefix is an error.
        for end in 0..58 {
            assert!(
                HandshakeResponse::decode(&raw[..end]).is_err(),
                "prefix {end}"
            );
        }
    }

    /// Found by the `handshake` fuzz target (fuzz/regressions/handshake-empty-plugin): a
    /// response ending right after the auth data re-encoded with empty optional fields, and the
    /// empty plugin name then decoded as `Some("")`, a plugin no one asked for.
    #[test]
    fn an_empty_plugin_name_is_no_plugin_and_round_trips() {
        let mut raw = hex(MARIADB_CLI);
        raw.truncate(59);
        let hr = HandshakeResponse::decode(&raw).unwrap();
        assert_eq!((&hr.database, &hr.auth_plugin), (&None, &None));
        let mut out = BytesMut::new();
        hr.encode(&mut out);
        assert_eq!(HandshakeResponse::decode(&out).unwrap(), hr);
        let fuzzed = include_bytes!("../../../fuzz/regressions/handshake-empty-plugin");
        let hr = HandshakeResponse::decode(&fuzzed[1..]).unwrap();
        let mut out = BytesMut::new();
        hr.encode(&mut out);
        assert_eq!(HandshakeResponse::decode(&out).unwrap(), hr);
    }
}
