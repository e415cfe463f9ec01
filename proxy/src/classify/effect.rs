//! What a statement does to session state: one [`Effect`] per thing it does, in the order it
//! does them (a multi-statement lists all of its statements' effects). The classifier only
//! names them; what each one means for the session is decided in one place,
//! `session::state::Rules::of`, whose exhaustive match makes a new variant a compile error
//! until it has a rule.

use smallvec::SmallVec;

/// The name of a user-level lock, as the classifier could read it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LockName {
    /// A single-quoted literal without escapes (the same bytes under every `sql_mode`), as the
    /// server compares it: byte for byte (MariaDB lock names are case-sensitive).
    Literal(Box<[u8]>),
    /// Computed, a parameter, or a literal the classifier does not unescape: some lock, but
    /// which one is unknown.
    Unknown,
}

/// How a statement reads the diagnostics area; the server treats the forms apart in what
/// they leave of ROW_COUNT() and FOUND_ROWS().
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagnosticsRead {
    /// SHOW WARNINGS / SHOW ERRORS: ROW_COUNT() becomes -1, FOUND_ROWS() stays.
    Show,
    /// GET DIAGNOSTICS: both stay.
    Get,
    /// @@warning_count, @@error_count, SHOW COUNT(*) WARNINGS / ERRORS: a result like any
    /// other SELECT's.
    Value,
}

/// One thing a statement does that matters for pooling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// A user variable is read (`SELECT @x`, `EXECUTE s USING @a`).
    UserVariableRead,
    /// A user variable is assigned (`SET @x`, `@x :=`, `INTO @x`, `GET DIAGNOSTICS @x = ...`).
    UserVariableWrite,
    /// CREATE TEMPORARY TABLE or DROP TEMPORARY TABLE.
    TemporaryTable,
    /// One GET_LOCK() call (or another lock-taking function of the locking services).
    GetLock(LockName),
    /// One RELEASE_LOCK() call.
    ReleaseLock(LockName),
    /// RELEASE_ALL_LOCKS().
    ReleaseAllLocks,
    /// LOCK TABLES, and FLUSH TABLES with a table list WITH READ LOCK or FOR EXPORT (which the
    /// server ends the same ways: UNLOCK TABLES, or starting a transaction).
    LockTables,
    /// FLUSH TABLES WITH READ LOCK without a table list: the global read lock.
    GlobalReadLock,
    /// UNLOCK TABLES.
    UnlockTables,
    /// BEGIN, START TRANSACTION, XA START / XA BEGIN.
    Begin,
    /// MariaDB BACKUP STAGE START / FLUSH / BLOCK_DDL / BLOCK_COMMIT.
    BackupStage,
    /// MariaDB BACKUP STAGE END.
    BackupStageEnd,
    /// MariaDB BACKUP LOCK t.
    BackupLock,
    /// MariaDB BACKUP UNLOCK.
    BackupUnlock,
    /// MySQL LOCK INSTANCE FOR BACKUP.
    LockInstance,
    /// MySQL UNLOCK INSTANCE.
    UnlockInstance,
    /// PREPARE name FROM ... (a text-protocol prepared statement lives on the connection).
    SqlPrepare,
    /// DEALLOCATE PREPARE / DROP PREPARE.
    SqlDeallocate,
    /// SQL_CALC_FOUND_ROWS, FOUND_ROWS() or ROW_COUNT(): depends on the previous statement.
    FoundRows,
    /// LAST_INSERT_ID(), @@identity, @@last_insert_id.
    LastInsertIdRead,
    /// LAST_INSERT_ID(expr): sets the value the session's later LAST_INSERT_ID() returns.
    LastInsertIdSet,
    /// IS_USED_LOCK(): names a lock's holder by its server thread id.
    LockHolderRead,
    /// CONNECTION_ID() is called, or `@@pseudo_thread_id` read.
    ConnectionIdRead,
    /// NEXTVAL(s) or NEXT VALUE FOR s: sets the session's last value of sequence s, which
    /// its LASTVAL(s) and PREVIOUS VALUE FOR s read (SETVAL() leaves it).
    SequenceNext,
    /// CALL: a stored routine runs statements sluice cannot see (and may read CONNECTION_ID()).
    Call,
    /// A SET that could not be parsed, or whose value needs a subquery or a user variable.
    UnknownSet,
    /// SET TRANSACTION without GLOBAL/SESSION: applies to the next transaction only.
    SetTransactionNext,
    /// HANDLER t OPEN.
    HandlerOpen,
    /// The client sets a session_track_* variable (the proxy owns those).
    SessionTrackChange,
    /// SET ROLE, SET DEFAULT ROLE, SET PASSWORD, SET SESSION AUTHORIZATION.
    SetRoleOrAuth,
    /// DDL and other statements that commit an open transaction (also SET autocommit=1).
    ImplicitCommit,
    /// SET sql_log_bin.
    SqlLogBin,
    /// SET GLOBAL / PERSIST.
    GlobalSet,
    /// Any XA statement (the XA transaction belongs to the connection).
    Xa,
    /// XA START / XA BEGIN.
    XaStart,
    /// GET DIAGNOSTICS, SHOW WARNINGS / ERRORS, @@warning_count: read the previous
    /// statement's diagnostics.
    Diagnostics(DiagnosticsRead),
    /// Runs SQL sluice cannot see (EXECUTE IMMEDIATE, BEGIN NOT ATOMIC, BINLOG), or sets a
    /// variable that lasts for the next statement only (`insert_id`, `rand_seed1/2`, as
    /// mysqlbinlog's output does), which no replay can move.
    UnknownState,
    /// COMMIT/ROLLBACK ... RELEASE: the server closes the connection afterwards.
    Disconnects,
    /// LOAD DATA LOCAL INFILE / LOAD XML LOCAL.
    LoadLocalInfile,
}

