//! COM_STMT_EXECUTE: where the parameter block of an execute payload is, the types it
//! carries, and the same payload with types spliced in.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_stmt_execute.html>,
//! <https://mariadb.com/kb/en/com_stmt_execute/>.
//!
//! Layout: `0x17`, statement id (4), flags (1), iteration count (4), then, when the
//! statement has parameters: the NULL bitmap (`(params + 7) / 8` bytes), the
//! new-params-bound flag (1), the types (2 bytes each, only when the flag is 1), the values.

/// Where the parameter block of a COM_STMT_EXECUTE payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecLayout {
    /// Offset of the new-params-bound flag.
    pub flag_at: usize,
    /// The flag is 1: the types follow it.
    pub bound: bool,
}

/// Whether the execute's flags are 0 (CURSOR_TYPE_NO_CURSOR and nothing else): its whole
/// answer comes at once and nothing of it stays on the backend for a COM_STMT_FETCH.
pub fn without_cursor(payload: &[u8]) -> bool {
    payload.get(5) == Some(&0)
}

/// The layout of `payload` for a statement with `params` parameters; `None` when it has
/// none (no parameter block) or the payload is too short to hold the flag.
pub fn layout(payload: &[u8], params: u16) -> Option<ExecLayout> {
    if params == 0 {
        return None;
    }
    let flag_at = 10 + (params as usize).div_ceil(8);
    let bound = *payload.get(flag_at)? == 1;
    Some(ExecLayout { flag_at, bound })
}

/// The types a client sent with this execute, if it sent any.
pub fn bound_types(payload: &[u8], params: u16) -> Option<Vec<u8>> {
    let l = layout(payload, params)?;
    if !l.bound {
        return None;
    }
    let start = l.flag_at + 1;
    payload
        .get(start..start + 2 * params as usize)
        .map(<[u8]>::to_vec)
}

/// `payload` (sent without types, laid out as `l`) with new-params-bound = 1 and `types`
/// inserted before the values.
pub fn with_types(payload: &[u8], l: ExecLayout, types: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(payload.len() + types.len());
    body.extend_from_slice(&payload[..l.flag_at]);
    body.push(1);
    body.extend_from_slice(types);
    body.extend_from_slice(&payload[l.flag_at + 1..]);
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    /// EXECUTE stmt 5, one BIGINT (0x08) param = 41, with types.
    const BOUND: &[u8] = &[
        0x17, 5, 0, 0, 0, 0, 1, 0, 0, 0, 0x00, 0x01, 0x08, 0x00, 41, 0, 0, 0, 0, 0, 0, 0,
    ];
    /// The same without types (new-params-bound = 0).
    const UNBOUND: &[u8] = &[
        0x17, 5, 0, 0, 0, 0, 1, 0, 0, 0, 0x00, 0x00, 41, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn flags_zero_means_no_cursor() {
        // EXECUTE stmt 1, flags 0, iteration count 1.
        assert!(without_cursor(&[0x17, 1, 0, 0, 0, 0x00, 1, 0, 0, 0]));
        // CURSOR_TYPE_READ_ONLY: rows wait on the backend for FETCH.
        assert!(!without_cursor(&[0x17, 1, 0, 0, 0, 0x01, 1, 0, 0, 0]));
        assert!(!without_cursor(&[0x17, 1, 0, 0, 0]));
    }

    #[test]
    fn finds_the_flag_after_the_null_bitmap() {
        assert_eq!(
            layout(BOUND, 1),
            Some(ExecLayout {
                flag_at: 11,
                bound: true
            })
        );
        assert_eq!(
            layout(UNBOUND, 1),
            Some(ExecLayout {
                flag_at: 11,
                bound: false
            })
        );
        // Nine parameters take a two-byte bitmap.
        assert_eq!(
            layout(&[0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1], 9)
                .unwrap()
                .flag_at,
            12
        );
        assert_eq!(layout(BOUND, 0), None);
        assert_eq!(layout(&BOUND[..11], 1), None);
    }

    #[test]
    fn reads_bound_types_and_never_panics_on_a_prefix() {
        assert_eq!(bound_types(BOUND, 1), Some(vec![0x08, 0x00]));
        assert_eq!(bound_types(UNBOUND, 1), None);
        for end in 0..14 {
            assert_eq!(bound_types(&BOUND[..end], 1), None, "prefix {end}");
        }
    }

    #[test]
    fn splicing_types_gives_the_bound_packet() {
        let l = layout(UNBOUND, 1).unwrap();
        assert_eq!(with_types(UNBOUND, l, &[0x08, 0x00]), BOUND);
    }
}
