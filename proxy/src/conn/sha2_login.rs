//! caching_sha2_password's exchange on the client side of a login, for listed users and
//! server accounts alike: the fast path (the client's scramble checked against a password
//! sluice already holds, then FAST_AUTH_OK) or full authentication (PERFORM_FULL_AUTH, then
//! the password inside TLS, or RSA-encrypted after the client fetched sluice's public key).
//! What the password is checked against is the caller's.

use bytes::BytesMut;

use super::handshake_state::HandshakeContext;
use super::password::{self, Proof};
use super::{Error, PacketStream};
use crate::config::UserConfig;
use crate::protocol::auth_switch::{FAST_AUTH_OK, PERFORM_FULL_AUTH, REQUEST_PUBLIC_KEY};
use crate::protocol::{auth, AuthMoreData};

/// What the exchange established.
pub enum Sha2Outcome {
    /// The scramble matched the known password (FAST_AUTH_OK has been sent).
    Fast,
    /// The client sent its password (full authentication).
    Cleartext(Vec<u8>),
    /// Full authentication could not happen: a cleartext over plain TCP, or an RSA cipher
    /// that does not decrypt. The login is refused.
    Refused,
}

impl HandshakeContext {
    /// The RSA key pair, generated on first use on the blocking pool: generation takes a
    /// noticeable time, and on the session's own thread (the only one with
    /// `worker_threads = 1`) it would hold up every other client meanwhile. Two logins that
    /// race both generate; the first key stored is the one every client gets.
    async fn rsa_key(&self) -> &auth::RsaKeyPair {
        if let Some(key) = self.rsa.get() {
            return key;
        }
        let generated = tokio::task::spawn_blocking(auth::RsaKeyPair::generate)
            .await
            .unwrap_or_else(|_| auth::RsaKeyPair::generate());
        self.rsa.get_or_init(|| generated)
    }

    /// The exchange after the client's caching_sha2 `response` to `nonce`. `known`: a
    /// password the fast path may check the scramble against.
    pub(super) async fn sha2_exchange(
        &self,
        stream: &mut PacketStream,
        seq: &mut u8,
        nonce: &[u8],
        response: &[u8],
        known: Option<&[u8]>,
    ) -> Result<Sha2Outcome, Error> {
        if known.is_some_and(|pw| auth::sha2_verify(nonce, pw, response)) {
            let mut out = BytesMut::new();
            AuthMoreData(vec![FAST_AUTH_OK]).encode(&mut out);
            *seq = stream.send_packet(*seq, &out).await?;
            return Ok(Sha2Outcome::Fast);
        }
        // Full authentication: ask for the password, offering our RSA public key.
        let mut out = BytesMut::new();
        AuthMoreData(vec![PERFORM_FULL_AUTH]).encode(&mut out);
        *seq = stream.send_packet(*seq, &out).await?;
        let mut reply = read_reply(stream, seq).await?;
        if reply == [REQUEST_PUBLIC_KEY] {
            let key = self.rsa_key().await;
            let mut out = BytesMut::new();
            AuthMoreData(key.public_pem()).encode(&mut out);
            *seq = stream.send_packet(*seq, &out).await?;
            let cipher = read_reply(stream, seq).await?;
            return Ok(match key.decrypt_password(&cipher, nonce) {
                Ok(clear) => Sha2Outcome::Cleartext(clear),
                Err(_) => Sha2Outcome::Refused,
            });
        }
        // A cleartext password over an unencrypted connection is refused, as MySQL does.
        if !stream.is_secure() {
            return Ok(Sha2Outcome::Refused);
        }
        if reply.last() == Some(&0) {
            reply.pop();
        }
        Ok(Sha2Outcome::Cleartext(reply))
    }

    /// caching_sha2_password for a listed user: the fast path once the user completed a
    /// full authentication since start-up (as MySQL's cache), otherwise full authentication.
    pub(super) async fn verify_sha2(
        &self,
        stream: &mut PacketStream,
        seq: &mut u8,
        user: &UserConfig,
        nonce: &[u8],
        response: &[u8],
    ) -> Result<bool, Error> {
        let scramble = Proof::Sha2 { nonce, response };
        // Full authentication cannot succeed against a native hash, and an empty password
        // has none: the scramble decides.
        if user.password.is_native_hash() || user.password.expose().is_empty() {
            return Ok(password::verify(&user.password, scramble));
        }
        let cached = self
            .sha2_cache
            .lock()
            .map(|c| c.contains(&user.name))
            .unwrap_or(false);
        let known = cached.then(|| user.password.expose().as_bytes());
        let ok = match self
            .sha2_exchange(stream, seq, nonce, response, known)
            .await?
        {
            Sha2Outcome::Fast => return Ok(true),
            Sha2Outcome::Cleartext(clear) => {
                password::verify(&user.password, Proof::Cleartext(&clear))
            }
            Sha2Outcome::Refused => false,
        };
        if ok {
            if let Ok(mut c) = self.sha2_cache.lock() {
                c.insert(user.name.clone());
            }
        }
        Ok(ok)
    }
}

/// The client's next auth packet; `seq` moves past it.
async fn read_reply(stream: &mut PacketStream, seq: &mut u8) -> Result<Vec<u8>, Error> {
    let span = stream.expect_packet().await?;
    let reply = stream.payload(&span).into_owned();
    *seq = span.last_seq.wrapping_add(1);
    stream.consume(&span);
    Ok(reply)
}