impl Effect {
    /// Effects that count once per query however often they occur; the lock calls count each
    /// time (GET_LOCK twice takes a lock twice).
    fn counts_once(&self) -> bool {
        !matches!(self, Effect::GetLock(_) | Effect::ReleaseLock(_))
    }
}

/// The effects of one COM_QUERY in statement order. Up to four are kept inline, so the
/// classifier allocates nothing for them on the hot path (most statements have none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects(SmallVec<[Effect; 4]>);

impl Effects {
    /// Adds `e` (an effect that counts once is not added again).
    pub(crate) fn add(&mut self, e: Effect) {
        if !(e.counts_once() && self.0.contains(&e)) {
            self.0.push(e);
        }
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Effect> {
        self.0.iter()
    }

    pub fn contains(&self, e: &Effect) -> bool {
        self.0.contains(e)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Names the lock of the `GetLock`/`ReleaseLock` at `index` (added while its argument was
    /// not yet read).
    pub(crate) fn name_lock(&mut self, index: usize, name: Box<[u8]>) {
        if let Some(Effect::GetLock(n) | Effect::ReleaseLock(n)) = self.0.get_mut(index) {
            *n = LockName::Literal(name);
        }
    }

    /// Drops the effects from `len` on (SET STATEMENT ... FOR takes its inner statement's).
    pub(crate) fn truncate(&mut self, len: usize) {
        self.0.truncate(len);
    }

    pub(crate) fn extend(&mut self, other: &Effects) {
        for e in other.iter() {
            self.add(e.clone());
        }
    }
}

impl<'a> IntoIterator for &'a Effects {
    type Item = &'a Effect;
    type IntoIter = std::slice::Iter<'a, Effect>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_count_once_and_lock_calls_each_time() {
        let mut e = Effects::default();
        e.add(Effect::UserVariableRead);
        e.add(Effect::UserVariableRead);
        e.add(Effect::GetLock(LockName::Unknown));
        e.add(Effect::GetLock(LockName::Unknown));
        assert_eq!(e.len(), 3);
        e.name_lock(1, b"a"[..].into());
        assert_eq!(
            e.iter().nth(1),
            Some(&Effect::GetLock(LockName::Literal(b"a"[..].into())))
        );
    }

    #[test]
    fn ordinary_statements_stay_inline() {
        let mut e = Effects::default();
        for x in [
            Effect::TemporaryTable,
            Effect::FoundRows,
            Effect::Call,
            Effect::Xa,
        ] {
            e.add(x);
        }
        assert!(!e.0.spilled());
    }
}
