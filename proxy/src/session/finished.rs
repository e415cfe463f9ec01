//! What a finished statement changes in the session: its transaction status, movable state,
//! locks and pins (its `Rules`, and what its answer reports), and what the backend goes back
//! as; when the answer leaves it unsure, the server is asked first (the named locks held,
//! both halves of a character-set pair), in one round trip each.

use super::replay;
use super::state::Rules;
use super::{Flow, Session};
use crate::conn::backend::Health;
use crate::protocol::{ResponseSummary, SessionStateChange, StatusFlags};
use crate::stats::PinReason;

impl Session {
    /// What a finished statement changed: transaction status, movable state, locks and pins
    /// (the statement's `Rules`, when it is one sluice classified). `Flow::Quit` when the
    /// server closes the connection after this answer (COMMIT RELEASE), so the client's
    /// connection ends too.
    pub(super) async fn after_statement(
        &mut self,
        summary: &ResponseSummary,
        rules: Option<&Rules>,
    ) -> Flow {
        match self.note_statement(summary, rules) {
            Noted::Done(flow) => flow,
            Noted::Confirm(ask, flow) => self.confirmed(summary, rules, &ask, flow).await,
        }
    }

    /// `after_statement` without a future: all of it, unless the server must first be asked
    /// which named locks the statement took (then `confirmed` does the rest).
    pub(super) fn note_statement(
        &mut self,
        summary: &ResponseSummary,
        rules: Option<&Rules>,
    ) -> Noted {
        if let Some(status) = summary.status {
            self.state.status = status;
        }
        let Some(backend) = self.held.backend.as_mut() else {
            return Noted::Done(Flow::Continue);
        };
        backend.statements += 1;
        let leaves = rules.map_or(super::state::Leaves::Command, |r| r.leaves);
        self.state.outcome = self.state.outcome.after(summary, leaves);
        let mut ask = Ask::default();
        if !summary.state_changes.is_empty() {
            backend.state.apply(&summary.state_changes);
            self.state.movable.apply(&summary.state_changes);
        }
        if rules.is_some_and(|r| r.restarts_clock) && summary.error.is_none() {
            backend.state.vars.remove(&b"timestamp"[..]);
            self.state.movable.vars.remove(&b"timestamp"[..]);
        }
        if !summary.state_changes.is_empty() {
            ask.charsets = replay::reports_charset_pair(&summary.state_changes);
            self.note_trackers(&summary.state_changes);
        }
        // Diagnostics and LAST_INSERT_ID(): what this statement left, and where.
        self.note_values(summary, rules);
        // The backend is gone after this answer: the server closed it, or it failed.
        let (mut closed, mut flow) = (false, Flow::Continue);
        if let Some(rules) = rules {
            let applied = self.state.apply(rules, rules.ran(summary.error.is_some()));
            for reason in &applied.new_pins {
                self.count_pin(*reason);
            }
            if applied.disconnects {
                (closed, flow) = (true, Flow::Quit);
            }
            // Asking the server may replace the diagnostics the client reads next (MariaDB
            // keeps them through a query that names no table; a server that clears them for
            // every statement would not): not after warnings. After an error it asks anyway
            // (a statement that failed, a typo or a killed wait, took no lock, and one
            // believed held would keep the slot for good).
            if !summary.any_warnings {
                ask.locks = applied.confirm;
            }
        }
        if ask.charsets && summary.any_warnings {
            // Asking would replace the warnings the client may read next: the session keeps
            // this backend, whose character sets sluice cannot describe, instead.
            ask.charsets = false;
            self.pin(PinReason::UntrackedState);
        }
        if !closed && (ask.charsets || !ask.locks.is_empty()) {
            return Noted::Confirm(ask, flow);
        }
        Noted::Done(self.finish_statement(summary, rules, closed, flow))
    }

    /// The rest of `note_statement` once the server said which named locks are held and
    /// what character sets the connection has.
    pub(super) async fn confirmed(
        &mut self,
        summary: &ResponseSummary,
        rules: Option<&Rules>,
        ask: &Ask,
        flow: Flow,
    ) -> Flow {
        let mut closed = !ask.locks.is_empty() && !self.confirm_named_locks(&ask.locks).await;
        if ask.charsets && !closed {
            closed = !self.confirm_charsets().await;
        }
        self.finish_statement(summary, rules, closed, flow)
    }

