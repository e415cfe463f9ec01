//! Authentication arithmetic: nonces, mysql_native_password and caching_sha2_password
//! scrambles (client side) and their verification (server side), and the RSA steps of
//! caching_sha2_password full authentication without TLS.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase_authentication_methods_native_password_authentication.html>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/page_caching_sha2_authentication_exchanges.html>,
//! <https://mariadb.com/kb/en/connection/#mysql_native_password-plugin>.
//!
//! Client scrambles come from mysql_common; verification and RSA are ours (mysql_common has no
//! server side, and its PEM parser panics on bad input).

use rand::Rng;
use rsa::pkcs1::DecodeRsaPublicKey;
use rsa::pkcs8::{DecodePublicKey, EncodePublicKey, LineEnding};
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};
use sha1::{Digest, Sha1};
use sha2::Sha256;

use super::error::{Error, Result};

pub const NATIVE: &str = "mysql_native_password";
pub const CACHING_SHA2: &str = "caching_sha2_password";

/// 20 random printable ASCII bytes. No NUL bytes: clients treat the nonce as a C string.
pub fn random_nonce() -> [u8; 20] {
    let mut rng = rand::thread_rng();
    let mut nonce = [0u8; 20];
    for b in &mut nonce {
        // Printable ASCII, like the server's own salts: never NUL, never a byte that a client
        // treating the nonce as text could mangle.
        *b = rng.gen_range(0x21..=0x7E);
    }
    nonce
}

/// SHA1(password) XOR SHA1(nonce + SHA1(SHA1(password))). Empty password -> empty response.
pub fn native_scramble(nonce: &[u8], password: &[u8]) -> Vec<u8> {
    mysql_common::scramble::scramble_native(nonce, password)
        .map(Vec::from)
        .unwrap_or_default()
}

/// Constant-time check of a native scramble against a plaintext password.
pub fn native_verify(nonce: &[u8], password: &[u8], response: &[u8]) -> bool {
    ct_eq(&native_scramble(nonce, password), response)
}

/// Verify against a stored "*<40 hex>" mysql.user-style hash (SHA1(SHA1(pw))) instead of plaintext.
///
/// An empty hash means "no password" and accepts only an empty response.
pub fn native_verify_hash(nonce: &[u8], stage2_hex: &str, response: &[u8]) -> bool {
    if stage2_hex.is_empty() {
        return response.is_empty();
    }
    native_recover_stage1(nonce, stage2_hex, response).is_some()
}

/// SHA1(password) from a client's mysql_native_password answer over `nonce`, when it proves
/// the password behind the stored `*<40 hex>` hash; `None` otherwise (an empty hash has no
/// SHA1 to recover). The answer is SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw))), so undoing the
/// XOR with the stored hash and hashing once more must give the stored hash back.
pub fn native_recover_stage1(nonce: &[u8], stage2_hex: &str, response: &[u8]) -> Option<[u8; 20]> {
    let stage2 = stage2_hex.strip_prefix('*').and_then(decode_hex::<20>)?;
    if response.len() != 20 {
        return None;
    }
    let mask = Sha1::new()
        .chain_update(nonce)
        .chain_update(stage2)
        .finalize();
    let mut stage1 = [0u8; 20];
    for (i, b) in stage1.iter_mut().enumerate() {
        *b = response[i] ^ mask[i];
    }
    ct_eq(&Sha1::digest(stage1), &stage2).then_some(stage1)
}

/// mysql_native_password's answer to `nonce` from SHA1(password) alone (what a backend login
/// with a recovered credential sends): SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw))).
pub fn native_scramble_stage1(nonce: &[u8], stage1: &[u8; 20]) -> Vec<u8> {
    let stage2 = Sha1::digest(stage1);
    let mask = Sha1::new()
        .chain_update(nonce)
        .chain_update(stage2)
        .finalize();
    stage1.iter().zip(mask.iter()).map(|(a, b)| a ^ b).collect()
}

/// SHA1(password): what a native answer proves knowledge of.
pub fn native_stage1(password: &[u8]) -> [u8; 20] {
    Sha1::digest(password).into()
}

/// "*<40 uppercase hex>" of a recovered SHA1(password): SHA1 of it, as mysql.user stores it.
pub fn native_hash_of_stage1(stage1: &[u8; 20]) -> String {
    let mut out = String::with_capacity(41);
    out.push('*');
    for b in Sha1::digest(stage1) {
        out.push_str(&format!("{b:02X}"));
    }
    out
}

