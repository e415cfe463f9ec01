//! MariaDB's COM_STMT_BULK_EXECUTE: the types it carries, and the same payload with types
//! added.
//!
//! Spec: <https://mariadb.com/kb/en/com_stmt_bulk_execute/>.
//!
//! Layout: `0xFA`, statement id (4), flags (u16), then the types (2 bytes per parameter,
//! only with `SEND_TYPES`), then the rows.

/// Flag: parameter types follow the flags.
pub const SEND_TYPES: u16 = 128;

/// The types a bulk command carries, if it carries any.
pub fn sent_types(payload: &[u8], params: u16) -> Option<Vec<u8>> {
    let flags = u16::from_le_bytes([*payload.get(5)?, *payload.get(6)?]);
    if flags & SEND_TYPES == 0 {
        return None;
    }
    payload.get(7..7 + 2 * params as usize).map(<[u8]>::to_vec)
}

/// `payload` (sent without types) with `SEND_TYPES` set and `types` inserted before the
/// rows; `None` when it is too short to hold the flags.
pub fn with_types(payload: &[u8], types: &[u8]) -> Option<Vec<u8>> {
    let flags = payload.get(5..7)?;
    let flags = u16::from_le_bytes([flags[0], flags[1]]) | SEND_TYPES;
    let mut body = Vec::with_capacity(payload.len() + types.len());
    body.extend_from_slice(&payload[..5]);
    body.extend_from_slice(&flags.to_le_bytes());
    body.extend_from_slice(types);
    body.extend_from_slice(&payload[7..]);
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BULK_EXECUTE stmt 5, one BIGINT param, no types sent, rows: indicator 0 + 41.
    const UNTYPED: &[u8] = &[0xFA, 5, 0, 0, 0, 0, 0, 0, 41, 0, 0, 0, 0, 0, 0, 0];
    /// The same with SEND_TYPES and BIGINT (0x08, unsigned flag 0).
    const TYPED: &[u8] = &[
        0xFA, 5, 0, 0, 0, 0x80, 0, 0x08, 0x00, 0, 41, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn reads_the_types_only_with_the_flag() {
        assert_eq!(sent_types(TYPED, 1), Some(vec![0x08, 0x00]));
        assert_eq!(sent_types(UNTYPED, 1), None);
        for end in 0..9 {
            assert_eq!(sent_types(&TYPED[..end], 1), None, "prefix {end}");
        }
    }

    #[test]
    fn adding_types_gives_the_typed_packet() {
        assert_eq!(with_types(UNTYPED, &[0x08, 0x00]).as_deref(), Some(TYPED));
        assert_eq!(with_types(&UNTYPED[..6], &[0x08, 0x00]), None);
    }
}
