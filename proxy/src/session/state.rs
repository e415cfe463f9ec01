//! What sluice knows about one client session, and the rules that follow from it: what each
//! effect of a statement means ([`Rules::of`], the one home of "what pins"), which locks the
//! session holds ([`SessionState::apply`]), when others may wait on it (its statements then
//! go first for a slot), when it must keep its backend, and why.

use smallvec::SmallVec;

use crate::classify::{Classification, DiagnosticsRead, Effect, LockName, Quoting, StatementKind};
use crate::conn::backend::MovableState;
use crate::protocol::StatusFlags;
use crate::stats::PinReason;
use locks::{Held, LockChange, Locks};

mod locks;

pub(crate) use super::outcome::{LastInsertId, Leaves, Outcome};

/// What of the client's identity a statement can observe on the backend, so that it is set
/// there first (`session::identity`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Presents {
    /// CONNECTION_ID() is read, a routine runs, or a temporary table may be created: the
    /// server keys temporary tables by pseudo_thread_id, so a table created under another
    /// session's id would vanish from this session once its own id is presented.
    pub(crate) connection_id: bool,
    pub(crate) last_insert_id: bool,
}

/// How a statement ended, as far as its locks are concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ran {
    Ok,
    /// A single statement failed: it took no lock, except a GET_LOCK() evaluated before the
    /// error, and released none sluice may count on.
    Failed,
    /// A multi-statement failed: the statements before the failing one ran.
    FailedPartway,
}

/// What a statement's effects ask of its session: read from the classification before it
/// runs (the identity to show and the pins to expect are needed then) and recorded by
/// [`SessionState::apply`] once its result is known.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rules {
    /// Shown on the backend before the statement runs.
    pub(crate) presents: Presents,
    /// Pins the statement leaves, whatever its result (one bit per `PinReason`).
    pins: u32,
    /// Lock changes, in statement order.
    locks: SmallVec<[LockChange; 2]>,
    /// The server closes the connection once the statement succeeded.
    disconnects: bool,
    multi_statement: bool,
    /// Reads the previous statement's warnings (SHOW WARNINGS, GET DIAGNOSTICS,
    /// @@warning_count), which stay on the backend after it.
    pub(crate) reads_diagnostics: bool,
    /// May change what LAST_INSERT_ID() returns: an INSERT, REPLACE or LOAD DATA (whose
    /// answer shows an id also when it was given, not generated), LAST_INSERT_ID(expr), or
    /// a routine (`session::values`).
    pub(crate) sets_last_insert_id: bool,
    /// Relays a file from the client mid-answer (LOAD DATA LOCAL): nothing of sluice's may
    /// follow it in the same write.
    pub(crate) reads_client_file: bool,
    /// COMMIT or ROLLBACK: the session lets its backend go after it, unless pinned.
    pub(crate) ends_transaction: bool,
    /// Certainly names a table, so the server clears the diagnostics first (false when
    /// unsure: the session then keeps them where they are).
    pub(crate) touches_tables: bool,
    /// What it leaves of ROW_COUNT() and FOUND_ROWS() (`Outcome::after`).
    pub(crate) leaves: Leaves,
    /// Sets a `session_track_*` variable: what the client's OKs carry changes.
    pub(crate) changes_trackers: bool,
    /// `SET timestamp = DEFAULT`: the clock runs again. MariaDB's tracker reports the
    /// fixed value the variable had before, which replayed would stop the clock.
    pub(crate) restarts_clock: bool,
}

/// Whether the statement sets `timestamp` back to DEFAULT.
fn restarts_clock(class: &Classification) -> bool {
    class.set.as_deref().unwrap_or_default().iter().any(|item| {
        matches!(item, crate::classify::SetItem::SessionVar { name, value }
            if name.eq_ignore_ascii_case("timestamp") && value.eq_ignore_ascii_case("default"))
    })
}

