//! Which handshake collation ids name a character set a server refuses as the client's.
//!
//! MySQL and MariaDB parse statements in the client character set, so ucs2, utf16, utf16le
//! and utf32 (not ASCII-compatible) are refused for it: the server fails the login with
//! ER_WRONG_VALUE_FOR_VAR. sluice logs clients in itself and opens backends later, so it
//! must refuse such a login itself, or the error would only surface at the first statement
//! (on a backend login that the server then refuses).
//!
//! Ids are the server's `information_schema.COLLATIONS` ids below 256 (the handshake's one
//! byte), the same in MySQL 8.0 and MariaDB 10.11.

use super::codes;
use super::err::ErrPacket;

/// The server's ER_WRONG_VALUE_FOR_VAR for a client asking for `collation` (handshake or
/// COM_CHANGE_USER), or `None` when the server accepts it.
pub fn refusal(collation: u16) -> Option<ErrPacket> {
    let charset = refused_client_charset(u8::try_from(collation).ok()?)?;
    let msg = format!("Variable 'character_set_client' can't be set to the value of '{charset}'");
    Some(ErrPacket::from_code(
        codes::WRONG_VALUE_FOR_VAR,
        msg.as_bytes(),
    ))
}

/// The character set behind `collation` when the server refuses it as a client character set.
pub fn refused_client_charset(collation: u8) -> Option<&'static str> {
    match collation {
        35 | 90 | 128..=151 | 159 => Some("ucs2"),
        54 | 55 | 101..=124 => Some("utf16"),
        56 | 62 => Some("utf16le"),
        60 | 61 | 160..=183 => Some("utf32"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_compatible_collations_pass() {
        // utf8mb4_general_ci, utf8mb3_general_ci, latin1_swedish_ci, binary, utf8mb4_0900_ai_ci,
        // utf8mb4_unicode_ci.
        for id in [45, 33, 8, 63, 255, 224] {
            assert_eq!(refused_client_charset(id), None, "{id}");
        }
    }

    #[test]
    fn wide_character_sets_are_refused() {
        // ucs2_general_ci, ucs2_bin, ucs2_unicode_ci, utf16_general_ci, utf16le_general_ci,
        // utf32_general_ci, utf32_unicode_ci.
        let cases = [
            (35, "ucs2"),
            (90, "ucs2"),
            (128, "ucs2"),
            (54, "utf16"),
            (56, "utf16le"),
            (60, "utf32"),
            (160, "utf32"),
        ];
        for (id, name) in cases {
            assert_eq!(refused_client_charset(id), Some(name), "{id}");
        }
    }

    #[test]
    fn the_refusal_is_the_servers_error() {
        let err = refusal(35).expect("ucs2 is refused");
        assert_eq!((err.code, &err.sql_state[..]), (1231, &b"42000"[..]));
        assert_eq!(
            &err.message[..],
            &b"Variable 'character_set_client' can't be set to the value of 'ucs2'"[..]
        );
        assert!(refusal(45).is_none());
        assert!(refusal(300).is_none());
    }
}
