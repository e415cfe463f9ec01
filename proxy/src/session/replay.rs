//! Bringing a backend to a session's movable state in one round trip: one `SET` for the
//! session variables that differ, COM_INIT_DB when the schema differs, and COM_SET_OPTION
//! when the multi-statements option differs.

use crate::conn::backend::MovableState;
use crate::protocol::request;

/// The commands (COM_QUERY / COM_INIT_DB payloads) that turn `have` into `want`, or an empty
/// list when they already agree. Variables `have` set that `want` did not are put back to
/// their default; callers avoid that case for character-set variables by resetting instead
/// (see `pool::replay_score`).
pub fn replay_commands(have: &MovableState, want: &MovableState) -> Vec<Vec<u8>> {
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
        Some(v) if v.eq_ignore_ascii_case(b"NULL") && name.starts_with(b"character_set_") => {
            out.extend_from_slice(b"NULL")
        }
        Some(v) => push_value(out, v),
    }
}

/// Numbers go bare (MySQL rejects quoted values for integer variables); everything else is
/// a quoted string.
fn push_value(out: &mut Vec<u8>, v: &[u8]) {
    if is_number(v) {
        out.extend_from_slice(v);
    } else {
        out.push(b'\'');
        for &b in v {
            match b {
                b'\'' => out.extend_from_slice(b"''"),
                b'\\' => out.extend_from_slice(b"\\\\"),
                0 => out.extend_from_slice(b"\\0"),
                _ => out.push(b),
            }
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
                ("n", "-1.5"),
                ("sql_mode", ""),
            ],
        );
        let cmds = replay_commands(&MovableState::default(), &want);
        assert_eq!(
            String::from_utf8_lossy(&cmds[0][1..]),
            "SET @@SESSION.a='it''s', @@SESSION.character_set_results=NULL, @@SESSION.n=-1.5, \
             @@SESSION.sql_mode=''"
        );
    }
}
