//! The backend login exchange: the handshake response, auth switches and caching_sha2's
//! fast and full authentication, answered with the client's password or a recovered
//! SHA1(password).

use bytes::BytesMut;

use super::backend::{BackendConn, BackendTarget};
use super::Error;
use crate::config::Secret;
use crate::protocol::auth_switch::{FAST_AUTH_OK, PERFORM_FULL_AUTH, REQUEST_PUBLIC_KEY};
use crate::protocol::{
    auth, AuthMoreData, AuthSwitchRequest, ErrPacket, Handshake, HandshakeResponse,
};

impl BackendConn {
    pub(super) async fn login(
        &mut self,
        hs: &Handshake,
        seq: u8,
        target: &BackendTarget,
    ) -> Result<(), Error> {
        let newest = target
            .credentials
            .as_ref()
            .and_then(|d| d.credential(&target.user));
        let secret = newest.as_ref().unwrap_or(&target.password);
        let password = secret.expose().as_bytes();
        // A recovered SHA1(password) answers mysql_native_password only: the account's plugin
        // (that gave it) is native, so the server takes the answer whatever it greeted with.
        let plugin: &[u8] =
            if hs.auth_plugin == auth::CACHING_SHA2.as_bytes() && secret.stage1().is_none() {
                auth::CACHING_SHA2.as_bytes()
            } else {
                auth::NATIVE.as_bytes()
            };
        let mut nonce = hs.nonce.to_vec();
        let response = HandshakeResponse {
            capabilities: self.caps,
            max_packet: 1 << 30,
            collation: self.key.collation,
            user: target.user.as_bytes().to_vec(),
            auth_response: scramble(plugin, &nonce, secret)?,
            database: None,
            auth_plugin: Some(plugin.to_vec()),
            connect_attrs: vec![(b"_client_name".to_vec(), b"sluice".to_vec())],
            // Bulk execution changes no response layout, so every backend can take it.
            mariadb_caps: hs.mariadb_caps & crate::protocol::flags::mariadb_caps::RELAYED,
        };
        let mut out = BytesMut::new();
        response.encode(&mut out);
        self.stream.send_packet(seq, &out).await?;
        loop {
            let span = self.stream.expect_packet().await?;
            let payload = self.stream.payload(&span).into_owned();
            let seq = span.last_seq.wrapping_add(1);
            self.stream.consume(&span);
            match payload.first().copied() {
                Some(0x00) => return Ok(()),
                Some(0xFF) => return Err(Error::Server(ErrPacket::decode(&payload, self.caps)?)),
                Some(0xFE) => {
                    let switch = AuthSwitchRequest::decode(&payload)?;
                    if switch.plugin != auth::NATIVE.as_bytes()
                        && switch.plugin != auth::CACHING_SHA2.as_bytes()
                    {
                        return Err(Error::UnsupportedPlugin);
                    }
                    nonce = switch.data.clone();
                    if nonce.last() == Some(&0) {
                        nonce.pop();
                    }
                    let reply = scramble(&switch.plugin, &nonce, secret)?;
                    self.stream.send_packet(seq, &reply).await?;
                }
                Some(0x01) => {
                    let more = AuthMoreData::decode(&payload)?;
                    match more.0.as_slice() {
                        [FAST_AUTH_OK] => {}
                        // Full authentication needs the password itself.
                        [PERFORM_FULL_AUTH] if secret.stage1().is_some() => {
                            return Err(Error::UnsupportedPlugin)
                        }
                        // Inside TLS the password goes as it is (NUL-terminated), as MySQL
                        // clients do; in the clear it must be RSA-encrypted.
                        [PERFORM_FULL_AUTH] if self.stream.is_secure() => {
                            let mut clear = password.to_vec();
                            clear.push(0);
                            self.stream.send_packet(seq, &clear).await?;
                        }
                        [PERFORM_FULL_AUTH] => {
                            self.stream.send_packet(seq, &[REQUEST_PUBLIC_KEY]).await?;
                        }
                        pem => {
                            let cipher = auth::rsa_encrypt_password(password, &nonce, pem)?;
                            self.stream.send_packet(seq, &cipher).await?;
                        }
                    }
                }
                Some(other) => {
                    return Err(Error::Unexpected {
                        during: "backend login",
                        got: other,
                    })
                }
                None => return Err(Error::Truncated),
            }
        }
    }
}

/// The answer to `nonce` for `plugin`; a recovered SHA1(password) answers only the native one.
fn scramble(plugin: &[u8], nonce: &[u8], secret: &Secret) -> Result<Vec<u8>, Error> {
    let sha2 = plugin == auth::CACHING_SHA2.as_bytes();
    match secret.stage1() {
        Some(stage1) if !sha2 => Ok(auth::native_scramble_stage1(nonce, stage1)),
        Some(_) => Err(Error::UnsupportedPlugin),
        None if sha2 => Ok(auth::sha2_scramble(nonce, secret.expose().as_bytes())),
        None => Ok(auth::native_scramble(nonce, secret.expose().as_bytes())),
    }
}
