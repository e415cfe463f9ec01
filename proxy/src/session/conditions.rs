//! The session's diagnostics where no backend holds them, and the diagnostics area a
//! diagnostics read finds: the session's own conditions or none, never another session's.
//!
//! MariaDB replaces a connection's diagnostics area with a statement's conditions when it
//! raises any, clears it before a statement that names a table, and keeps it otherwise. A
//! session keeps its backend after a warning or an error while it can (`session::values`),
//! and besides remembers the conditions sluice can raise again ([`Conditions`]): the error of
//! a `USE` or COM_INIT_DB that sluice answered itself after the control connection's check
//! (raised again by a SIGNAL of its code, SQLSTATE and message), and a read's warnings (the
//! read runs again alone, its rows dropped: a read has no side effect and reads nothing an
//! earlier statement left, so running it again changes nothing the session can see). A
//! diagnostics read on a backend that does not hold the session's conditions finds them
//! raised there first; on one whose area may hold anyone else's, the area cleared first
//! (a PREPARE that names a derived table, which changes nothing else a session can read).

use crate::conn::backend::Health;
use crate::conn::visible::Diagnostics;
use crate::protocol::{codes, ErrPacket, ResponseKind, ResponseSummary, ResponseTracker};

use super::prepared::{ClientStmt, StmtCmd};
use super::state::Rules;
use super::statement::{Request, Statement};
use super::Session;

/// Clears a connection's diagnostics area when prepared (it names a table, raises nothing)
/// and leaves LAST_INSERT_ID(), ROW_COUNT() and FOUND_ROWS() as they were; closed at once.
const CLEAR_DIAGNOSTICS: &[u8] = b"SELECT 1 FROM (SELECT 1) AS sluice_clear";

/// The session's conditions (the warnings or the error of its last statement that raised
/// any, until one names a table) where no backend may still hold them, and how they are
/// raised again on the backend where the session next reads its diagnostics
/// (`Session::diagnostics_cleared`); kept in the session's memory until a statement replaces
/// or clears them (`Session::note_values`).
#[derive(Clone)]
pub(super) enum Conditions {
    /// An error sluice answered with on the server's behalf (a `USE` or COM_INIT_DB checked
    /// on the control connection): raised again by a SIGNAL of its code, SQLSTATE and
    /// message.
    Error(ErrPacket),
    /// A read (no side effect, nothing read of an earlier statement) that raised warnings:
    /// run again alone, its rows dropped. Its packet as it went to the backend.
    Query(bytes::Bytes),
    /// The same for an execution of a prepared statement (its payload as the client sent it).
    Execute(bytes::Bytes, ClientStmt),
}

impl Session {
    /// The session has diagnostics of its own: on its backend, or to raise again.
    pub(super) fn diagnostics_pending(&self) -> bool {
        self.state.warnings_pending || self.memory.conditions.is_some()
    }

    /// Before a statement that reads the diagnostics area (`rules`): the session's own
    /// conditions, where no backend holds them ([`Conditions`]), are raised
    /// again on this backend; otherwise an area that may hold anyone else's conditions is
    /// cleared first, so the statement finds the session's own or none. True if that took a
    /// round trip; the error for the client if it failed.
    pub(super) async fn diagnostics_cleared(
        &mut self,
        rules: Option<&Rules>,
    ) -> Result<bool, ErrPacket> {
        let me = self.reg.info.id;
        let reads = rules.is_some_and(|r| r.reads_diagnostics);
        if !reads || self.held.backend.is_none() {
            return Ok(false);
        }
        let again = self.memory.conditions.clone();
        let mut talked = false;
        if let Some(conditions) = again.filter(|_| !self.state.warnings_pending) {
            talked = true;
            if self.raise_again(&conditions).await? {
                // On this backend now, as after the statement that first raised them.
                if let Some(b) = self.held.backend.as_mut() {
                    b.visible.diagnostics = Diagnostics::Of(me);
                }
                self.state.warnings_pending = true;
                return Ok(true);
            }
        }
        let Some(b) = self
            .held
            .backend
            .as_mut()
            .filter(|b| b.visible.foreign_to(me))
        else {
            return Ok(talked);
        };
        match b.prepare_internal(CLEAR_DIAGNOSTICS).await {
            Ok(Ok(ok)) => {
                // No answer; it goes out with the statement.
                b.queue_stmt_close(ok.stmt_id);
                b.visible.diagnostics = Diagnostics::Clean;
                Ok(true)
            }
            outcome => {
                // The area holds what it held, or the backend failed: the statement does
                // not run here.
                let why = match outcome {
                    Ok(Err(e)) => String::from_utf8_lossy(&e.message).into_owned(),
                    Err(e) => e.to_string(),
                    Ok(Ok(_)) => String::new(),
                };
                Err(self.lost_preparing(&format!(
                    "sluice could not clear another session's diagnostics from its backend ({why}); retry"
                )))
            }
        }
    }

