//! The values a statement leaves for the session's next ones that the server keeps per
//! connection, so that a session reads its own whichever backend runs its next statement:
//! LAST_INSERT_ID() and the diagnostics area. (ROW_COUNT() and FOUND_ROWS() are
//! `state::Outcome`'s, put in the text by `identity`; docs/semantics.md has the whole table.)
//!
//! LAST_INSERT_ID(): the OK packet's insert id is not it (an explicit id shows there too,
//! and leaves LAST_INSERT_ID() as it was), so after a statement that may have changed it
//! (`Rules::sets_last_insert_id`, an insert id in the answer, a failed multi-statement) the
//! value is the held backend's ([`LastInsertId::OnBackend`]) and is read back with
//! `SELECT LAST_INSERT_ID()` before the session lets that backend go. That query names no
//! table and raises nothing, so it leaves the diagnostics area as it is; what it leaves of
//! ROW_COUNT()/FOUND_ROWS() the next statement's text corrects (`Visible::row_count_of`).
//! For an autocommit statement, and for the COMMIT or ROLLBACK that ends a transaction, the
//! read-back goes in the same write as the statement (`read_back_behind`): no round trip
//! of its own. A session reads its value where the backend's differs: in the text of a
//! single statement (`identity::rewritten_query`), else with one SET first.
//!
//! Trackers: a client with CLIENT_SESSION_TRACK gets in its OKs what its own session's
//! `session_track_*` settings report (`protocol::Trackers`: the server's at login, then the
//! client's own SETs), not what sluice's backends track (`relay::SessionTrack::Filter`).
//!
//! Diagnostics: MariaDB replaces the area with a statement's conditions when it raises any,
//! clears it before a statement that names a table, and keeps it otherwise, whatever the
//! answer's warning count says; an ERR carries none. So a session keeps its backend after a
//! warning or an error while a quarter of the pinned places stays free for pins, until a
//! statement that names a table clears them (`warnings_pending`), and a diagnostics read on
//! a backend whose area may hold anyone else's conditions (`Visible::foreign_to`) finds it
//! cleared first, by a PREPARE that names a derived table, which changes nothing else a
//! session can read (`session::conditions`, which also raises again the conditions sluice
//! remembers where no backend holds them).

use crate::classify::{Classification, SetItem};
use crate::conn::backend::Health;
use crate::conn::visible::Diagnostics;
use crate::protocol::{ResponseSummary, SessionStateChange, Trackers};

use super::identity::Presenting;
use super::state::{LastInsertId, Leaves, Ran, Rules};
use super::Session;

/// Reads the session's LAST_INSERT_ID() back from the backend.
const READ_BACK: &[u8] = b"SELECT LAST_INSERT_ID()";

/// [`READ_BACK`] framed, to go behind a client's statement.
pub(super) fn read_back_packet() -> bytes::Bytes {
    super::framed(&crate::protocol::request::query(READ_BACK))
}

/// What a client's session tracks (`now`, which its OKs follow), and what it started with
/// (`start`, the backend's at login: a SET ... = DEFAULT returns to it).
#[derive(Clone, Debug)]
pub(super) struct ClientTrackers {
    pub(crate) now: Trackers,
    start: Trackers,
}

impl ClientTrackers {
    pub(crate) fn new(start: &Trackers) -> ClientTrackers {
        ClientTrackers {
            now: start.clone(),
            start: start.clone(),
        }
    }
}

/// What sluice sends around one client statement, in the same write as it: a SET first
/// that shows the session's values (`identity::Presenting`), and the read-back of
/// LAST_INSERT_ID() after it.
#[derive(Default)]
pub(super) struct Around {
    pub(crate) before: Option<Presenting>,
    pub(crate) read_back: bool,
    /// Set by the relay when the SET failed.
    pub(crate) before_failed: std::sync::atomic::AtomicBool,
}

impl Session {
    /// What goes around the statement with `rules` on the backend the session holds now.
    pub(super) fn around(&self, rules: Option<&Rules>) -> Around {
        Around {
            before: rules.and_then(|r| self.presenting(r)),
            read_back: self.read_back_behind(rules),
            before_failed: Default::default(),
        }
    }