impl Rules {
    /// The state rules: one arm per effect, so that a new `Effect` does not compile until
    /// it has its rule here. Arms that change nothing say why.
    pub(crate) fn of(class: &Classification) -> Rules {
        use StatementKind as K;
        let mut r = Rules {
            multi_statement: class.multi_statement,
            sets_last_insert_id: matches!(class.kind, K::Insert | K::Replace | K::LoadData),
            ends_transaction: matches!(class.kind, K::Commit | K::Rollback),
            touches_tables: matches!(
                class.kind,
                K::Insert | K::Update | K::Delete | K::Replace | K::LoadData | K::Explain
            ),
            restarts_clock: restarts_clock(class),
            ..Rules::default()
        };
        for effect in &class.effects {
            match effect {
                // A clean backend answers NULL, as a session that never set it would; a
                // session that did set it is pinned already (UserVariableWrite).
                Effect::UserVariableRead => {}
                Effect::UserVariableWrite => r.pin(PinReason::UserVariable),
                Effect::TemporaryTable => {
                    r.pin(PinReason::TemporaryTable);
                    r.presents.connection_id = true;
                }
                Effect::GetLock(name) => r.lock(LockChange::TakeNamed(name.clone())),
                Effect::ReleaseLock(name) => r.lock(LockChange::ReleaseNamed(name.clone())),
                Effect::ReleaseAllLocks => r.lock(LockChange::ReleaseAllNamed),
                Effect::LockTables => r.lock(LockChange::Take(Held::Tables)),
                Effect::GlobalReadLock => r.lock(LockChange::Take(Held::GlobalRead)),
                Effect::UnlockTables => {
                    r.lock(LockChange::Release(Held::Tables));
                    r.lock(LockChange::Release(Held::GlobalRead));
                }
                // Starting a transaction ends LOCK TABLES (not the global read lock, backup
                // locks or named locks). The transaction itself shows in the status flags.
                Effect::Begin => r.lock(LockChange::Release(Held::Tables)),
                Effect::BackupStage => r.lock(LockChange::Take(Held::BackupStage)),
                Effect::BackupStageEnd => r.lock(LockChange::Release(Held::BackupStage)),
                Effect::BackupLock => r.lock(LockChange::Take(Held::BackupLock)),
                Effect::BackupUnlock => r.lock(LockChange::Release(Held::BackupLock)),
                Effect::LockInstance => r.lock(LockChange::Take(Held::Instance)),
                Effect::UnlockInstance => r.lock(LockChange::Release(Held::Instance)),
                Effect::SqlPrepare => r.pin(PinReason::SqlPrepare),
                // The SqlPrepare pin stays: sluice does not count the statements a connection
                // has prepared, so it cannot tell that the last one is gone.
                Effect::SqlDeallocate => {}
                Effect::FoundRows => r.pin(PinReason::FoundRows),
                Effect::LastInsertIdRead => r.presents.last_insert_id = true,
                // The server has the new value; the session reads it back before it lets
                // the backend go (`session::values`).
                Effect::LastInsertIdSet => r.sets_last_insert_id = true,
                // The holder's thread id becomes its client id in the text
                // (`session::identity`), as the holders are when the statement comes.
                Effect::LockHolderRead => {}
                Effect::ConnectionIdRead => r.presents.connection_id = true,
                // The server reports no change of it (the effect's doc says what it is).
                Effect::SequenceNext => r.pin(PinReason::Sequence),
                // A routine's statements are invisible: what it changes, the server's session
                // tracker reports (an UntrackedState pin); what it reads of the identity is
                // presented like a direct CONNECTION_ID().
                Effect::Call => {
                    r.presents.connection_id = true;
                    r.presents.last_insert_id = true;
                    r.sets_last_insert_id = true;
                }
                Effect::UnknownSet | Effect::SetRoleOrAuth => r.pin(PinReason::UnknownSet),
                // The backend tracks what the client asked for from now on (so it stays with
                // the client), and the client's OKs carry it (`session::values`).
                Effect::SessionTrackChange => {
                    r.pin(PinReason::UnknownSet);
                    r.changes_trackers = true;
                }
                Effect::SetTransactionNext => r.pin(PinReason::NextTransaction),
                Effect::HandlerOpen => r.pin(PinReason::Handler),
                // The status flags of the answer say that the transaction ended.
                Effect::ImplicitCommit => {}
                // A session variable like the others: the tracker reports it, the replay moves it.
                Effect::SqlLogBin => {}
                // Changes the server for every session, not this session's state.
                Effect::GlobalSet => {}
                // The XA transaction shows in the status flags (SERVER_STATUS_IN_TRANS from
                // XA START through END and PREPARE to XA COMMIT / ROLLBACK), which keep the
                // session's backend.
                Effect::Xa => {}
                // ... and a backend left with one open is closed, not reset (`xa_open`).
                Effect::XaStart => r.lock(LockChange::XaStart),
                // Reads what the previous statement left, for which that statement kept its
                // backend (`warnings_pending`); they are still there afterwards.
                Effect::Diagnostics(read) => {
                    r.reads_diagnostics = true;
                    r.leaves = match read {
                        DiagnosticsRead::Show => Leaves::PreviousFoundRows,
                        DiagnosticsRead::Get => Leaves::Previous,
                        DiagnosticsRead::Value => r.leaves,
                    };
                }
                // SQL sluice cannot see (EXECUTE IMMEDIATE, BEGIN NOT ATOMIC, BINLOG) may set
                // anything, and the tracker does not report every kind of state (locks).
                Effect::UnknownState => r.pin(PinReason::UntrackedState),
                Effect::Disconnects => r.disconnects = true,
                // The file request and the client's data are relayed within the statement
                // (`protocol::response`, `Feed::LocalInfile`).
                Effect::LoadLocalInfile => r.reads_client_file = true,
            }
        }
        r
    }

