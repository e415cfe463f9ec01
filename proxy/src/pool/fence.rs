//! Kill fences: while a KILL QUERY by thread id is on its way to the server
//! (`session::kill`), the backend it names goes to no other session. A backend given back
//! while fenced is closed instead of pooled, so the kill lands on the statement it was meant
//! for, or on a connection nobody uses any more.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use super::Pool;

/// The fenced backends' server thread ids.
#[derive(Default)]
pub(super) struct Fences {
    threads: Mutex<Vec<u32>>,
    /// How many fences are up: a checkin looks at the list only when there is one.
    active: AtomicU32,
}

/// A fence on one backend thread, down on drop.
pub(crate) struct KillFence {
    pool: Pool,
    thread: u32,
}

impl Pool {
    /// Fences the backend with server thread id `thread` until the fence drops.
    pub(crate) fn fence(&self, thread: u32) -> KillFence {
        let fences = &self.shared.fences;
        fences
            .threads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(thread);
        // SeqCst, as the session's clearing of its running thread before it gives the
        // backend back: either the killer sees the thread gone, or the checkin sees this.
        fences.active.fetch_add(1, Ordering::SeqCst);
        KillFence {
            pool: self.clone(),
            thread,
        }
    }

    /// Is a kill on its way to this backend thread?
    pub(super) fn fenced(&self, thread: u32) -> bool {
        let fences = &self.shared.fences;
        fences.active.load(Ordering::SeqCst) > 0
            && fences
                .threads
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&thread)
    }
}

impl Drop for KillFence {
    fn drop(&mut self) {
        let fences = &self.pool.shared.fences;
        let mut threads = fences.threads.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = threads.iter().position(|t| *t == self.thread) {
            threads.swap_remove(i);
        }
        fences.active.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BackendLimit;
    use crate::pool::PoolSettings;

    #[test]
    fn a_fence_holds_until_it_drops() {
        let pool = Pool::new(
            &PoolSettings {
                pool_size: 1,
                max_backend_connections: BackendLimit::Fixed(2),
                server_lifetime: std::time::Duration::ZERO,
            },
            Default::default(),
            Default::default(),
            Default::default(),
        );
        assert!(!pool.fenced(7));
        let a = pool.fence(7);
        let b = pool.fence(7);
        assert!(pool.fenced(7) && !pool.fenced(8));
        drop(a);
        assert!(
            pool.fenced(7),
            "a second kill of the same thread still fences it"
        );
        drop(b);
        assert!(!pool.fenced(7));
    }
}
