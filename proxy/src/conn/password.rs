//! The one password check, used by every login sluice verifies: the client handshake, its
//! COM_CHANGE_USER and the admin console. The answer a client gives is a [`Proof`]; the
//! configured password is a plaintext or a mysql.user-style `*<40 hex>` hash ([`Secret`]).
//! Also the one access-denied error those logins send.

use crate::config::Secret;
use crate::protocol::{auth, codes, ErrPacket};

/// What a client offered for its password.
#[derive(Clone, Copy, Debug)]
pub enum Proof<'a> {
    /// mysql_native_password: SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw))); empty for no password.
    Native { nonce: &'a [u8], response: &'a [u8] },
    /// caching_sha2_password's scramble (its fast path):
    /// SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + nonce); empty or one NUL for no password.
    Sha2 { nonce: &'a [u8], response: &'a [u8] },
    /// caching_sha2_password's full authentication: the password itself, sent over TLS or
    /// RSA-encrypted, without its NUL terminator.
    Cleartext(&'a [u8]),
}

/// True if `proof` shows the client knows `stored`. Constant time in the compared bytes.
pub fn verify(stored: &Secret, proof: Proof<'_>) -> bool {
    let hashed = stored.is_native_hash();
    let password = stored.expose();
    match proof {
        Proof::Native { nonce, response } if hashed => {
            auth::native_verify_hash(nonce, password, response)
        }
        Proof::Native { nonce, response } => {
            auth::native_verify(nonce, password.as_bytes(), response)
        }
        // A SHA1 hash cannot check a SHA256 scramble, and sluice does not compare a
        // cleartext against it either: such a user logs in with mysql_native_password.
        Proof::Sha2 { .. } | Proof::Cleartext(_) if hashed => false,
        Proof::Sha2 { response, .. } if password.is_empty() => {
            response.is_empty() || response == [0]
        }
        Proof::Sha2 { nonce, response } => auth::sha2_verify(nonce, password.as_bytes(), response),
        Proof::Cleartext(clear) => constant_time_eq(clear, password.as_bytes()),
    }
}

/// The ERR a failed login gets, word for word MySQL's (scripts and operators match on it).
pub fn access_denied(user: &[u8], host: &str, used_password: bool) -> ErrPacket {
    let msg = format!(
        "Access denied for user '{}'@'{}' (using password: {})",
        String::from_utf8_lossy(user),
        host,
        if used_password { "YES" } else { "NO" }
    );
    ErrPacket::from_code(codes::ACCESS_DENIED, msg)
}

/// Equal-length comparison that does not stop at the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nonce 0x01..=0x14 and the password "secret".
    const NONCE: [u8; 20] = [
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
    ];
    /// mysql_native_password's answer for "secret" over [`NONCE`] (computed independently:
    /// SHA1("secret") XOR SHA1(NONCE + SHA1(SHA1("secret")))).
    const NATIVE_SECRET: [u8; 20] = [
        0xb3, 0x2b, 0xb3, 0xa5, 0x83, 0xe1, 0x34, 0x0c, 0x0a, 0x11, 0x08, 0xd5, 0x8b, 0x1b, 0xe4,
        0x97, 0x81, 0xad, 0x8c, 0x2f,
    ];
    /// SHA1(SHA1("secret")), as `SELECT PASSWORD('secret')` shows it.
    const NATIVE_HASH: &str = "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7";
    /// caching_sha2_password's scramble for "secret" over [`NONCE`].
    const SHA2_SECRET: [u8; 32] = [
        0x74, 0x6e, 0xbe, 0x20, 0x5d, 0x56, 0xa0, 0x70, 0x7a, 0xcb, 0x3e, 0x79, 0x6e, 0x83, 0x4e,
        0x0d, 0xd7, 0xb1, 0xd6, 0x17, 0x43, 0xb2, 0x6b, 0xd5, 0x20, 0x2c, 0x7a, 0x62, 0x32, 0x30,
        0xc7, 0xc9,
    ];

    fn secret(s: &str) -> Secret {
        Secret::new(s.to_string())
    }

    fn native(response: &[u8]) -> Proof<'_> {
        Proof::Native {
            nonce: &NONCE,
            response,
        }
    }

    #[test]
    fn a_native_scramble_matches_the_plaintext_and_the_hash() {
        assert!(verify(&secret("secret"), native(&NATIVE_SECRET)));
        assert!(verify(&secret(NATIVE_HASH), native(&NATIVE_SECRET)));
        assert_eq!(auth::native_hash(b"secret"), NATIVE_HASH);
    }

    #[test]
    fn a_wrong_or_truncated_native_scramble_is_refused() {
        let mut flipped = NATIVE_SECRET;
        flipped[19] ^= 1;
        for stored in [secret("secret"), secret(NATIVE_HASH)] {
            assert!(!verify(&stored, native(&flipped)));
            assert!(!verify(&stored, native(&NATIVE_SECRET[..19])));
            assert!(!verify(&stored, native(b"")));
        }
        assert!(!verify(&secret("other"), native(&NATIVE_SECRET)));
        let other_nonce = Proof::Native {
            nonce: &[7; 20],
            response: &NATIVE_SECRET,
        };
        assert!(!verify(&secret("secret"), other_nonce));
    }

    #[test]
    fn an_empty_password_takes_only_an_empty_answer() {
        assert!(verify(&secret(""), native(b"")));
        assert!(!verify(&secret(""), native(&NATIVE_SECRET)));
        for empty in [&b""[..], &[0]] {
            let proof = Proof::Sha2 {
                nonce: &NONCE,
                response: empty,
            };
            assert!(verify(&secret(""), proof));
        }
    }

    #[test]
    fn a_sha2_scramble_and_a_cleartext_match_the_plaintext_only() {
        let sha2 = Proof::Sha2 {
            nonce: &NONCE,
            response: &SHA2_SECRET,
        };
        assert!(verify(&secret("secret"), sha2));
        assert!(!verify(&secret("other"), sha2));
        assert!(!verify(&secret(NATIVE_HASH), sha2));
        assert!(verify(&secret("secret"), Proof::Cleartext(b"secret")));
        assert!(!verify(&secret("secret"), Proof::Cleartext(b"secre")));
        assert!(!verify(&secret(NATIVE_HASH), Proof::Cleartext(b"secret")));
    }

    #[test]
    fn access_denied_is_mysqls_1045_text() {
        let err = access_denied(b"bob", "10.0.0.5", true);
        assert_eq!((err.code, err.sql_state_str()), (1045, "28000"));
        assert_eq!(
            err.message,
            b"Access denied for user 'bob'@'10.0.0.5' (using password: YES)"
        );
        assert!(access_denied(b"bob", "", false)
            .message
            .ends_with(b"(using password: NO)"));
    }
}