    fn pin(&mut self, reason: PinReason) {
        self.pins |= bit(reason);
    }

    fn lock(&mut self, change: LockChange) {
        self.locks.push(change);
    }

    /// The pin the statement leaves if it succeeds, for a session that must reserve a place
    /// for it before it runs: a lock first, then the others in `PinReason` order.
    pub(crate) fn pin_ahead(&self) -> Option<PinReason> {
        let lock = self.locks.iter().find_map(|c| match c {
            LockChange::TakeNamed(_) => Some(PinReason::NamedLock),
            LockChange::Take(_) => Some(PinReason::TableLock),
            _ => None,
        });
        lock.or_else(|| first_reason(self.pins))
    }

    /// The statement is known to change state the session tracker may report without a
    /// variable or schema (a pin, or a named lock, which MySQL reports).
    pub(crate) fn explains_state_change(&self) -> bool {
        self.pins != 0
            || self
                .locks
                .iter()
                .any(|c| matches!(c, LockChange::TakeNamed(_)))
    }

    /// Nothing to present, pin, lock or close: a statement other sessions' may follow on
    /// the same backend (`session::pipeline`).
    pub(crate) fn is_stateless(&self) -> bool {
        self.presents == Presents::default()
            && self.pins == 0
            && self.locks.is_empty()
            && !self.disconnects
            && !self.reads_diagnostics
            && !self.sets_last_insert_id
    }

    /// How the statement ended, given whether its answer was an error.
    pub(crate) fn ran(&self, failed: bool) -> Ran {
        match (failed, self.multi_statement) {
            (false, _) => Ran::Ok,
            (true, true) => Ran::FailedPartway,
            (true, false) => Ran::Failed,
        }
    }
}

/// What [`SessionState::apply`] changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Applied {
    /// Pin reasons the session did not have before (counted once each time they start).
    pub(crate) new_pins: SmallVec<[PinReason; 2]>,
    /// Named locks the statement took by name: the server is asked whether this connection
    /// holds them ([`SessionState::confirm_named_locks`]), since GET_LOCK() may have timed out.
    pub(crate) confirm: Vec<Box<[u8]>>,
    /// The server closes the connection after this answer.
    pub(crate) disconnects: bool,
}