/// "*<40 uppercase hex>" = SHA1(SHA1(password)), as in mysql.user; "" for an empty password.
pub fn native_hash(password: &[u8]) -> String {
    if password.is_empty() {
        return String::new();
    }
    native_hash_of_stage1(&native_stage1(password))
}

/// XOR(SHA256(pw), SHA256(SHA256(SHA256(pw)) + nonce)). Empty password -> empty response.
pub fn sha2_scramble(nonce: &[u8], password: &[u8]) -> Vec<u8> {
    mysql_common::scramble::scramble_sha256(nonce, password)
        .map(Vec::from)
        .unwrap_or_default()
}

/// Constant-time check of a caching_sha2 fast-path scramble against a plaintext password.
pub fn sha2_verify(nonce: &[u8], password: &[u8], response: &[u8]) -> bool {
    ct_eq(&sha2_scramble(nonce, password), response)
}

/// SHA256(SHA256(password)): what a caching_sha2 server keeps in its fast-auth cache.
pub fn sha2_stage2(password: &[u8]) -> [u8; 32] {
    Sha256::digest(Sha256::digest(password)).into()
}

/// Verify a caching_sha2 fast-path scramble against a cached `sha2_stage2` value.
pub fn sha2_verify_stage2(nonce: &[u8], stage2: &[u8; 32], response: &[u8]) -> bool {
    if response.len() != 32 {
        return false;
    }
    let mask = Sha256::new()
        .chain_update(stage2)
        .chain_update(nonce)
        .finalize();
    let stage1: Vec<u8> = response
        .iter()
        .zip(mask.iter())
        .map(|(a, b)| a ^ b)
        .collect();
    ct_eq(&Sha256::digest(&stage1), stage2)
}

/// Client side of caching_sha2 full auth without TLS: RSA-OAEP encrypt (password + NUL) XOR nonce with the
/// server's PEM public key.
pub fn rsa_encrypt_password(password: &[u8], nonce: &[u8], public_pem: &[u8]) -> Result<Vec<u8>> {
    let key = parse_public_pem(public_pem)?;
    let plain = xor_with_nonce(password, nonce, true)?;
    key.encrypt(&mut rand::thread_rng(), Oaep::new::<Sha1>(), &plain)
        .map_err(|_| Error::Malformed {
            what: "password too long for the RSA key",
        })
}

/// Server side of caching_sha2 full auth: an RSA key pair generated at start-up (2048 bit).
pub struct RsaKeyPair {
    private: RsaPrivateKey,
    public_pem: Vec<u8>,
}

impl std::fmt::Debug for RsaKeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the private key.
        f.debug_struct("RsaKeyPair")
            .field("bits", &2048)
            .finish_non_exhaustive()
    }
}

impl RsaKeyPair {
    pub fn generate() -> Self {
        // Generation fails only if the OS random source does, and then nothing can run safely.
        let private =
            RsaPrivateKey::new(&mut rand::thread_rng(), 2048).expect("generate a 2048-bit RSA key");
        let public_pem = RsaPublicKey::from(&private)
            .to_public_key_pem(LineEnding::LF)
            .expect("encode an RSA public key as PEM")
            .into_bytes();
        RsaKeyPair {
            private,
            public_pem,
        }
    }

    /// The public key as "-----BEGIN PUBLIC KEY-----" PEM, as MySQL sends it after 0x02.
    pub fn public_pem(&self) -> Vec<u8> {
        self.public_pem.clone()
    }

    /// The password a client encrypted with `rsa_encrypt_password` (NUL terminator removed).
    pub fn decrypt_password(&self, cipher: &[u8], nonce: &[u8]) -> Result<Vec<u8>> {
        let plain = self
            .private
            .decrypt(Oaep::new::<Sha1>(), cipher)
            .map_err(|_| Error::Malformed {
                what: "RSA-encrypted password",
            })?;
        let mut password = xor_with_nonce(&plain, nonce, false)?;
        if password.last() == Some(&0) {
            password.pop();
        }
        Ok(password)
    }
}

fn parse_public_pem(pem: &[u8]) -> Result<RsaPublicKey> {
    let bad = Error::Malformed {
        what: "RSA public key",
    };
    // Servers send the PEM text with a trailing NUL or newline depending on the version.
    let text = std::str::from_utf8(pem).map_err(|_| bad.clone())?;
    let text = text.trim_matches(|c: char| c == '\0' || c.is_whitespace());
    RsaPublicKey::from_public_key_pem(text)
        .or_else(|_| RsaPublicKey::from_pkcs1_pem(text))
        .map_err(|_| bad)
}

