//! The client's identity on a shared backend: `CONNECTION_ID()` returns the id sluice gave the
//! client in its handshake, and `LAST_INSERT_ID()` the session's own last insert, whichever
//! backend runs the statement.
//!
//! CONNECTION_ID() has two ways (`conn::identity::IdentityMode`, found per backend account):
//! an account that may set `pseudo_thread_id` gets it set before each statement that can
//! observe the id; for one that may not, each call the classifier found in the statement's
//! text is replaced by `IFNULL(CAST(<id> AS UNSIGNED), CONNECTION_ID())`, an expression the
//! server types exactly as the function itself (on MariaDB INT UNSIGNED, length 10, NOT NULL;
//! on MySQL 8 BIGINT UNSIGNED), and a select item without an alias gets its original text as
//! one, so a driver sees the same column name. The text differs per client, so a prepared
//! statement with such a call is cached per client (its backend key is the rewritten text).

use crate::classify::{Classification, IdCall};
use crate::conn::backend::Health;
use crate::conn::identity::IdentityMode;
use crate::protocol::request::query as query_payload;

use super::state::Presents;
use super::Session;

/// Longest select-item text used as an alias (MySQL allows 256 characters for a name).
const MAX_ALIAS: usize = 250;

/// `sql` with each call replaced by the client's `id`, and the unnamed select items that
/// hold one named after their original text.
pub fn with_client_id(sql: &[u8], calls: &[IdCall], id: u32) -> Vec<u8> {
    let value = client_id_value(id);
    with_values(sql, calls.iter().map(|c| (c, value.as_str())))
}

/// What a CONNECTION_ID() call becomes: the client's id, typed as the function itself.
fn client_id_value(id: u32) -> String {
    format!("IFNULL(CAST({id} AS UNSIGNED), CONNECTION_ID())")
}

/// `sql` with each call replaced by its text, and the unnamed select items that hold one
/// named after their original text (the server names such a column after the item).
fn with_values<'a>(sql: &[u8], calls: impl Iterator<Item = (&'a IdCall, &'a str)>) -> Vec<u8> {
    // (position, bytes of the original replaced from there, text put there), in order.
    let mut edits: Vec<(usize, usize, Vec<u8>)> = Vec::new();
    for (call, value) in calls {
        edits.push((call.span.start, call.span.len(), value.as_bytes().to_vec()));
        if let Some(item) = call.unnamed_item.clone().filter(|r| r.len() <= MAX_ALIAS) {
            let mut alias = b" AS `".to_vec();
            for &b in &sql[item.clone()] {
                if b == b'`' {
                    alias.push(b'`');
                }
                alias.push(b);
            }
            alias.push(b'`');
            edits.push((item.end, 0, alias));
        }
    }
    // At one position, the replacement of a call comes before the alias of its item.
    edits.sort_by_key(|(at, len, _)| (*at, usize::from(*len == 0)));
    let grown: usize = edits.iter().map(|(_, _, t)| t.len()).sum();
    let mut out = Vec::with_capacity(sql.len() + grown);
    let mut pos = 0;
    for (at, len, text) in edits {
        if at < pos {
            continue; // overlapping spans cannot come from the classifier; keep the text
        }
        out.extend_from_slice(&sql[pos..at]);
        out.extend_from_slice(&text);
        pos = at + len;
    }
    out.extend_from_slice(&sql[pos..]);
    out
}

/// `ROW_COUNT()` / `FOUND_ROWS()` as the previous statement left them: typed by the server
/// as the function itself (BIGINT, length 21, NOT NULL).
fn outcome_value(value: i64, function: &str) -> String {
    format!("IFNULL(CAST({value} AS SIGNED), {function}())")
}

impl Session {
    /// How the session's backend account shows CONNECTION_ID() (`None` before its first login).
    pub(super) fn id_mode(&self) -> Option<IdentityMode> {
        self.target.identity.mode(&self.target.user)
    }

    /// The statement's text with the client's id in place of its CONNECTION_ID() calls, when
    /// the backend account cannot present the id itself. Before the account's first login the
    /// mode is not known: the rewrite is right in both modes, so it is used.
    pub(super) fn rewritten_sql(&self, sql: &[u8], class: &Classification) -> Option<Vec<u8>> {
        if class.id_calls.is_empty() || self.id_mode() == Some(IdentityMode::PseudoThreadId) {
            return None;
        }
        Some(with_client_id(sql, &class.id_calls, self.reg.info.id))
    }

    /// A query's text as it must run: `rewritten_sql`'s, and, for a session that holds no
    /// backend (so its previous statement may have run on another), its `ROW_COUNT()` and
    /// `FOUND_ROWS()` calls replaced by what that statement left, where known. A prepared
    /// statement keeps its calls: its executions run later, after other statements.
    pub(super) fn rewritten_query(&self, sql: &[u8], class: &Classification) -> Option<Vec<u8>> {
        let id = self.rewritten_sql(sql, class);
        // Almost every query: no outcome call, nothing to format.
        if self.backend.is_some()
            || class.row_count_calls.is_empty() && class.found_rows_calls.is_empty()
        {
            return id;
        }
        let outcome = self.state.outcome;
        let row_count = outcome.row_count.map(|v| outcome_value(v, "ROW_COUNT"));
        let found_rows = outcome
            .found_rows
            .and_then(|v| i64::try_from(v).ok())
            .map(|v| outcome_value(v, "FOUND_ROWS"));
        if (class.row_count_calls.is_empty() || row_count.is_none())
            && (class.found_rows_calls.is_empty() || found_rows.is_none())
        {
            return id;
        }
        // The id calls were found in the original text: the outcome calls go in the same pass.
        let id_value = client_id_value(self.reg.info.id);
        let mut all: Vec<(&IdCall, &str)> = Vec::new();
        if id.is_some() {
            all.extend(class.id_calls.iter().map(|c| (c, id_value.as_str())));
        }
        for (list, value) in [
            (&class.row_count_calls, &row_count),
            (&class.found_rows_calls, &found_rows),
        ] {
            if let Some(v) = value.as_deref() {
                all.extend(list.iter().map(|c| (c, v)));
            }
        }
        Some(with_values(sql, all.into_iter()))
    }