#[derive(Debug)]
pub(crate) struct SessionState {
    /// Schema and session variables; replayed on whichever backend runs the next statement.
    pub(crate) movable: MovableState,
    /// Status flags of the last OK/EOF (ERR carries none, so they stay as they were).
    pub(crate) status: StatusFlags,
    /// Why the session may not leave its backend: one bit per `PinReason` (lock reasons
    /// come from `locks` instead, and end with them).
    pins: u32,
    /// Named, table, global, backup and instance locks in force.
    locks: Locks,
    /// An XA START succeeded (the XA transaction lasts while the status says IN_TRANS).
    xa: bool,
    /// What LAST_INSERT_ID() must return for this session.
    pub(crate) last_insert_id: LastInsertId,
    /// What ROW_COUNT() and FOUND_ROWS() return after the session's last statement, where
    /// known (`Outcome::after`).
    pub(crate) outcome: Outcome,
    /// The session's diagnostics (warnings or an error of a statement since which none
    /// named a table) are on its backend: a later SHOW WARNINGS, GET DIAGNOSTICS or
    /// @@warning_count must run there to see them (`session::values`).
    pub(crate) warnings_pending: bool,
    /// The multi-statements option a reset returns to: the client's capability flag.
    multi_statements_baseline: bool,
    /// A fresh session's status on this server (AUTOCOMMIT unless its global autocommit is
    /// off), which a reset returns to.
    fresh_status: StatusFlags,
}

fn bit(reason: PinReason) -> u32 {
    1 << reason as u32
}

/// The first reason (in declaration order) among `bits`.
fn first_reason(bits: u32) -> Option<PinReason> {
    // `ALL` is in declaration order, so a reason's bit is its index there.
    PinReason::ALL.get(bits.trailing_zeros() as usize).copied()
}

impl SessionState {
    pub(crate) fn new(schema: Option<Vec<u8>>) -> Self {
        SessionState {
            movable: MovableState {
                schema,
                ..Default::default()
            },
            status: StatusFlags::SERVER_STATUS_AUTOCOMMIT,
            pins: 0,
            locks: Locks::default(),
            xa: false,
            last_insert_id: LastInsertId::Known(0),
            outcome: Outcome::FRESH,
            warnings_pending: false,
            multi_statements_baseline: false,
            fresh_status: StatusFlags::SERVER_STATUS_AUTOCOMMIT,
        }
    }

    /// The status a new session starts with: a server whose global autocommit is off, or
    /// whose global sql_mode has NO_BACKSLASH_ESCAPES, starts sessions so.
    pub(crate) fn start_with(&mut self, fresh: StatusFlags) {
        self.fresh_status = fresh;
        self.status = fresh;
    }

    /// How the session's string literals are lexed: the server says in every reply's status.
    pub(crate) fn quoting(&self) -> Quoting {
        if self
            .status
            .contains(StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES)
        {
            Quoting::QuotesOnly
        } else {
            Quoting::Backslash
        }
    }

    /// Records the client's CLIENT_MULTI_STATEMENTS capability as the option's baseline.
    pub(crate) fn with_multi_statements(mut self, on: bool) -> Self {
        self.multi_statements_baseline = on;
        self.movable.multi_statements = on;
        self
    }

    /// Back to the baseline schema-less state (COM_CHANGE_USER).
    pub(crate) fn clear_movable(&mut self) {
        self.movable = MovableState {
            multi_statements: self.multi_statements_baseline,
            ..MovableState::default()
        };
    }

    pub(crate) fn in_transaction(&self) -> bool {
        self.status.contains(StatusFlags::SERVER_STATUS_IN_TRANS)
    }

    /// Autocommit is on and no transaction is open: a statement ends on its own.
    pub(crate) fn autocommit(&self) -> bool {
        self.status.contains(StatusFlags::SERVER_STATUS_AUTOCOMMIT) && !self.in_transaction()
    }

    /// An open transaction or a lock, which others may wait on: its statements take a slot
    /// ahead of others' and never wait long for one (`pool::Slots::acquire_held`), so that
    /// sessions blocked on its locks cannot deadlock the pool; a backend it leaves is reset
    /// at once.
    pub(crate) fn holds_locks(&self) -> bool {
        self.in_transaction() || self.locks.any()
    }

    /// An XA transaction is open on the session's backend. If the session leaves now, the
    /// backend is closed as the client's own connection would be: a reset detaches a prepared
    /// XA transaction too, but one that XA COMMIT then commits without its changes (MariaDB
    /// 10.11), where a disconnect keeps them.
    pub(crate) fn xa_open(&self) -> bool {
        self.xa && self.in_transaction()
    }

