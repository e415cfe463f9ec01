//! Bringing a backend to a session's movable state in one round trip: one `SET` for the
//! session variables that differ, COM_INIT_DB when the schema differs, and COM_SET_OPTION
//! when the multi-statements option differs.
//!
//! Character sets and collations come in pairs (`character_set_connection` with
//! `collation_connection`, `character_set_server` with `collation_server`): setting one
//! changes the other, and MariaDB's tracker reports only the one a statement named (`SET
//! NAMES utf8mb4 COLLATE utf8mb4_unicode_ci` reports no collation). A statement that
//! reports either half has both read back from the server ([`CHARSET_PAIRS_QUERY`]), so a
//! replay sets the pair the session really has, the character set first.

use crate::conn::backend::MovableState;
use crate::protocol::{request, SessionStateChange};

/// The variables that change together, character set first (the order of a replay's SET:
/// its variables go in name order, and each collation sorts after its character set).
const CHARSET_PAIRS: [(&[u8], &[u8]); 2] = [
    (b"character_set_connection", b"collation_connection"),
    (b"character_set_server", b"collation_server"),
];

/// Reads both halves of every pair back, in `CHARSET_PAIRS` order.
pub(crate) const CHARSET_PAIRS_QUERY: &[u8] = b"SELECT @@SESSION.character_set_connection, @@SESSION.collation_connection, @@SESSION.character_set_server, @@SESSION.collation_server";

/// Whether `changes` report a variable of a character-set pair: the server has both halves
/// right, the tracked state perhaps only one.
pub(crate) fn reports_charset_pair(changes: &[SessionStateChange]) -> bool {
    changes.iter().any(|c| match c {
        SessionStateChange::SystemVariable { name, .. } => CHARSET_PAIRS
            .iter()
            .any(|(cs, coll)| name.eq_ignore_ascii_case(cs) || name.eq_ignore_ascii_case(coll)),
        _ => false,
    })
}

/// Records `CHARSET_PAIRS_QUERY`'s row in `state`; false (nothing recorded) when the row
/// does not have the four values.
pub(crate) fn record_charset_pairs(state: &mut MovableState, row: &[Option<Vec<u8>>]) -> bool {
    let names = CHARSET_PAIRS.iter().flat_map(|(cs, coll)| [*cs, *coll]);
    if row.len() != 4 || row.iter().any(Option::is_none) {
        return false;
    }
    for (name, value) in names.zip(row.iter().flatten()) {
        state.vars.insert(name.to_vec(), value.clone());
    }
    true
}

/// The commands (COM_QUERY / COM_INIT_DB payloads) that turn `have` into `want`, or an empty
/// list when they already agree. Variables `have` set that `want` did not are put back to
/// their default; callers avoid that case for character-set variables by resetting instead
/// (see `pool::replay_score`).
pub(crate) fn replay_commands(have: &MovableState, want: &MovableState) -> Vec<Vec<u8>> {
    let mut cmds = Vec::new();
    let mut set = Vec::new();
    for (name, value) in &want.vars {
        if have.vars.get(name) != Some(value) {
            push_assignment(&mut set, name, Some(value));
        }
    }
    for name in have.vars.keys() {
        if !want.vars.contains_key(name) {
            push_assignment(&mut set, name, None);
        }
    }
    if !set.is_empty() {
        let mut sql = Vec::with_capacity(set.len() + 4);
        sql.extend_from_slice(b"SET ");
        sql.extend_from_slice(&set);
        cmds.push(request::query(&sql));
    }
    if have.schema != want.schema {
        if let Some(db) = &want.schema {
            cmds.push(request::init_db(db));
        }
    }
    if have.multi_statements != want.multi_statements {
        cmds.push(request::set_option(want.multi_statements).to_vec());
    }
    cmds
}

fn push_assignment(out: &mut Vec<u8>, name: &[u8], value: Option<&Vec<u8>>) {
    if !out.is_empty() {
        out.extend_from_slice(b", ");
    }
    out.extend_from_slice(b"@@SESSION.");
    out.extend_from_slice(name);
    out.push(b'=');
    match value {
        None => out.extend_from_slice(b"DEFAULT"),
        // `SET character_set_results = NULL` is reported as an empty value, which SET refuses
        // (1115 Unknown character set: '').
        Some(v)
            if (v.is_empty() || v.eq_ignore_ascii_case(b"NULL"))
                && name.starts_with(b"character_set_") =>
        {
            out.extend_from_slice(b"NULL")
        }
        Some(v) => push_value(out, v),
    }
}

/// Numbers go bare (MySQL rejects quoted values for integer variables); everything else is
/// a quoted string. A backslash or NUL means different things with and without the
/// NO_BACKSLASH_ESCAPES sql_mode, which the replayed SET may itself be changing, so such a
/// value goes as a hex literal, which reads the same in every mode.
fn push_value(out: &mut Vec<u8>, v: &[u8]) {
    if is_number(v) {
        out.extend_from_slice(v);
    } else if v.iter().any(|&b| b == b'\\' || b == 0) {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        out.extend_from_slice(b"X'");
        for &b in v {
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0x0f)]);
        }
        out.push(b'\'');
    } else {
        out.push(b'\'');
        for &b in v {
            if b == b'\'' {
                out.push(b'\'');
            }
            out.push(b);
        }
        out.push(b'\'');
    }
}