    /// Runs what raises the session's `conditions` again on its backend, its answer read
    /// and dropped: true if it raised them (an error the same as the first, or, for a read,
    /// any warning or error: run again, a read may raise others if what it reads changed).
    async fn raise_again(&mut self, conditions: &Conditions) -> Result<bool, ErrPacket> {
        let (packet, kind, expect) = match conditions {
            Conditions::Error(err) => {
                let sql = signal_sql(err);
                let packet = super::framed(&crate::protocol::request::query(&sql));
                (packet.to_vec(), ResponseKind::Query, Some(err.code))
            }
            Conditions::Query(packet) => (packet.to_vec(), ResponseKind::Query, None),
            Conditions::Execute(payload, stmt) => {
                if let Err(err) = self.ensure_prepared(stmt).await {
                    // A backend lost fails the statement; a statement that no longer
                    // prepares raises nothing here.
                    return match self.held.backend {
                        None => Err(err),
                        Some(_) => Ok(false),
                    };
                }
                let b = self.held.backend.as_mut();
                let Some(packet) = b.and_then(|b| StmtCmd::Execute.on_backend(payload, stmt, b))
                else {
                    return Ok(false);
                };
                (packet, ResponseKind::Execute, None)
            }
        };
        let Some(b) = self.held.backend.as_mut() else {
            return Ok(false);
        };
        b.stream.queue_raw(&packet);
        let answered = match b.stream.flush(None).await {
            Ok(()) => drop_answer(b, kind).await,
            Err(e) => Err(e),
        };
        let summary = match answered {
            Ok(summary) => summary,
            Err(e) => {
                return Err(self.lost_preparing(&format!(
                    "Lost connection to backend while raising the session's diagnostics again: {e}; retry"
                )))
            }
        };
        let any = summary.any_warnings || summary.error.is_some();
        b.visible.ran_own(any);
        Ok(match expect {
            Some(code) => summary.error.is_some_and(|e| e.code == code),
            None => any,
        })
    }

    /// The session's backend failed while sluice prepared its statement (which has not
    /// run): the backend closes, and the client gets 9004 with `why`.
    fn lost_preparing(&mut self, why: &str) -> ErrPacket {
        if let Some(b) = self.held.backend.as_mut() {
            b.health = Health::Broken;
        }
        self.held.backend = None;
        ErrPacket::from_code(codes::BACKEND_LOST, why.as_bytes())
    }

    /// After a statement's answer (`summary`, once `note_values` has recorded it): a read
    /// that raised warnings is remembered, so that they are raised again where its session
    /// next reads its diagnostics if no backend holds them by then (a pipelined read's
    /// backend goes on to another session's statement; no pinned place was free for them).
    /// Only a read, which may run again unseen: no side effect, nothing of an earlier
    /// statement read. One that failed is not (it may have been killed).
    pub(super) fn remember_conditions(&mut self, st: &Statement<'_>, summary: &ResponseSummary) {
        let read = st.rules.is_some_and(Rules::is_stateless) && st.reads_only();
        if !summary.any_warnings || summary.error.is_some() || !read {
            return;
        }
        self.memory.conditions = Some(match st.request {
            Request::AsSent(packet) => Conditions::Query(bytes::Bytes::copy_from_slice(packet)),
            Request::Prepared { payload, stmt, .. } => {
                Conditions::Execute(bytes::Bytes::copy_from_slice(payload), stmt.clone())
            }
        });
    }

    /// A statement sluice answered itself failed with the server's own error `err` (a `USE`
    /// or COM_INIT_DB checked on the control connection): ROW_COUNT() is -1, and the error
    /// is the session's diagnostics, raised again where it next reads them.
    pub(super) fn failed_alone(&mut self, err: &ErrPacket) {
        self.state.outcome.row_count = Some(-1);
        self.memory.conditions = Some(Conditions::Error(err.clone()));
    }
}

/// Reads the answer to a command of `kind` sent already, whole, and drops it.
async fn drop_answer(
    b: &mut crate::conn::BackendConn,
    kind: ResponseKind,
) -> Result<ResponseSummary, crate::conn::Error> {
    let mut tracker = ResponseTracker::new(kind, b.caps);
    while !tracker.is_done() {
        let span = b.stream.expect_packet().await?;
        let feed = tracker.feed(&b.stream.payload(&span));
        b.stream.consume(&span);
        feed?;
    }
    Ok(tracker.into_summary())
}

/// The SIGNAL that raises `err` again: its code, its SQLSTATE (a general error's where the
/// server would refuse it: a warning's class or a malformed one) and its message, as a hex
/// literal, which reads the same under any sql_mode.
fn signal_sql(err: &ErrPacket) -> Vec<u8> {
    let state = err.sql_state_str();
    let valid = state
        .bytes()
        .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
        && !matches!(&state[..2], "00" | "01" | "02");
    let state = if valid { state } else { "HY000" };
    let mut sql = format!(
        "SIGNAL SQLSTATE '{state}' SET MYSQL_ERRNO = {}, MESSAGE_TEXT = X'",
        err.code
    );
    for b in &err.message {
        sql.push_str(&format!("{b:02x}"));
    }
    sql.push('\'');
    sql.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_raises_the_error_again_under_any_sql_mode() {
        let err = ErrPacket::new(1049, "42000", "Unknown database 'n\u{f6}'");
        let hex: String = err.message.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            String::from_utf8(signal_sql(&err)).unwrap(),
            format!("SIGNAL SQLSTATE '42000' SET MYSQL_ERRNO = 1049, MESSAGE_TEXT = X'{hex}'")
        );
        // A class the server would take for a warning (or refuse): a general error's.
        for state in ["01000", "00000", "4200a"] {
            let sql = signal_sql(&ErrPacket::new(1044, state, "denied"));
            assert!(String::from_utf8(sql)
                .unwrap()
                .starts_with("SIGNAL SQLSTATE 'HY000' "));
        }
    }
}
