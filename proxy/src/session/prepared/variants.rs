//! Prepared statements that read ROW_COUNT() or FOUND_ROWS(): what the session's previous
//! statement left, which the backend running the execution may not hold (another session's
//! statement may have run there last). Such an execution runs as a copy of the statement
//! with the session's values in its text, as a query gets them
//! (`Session::rewritten_query`): each call becomes `IFNULL(CAST(v AS SIGNED), ROW_COUNT())`,
//! typed as the function, its select item named as before, so the column definitions the
//! client got at PREPARE hold. A copy's backend statement is keyed by its text (and the
//! parse), so sessions with the same values share it, and the backend's statement cache
//! bounds the copies. A statement without such calls, or one that runs on a backend the
//! session holds whose values are the session's own, runs as prepared; a session that never
//! prepares such a statement pays one `is_none` per command.
//!
//! State a copy holds on its backend stays with that copy ([`Bound`]): the long data sent
//! for the next execution (the copy is chosen at the first SEND_LONG_DATA, with the values
//! then), and the cursor an execution opened (FETCH and RESET go to it).

use std::sync::Arc;

use super::{ClientStmt, StmtCmd, StmtDef};
use crate::classify::{Classification, IdCall};
use crate::conn::stmts::stmt_key;
use crate::protocol::stmt_execute;
use crate::session::identity::{outcome_calls, with_values};
use crate::session::Session;

/// The ROW_COUNT() and FOUND_ROWS() calls in a prepared statement's text.
pub(crate) struct OutcomeCalls {
    row_count: Vec<IdCall>,
    found_rows: Vec<IdCall>,
}

impl OutcomeCalls {
    /// The calls `class` found in the text it classified; `None` without any.
    pub(crate) fn of(class: &Classification) -> Option<Box<OutcomeCalls>> {
        let none = class.row_count_calls.is_empty() && class.found_rows_calls.is_empty();
        (!none).then(|| {
            Box::new(OutcomeCalls {
                row_count: class.row_count_calls.clone(),
                found_rows: class.found_rows_calls.clone(),
            })
        })
    }
}

/// The copy of a client's statement whose backend statement holds state for it.
#[derive(Clone)]
pub(crate) enum Bound {
    /// Long data was sent to it for the next execution.
    LongData(Arc<StmtDef>),
    /// Its last execution opened a cursor there.
    Cursor(Arc<StmtDef>),
}

impl StmtDef {
    /// This statement with `sql` for its text (the same parse, parameters and rules).
    fn copy_with(&self, sql: &[u8]) -> StmtDef {
        let key = stmt_key(&self.parse, sql);
        StmtDef {
            sql_at: key.len() - sql.len(),
            key,
            parse: self.parse.clone(),
            params: self.params,
            rules: self.rules.clone(),
            reads_only: self.reads_only,
            route: self.route.clone(),
            outcome_calls: None,
            // A copy records under its client statement's digest: the text the client sent.
            digest: self.digest.clone(),
        }
    }
}

impl Session {
    /// What `cmd` on the client's statement `client_id` (`stmt`, a copy of the session's)
    /// runs as: `stmt.def` becomes the copy with the session's values in its text where the
    /// statement reads them, or the copy that holds its long data or cursor; the client's
    /// statement remembers which copy holds them.
    pub(in crate::session) fn runs_as(
        &mut self,
        client_id: u32,
        stmt: &mut ClientStmt,
        cmd: StmtCmd,
        payload: &[u8],
    ) {
        if stmt.def.outcome_calls.is_none() {
            return;
        }
        let bound = stmt.bound.take();
        let (def, bound) = match cmd {
            StmtCmd::SendLongData => {
                let d = match bound {
                    Some(Bound::LongData(d)) => d,
                    _ => self.with_session_values(&stmt.def),
                };
                (Arc::clone(&d), Some(Bound::LongData(d)))
            }
            StmtCmd::Execute | StmtCmd::BulkExecute => {
                let d = match bound {
                    Some(Bound::LongData(d)) => d,
                    _ => self.with_session_values(&stmt.def),
                };
                let cursor = cmd == StmtCmd::Execute && !stmt_execute::without_cursor(payload);
                (Arc::clone(&d), cursor.then_some(Bound::Cursor(d)))
            }
            StmtCmd::Fetch => match bound {
                Some(Bound::Cursor(d)) => (Arc::clone(&d), Some(Bound::Cursor(d))),
                other => (Arc::clone(&stmt.def), other),
            },
            // A reset ends both.
            StmtCmd::Reset => match bound {
                Some(Bound::LongData(d) | Bound::Cursor(d)) => (d, None),
                None => (Arc::clone(&stmt.def), None),
            },
        };
        if let Some(s) = self.stmts.get_mut(client_id) {
            s.bound = bound;
        }
        stmt.def = def;
    }

    /// `def` with the session's ROW_COUNT() and FOUND_ROWS() in its text where the backend
    /// may not hold them (`Session::outcome_for_text`); `def` itself otherwise.
    fn with_session_values(&self, def: &Arc<StmtDef>) -> Arc<StmtDef> {
        let Some(calls) = def.outcome_calls.as_deref() else {
            return Arc::clone(def);
        };
        let (row_count, found_rows) = self.outcome_for_text();
        let values = outcome_calls(
            (&calls.row_count, row_count),
            (&calls.found_rows, found_rows),
        );
        if values.is_empty() {
            return Arc::clone(def);
        }
        let sql = with_values(def.sql(), values.iter().map(|(c, v)| (*c, v.as_slice())));
        Arc::new(def.copy_with(&sql))
    }
}