    /// The session's backend carries state that cannot move.
    pub(crate) fn needs_backend(&self) -> bool {
        self.holds_locks() || self.pins != 0 || self.warnings_pending
    }

    /// The session keeps its backend for state that outlasts the next statement (a
    /// transaction, a lock, a pin), not only for its diagnostics.
    pub(crate) fn keeps_backend(&self) -> bool {
        self.holds_locks() || self.pins != 0
    }

    /// Holds a named lock (its backend's thread id names the session in IS_USED_LOCK()).
    pub(crate) fn holds_named_lock(&self) -> bool {
        !self.locks.named.is_empty() || self.locks.unnamed > 0
    }

    /// Records a finished statement's lock changes and pins, given how it ended: takes count
    /// unless a single statement failed (a GET_LOCK() counts even then: it may have run
    /// before the error); releases count only when everything succeeded.
    pub(crate) fn apply(&mut self, rules: &Rules, ran: Ran) -> Applied {
        if rules.pins == 0 && rules.locks.is_empty() {
            // Most statements: no pin, no lock to record; only an XA transaction may end.
            self.xa &= self.in_transaction();
            return Applied {
                disconnects: rules.disconnects && ran == Ran::Ok,
                ..Applied::default()
            };
        }
        let before = self.pin_bits();
        let mut applied = Applied {
            disconnects: rules.disconnects && ran == Ran::Ok,
            ..Applied::default()
        };
        self.pins |= rules.pins;
        for change in &rules.locks {
            match (change, ran) {
                (LockChange::TakeNamed(name), _) => {
                    self.locks.take_named(name);
                    if let LockName::Literal(n) = name {
                        if !applied.confirm.contains(n) {
                            applied.confirm.push(n.clone());
                        }
                    }
                }
                (LockChange::ReleaseNamed(name), Ran::Ok) => self.locks.release_named(name),
                (LockChange::ReleaseAllNamed, Ran::Ok) => {
                    self.locks.named.clear();
                    self.locks.unnamed = 0;
                }
                (LockChange::Take(h), Ran::Ok | Ran::FailedPartway) => self.locks.held |= *h as u8,
                (LockChange::Release(h), Ran::Ok) => self.locks.held &= !(*h as u8),
                (LockChange::XaStart, Ran::Ok) => self.xa = true,
                // Did not run, or may not have: the session goes on believing what it did.
                (
                    LockChange::ReleaseNamed(_)
                    | LockChange::ReleaseAllNamed
                    | LockChange::Take(_)
                    | LockChange::Release(_)
                    | LockChange::XaStart,
                    _,
                ) => {}
            }
        }
        // XA COMMIT / ROLLBACK (or anything else that ended it) cleared IN_TRANS.
        self.xa &= self.in_transaction();
        let started = self.pin_bits() & !before;
        if started != 0 {
            applied.new_pins = PinReason::ALL
                .iter()
                .copied()
                .filter(|r| started & bit(*r) != 0)
                .collect();
        }
        applied
    }

    /// The server's answer for `names` (bit i set: this connection holds `names[i]`): a lock
    /// it does not hold is forgotten, however often it was taken. Never adds one.
    pub(crate) fn confirm_named_locks(&mut self, names: &[Box<[u8]>], held: u64) {
        for (i, name) in names.iter().enumerate().take(64) {
            if held & (1 << i) == 0 {
                self.locks.named.retain(|(n, _)| n != name);
            }
        }
    }

    /// Adds a pin reason; true if the session was not pinned for that reason before.
    pub(crate) fn pin(&mut self, reason: PinReason) -> bool {
        let new = self.pin_bits() & bit(reason) == 0;
        self.pins |= bit(reason);
        new
    }

    pub(crate) fn unpin(&mut self, reason: PinReason) {
        self.pins &= !bit(reason);
    }

    /// Every reason the session is pinned for now, locks included.
    fn pin_bits(&self) -> u32 {
        let mut bits = self.pins;
        if !self.locks.named.is_empty() || self.locks.unnamed > 0 {
            bits |= bit(PinReason::NamedLock);
        }
        if self.locks.held != 0 {
            bits |= bit(PinReason::TableLock);
        }
        bits
    }

