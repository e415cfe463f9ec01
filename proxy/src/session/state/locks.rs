//! The locks a session holds on its backend: named locks (GET_LOCK) by name and count, and
//! the locks the server ends only with a statement of their own (LOCK TABLES, FLUSH TABLES
//! WITH READ LOCK, BACKUP STAGE, ...), with the changes a statement makes to them.

use crate::classify::LockName;

/// A lock the server ends only with a statement of its own (named locks are counted apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Held {
    /// LOCK TABLES, FLUSH TABLES t WITH READ LOCK / FOR EXPORT: ended by UNLOCK TABLES or by
    /// starting a transaction.
    Tables = 1,
    /// FLUSH TABLES WITH READ LOCK: ended by UNLOCK TABLES only.
    GlobalRead = 2,
    /// BACKUP STAGE: ended by BACKUP STAGE END only (not BACKUP UNLOCK, not UNLOCK TABLES).
    BackupStage = 4,
    /// BACKUP LOCK t: ended by BACKUP UNLOCK (or the next BACKUP LOCK, which replaces it).
    BackupLock = 8,
    /// LOCK INSTANCE FOR BACKUP (MySQL): ended by UNLOCK INSTANCE.
    Instance = 16,
}

/// A change to the session's locks, recorded once the statement's result is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum LockChange {
    TakeNamed(LockName),
    ReleaseNamed(LockName),
    ReleaseAllNamed,
    Take(Held),
    Release(Held),
    XaStart,
}

/// The locks a session holds on its backend.
#[derive(Debug, Default)]
pub(super) struct Locks {
    /// Named locks taken by a literal name, and how many times each (a lock taken twice is
    /// released twice, as on the server).
    pub(super) named: Vec<(Box<[u8]>, u32)>,
    /// Named locks whose name sluice could not read.
    pub(super) unnamed: u32,
    /// `Held` bits.
    pub(super) held: u8,
}

impl Locks {
    pub(super) fn any(&self) -> bool {
        !self.named.is_empty() || self.unnamed > 0 || self.held != 0
    }

    pub(super) fn take_named(&mut self, name: &LockName) {
        match name {
            LockName::Literal(n) => match self.named.iter_mut().find(|(m, _)| m == n) {
                Some((_, count)) => *count += 1,
                None => self.named.push((n.clone(), 1)),
            },
            LockName::Unknown => self.unnamed += 1,
        }
    }

    /// RELEASE_LOCK(): a lock this session holds is released. One it does not hold (or one
    /// sluice cannot tell apart from those it cannot name) changes nothing: believing a lock
    /// held keeps a backend, believing it released would hand the lock to the next client.
    pub(super) fn release_named(&mut self, name: &LockName) {
        match name {
            LockName::Literal(n) => {
                if let Some(i) = self.named.iter().position(|(m, _)| m == n) {
                    self.named[i].1 -= 1;
                    if self.named[i].1 == 0 {
                        self.named.swap_remove(i);
                    }
                }
            }
            LockName::Unknown if self.unnamed > 0 => self.unnamed -= 1,
            LockName::Unknown => {}
        }
    }
}