    /// Reads both halves of each character-set pair back (`replay::CHARSET_PAIRS_QUERY`)
    /// into the session's and the backend's state; a server that will not say pins the
    /// session. False if the backend failed meanwhile.
    async fn confirm_charsets(&mut self) -> bool {
        let Some(b) = self.held.backend.as_mut() else {
            return true;
        };
        let recorded = match b.query_rows(replay::CHARSET_PAIRS_QUERY).await {
            Ok(Ok(result)) => result.rows.first().is_some_and(|row| {
                replay::record_charset_pairs(&mut b.state, row)
                    && replay::record_charset_pairs(&mut self.state.movable, row)
            }),
            Ok(Err(_)) => false,
            Err(_) => return false,
        };
        if !recorded {
            self.pin(PinReason::UntrackedState);
        }
        true
    }

    /// Pins nothing predicted, and what the backend goes back as.
    fn finish_statement(
        &mut self,
        summary: &ResponseSummary,
        rules: Option<&Rules>,
        closed: bool,
        flow: Flow,
    ) -> Flow {
        if rules.is_some() {
            self.reg.info.set_pin(self.state.pin_reason());
        }
        if has_unexplained_change(&summary.state_changes, rules) {
            self.pin(PinReason::UntrackedState);
        }
        if summary
            .status
            .is_some_and(|s| s.contains(StatusFlags::SERVER_STATUS_CURSOR_EXISTS))
        {
            self.pin(PinReason::Cursor);
        }
        // With an XA transaction open the backend is closed if the session leaves, never
        // reset (`SessionState::xa_open`).
        let closes = closed || self.state.xa_open();
        let needs_backend = self.state.needs_backend();
        if let Some(backend) = self.held.backend.as_mut() {
            backend.health = match (closes, needs_backend) {
                (true, _) => Health::Broken,
                (false, true) => Health::Dirty,
                (false, false) => Health::Clean,
            };
        }
        flow
    }

    /// GET_LOCK() may have timed out, been killed, or found the lock held elsewhere; a lock
    /// believed held would keep the session's slot until it left. The server says which of
    /// the locks the statement named this connection holds (`IS_USED_LOCK()` returns the
    /// owner's thread id, whatever pseudo_thread_id says): one round trip after the answer,
    /// only for statements that take a lock by a literal name.
    /// False if the backend failed meanwhile.
    async fn confirm_named_locks(&mut self, names: &[Box<[u8]>]) -> bool {
        let Some(b) = self.held.backend.as_mut() else {
            return true;
        };
        let names = &names[..names.len().min(63)];
        let mut sql = b"SELECT 0".to_vec();
        for (i, name) in names.iter().enumerate() {
            // A literal without quotes or backslashes (the classifier's rule): safe as is.
            sql.extend_from_slice(b" | ((IS_USED_LOCK('");
            sql.extend_from_slice(name);
            sql.extend_from_slice(format!("') <=> {}) << {i})", b.thread_id).as_bytes());
        }
        match b.query_first_u64(&sql).await {
            Ok(Ok(Some(held))) => self.state.confirm_named_locks(names, held),
            // No answer: the locks stay believed held, which keeps the slot, never leaks one.
            Ok(_) => {}
            Err(_) => return false,
        }
        true
    }

    /// Adds a pin reason and counts it if it is new.
    pub(super) fn pin(&mut self, reason: PinReason) {
        if self.state.pin(reason) {
            self.count_pin(reason);
        }
    }

    /// A pin starts: counted in the stats and shown in SHOW CLIENTS.
    fn count_pin(&mut self, reason: PinReason) {
        self.ctx.stats.pinned(reason);
        self.reg.info.set_pin(self.state.pin_reason());
        tracing::info!(client = self.reg.info.id, %reason, "session pinned to its backend");
    }
}

/// The server says session state changed, but nothing it reported (schema, variables)
/// and nothing the classifier recognised explains it.
fn has_unexplained_change(changes: &[SessionStateChange], rules: Option<&Rules>) -> bool {
    let changed = changes
        .iter()
        .any(|c| matches!(c, SessionStateChange::StateChanged));
    if !changed {
        return false;
    }
    let explained_by_report = changes.iter().any(|c| {
        matches!(
            c,
            SessionStateChange::SystemVariable { .. } | SessionStateChange::Schema(_)
        )
    });
    let explained_by_class = rules.is_some_and(Rules::explains_state_change);
    !(explained_by_report || explained_by_class)
}

/// How far `note_statement` got.
pub(super) enum Noted {
    Done(Flow),
    /// What to ask the server first (`Session::confirmed`), and the flow so far.
    Confirm(Ask, Flow),
}

/// What the server is asked after a statement, in one round trip each.
#[derive(Default)]
pub(super) struct Ask {
    /// The named locks the statement may have taken (GET_LOCK() by literal names).
    locks: Vec<Box<[u8]>>,
    /// The statement reported one half of a character-set pair (`replay::CHARSET_PAIRS`).
    charsets: bool,
}