fn is_number(v: &[u8]) -> bool {
    let digits = v.strip_prefix(b"-").unwrap_or(v);
    let mut seen_dot = false;
    !digits.is_empty()
        && digits[0].is_ascii_digit()
        && digits.iter().all(|&b| {
            if b == b'.' && !seen_dot {
                seen_dot = true;
                true
            } else {
                b.is_ascii_digit()
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(schema: Option<&str>, vars: &[(&str, &str)]) -> MovableState {
        MovableState {
            schema: schema.map(|s| s.as_bytes().to_vec()),
            vars: vars
                .iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
            multi_statements: false,
        }
    }

    #[test]
    fn a_differing_multi_statements_option_becomes_com_set_option() {
        let have = state(Some("db"), &[]);
        let mut want = have.clone();
        want.multi_statements = true;
        assert_eq!(replay_commands(&have, &want), vec![vec![0x1b, 0, 0]]);
        assert_eq!(replay_commands(&want, &have), vec![vec![0x1b, 1, 0]]);
        assert_eq!(crate::pool::replay_score(&have, &want), 2);
    }

    #[test]
    fn a_reported_half_of_a_pair_asks_for_both_and_the_character_set_is_set_first() {
        let names = SessionStateChange::SystemVariable {
            name: b"character_set_connection".to_vec(),
            value: b"utf8mb4".to_vec(),
        };
        let other = SessionStateChange::SystemVariable {
            name: b"time_zone".to_vec(),
            value: b"+01:00".to_vec(),
        };
        assert!(reports_charset_pair(&[other.clone(), names]));
        assert!(!reports_charset_pair(&[other]));
        let mut want = state(None, &[("character_set_connection", "utf8mb4")]);
        let row: Vec<Option<Vec<u8>>> = ["utf8mb4", "utf8mb4_unicode_ci", "latin1", "latin1_bin"]
            .iter()
            .map(|v| Some(v.as_bytes().to_vec()))
            .collect();
        assert!(record_charset_pairs(&mut want, &row));
        assert!(!record_charset_pairs(&mut want, &row[..3]));
        let cmds = replay_commands(&MovableState::default(), &want);
        assert_eq!(
            String::from_utf8_lossy(&cmds[0][1..]),
            "SET @@SESSION.character_set_connection='utf8mb4', \
             @@SESSION.character_set_server='latin1', \
             @@SESSION.collation_connection='utf8mb4_unicode_ci', \
             @@SESSION.collation_server='latin1_bin'"
        );
    }

    #[test]
    fn equal_states_need_nothing() {
        let a = state(Some("db"), &[("sql_mode", "ANSI")]);
        assert!(replay_commands(&a, &a.clone()).is_empty());
    }

    #[test]
    fn differing_vars_and_schema_become_one_set_and_one_init_db() {
        let have = state(Some("a"), &[("sql_mode", ""), ("wait_timeout", "10")]);
        let want = state(
            Some("b"),
            &[
                ("sql_mode", "ANSI_QUOTES"),
                ("time_zone", "+00:00"),
                ("sql_select_limit", "5"),
            ],
        );
        let cmds = replay_commands(&have, &want);
        assert_eq!(cmds.len(), 2);
        assert_eq!(
            String::from_utf8_lossy(&cmds[0][1..]),
            "SET @@SESSION.sql_mode='ANSI_QUOTES', @@SESSION.sql_select_limit=5, \
             @@SESSION.time_zone='+00:00', @@SESSION.wait_timeout=DEFAULT"
        );
        assert_eq!(cmds[1], b"\x02b".to_vec());
    }

    #[test]
    fn quotes_are_escaped_and_null_charset_stays_null() {
        let want = state(
            None,
            &[
                ("a", "it's"),
                ("character_set_results", "NULL"),
                ("character_set_client", ""),
                ("n", "-1.5"),
                ("sql_mode", ""),
            ],
        );
        let cmds = replay_commands(&MovableState::default(), &want);
        assert_eq!(
            String::from_utf8_lossy(&cmds[0][1..]),
            "SET @@SESSION.a='it''s', @@SESSION.character_set_client=NULL, \
             @@SESSION.character_set_results=NULL, @@SESSION.n=-1.5, @@SESSION.sql_mode=''"
        );
    }

    #[test]
    fn a_backslash_or_nul_goes_as_hex_whatever_the_sql_mode() {
        let want = state(None, &[("a", "c:\\t"), ("b", "x\0y")]);
        let cmds = replay_commands(&MovableState::default(), &want);
        assert_eq!(
            String::from_utf8_lossy(&cmds[0][1..]),
            "SET @@SESSION.a=X'633A5C74', @@SESSION.b=X'780079'"
        );
    }
}