    /// Once the statement's answer is relayed: what the SET before it set, and the value
    /// read back after it (read before anything else on the backend).
    pub(super) async fn after_around(&mut self, around: &Around) -> Option<u64> {
        if let Some(p) = &around.before {
            self.presented(
                p,
                around
                    .before_failed
                    .load(std::sync::atomic::Ordering::Relaxed),
            );
        }
        self.read_back_answer(around.read_back).await
    }

    /// After a client statement on the session's backend (from `note_statement`): whose
    /// the backend's conditions are, whether the session's diagnostics stay with it, and
    /// whether LAST_INSERT_ID() may have changed there.
    pub(super) fn note_values(&mut self, summary: &ResponseSummary, rules: Option<&Rules>) {
        let me = self.reg.info.id;
        let Some(b) = self.held.backend.as_mut() else {
            return;
        };
        let raised = summary.any_warnings || summary.error.is_some();
        if raised {
            b.visible.diagnostics = Diagnostics::Of(me);
        }
        // Whose ROW_COUNT() and FOUND_ROWS() the server holds now (`Outcome::after` says
        // what each kind of statement sets).
        let leaves = rules.map_or(Leaves::Command, |r| r.leaves);
        let ok = summary.error.is_none() && summary.result_sets == 0;
        if leaves == Leaves::Command && summary.prepare_ok.is_none() {
            b.visible.row_count_of = ok.then_some(me);
        } else if summary.prepare_ok.is_none() && leaves != Leaves::Previous {
            b.visible.row_count_of = Some(me);
            match (&summary.error, summary.result_sets) {
                (None, 0) => {}
                (None, _) if leaves == Leaves::Own => b.visible.found_rows_of = Some(me),
                // An error may or may not have changed it.
                (Some(_), _) if b.visible.found_rows_of != Some(me) => {
                    b.visible.found_rows_of = None
                }
                _ => {}
            }
        }
        // They stay until a statement replaces them: one that raises its own, or names a
        // table (a diagnostics read leaves them where they are).
        let clears = rules.is_some_and(|r| r.touches_tables);
        self.state.warnings_pending = raised || (self.state.warnings_pending && !clears);
        // SHOW WARNINGS / ERRORS and GET DIAGNOSTICS count the area's conditions, raising
        // none of their own.
        let reads_them = matches!(leaves, Leaves::PreviousFoundRows | Leaves::Previous);
        if clears || (raised && !reads_them) {
            self.memory.conditions = None;
        }
        // A multi-statement that failed may have run an INSERT before the failing one.
        let partway = |r: &Rules| r.ran(summary.error.is_some()) == Ran::FailedPartway;
        let may_change =
            summary.any_insert_id || rules.is_some_and(|r| r.sets_last_insert_id || partway(r));
        if may_change {
            b.visible.last_insert_id = None;
            self.state.last_insert_id = LastInsertId::OnBackend;
        }
    }

    /// Before a query that sets `session_track_*` variables runs (`rules`): what its session
    /// tracks once it has, from its SET items as written (a literal, or DEFAULT: the value the
    /// session started with), so that its own OK already carries what the new settings
    /// report. Returns what the session tracked before, to restore if the query fails.
    pub(super) fn expect_trackers(
        &mut self,
        class: Option<&Classification>,
        rules: Option<&Rules>,
    ) -> Option<ClientTrackers> {
        let items = class
            .filter(|_| rules.is_some_and(|r| r.changes_trackers))?
            .set
            .as_ref()?;
        let t = self.trackers.as_mut()?;
        let before = t.clone();
        for item in items {
            if let SetItem::SessionVar { name, value } = item {
                let literal = value.trim_matches(|c| c == '\'' || c == '"');
                if literal.eq_ignore_ascii_case("default") {
                    t.now.take(&t.start, name.as_bytes());
                } else {
                    t.now.set(name.as_bytes(), literal.as_bytes());
                }
            }
        }
        Some(before)
    }

    /// After such a query: a failed one changed nothing.
    pub(super) fn trackers_after(&mut self, before: Option<ClientTrackers>, failed: bool) {
        if let Some(before) = before.filter(|_| failed) {
            self.trackers = Some(before);
        }
    }

