//! How each backend account can show a client its own `CONNECTION_ID()`, found once per
//! account at its first login and shared by every session (SHOW SERVERS lists it).
//!
//! `SET @@SESSION.pseudo_thread_id` (what CONNECTION_ID() returns) needs BINLOG REPLAY or
//! SUPER on MariaDB 10.5.2+ and SESSION_VARIABLES_ADMIN or SYSTEM_VARIABLES_ADMIN on MySQL 8.
//! An account with it gets that exact path; an application account without it gets the
//! classifier's rewrite of each call in the SQL text, which covers what the statement itself
//! says but not stored routines, views or triggers (see the README).

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::server_info::ServerInfo;

/// How CONNECTION_ID() shows the client's id for one backend account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityMode {
    /// The account may set `pseudo_thread_id`: sluice sets it before a statement that can
    /// observe the id (also inside procedures, views and triggers).
    PseudoThreadId,
    /// It may not: each `CONNECTION_ID()` in the statement's text is replaced by the
    /// client's id, with the column's name and type kept.
    Rewrite,
}

impl IdentityMode {
    pub fn as_str(self) -> &'static str {
        match self {
            IdentityMode::PseudoThreadId => "pseudo_thread_id",
            IdentityMode::Rewrite => "rewrite",
        }
    }
}

/// The mode of each backend account seen so far.
#[derive(Debug, Default)]
pub struct IdentityModes {
    by_user: Mutex<BTreeMap<String, IdentityMode>>,
}

impl IdentityModes {
    /// The account's mode, `None` before its first login.
    pub fn mode(&self, user: &str) -> Option<IdentityMode> {
        self.lock().get(user).copied()
    }

    /// Every account's mode, by name (SHOW SERVERS).
    pub fn all(&self) -> Vec<(String, IdentityMode)> {
        self.lock().iter().map(|(u, m)| (u.clone(), *m)).collect()
    }

    /// Sets an account's mode without probing or logging (sluice's own service accounts,
    /// which never present a client's id).
    pub fn preset(&self, user: &str, mode: IdentityMode) {
        self.lock().insert(user.to_string(), mode);
    }

    /// Records what a login found; the first finding per account is logged (at WARN for the
    /// rewrite, with the GRANT that would switch it). Later findings change nothing: a
    /// GRANT given while sluice runs takes effect at its next start.
    pub fn record(
        &self,
        user: &str,
        mode: IdentityMode,
        server: &ServerInfo,
        refusal: Option<&str>,
    ) {
        let mut map = self.lock();
        if map.contains_key(user) {
            return;
        }
        map.insert(user.to_string(), mode);
        drop(map);
        match mode {
            IdentityMode::PseudoThreadId => tracing::info!(
                backend_user = user,
                "CONNECTION_ID(): the backend account may set pseudo_thread_id; clients see their own id everywhere"
            ),
            IdentityMode::Rewrite => tracing::warn!(
                backend_user = user,
                "CONNECTION_ID(): the backend account may not set pseudo_thread_id ({}); sluice puts each \
                 client's id into the SQL text instead, which stored routines, views and triggers do not see. \
                 To switch: {}",
                refusal.unwrap_or("refused"),
                grant_advice(user, server)
            ),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, IdentityMode>> {
        self.by_user.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The GRANT that lets `user` set pseudo_thread_id on this server.
pub fn grant_advice(user: &str, server: &ServerInfo) -> String {
    let mariadb = server.version.windows(7).any(|w| w == b"MariaDB");
    if mariadb {
        format!("GRANT BINLOG REPLAY ON *.* TO '{user}'@'%' (MariaDB 10.5.2+; SUPER also works)")
    } else {
        format!("GRANT SESSION_VARIABLES_ADMIN ON *.* TO '{user}'@'%' (MySQL 8; or SYSTEM_VARIABLES_ADMIN)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::backend::probe_sql;

    #[test]
    fn the_first_finding_per_account_wins() {
        let m = IdentityModes::default();
        let server = ServerInfo::fallback();
        assert_eq!(m.mode("app"), None);
        m.record("app", IdentityMode::Rewrite, &server, Some("1227"));
        m.record("app", IdentityMode::PseudoThreadId, &server, None);
        m.record("root", IdentityMode::PseudoThreadId, &server, None);
        assert_eq!(m.mode("app"), Some(IdentityMode::Rewrite));
        assert_eq!(
            m.all(),
            vec![
                ("app".to_string(), IdentityMode::Rewrite),
                ("root".to_string(), IdentityMode::PseudoThreadId)
            ]
        );
        assert_eq!(&probe_sql(7)[1..], b"SET @@SESSION.pseudo_thread_id = 7");
        assert!(grant_advice("app", &server).starts_with("GRANT SESSION_VARIABLES_ADMIN"));
        let mut maria = server.clone();
        maria.version = b"5.5.5-10.11.19-MariaDB".to_vec();
        assert!(grant_advice("app", &maria).starts_with("GRANT BINLOG REPLAY ON *.* TO 'app'"));
    }
}
