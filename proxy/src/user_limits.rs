//! Per-user limits (`[[users]]` max_client_connections / max_concurrency, and the
//! max_user_* defaults for every other account): the FIFO gate of each user's statements,
//! and the refusals, with the code and message shape MySQL uses for an account's resource
//! limits (1226, ER_USER_LIMIT_REACHED). The client count at login is the registry's
//! (`registry::Registry::count_user`).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::config::UserLimits;
use crate::gate::{Gate, GateGuard};
use crate::protocol::{codes, ErrPacket};
use crate::registry::UserLimitReached;

/// One gate per user that has a concurrency limit (in `Context`).
#[derive(Default)]
pub struct UserGates {
    gates: RwLock<HashMap<Box<str>, Arc<Gate>>>,
}

impl UserGates {
    /// Waits (FIFO, up to `queue_timeout`) for a place among `user`'s running statements;
    /// `None` when the user has no limit. `holds_locks`: the session is in a transaction or
    /// holds a lock (`SessionState::holds_locks`), so it does not wait here: the statements
    /// inside may be waiting on its locks. Take it before any query rule's gate.
    pub async fn enter(
        &self,
        user: &str,
        limits: UserLimits,
        queue_timeout: Duration,
        holds_locks: bool,
    ) -> Result<Option<GateGuard>, ErrPacket> {
        let Some(limit) = limits.max_concurrency else {
            return Ok(None);
        };
        let gate = self.gate(user, limit);
        let wait = if holds_locks {
            Duration::ZERO
        } else {
            queue_timeout
        };
        match gate.enter(wait).await {
            Ok(entered) => Ok(Some(entered.guard)),
            Err(_) if holds_locks => Ok(None),
            Err(t) => Err(concurrency_reached(user, limit, t.waited)),
        }
    }

    /// `user`'s gate at `limit` (made on first use; a changed limit applies from now).
    fn gate(&self, user: &str, limit: u32) -> Arc<Gate> {
        let found = {
            let gates = self.gates.read().unwrap_or_else(|p| p.into_inner());
            gates.get(user).cloned()
        };
        let gate = match found {
            Some(g) => g,
            None => {
                let mut gates = self.gates.write().unwrap_or_else(|p| p.into_inner());
                gates
                    .entry(user.into())
                    .or_insert_with(|| Arc::new(Gate::new(limit)))
                    .clone()
            }
        };
        if gate.limit() != limit {
            gate.set_limit(limit);
        }
        gate
    }

    /// Running and queued statements of `user`, if it has a gate.
    pub fn load(&self, user: &str) -> Option<(u32, usize)> {
        let gates = self.gates.read().unwrap_or_else(|p| p.into_inner());
        gates.get(user).map(|g| (g.running(), g.waiting()))
    }
}

/// The login refusal at a user's `max_client_connections` (MySQL's max_user_connections
/// shape).
pub fn clients_reached(user: &str, reached: UserLimitReached) -> ErrPacket {
    let msg = format!(
        "User '{user}' has exceeded the 'max_client_connections' resource (current value: {}); close one of its connections, or raise max_client_connections for this user in sluice",
        reached.limit
    );
    ErrPacket::from_code(codes::USER_LIMIT_REACHED, msg.as_bytes())
}

fn concurrency_reached(user: &str, limit: u32, waited: Duration) -> ErrPacket {
    let msg = format!(
        "User '{user}' has exceeded the 'max_concurrency' resource (current value: {limit}); this statement waited {} ms (queue_timeout) for one of them to finish and did not run",
        waited.as_millis()
    );
    ErrPacket::from_code(codes::USER_LIMIT_REACHED, msg.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(n: u32) -> UserLimits {
        UserLimits {
            max_client_connections: None,
            max_concurrency: Some(n),
        }
    }

    #[tokio::test]
    async fn a_users_statements_queue_at_its_limit_and_others_do_not() {
        let g = UserGates::default();
        let short = Duration::from_millis(30);
        assert!(g
            .enter("free", UserLimits::default(), short, false)
            .await
            .unwrap()
            .is_none());
        let a = g.enter("app", limit(1), short, false).await.unwrap();
        assert!(a.is_some());
        let err = g.enter("app", limit(1), short, false).await.err().unwrap();
        assert_eq!((err.code, &err.sql_state), (1226, b"42000"));
        let text = String::from_utf8_lossy(&err.message).into_owned();
        assert!(
            text.starts_with(
                "User 'app' has exceeded the 'max_concurrency' resource (current value: 1)"
            ),
            "{text}"
        );
        assert!(g
            .enter("other", limit(1), short, false)
            .await
            .unwrap()
            .is_some());
        // In a transaction: no wait, and no refusal.
        assert!(g
            .enter("app", limit(1), short, true)
            .await
            .unwrap()
            .is_none());
        assert_eq!(g.load("app"), Some((1, 0)));
        // A raised limit applies at once.
        let b = g.enter("app", limit(2), short, false).await.unwrap();
        assert!(b.is_some());
        drop((a, b));
        assert_eq!(g.load("app"), Some((0, 0)));
    }

    #[test]
    fn the_login_refusal_has_mysqls_shape() {
        let e = clients_reached("app", UserLimitReached { limit: 3 });
        assert_eq!(e.code, 1226);
        let text = String::from_utf8_lossy(&e.message).into_owned();
        assert!(
            text.starts_with(
                "User 'app' has exceeded the 'max_client_connections' resource (current value: 3)"
            ),
            "{text}"
        );
    }
}