    /// A statement's OK reported new `session_track_*` values (the client set them): what
    /// its session tracks from now on.
    pub(super) fn note_trackers(&mut self, changes: &[SessionStateChange]) {
        let Some(t) = self.trackers.as_mut() else {
            return;
        };
        for c in changes {
            if let SessionStateChange::SystemVariable { name, value } = c {
                if crate::conn::backend::is_tracker_variable(name) {
                    t.now.set(name, value);
                }
            }
        }
    }

    /// Whether to send the read-back of LAST_INSERT_ID() right behind this statement, in
    /// the same write: it may change the value, and the session most likely lets its
    /// backend go after it (an autocommit statement outside a transaction, or the COMMIT
    /// or ROLLBACK of one that changed it). Never behind a file the client sends.
    fn read_back_behind(&self, rules: Option<&Rules>) -> bool {
        let Some(r) = rules.filter(|r| !r.reads_client_file && r.pin_ahead().is_none()) else {
            return false;
        };
        let free = !self.state.keeps_backend() && self.state.autocommit();
        (r.sets_last_insert_id && free)
            || (r.ends_transaction && self.state.last_insert_id == LastInsertId::OnBackend)
    }

    /// The answer to the read-back sent behind the statement (`read_back_behind`), read
    /// before anything else on the backend. `None`: none was sent, or it failed (the value
    /// then stays the backend's, read back again later; a backend that failed is closed).
    async fn read_back_answer(&mut self, sent: bool) -> Option<u64> {
        let b = self.held.backend.as_mut().filter(|_| sent)?;
        match b.read_first_u64().await {
            Ok(Ok(v)) => v,
            Ok(Err(_)) => None,
            Err(_) => {
                b.health = Health::Broken;
                None
            }
        }
    }

    /// Records a value read back after the session's statement (on the session's backend,
    /// whose last statement that read-back now is).
    pub(super) fn record_read_back(&mut self, value: Option<u64>) {
        let (Some(v), Some(b)) = (value, self.held.backend.as_mut()) else {
            return;
        };
        b.visible.last_insert_id = Some(v);
        b.visible.ran_own(false);
        self.state.last_insert_id = LastInsertId::Known(v);
    }

    /// Before the session may let its backend go: a LAST_INSERT_ID() only that backend
    /// knows is read back (one round trip; a session that lost the backend lost the value
    /// with it, as with its own connection).
    pub(super) async fn settle_last_insert_id(&mut self) {
        if self.state.last_insert_id != LastInsertId::OnBackend || self.state.keeps_backend() {
            return;
        }
        let Some(b) = self.held.backend.as_mut() else {
            self.state.last_insert_id = LastInsertId::Known(0);
            return;
        };
        match b.query_first_u64(READ_BACK).await {
            Ok(Ok(Some(v))) => {
                b.visible.last_insert_id = Some(v);
                self.state.last_insert_id = LastInsertId::Known(v);
            }
            // The session keeps the backend rather than lose its value.
            Ok(_) => self.pin(crate::stats::PinReason::UntrackedState),
            Err(_) => {
                b.health = Health::Broken;
                self.state.last_insert_id = LastInsertId::Known(0);
            }
        }
    }

    /// sluice answered a command that the server answers with an OK setting ROW_COUNT() to
    /// 0 (COM_PING, COM_INIT_DB, COM_STMT_RESET) without running it there: the session's
    /// value is 0, and a backend it holds has another.
    pub(super) fn row_count_zeroed(&mut self) {
        self.state.outcome.row_count = Some(0);
        if let Some(b) = self.held.backend.as_mut() {
            b.visible.row_count_of = None;
        }
    }

    /// The session's previous ROW_COUNT() and FOUND_ROWS() where a statement's text must
    /// carry them: known, and not what the backend the session holds returns from the
    /// session's own statement (`Visible::row_count_of`, `found_rows_of`).
    pub(super) fn outcome_for_text(&self) -> (Option<i64>, Option<i64>) {
        let me = self.reg.info.id;
        let held = self.held.backend.as_ref();
        let outcome = self.state.outcome;
        let row_count = outcome
            .row_count
            .filter(|_| held.is_none_or(|b| b.visible.row_count_of != Some(me)));
        let found_rows = outcome
            .found_rows
            .and_then(|v| i64::try_from(v).ok())
            .filter(|_| held.is_none_or(|b| b.visible.found_rows_of != Some(me)));
        (row_count, found_rows)
    }
}
