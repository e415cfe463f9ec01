//! What sluice knows about one client session, and the rules that follow from it: when the
//! session must keep its execution slot, when it must keep its backend, and why.

use crate::conn::backend::MovableState;
use crate::protocol::StatusFlags;
use crate::stats::PinReason;

#[derive(Debug)]
pub struct SessionState {
    /// Schema and session variables; replayed on whichever backend runs the next statement.
    pub movable: MovableState,
    /// Status flags of the last OK/EOF (ERR carries none, so they stay as they were).
    pub status: StatusFlags,
    /// Why the session may not leave its backend: one bit per `PinReason`.
    pins: u32,
    /// GET_LOCK calls not yet released.
    pub named_locks: u32,
    /// LOCK TABLES or FLUSH TABLES WITH READ LOCK in force.
    pub table_locks: bool,
    /// LOCK INSTANCE FOR BACKUP, BACKUP LOCK or a BACKUP STAGE in force (released by
    /// UNLOCK INSTANCE, BACKUP UNLOCK, BACKUP STAGE END; UNLOCK TABLES leaves it).
    pub instance_lock: bool,
    /// What LAST_INSERT_ID() must return for this session.
    pub last_insert_id: u64,
    /// The last statement left warnings: the next one (SHOW WARNINGS, GET DIAGNOSTICS,
    /// @@warning_count) must run on the same backend to see them.
    pub warnings_pending: bool,
    /// The multi-statements option a reset returns to: the client's capability flag.
    multi_statements_baseline: bool,
    /// A fresh session's status on this server (AUTOCOMMIT unless its global autocommit is
    /// off), which a reset returns to.
    fresh_status: StatusFlags,
}

impl SessionState {
    pub fn new(schema: Option<Vec<u8>>) -> Self {
        SessionState {
            movable: MovableState {
                schema,
                ..Default::default()
            },
            status: StatusFlags::SERVER_STATUS_AUTOCOMMIT,
            pins: 0,
            named_locks: 0,
            table_locks: false,
            instance_lock: false,
            last_insert_id: 0,
            warnings_pending: false,
            multi_statements_baseline: false,
            fresh_status: StatusFlags::SERVER_STATUS_AUTOCOMMIT,
        }
    }

    /// A server whose global autocommit is off starts sessions without it.
    pub fn start_autocommit(&mut self, on: bool) {
        self.fresh_status
            .set(StatusFlags::SERVER_STATUS_AUTOCOMMIT, on);
        self.status = self.fresh_status;
    }

    /// Records the client's CLIENT_MULTI_STATEMENTS capability as the option's baseline.
    pub fn with_multi_statements(mut self, on: bool) -> Self {
        self.multi_statements_baseline = on;
        self.movable.multi_statements = on;
        self
    }

    /// Back to the baseline schema-less state (COM_CHANGE_USER).
    pub fn clear_movable(&mut self) {
        self.movable = MovableState {
            multi_statements: self.multi_statements_baseline,
            ..MovableState::default()
        };
    }

    pub fn in_transaction(&self) -> bool {
        self.status.contains(StatusFlags::SERVER_STATUS_IN_TRANS)
    }

    /// A session that holds a lock or an open transaction keeps its execution slot, so that
    /// sessions queued behind its lock can never take every slot and deadlock the pool.
    pub fn holds_slot(&self) -> bool {
        self.in_transaction() || self.named_locks > 0 || self.table_locks || self.instance_lock
    }

    /// The session's backend carries state that cannot move.
    pub fn needs_backend(&self) -> bool {
        self.holds_slot() || self.pins != 0 || self.warnings_pending
    }

    /// Adds a pin reason; true if the session was not pinned for that reason before.
    pub fn pin(&mut self, reason: PinReason) -> bool {
        let bit = 1 << reason as u32;
        let new = self.pins & bit == 0;
        self.pins |= bit;
        new
    }

    pub fn unpin(&mut self, reason: PinReason) {
        self.pins &= !(1 << reason as u32);
    }

    /// The first reason (in declaration order) the session is pinned for, for display.
    pub fn pin_reason(&self) -> Option<PinReason> {
        PinReason::ALL
            .iter()
            .copied()
            .find(|r| self.pins & (1 << *r as u32) != 0)
    }

    /// After COM_RESET_CONNECTION / COM_CHANGE_USER: back to a fresh session.
    pub fn reset(&mut self) {
        self.movable.vars.clear();
        self.movable.multi_statements = self.multi_statements_baseline;
        self.status = self.fresh_status;
        self.pins = 0;
        self.named_locks = 0;
        self.table_locks = false;
        self.instance_lock = false;
        self.last_insert_id = 0;
        self.warnings_pending = false;
    }

    /// The backend died: the transaction, locks and pinned state died with it. Schema and
    /// variables stay; they are replayed on the next backend.
    pub fn reset_transaction(&mut self) {
        self.status.remove(
            StatusFlags::SERVER_STATUS_IN_TRANS | StatusFlags::SERVER_STATUS_IN_TRANS_READONLY,
        );
        self.pins = 0;
        self.named_locks = 0;
        self.table_locks = false;
        self.instance_lock = false;
        self.warnings_pending = false;
    }

    /// Status flags for an OK that sluice answers itself.
    pub fn local_status(&self) -> StatusFlags {
        let keep = StatusFlags::SERVER_STATUS_AUTOCOMMIT
            | StatusFlags::SERVER_STATUS_IN_TRANS
            | StatusFlags::SERVER_STATUS_IN_TRANS_READONLY;
        self.status & keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_keeps_slot_and_backend() {
        let mut s = SessionState::new(None);
        assert!(!s.needs_backend());
        s.status = StatusFlags::SERVER_STATUS_IN_TRANS | StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        assert!(s.holds_slot() && s.needs_backend());
    }

    #[test]
    fn pinned_session_keeps_backend_but_not_slot() {
        let mut s = SessionState::new(None);
        assert!(s.pin(PinReason::TemporaryTable));
        assert!(s.pin(PinReason::UserVariable));
        assert!(!s.pin(PinReason::UserVariable));
        assert_eq!(s.pin_reason(), Some(PinReason::UserVariable));
        s.unpin(PinReason::UserVariable);
        assert_eq!(s.pin_reason(), Some(PinReason::TemporaryTable));
        assert!(s.needs_backend() && !s.holds_slot());
        s.reset();
        assert!(!s.needs_backend());
    }

    #[test]
    fn locks_keep_the_slot() {
        let mut s = SessionState::new(None);
        s.named_locks = 1;
        assert!(s.holds_slot());
        s.named_locks = 0;
        s.table_locks = true;
        assert!(s.holds_slot());
    }
}
