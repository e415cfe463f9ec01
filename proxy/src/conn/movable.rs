//! The movable half of a connection's session state (schema, session variables, the
//! multi-statements option) as the server's session trackers last reported it, and which
//! variables are never part of it.

use std::collections::BTreeMap;

use crate::protocol::SessionStateChange;

/// Movable session state as the server last reported it.
#[derive(Clone, Debug, Default, Eq)]
pub struct MovableState {
    /// Current schema; `None` means no database selected.
    pub schema: Option<Vec<u8>>,
    /// Session system variables changed from the connection's baseline, by name.
    pub vars: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The multi-statements option (COM_SET_OPTION). Its baseline is the
    /// CLIENT_MULTI_STATEMENTS capability the connection was opened with, which the pool key
    /// makes the same for a session and every backend it may use.
    pub multi_statements: bool,
}

/// Field by field, as derived, but with no variables on either side (the common case)
/// decided without walking the maps: every checkout compares states twice.
impl PartialEq for MovableState {
    fn eq(&self, other: &MovableState) -> bool {
        self.multi_statements == other.multi_statements
            && self.schema == other.schema
            && vars_equal(self, other)
    }
}

fn vars_equal(a: &MovableState, b: &MovableState) -> bool {
    (a.vars.is_empty() && b.vars.is_empty()) || a.vars == b.vars
}

/// 3: identical; 2: same variables, other schema; 1: replay needs only SETs; 0: needs a reset.
pub fn replay_score(have: &MovableState, want: &MovableState) -> u8 {
    let vars_equal = vars_equal(have, want);
    if vars_equal && have.schema == want.schema && have.multi_statements == want.multi_statements {
        3
    } else if vars_equal && (want.schema.is_some() || have.schema.is_none()) {
        // Includes "only the multi-statements option differs" (one COM_SET_OPTION).
        2
    } else if have.vars.keys().all(|k| want.vars.contains_key(k))
        && (want.schema.is_some() || have.schema.is_none())
    {
        1
    } else {
        0
    }
}

impl MovableState {
    /// Applies what one OK packet's session-state block reports.
    pub fn apply(&mut self, changes: &[SessionStateChange]) {
        for change in changes {
            match change {
                SessionStateChange::Schema(s) if s.is_empty() => self.schema = None,
                SessionStateChange::Schema(s) => self.schema = Some(s.clone()),
                SessionStateChange::SystemVariable { name, value }
                    if !is_tracker_variable(name) =>
                {
                    self.vars.insert(name.to_ascii_lowercase(), value.clone());
                }
                _ => {}
            }
        }
    }
}

/// Variables never replayed as part of a client's state: those sluice manages on its
/// backends (the session trackers, the pseudo_thread_id behind CONNECTION_ID(), the value
/// behind LAST_INSERT_ID()); MariaDB's read-only `last_gtid` (replaying it fails with 1238);
/// and the one-shot ones, which setting pins instead.
pub fn is_tracker_variable(name: &[u8]) -> bool {
    (name.len() >= 14 && name[..14].eq_ignore_ascii_case(b"session_track_"))
        || [&b"pseudo_thread_id"[..], b"last_insert_id"]
            .iter()
            .any(|v| name.eq_ignore_ascii_case(v))
        || name.eq_ignore_ascii_case(crate::protocol::session_gtid::LAST_GTID)
        || is_one_shot_variable(name)
}

/// Variables that last for the next statement or transaction only: replayed later,
/// `insert_id` would give every later INSERT the same id, and MariaDB's `gtid_seq_no` or
/// MySQL's `gtid_next` every later transaction the same GTID (both in mysqlbinlog output).
pub fn is_one_shot_variable(name: &[u8]) -> bool {
    [
        &b"insert_id"[..],
        b"rand_seed1",
        b"rand_seed2",
        b"gtid_seq_no",
        b"gtid_next",
    ]
    .iter()
    .any(|v| name.eq_ignore_ascii_case(v))
}
