//! What a new backend session starts with before sluice changes anything, read in the login's
//! first round trip: the server's session trackers (what a client's own session tracks until
//! it changes them, `protocol::Trackers`) and the values of the variables a PREPARE parses
//! under (`conn::stmts::PARSE_VARIABLES`), so that a statement prepared under one set of
//! values can be prepared again under it elsewhere without `SET ... = DEFAULT`, which would
//! give the server's global character sets rather than the connection's; and the server's
//! idle timeouts, which a client's session starts with (`IdleTimeouts`).

use crate::protocol::{TextResult, Trackers};

use super::stmts::PARSE_VARIABLES;

/// MariaDB has no session_track_gtids; MySQL no old_mode (NULL in its place).
const MARIADB: &[u8] = b"SELECT @@SESSION.session_track_schema, @@SESSION.session_track_state_change, \
@@SESSION.session_track_system_variables, @@SESSION.session_track_transaction_info, 'OFF', \
@@SESSION.character_set_client, @@SESSION.character_set_connection, @@SESSION.character_set_results, \
@@SESSION.collation_connection, @@SESSION.div_precision_increment, @@SESSION.group_concat_max_len, \
@@SESSION.old_mode, @@SESSION.sql_mode, @@GLOBAL.wait_timeout, @@GLOBAL.interactive_timeout";
const MYSQL: &[u8] = b"SELECT @@SESSION.session_track_schema, @@SESSION.session_track_state_change, \
@@SESSION.session_track_system_variables, @@SESSION.session_track_transaction_info, \
@@SESSION.session_track_gtids, \
@@SESSION.character_set_client, @@SESSION.character_set_connection, @@SESSION.character_set_results, \
@@SESSION.collation_connection, @@SESSION.div_precision_increment, @@SESSION.group_concat_max_len, \
NULL, @@SESSION.sql_mode, @@GLOBAL.wait_timeout, @@GLOBAL.interactive_timeout";

/// The tracker settings, in the query's column order.
const TRACKERS: [&[u8]; 5] = [
    b"session_track_schema",
    b"session_track_state_change",
    b"session_track_system_variables",
    b"session_track_transaction_info",
    b"session_track_gtids",
];

/// The query for a server with this greeting version.
pub fn query(mariadb: bool) -> &'static [u8] {
    if mariadb {
        MARIADB
    } else {
        MYSQL
    }
}

/// A backend session's starting values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Baseline {
    /// What a client's session tracks at login.
    pub trackers: Trackers,
    /// Each of `PARSE_VARIABLES` (in its order): `None` where the server did not say.
    pub parse: Vec<Option<Vec<u8>>>,
    /// The server's idle timeouts (`None` where it did not say).
    pub idle: Option<IdleTimeouts>,
}

/// How long the server lets a new session sit idle before it closes the connection, in
/// seconds: `wait_timeout`, which a client that logs in with CLIENT_INTERACTIVE starts
/// with `interactive_timeout` in place of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleTimeouts {
    pub wait: u64,
    pub interactive: u64,
}

impl IdleTimeouts {
    /// What a session logging in now starts with as its wait_timeout.
    pub fn for_login(self, interactive: bool) -> std::time::Duration {
        std::time::Duration::from_secs(if interactive {
            self.interactive
        } else {
            self.wait
        })
    }
}

impl Baseline {
    /// What a session is taken to start with when the server did not answer the query:
    /// every tracker the backend reports (as before this was read), parse values unknown.
    pub fn unknown() -> Baseline {
        Baseline {
            trackers: Trackers {
                schema: true,
                state_change: true,
                variables: None,
                gtids: true,
                transaction_info: 2,
            },
            parse: vec![None; PARSE_VARIABLES.len()],
            idle: None,
        }
    }

    /// From the query's one row.
    pub fn from_result(result: &TextResult) -> Baseline {
        let mut b = Baseline::unknown();
        let Some(row) = result.rows.first() else {
            return b;
        };
        for (name, value) in TRACKERS.iter().zip(row) {
            b.trackers.set(name, value.as_deref().unwrap_or_default());
        }
        let mut rest = row.iter().skip(TRACKERS.len());
        b.parse = rest.by_ref().take(PARSE_VARIABLES.len()).cloned().collect();
        b.parse.resize(PARSE_VARIABLES.len(), None);
        let mut seconds = rest.map(|v| {
            let text = std::str::from_utf8(v.as_deref()?).ok()?;
            text.trim().parse::<u64>().ok()
        });
        b.idle = match (seconds.next().flatten(), seconds.next().flatten()) {
            (Some(wait), Some(interactive)) => Some(IdleTimeouts { wait, interactive }),
            _ => None,
        };
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_gives_the_trackers_and_the_parse_values() {
        let text = |s: &str| Some(s.as_bytes().to_vec());
        let mut row = vec![
            text("1"),
            text("0"),
            text("autocommit,time_zone"),
            text("OFF"),
            text("OFF"),
        ];
        row.extend(
            PARSE_VARIABLES
                .iter()
                .map(|v| text(&String::from_utf8_lossy(v))),
        );
        row[11] = None; // MySQL: no old_mode
        let b = Baseline::from_result(&TextResult {
            columns: Vec::new(),
            rows: vec![row],
        });
        assert!(b.trackers.schema && !b.trackers.state_change && !b.trackers.gtids);
        assert_eq!(
            b.trackers.variables,
            Some(vec![b"autocommit".to_vec(), b"time_zone".to_vec()])
        );
        assert_eq!(b.parse.len(), PARSE_VARIABLES.len());
        assert_eq!(b.parse[0].as_deref(), Some(PARSE_VARIABLES[0]));
        assert_eq!(b.parse[6], None);
        assert_eq!(
            Baseline::from_result(&TextResult::default()),
            Baseline::unknown()
        );
    }

    #[test]
    fn the_idle_timeouts_follow_the_parse_values() {
        let text = |s: &str| Some(s.as_bytes().to_vec());
        let mut row = vec![text("1"); TRACKERS.len() + PARSE_VARIABLES.len()];
        row.extend([text("28800"), text("600")]);
        let b = Baseline::from_result(&TextResult {
            columns: Vec::new(),
            rows: vec![row],
        });
        let idle = b.idle.expect("both timeouts");
        assert_eq!((idle.wait, idle.interactive), (28800, 600));
        assert_eq!(idle.for_login(true), std::time::Duration::from_secs(600));
        assert_eq!(b.parse.len(), PARSE_VARIABLES.len());
    }
}