    /// Makes the backend show the client's identity where the statement can see it. True
    /// if that took a round trip to the backend.
    pub(super) async fn present_identity(&mut self, presents: Presents) -> bool {
        let mut talked = false;
        if presents.connection_id && self.id_mode() == Some(IdentityMode::PseudoThreadId) {
            talked |= self.present_connection_id().await;
        }
        if presents.last_insert_id {
            talked |= self.present_last_insert_id().await;
        }
        talked
    }

    /// CONNECTION_ID() returns pseudo_thread_id: set it to the client's id first.
    async fn present_connection_id(&mut self) -> bool {
        let id = self.reg.info.id;
        let Some(b) = self.backend.as_mut() else {
            return false;
        };
        if b.pseudo_id == id {
            return false;
        }
        let sql = format!("SET @@SESSION.pseudo_thread_id = {id}");
        match b.run_simple(&query_payload(sql.as_bytes())).await {
            Ok(Ok(_)) => b.pseudo_id = id,
            Ok(Err(e)) => {
                // The probe said the account may; a GRANT revoked since then shows here.
                tracing::warn!(
                    client = id,
                    "cannot set pseudo_thread_id: {}",
                    String::from_utf8_lossy(&e.message)
                )
            }
            Err(_) => b.health = Health::Broken,
        }
        true
    }

    /// LAST_INSERT_ID() must return the id of the session's own last insert, which may have
    /// run on another backend: set it there first (one extra round trip, only for statements
    /// that read it).
    async fn present_last_insert_id(&mut self) -> bool {
        let id = self.state.last_insert_id;
        let Some(b) = self.backend.as_mut() else {
            return false;
        };
        if b.last_insert_id == id {
            return false;
        }
        let sql = format!("SET @@SESSION.last_insert_id = {id}");
        match b.run_simple(&query_payload(sql.as_bytes())).await {
            Ok(Ok(_)) => b.last_insert_id = id,
            Ok(Err(_)) => {}
            Err(_) => b.health = Health::Broken,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::classify;

    fn rewrite(sql: &str) -> String {
        let c = classify(sql.as_bytes());
        String::from_utf8(with_client_id(sql.as_bytes(), &c.id_calls, 42)).unwrap()
    }

    const V: &str = "IFNULL(CAST(42 AS UNSIGNED), CONNECTION_ID())";

    #[test]
    fn calls_become_the_client_id_and_bare_items_keep_their_name() {
        assert_eq!(
            rewrite("SELECT CONNECTION_ID()"),
            format!("SELECT {V} AS `CONNECTION_ID()`")
        );
        assert_eq!(
            rewrite("select connection_id(), 1 from dual where connection_id() > 0"),
            format!("select {V} AS `connection_id()`, 1 from dual where {V} > 0")
        );
        assert_eq!(
            rewrite("SELECT (SELECT CONNECTION_ID()) AS x"),
            format!("SELECT (SELECT {V} AS `CONNECTION_ID()`) AS x")
        );
        assert_eq!(
            rewrite("SELECT CONNECTION_ID()+1, 'CONNECTION_ID()'"),
            format!("SELECT {V}+1 AS `CONNECTION_ID()+1`, 'CONNECTION_ID()'")
        );
        assert_eq!(rewrite("SELECT 1"), "SELECT 1");
    }

    #[test]
    fn outcome_calls_become_the_previous_statements_values() {
        let sql = "SELECT ROW_COUNT(), FOUND_ROWS() AS f WHERE ROW_COUNT() > 0";
        let c = classify(sql.as_bytes());
        assert_eq!(c.row_count_calls.len(), 2);
        let (rc, fr) = (
            outcome_value(3, "ROW_COUNT"),
            outcome_value(-1, "FOUND_ROWS"),
        );
        let calls = c.row_count_calls.iter().map(|x| (x, rc.as_str()));
        let all: Vec<_> = calls
            .chain(c.found_rows_calls.iter().map(|x| (x, fr.as_str())))
            .collect();
        assert_eq!(
            String::from_utf8(with_values(sql.as_bytes(), all.into_iter())).unwrap(),
            "SELECT IFNULL(CAST(3 AS SIGNED), ROW_COUNT()) AS `ROW_COUNT()`, \
             IFNULL(CAST(-1 AS SIGNED), FOUND_ROWS()) AS f \
             WHERE IFNULL(CAST(3 AS SIGNED), ROW_COUNT()) > 0"
        );
        assert!(classify(b"SELECT 1").row_count_calls.is_empty());
    }
}