    /// The first reason (in declaration order) the session is pinned for, for display.
    pub(crate) fn pin_reason(&self) -> Option<PinReason> {
        first_reason(self.pin_bits())
    }

    /// After COM_RESET_CONNECTION / COM_CHANGE_USER: back to a fresh session.
    pub(crate) fn reset(&mut self) {
        self.movable.vars.clear();
        self.movable.multi_statements = self.multi_statements_baseline;
        self.status = self.fresh_status;
        self.pins = 0;
        self.locks = Locks::default();
        self.xa = false;
        self.last_insert_id = LastInsertId::Known(0);
        self.outcome = Outcome::default();
        self.warnings_pending = false;
    }

    /// The backend died: the transaction, locks and pinned state died with it. Schema and
    /// variables stay; they are replayed on the next backend.
    pub(crate) fn reset_transaction(&mut self) {
        self.status.remove(
            StatusFlags::SERVER_STATUS_IN_TRANS | StatusFlags::SERVER_STATUS_IN_TRANS_READONLY,
        );
        self.pins = 0;
        self.locks = Locks::default();
        self.xa = false;
        self.warnings_pending = false;
        // A value only that backend knew is gone with it, as with the client's own
        // connection.
        if self.last_insert_id == LastInsertId::OnBackend {
            self.last_insert_id = LastInsertId::Known(0);
        }
    }

