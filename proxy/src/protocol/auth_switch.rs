//! Packets of the authentication exchange after the first reply: AuthSwitchRequest (0xFE)
//! and AuthMoreData (0x01).
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase_packets_protocol_auth_switch_request.html>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase_packets_protocol_auth_more_data.html>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/page_caching_sha2_authentication_exchanges.html>,
//! <https://mariadb.com/kb/en/connection/#authentication-switch-request>.

use bytes::{BufMut, BytesMut};

use super::buf::{put_nul_bytes, Reader};
use super::error::{Error, Result};

const SWITCH_HEADER: u8 = 0xFE;
const MORE_DATA_HEADER: u8 = 0x01;

/// caching_sha2_password, server to client: the scramble matched the cache; an OK follows.
pub const FAST_AUTH_OK: u8 = 0x03;
/// caching_sha2_password, server to client: send the password (in clear over TLS, else RSA).
pub const PERFORM_FULL_AUTH: u8 = 0x04;
/// caching_sha2_password, client to server (a bare 1-byte packet): send me your RSA public key.
pub const REQUEST_PUBLIC_KEY: u8 = 0x02;

/// Protocol::AuthSwitchRequest: "restart authentication with this plugin and this nonce".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSwitchRequest {
    pub plugin: Vec<u8>,
    /// Plugin data as sent; for the native and sha2 plugins the 20-byte nonce plus a NUL.
    pub data: Vec<u8>,
}

impl AuthSwitchRequest {
    /// A request carrying `nonce` the way MySQL sends it (followed by a NUL).
    pub fn new(plugin: &str, nonce: &[u8]) -> Self {
        let mut data = nonce.to_vec();
        data.push(0);
        AuthSwitchRequest {
            plugin: plugin.as_bytes().to_vec(),
            data,
        }
    }

    pub fn decode(payload: &[u8]) -> Result<Self> {
        let mut r = Reader::named(payload, "auth switch request");
        if r.u8()? != SWITCH_HEADER {
            return Err(Error::Malformed {
                what: "auth switch request header",
            });
        }
        if r.is_empty() {
            // The pre-4.1 "old password" switch is the bare 0xFE byte.
            return Ok(AuthSwitchRequest {
                plugin: b"mysql_old_password".to_vec(),
                data: Vec::new(),
            });
        }
        let plugin = r.nul_or_eof_bytes().to_vec();
        Ok(AuthSwitchRequest {
            plugin,
            data: r.rest().to_vec(),
        })
    }

    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u8(SWITCH_HEADER);
        put_nul_bytes(out, &self.plugin);
        out.put_slice(&self.data);
    }

    /// The nonce: `data` without its trailing NUL.
    pub fn nonce(&self) -> &[u8] {
        self.data.strip_suffix(&[0]).unwrap_or(&self.data)
    }
}

/// Protocol::AuthMoreData: plugin-specific bytes from the server (0x01 + data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthMoreData(pub Vec<u8>);

impl AuthMoreData {
    pub fn decode(payload: &[u8]) -> Result<Self> {
        match payload.split_first() {
            Some((&MORE_DATA_HEADER, data)) => Ok(AuthMoreData(data.to_vec())),
            Some(_) => Err(Error::Malformed {
                what: "auth more data header",
            }),
            None => Err(Error::Truncated {
                what: "auth more data",
            }),
        }
    }

    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u8(MORE_DATA_HEADER);
        out.put_slice(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MySQL 8 asking a mysql_native_password client to switch to caching_sha2_password.
    const SWITCH_TO_SHA2: &[u8] = &[
        0xfe, b'c', b'a', b'c', b'h', b'i', b'n', b'g', b'_', b's', b'h', b'a', b'2', b'_', b'p',
        b'a', b's', b's', b'w', b'o', b'r', b'd', 0x00, // plugin
        0x10, 0x47, 0x74, 0x49, 0x5a, 0x18, 0x3c, 0x7f, 0x2e, 0x7e, 0x33, 0x0f, 0x35, 0x28, 0x5b,
        0x65, 0x29, 0x06, 0x13, 0x64, 0x00, // 20-byte nonce + NUL
    ];

    #[test]
    fn decodes_and_encodes_switch_request() {
        let req = AuthSwitchRequest::decode(SWITCH_TO_SHA2).unwrap();
        assert_eq!(req.plugin, b"caching_sha2_password");
        assert_eq!(req.nonce(), &SWITCH_TO_SHA2[23..43]);
        let built = AuthSwitchRequest::new("caching_sha2_password", req.nonce());
        assert_eq!(built, req);
        let mut out = BytesMut::new();
        req.encode(&mut out);
        assert_eq!(&out[..], SWITCH_TO_SHA2);
    }

    #[test]
    fn old_password_switch_is_one_byte() {
        let req = AuthSwitchRequest::decode(&[0xfe]).unwrap();
        assert_eq!(req.plugin, b"mysql_old_password");
        assert!(req.nonce().is_empty());
    }

    #[test]
    fn caching_sha2_more_data_packets() {
        // Fast path: 0x01 0x03, then the server sends OK.
        assert_eq!(
            AuthMoreData::decode(&[0x01, 0x03]).unwrap(),
            AuthMoreData(vec![FAST_AUTH_OK])
        );
        // Full auth: 0x01 0x04; the client answers with the bare byte 0x02 to get the key.
        assert_eq!(
            AuthMoreData::decode(&[0x01, 0x04]).unwrap().0,
            [PERFORM_FULL_AUTH]
        );
        // The key comes back as 0x01 + PEM text.
        let pem = b"-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqh\n-----END PUBLIC KEY-----\n";
        let mut out = BytesMut::new();
        AuthMoreData(pem.to_vec()).encode(&mut out);
        assert_eq!(out[0], 0x01);
        assert_eq!(AuthMoreData::decode(&out).unwrap().0, pem);
        assert!(AuthMoreData::decode(&[0x00, 0x03]).is_err());
    }

    #[test]
    fn no_prefix_panics() {
        for end in 0..SWITCH_TO_SHA2.len() {
            let _ = AuthSwitchRequest::decode(&SWITCH_TO_SHA2[..end]);
            let _ = AuthMoreData::decode(&SWITCH_TO_SHA2[..end]);
        }
        assert!(AuthSwitchRequest::decode(&[]).is_err());
    }
}