fn xor_with_nonce(data: &[u8], nonce: &[u8], add_nul: bool) -> Result<Vec<u8>> {
    if nonce.is_empty() {
        return Err(Error::Malformed {
            what: "empty auth nonce",
        });
    }
    let mut out = data.to_vec();
    if add_nul {
        out.push(0);
    }
    for (i, b) in out.iter_mut().enumerate() {
        *b ^= nonce[i % nonce.len()];
    }
    Ok(out)
}

fn decode_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let bytes = s.as_bytes();
    if bytes.len() != N * 2 {
        return None;
    }
    let mut out = [0u8; N];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

/// Equal length and contents, without an early exit that would leak the first differing byte.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::OnceLock;

    /// The nonce of the MySQL 8.0-like greeting in handshake_response.rs's capture.
    const NONCE: [u8; 20] = [
        0x3a, 0x23, 0x50, 0x3b, 0x79, 0x0e, 0x2d, 0x5e, 0x5b, 0x2e, 0x34, 0x1f, 0x5f, 0x6c, 0x0a,
        0x27, 0x28, 0x13, 0x71, 0x1b,
    ];
    /// What the `mariadb` CLI sent for password "secret" with that nonce.
    const CLI_SCRAMBLE: [u8; 20] = [
        0x79, 0x31, 0xcd, 0xfc, 0x44, 0xf9, 0xe0, 0x63, 0x93, 0x4a, 0x93, 0xde, 0xba, 0x3e, 0xdc,
        0xac, 0x05, 0xf0, 0x35, 0xe6,
    ];

    fn key() -> &'static RsaKeyPair {
        static KEY: OnceLock<RsaKeyPair> = OnceLock::new();
        KEY.get_or_init(RsaKeyPair::generate)
    }

    #[test]
    fn native_scramble_matches_a_real_client() {
        assert_eq!(native_scramble(&NONCE, b"secret"), CLI_SCRAMBLE);
        assert!(native_verify(&NONCE, b"secret", &CLI_SCRAMBLE));
        assert!(!native_verify(&NONCE, b"Secret", &CLI_SCRAMBLE));
        assert!(!native_verify(&NONCE, b"secret", &CLI_SCRAMBLE[..19]));
    }

    #[test]
    fn native_hash_is_mysql_password_function() {
        // SELECT PASSWORD('secret') on MariaDB 10.11.
        assert_eq!(
            native_hash(b"secret"),
            "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"
        );
        assert_eq!(native_hash(b""), "");
        let hash = native_hash(b"secret");
        assert!(native_verify_hash(&NONCE, &hash, &CLI_SCRAMBLE));
        assert!(native_verify_hash(
            &NONCE,
            &hash.to_lowercase(),
            &CLI_SCRAMBLE
        ));
        assert!(!native_verify_hash(
            &NONCE,
            &native_hash(b"other"),
            &CLI_SCRAMBLE
        ));
        assert!(!native_verify_hash(&NONCE, "*1234", &CLI_SCRAMBLE));
        assert!(!native_verify_hash(&NONCE, &hash, &[]));
    }

    #[test]
    fn a_native_answer_yields_sha1_of_the_password_which_answers_any_scramble() {
        let hash = native_hash(b"secret");
        let stage1 = native_recover_stage1(&NONCE, &hash, &CLI_SCRAMBLE).expect("proves it");
        assert_eq!(stage1, native_stage1(b"secret"));
        assert_eq!(native_hash_of_stage1(&stage1), hash);
        // A backend's own scramble answered with the recovered SHA1 is the password's answer.
        let other = [0x5a; 20];
        assert_eq!(
            native_scramble_stage1(&other, &stage1),
            native_scramble(&other, b"secret")
        );
        let mut wrong = CLI_SCRAMBLE;
        wrong[0] ^= 1;
        assert_eq!(native_recover_stage1(&NONCE, &hash, &wrong), None);
        assert_eq!(native_recover_stage1(&NONCE, "", &CLI_SCRAMBLE), None);
        assert_eq!(
            native_recover_stage1(&NONCE, &hash, &CLI_SCRAMBLE[..19]),
            None
        );
    }

    #[test]
    fn empty_password_means_empty_response() {
        assert!(native_scramble(&NONCE, b"").is_empty());
        assert!(sha2_scramble(&NONCE, b"").is_empty());
        assert!(native_verify(&NONCE, b"", &[]));
        assert!(native_verify_hash(&NONCE, "", &[]));
        assert!(!native_verify_hash(&NONCE, "", &CLI_SCRAMBLE));
        assert!(sha2_verify(&NONCE, b"", &[]));
    }

    #[test]
    fn sha2_scramble_verifies_with_password_and_with_cached_stage2() {
        let response = sha2_scramble(&NONCE, b"secret");
        assert_eq!(response.len(), 32);
        assert!(sha2_verify(&NONCE, b"secret", &response));
        assert!(!sha2_verify(&NONCE, b"secreT", &response));
        let stage2 = sha2_stage2(b"secret");
        assert!(sha2_verify_stage2(&NONCE, &stage2, &response));
        assert!(!sha2_verify_stage2(&NONCE, &sha2_stage2(b"x"), &response));
        assert!(!sha2_verify_stage2(&NONCE, &stage2, &response[..31]));
    }

    #[test]
    fn random_nonce_has_no_nul_and_varies() {
        let a = random_nonce();
        assert!(a.iter().all(|&b| (0x21..=0x7E).contains(&b)));
        assert_ne!(a, random_nonce());
    }

    #[test]
    fn rsa_full_auth_round_trips() {
        let pem = key().public_pem();
        assert!(pem.starts_with(b"-----BEGIN PUBLIC KEY-----\n"));
        let cipher = rsa_encrypt_password(b"secret", &NONCE, &pem).unwrap();
        assert_eq!(cipher.len(), 256);
        assert_eq!(key().decrypt_password(&cipher, &NONCE).unwrap(), b"secret");
        // A PEM as some servers send it, NUL-terminated.
        let mut nul_pem = pem.clone();
        nul_pem.push(0);
        let cipher = rsa_encrypt_password(b"", &NONCE, &nul_pem).unwrap();
        assert_eq!(key().decrypt_password(&cipher, &NONCE).unwrap(), b"");
    }

    #[test]
    fn mysql_common_client_encryption_decrypts() {
        let plain = xor_with_nonce(b"p4ss", &NONCE, true).unwrap();
        let cipher = mysql_common::crypto::encrypt(&plain, &key().public_pem());
        assert_eq!(key().decrypt_password(&cipher, &NONCE).unwrap(), b"p4ss");
    }

    /// The caching_sha2_password exchanges of a MySQL 8 server, byte by byte: the packets are
    /// decoded with the protocol types and the crypto is checked from both sides.
    #[test]
    fn caching_sha2_fast_and_full_auth_exchanges() {
        use crate::protocol::auth_switch::{FAST_AUTH_OK, PERFORM_FULL_AUTH, REQUEST_PUBLIC_KEY};
        use crate::protocol::{AuthMoreData, Capabilities, OkPacket};
        let caps = Capabilities::CLIENT_PROTOCOL_41;
        let ok = [0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00];

        // Fast path: client scramble (32 bytes) -> 0x01 0x03 -> OK.
        let response = sha2_scramble(&NONCE, b"secret");
        assert!(sha2_verify_stage2(
            &NONCE,
            &sha2_stage2(b"secret"),
            &response
        ));
        assert_eq!(
            AuthMoreData::decode(&[0x01, 0x03]).unwrap().0,
            [FAST_AUTH_OK]
        );
        assert!(OkPacket::decode(&ok, caps).is_ok());

        // Full auth on plain TCP: 0x01 0x04 -> client 0x02 -> 0x01 + PEM -> RSA cipher -> OK.
        assert_eq!(
            AuthMoreData::decode(&[0x01, 0x04]).unwrap().0,
            [PERFORM_FULL_AUTH]
        );
        let key_request = [REQUEST_PUBLIC_KEY];
        assert_eq!(key_request, [0x02]);
        let mut pem_reply = vec![0x01];
        pem_reply.extend_from_slice(&key().public_pem());
        let pem = AuthMoreData::decode(&pem_reply).unwrap().0;
        let cipher = rsa_encrypt_password(b"secret", &NONCE, &pem).unwrap();
        assert_eq!(key().decrypt_password(&cipher, &NONCE).unwrap(), b"secret");
        assert!(OkPacket::decode(&ok, caps).is_ok());
    }

    #[test]
    fn bad_rsa_input_is_an_error() {
        assert!(rsa_encrypt_password(b"pw", &NONCE, b"not a key").is_err());
        assert!(rsa_encrypt_password(b"pw", &NONCE, &[0xff, 0xfe]).is_err());
        assert!(rsa_encrypt_password(b"pw", &[], &key().public_pem()).is_err());
        assert!(rsa_encrypt_password(&[b'x'; 300], &NONCE, &key().public_pem()).is_err());
        assert!(key().decrypt_password(&[1, 2, 3], &NONCE).is_err());
        assert!(key().decrypt_password(&[0u8; 256], &NONCE).is_err());
    }
}