    /// Status flags for an OK that sluice answers itself.
    pub(crate) fn local_status(&self) -> StatusFlags {
        // The quoting flags follow the session's sql_mode, which its last answer reported.
        let keep = StatusFlags::SERVER_STATUS_AUTOCOMMIT
            | StatusFlags::SERVER_STATUS_IN_TRANS
            | StatusFlags::SERVER_STATUS_IN_TRANS_READONLY
            | StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES
            | StatusFlags::SERVER_STATUS_ANSI_QUOTES;
        self.status & keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::classify;

    fn rules(sql: &str) -> Rules {
        Rules::of(&classify(sql.as_bytes()))
    }

    /// Runs `sql` as if it succeeded; returns the pins that started.
    fn ok(s: &mut SessionState, sql: &str) -> Vec<PinReason> {
        s.apply(&rules(sql), Ran::Ok).new_pins.to_vec()
    }

    #[test]
    fn transaction_holds_locks_and_keeps_backend() {
        let mut s = SessionState::new(None);
        assert!(!s.needs_backend());
        s.status = StatusFlags::SERVER_STATUS_IN_TRANS | StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        assert!(s.holds_locks() && s.needs_backend());
    }

    #[test]
    fn pinned_session_keeps_backend_but_holds_no_lock() {
        let mut s = SessionState::new(None);
        assert!(s.pin(PinReason::TemporaryTable));
        assert!(s.pin(PinReason::UserVariable));
        assert!(!s.pin(PinReason::UserVariable));
        assert_eq!(s.pin_reason(), Some(PinReason::UserVariable));
        s.unpin(PinReason::UserVariable);
        assert_eq!(s.pin_reason(), Some(PinReason::TemporaryTable));
        assert!(s.needs_backend() && !s.holds_locks());
        s.reset();
        assert!(!s.needs_backend());
    }

    #[test]
    fn named_locks_are_held_until_each_is_released() {
        let mut s = SessionState::new(None);
        assert_eq!(
            ok(&mut s, "SELECT GET_LOCK('a', 1), GET_LOCK('b', 1)"),
            [PinReason::NamedLock]
        );
        assert_eq!(s.pin_reason(), Some(PinReason::NamedLock));
        // Taken twice: released twice, as on the server.
        assert!(ok(&mut s, "DO GET_LOCK('a', 1)").is_empty());
        ok(&mut s, "DO RELEASE_LOCK('a')");
        ok(&mut s, "DO RELEASE_LOCK('b')");
        assert!(s.holds_locks(), "'a' is still held once");
        // A lock not held, or another case of the same letters: nothing changes.
        ok(&mut s, "DO RELEASE_LOCK('nope'), RELEASE_LOCK('A')");
        assert!(s.holds_locks());
        ok(&mut s, "DO RELEASE_LOCK('a')");
        assert!(!s.holds_locks() && !s.needs_backend());
        assert_eq!(s.pin_reason(), None);
        // The pin starts again with the next lock.
        assert_eq!(ok(&mut s, "DO GET_LOCK('c', 1)"), [PinReason::NamedLock]);
        ok(&mut s, "SELECT RELEASE_ALL_LOCKS()");
        assert!(!s.holds_locks());
    }

    #[test]
    fn locks_sluice_cannot_name_are_released_only_when_it_can_tell() {
        let mut s = SessionState::new(None);
        ok(&mut s, "SELECT GET_LOCK(?, 10)");
        // A literal release might be that lock or another one: it stays held.
        ok(&mut s, "DO RELEASE_LOCK('x')");
        assert!(s.holds_locks());
        ok(&mut s, "DO RELEASE_LOCK(?)");
        assert!(!s.holds_locks());
        // One unknown release for one literal lock: which one it was is unknown.
        ok(&mut s, "DO GET_LOCK('a', 1)");
        ok(&mut s, "DO RELEASE_LOCK(CONCAT('a'))");
        assert!(s.holds_locks());
    }

    #[test]
    fn the_server_corrects_a_lock_it_does_not_hold() {
        let mut s = SessionState::new(None);
        let applied = s.apply(&rules("SELECT GET_LOCK('a', 0), GET_LOCK('b', 0)"), Ran::Ok);
        let names: Vec<&[u8]> = applied.confirm.iter().map(|n| &n[..]).collect();
        assert_eq!(names, [&b"a"[..], b"b"]);
        // 'a' timed out (another session holds it), 'b' is held.
        s.confirm_named_locks(&applied.confirm, 0b10);
        ok(&mut s, "DO RELEASE_LOCK('b')");
        assert!(!s.holds_locks(), "nothing is held");
        // Nothing named, nothing to confirm.
        assert!(s
            .apply(&rules("DO GET_LOCK(?, 1)"), Ran::Ok)
            .confirm
            .is_empty());
    }

    #[test]
    fn results_decide_which_changes_count() {
        let mut s = SessionState::new(None);
        // A failed GET_LOCK may have run before the error; a failed LOCK TABLES took nothing.
        s.apply(
            &rules("SELECT GET_LOCK('a', 1), (SELECT 1 UNION SELECT 2)"),
            Ran::Failed,
        );
        assert!(s.holds_locks());
        s.apply(&rules("DO RELEASE_LOCK('a')"), Ran::Failed);
        assert!(s.holds_locks(), "a failed release counts for nothing");
        ok(&mut s, "DO RELEASE_LOCK('a')");
        s.apply(&rules("LOCK TABLES nope READ"), Ran::Failed);
        assert!(!s.holds_locks());
        // In a multi-statement that failed later, the lock was taken.
        let multi = rules("LOCK TABLES t READ; SELEKT");
        s.apply(&multi, multi.ran(true));
        assert!(s.holds_locks());
        s.apply(&rules("UNLOCK TABLES x"), Ran::Failed);
        assert!(s.holds_locks(), "a failed UNLOCK leaves the locks");
        ok(&mut s, "UNLOCK TABLES");
        assert!(!s.holds_locks());
    }

    #[test]
    fn each_table_lock_ends_the_way_the_server_ends_it() {
        let mut s = SessionState::new(None);
        for (take, not_by, ends) in [
            ("LOCK TABLES t WRITE", "COMMIT", "START TRANSACTION"),
            ("FLUSH TABLES t FOR EXPORT", "UNLOCK INSTANCE", "BEGIN"),
            ("FLUSH TABLES WITH READ LOCK", "BEGIN", "UNLOCK TABLES"),
            ("BACKUP STAGE START", "BACKUP UNLOCK", "BACKUP STAGE END"),
            ("BACKUP LOCK t.a", "UNLOCK TABLES", "BACKUP UNLOCK"),
            (
                "LOCK INSTANCE FOR BACKUP",
                "UNLOCK TABLES",
                "UNLOCK INSTANCE",
            ),
        ] {
            assert_eq!(ok(&mut s, take), [PinReason::TableLock], "{take}");
            ok(&mut s, not_by);
            assert!(s.holds_locks(), "{not_by} does not end {take}");
            ok(&mut s, ends);
            assert!(!s.holds_locks(), "{ends} ends {take}");
            assert_eq!(s.pin_reason(), None);
        }
        // Named locks outlive UNLOCK TABLES and transactions.
        ok(&mut s, "DO GET_LOCK('n', 1)");
        ok(&mut s, "UNLOCK TABLES; BEGIN");
        assert!(s.holds_locks());
    }

    #[test]
    fn a_reset_or_a_lost_backend_ends_every_lock() {
        let mut s = SessionState::new(None);
        ok(&mut s, "DO GET_LOCK('n', 1), GET_LOCK(?, 1)");
        ok(&mut s, "LOCK TABLES t READ");
        s.reset_transaction();
        assert!(!s.needs_backend());
        ok(&mut s, "BACKUP STAGE START");
        s.reset();
        assert!(!s.needs_backend());
    }

    #[test]
    fn an_xa_transaction_is_open_while_the_status_says_so() {
        let mut s = SessionState::new(None);
        let in_trans = StatusFlags::SERVER_STATUS_IN_TRANS | StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        s.status = in_trans;
        s.apply(&rules("XA START 'x'"), Ran::Failed);
        assert!(!s.xa_open(), "a failed XA START opened nothing");
        s.apply(&rules("XA START 'x'"), Ran::Ok);
        assert!(s.xa_open() && s.holds_locks());
        s.apply(&rules("XA PREPARE 'x'"), Ran::Ok);
        assert!(s.xa_open());
        s.status = StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        s.apply(&rules("XA COMMIT 'x'"), Ran::Ok);
        assert!(!s.xa_open());
        s.status = in_trans;
        assert!(!s.xa_open(), "a later plain transaction is not an XA one");
    }

    #[test]
    fn rules_say_what_to_show_and_what_will_pin() {
        let r = rules("SELECT CONNECTION_ID(), LAST_INSERT_ID()");
        assert_eq!(
            r.presents,
            Presents {
                connection_id: true,
                last_insert_id: true
            }
        );
        assert!(rules("CALL p()").presents.connection_id);
        assert!(
            rules("CREATE TEMPORARY TABLE t (a INT)")
                .presents
                .connection_id
        );
        assert_eq!(rules("SELECT 1").pin_ahead(), None);
        assert_eq!(
            rules("SET @a = 1, time_zone = @b").pin_ahead(),
            Some(PinReason::UserVariable)
        );
        assert_eq!(
            rules("SELECT @a := 1, GET_LOCK('x', 1)").pin_ahead(),
            Some(PinReason::NamedLock)
        );
        assert_eq!(
            rules("LOCK TABLES t READ").pin_ahead(),
            Some(PinReason::TableLock)
        );
        assert_eq!(rules("UNLOCK TABLES").pin_ahead(), None);
        assert!(rules("DO GET_LOCK('x', 1)").explains_state_change());
        assert!(!rules("LOCK TABLES t READ").explains_state_change());
    }

    #[test]
    fn sql_sluice_cannot_see_pins_and_release_disconnects() {
        let mut s = SessionState::new(None);
        for sql in [
            "EXECUTE IMMEDIATE 'SET @a = 1'",
            "BEGIN NOT ATOMIC SELECT 1; END",
        ] {
            assert_eq!(
                rules(sql).pin_ahead(),
                Some(PinReason::UntrackedState),
                "{sql}"
            );
        }
        assert_eq!(
            ok(&mut s, "EXECUTE IMMEDIATE 'DO 1'"),
            [PinReason::UntrackedState]
        );
        assert!(s.apply(&rules("COMMIT RELEASE"), Ran::Ok).disconnects);
        assert!(!s.apply(&rules("COMMIT RELEASE"), Ran::Failed).disconnects);
        assert!(!s.apply(&rules("COMMIT NO RELEASE"), Ran::Ok).disconnects);
    }
}
