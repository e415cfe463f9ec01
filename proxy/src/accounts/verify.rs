//! Per-plugin checks of a client's proof against a stored account, and what the proof leaves
//! sluice to log in to the backend with. Pure.
//!
//! - mysql_native_password: the stored `*<40 hex>` is SHA1(SHA1(pw)); the client's answer
//!   gives SHA1(pw) back (`protocol::auth::native_recover_stage1`), which answers any
//!   backend scramble. A cleartext (caching_sha2 full authentication) is hashed and compared.
//! - caching_sha2_password: only the cleartext can be checked (against the SHA-256 crypt of
//!   `sha_crypt`); its scramble needs the cleartext remembered from an earlier full login.
//! - anything else: no proof can be checked; the login is refused (`refusal`).

use super::row::{Method, Plugin};
use crate::config::Secret;
use crate::protocol::auth;

/// What a client offered.
#[derive(Clone, Copy, Debug)]
pub enum Proof<'a> {
    /// A mysql_native_password answer to `nonce`.
    Native { nonce: &'a [u8], response: &'a [u8] },
    /// The password itself (caching_sha2 full authentication, over TLS or RSA).
    Cleartext(&'a [u8]),
}

/// The backend credential `proof` yields for `method`, or `None` if it does not prove the
/// password.
pub fn verify(method: &Method, proof: Proof<'_>) -> Option<Secret> {
    if method.no_password() {
        let empty = match proof {
            Proof::Native { response, .. } => response.is_empty(),
            Proof::Cleartext(clear) => clear.is_empty(),
        };
        return empty.then(|| Secret::new(String::new()));
    }
    match (&method.plugin, proof) {
        (Plugin::Native, Proof::Native { nonce, response }) => {
            let hash = method.native_hash()?;
            auth::native_recover_stage1(nonce, hash, response).map(Secret::native_stage1)
        }
        (Plugin::Native, Proof::Cleartext(clear)) => {
            let hash = method.native_hash()?;
            let ok = auth::native_hash(clear).eq_ignore_ascii_case(hash);
            ok.then(|| cleartext(clear)).flatten()
        }
        (Plugin::CachingSha2, Proof::Cleartext(clear)) => {
            let ok = method.sha2_hash()?.verify(clear);
            ok.then(|| cleartext(clear)).flatten()
        }
        (Plugin::CachingSha2, Proof::Native { .. }) | (Plugin::Unsupported(_), _) => None,
    }
}

/// Whether `credential` would log in to an account stored as `method` (the row sluice's own
/// backend login is matched to).
pub fn satisfies(method: &Method, credential: &Secret) -> bool {
    if method.no_password() {
        return credential.is_empty();
    }
    match (&method.plugin, credential.stage1()) {
        (Plugin::Native, Some(stage1)) => method
            .native_hash()
            .is_some_and(|h| auth::native_hash_of_stage1(stage1).eq_ignore_ascii_case(h)),
        (Plugin::Native, None) => method.native_hash().is_some_and(|h| {
            auth::native_hash(credential.expose().as_bytes()).eq_ignore_ascii_case(h)
        }),
        (Plugin::CachingSha2, None) => method
            .sha2_hash()
            .is_some_and(|h| h.verify(credential.expose().as_bytes())),
        (Plugin::CachingSha2, Some(_)) | (Plugin::Unsupported(_), _) => false,
    }
}

/// A cleartext credential: backend logins send it as text, so it must be UTF-8 (MySQL
/// clients send passwords as given; a non-UTF-8 one is refused rather than altered).
fn cleartext(clear: &[u8]) -> Option<Secret> {
    std::str::from_utf8(clear)
        .ok()
        .map(|s| Secret::new(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONCE: [u8; 20] = [7; 20];
    /// caching_sha2's stored form of "foobar" (see `sha_crypt`).
    const FOOBAR_SHA2: &str = "24412430303524031A69251C34295C4B35167C7F1E5A7B63091349503974624D34504B5A424679354856336868686F52485A736E4A733368786E427575516C73446469496537";

    fn native(password: &str) -> Method {
        Method {
            plugin: Plugin::Native,
            auth: auth::native_hash(password.as_bytes()).into_bytes(),
        }
    }

    fn sha2() -> Method {
        let auth = (0..FOOBAR_SHA2.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&FOOBAR_SHA2[i..i + 2], 16).unwrap())
            .collect();
        Method {
            plugin: Plugin::CachingSha2,
            auth,
        }
    }

    fn answer(password: &str) -> Vec<u8> {
        auth::native_scramble(&NONCE, password.as_bytes())
    }

    #[test]
    fn a_native_answer_yields_sha1_of_the_password() {
        let m = native("secret");
        let response = answer("secret");
        let got = verify(
            &m,
            Proof::Native {
                nonce: &NONCE,
                response: &response,
            },
        )
        .expect("the right password");
        assert_eq!(got.stage1(), Some(&auth::native_stage1(b"secret")));
        assert_eq!(got.expose(), "", "no text to leak");
        let wrong = answer("Secret");
        assert!(verify(
            &m,
            Proof::Native {
                nonce: &NONCE,
                response: &wrong
            }
        )
        .is_none());
        assert!(verify(&m, Proof::Cleartext(b"secret")).is_some());
        assert!(verify(&m, Proof::Cleartext(b"other")).is_none());
        assert!(satisfies(&m, &got) && satisfies(&m, &Secret::new("secret".into())));
        assert!(!satisfies(&native("other"), &got));
    }

    #[test]
    fn caching_sha2_checks_the_cleartext_only() {
        let m = sha2();
        let got = verify(&m, Proof::Cleartext(b"foobar")).expect("the right password");
        assert_eq!(got.expose(), "foobar");
        assert!(verify(&m, Proof::Cleartext(b"foobaz")).is_none());
        let response = answer("foobar");
        assert!(verify(
            &m,
            Proof::Native {
                nonce: &NONCE,
                response: &response
            }
        )
        .is_none());
        assert!(satisfies(&m, &got));
        assert!(!satisfies(
            &m,
            &Secret::native_stage1(auth::native_stage1(b"foobar"))
        ));
    }

    #[test]
    fn no_password_takes_only_an_empty_answer() {
        let m = Method {
            plugin: Plugin::Native,
            auth: Vec::new(),
        };
        let empty = verify(
            &m,
            Proof::Native {
                nonce: &NONCE,
                response: &[],
            },
        )
        .expect("empty");
        assert!(empty.is_empty() && satisfies(&m, &empty));
        let response = answer("x");
        assert!(verify(
            &m,
            Proof::Native {
                nonce: &NONCE,
                response: &response
            }
        )
        .is_none());
    }

    #[test]
    fn other_plugins_verify_nothing() {
        let m = Method {
            plugin: Plugin::Unsupported("ed25519".into()),
            auth: b"xazss0L7brFwI1lmAqCIiQbo8/Zpi+JzOCmNHPh91dw".to_vec(),
        };
        assert!(verify(&m, Proof::Cleartext(b"y")).is_none());
        assert!(!satisfies(&m, &Secret::new("y".into())));
    }
}
