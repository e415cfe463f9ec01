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
//! A read of `@@pseudo_thread_id` is the same id, typed as the variable.
//!
//! A rewritten query the server cannot parse ran nothing: the client's own text runs in its
//! place (`session::path`), so that the error quotes what the client wrote.

use crate::classify::{Classification, Effect, IdCall};
use crate::conn::identity::IdentityMode;
use crate::protocol::request::query as query_payload;

use super::state::{LastInsertId, Rules};
use super::Session;

/// Longest select-item text used as an alias (MySQL allows 256 characters for a name).
const MAX_ALIAS: usize = 250;

/// `sql` with each call replaced by the client's `id`, and the unnamed select items that
/// hold one named after their original text.
pub(crate) fn with_client_id(sql: &[u8], calls: &[IdCall], id: u32) -> Vec<u8> {
    let values = ClientId::new(id);
    with_values(sql, calls.iter().map(|c| (c, values.of(sql, c))))
}

/// What the client's id replaces: a `CONNECTION_ID()` call, or a read of
/// `@@pseudo_thread_id`, each typed as what it replaces.
struct ClientId {
    /// INT UNSIGNED, length 10, NOT NULL on MariaDB (MySQL 8: BIGINT UNSIGNED).
    call: Vec<u8>,
    /// BIGINT UNSIGNED, length 21, nullable, as the variable.
    variable: Vec<u8>,
}

impl ClientId {
    fn new(id: u32) -> ClientId {
        ClientId {
            call: format!("IFNULL(CAST({id} AS UNSIGNED), CONNECTION_ID())").into_bytes(),
            variable: format!("IF(1, CAST({id} AS UNSIGNED), @@pseudo_thread_id)").into_bytes(),
        }
    }

    /// The text for `call` (the classifier's span of a variable starts at its `@@`).
    fn of(&self, sql: &[u8], call: &IdCall) -> &[u8] {
        match sql.get(call.span.start) {
            Some(b'@') => &self.variable,
            _ => &self.call,
        }
    }
}

/// `sql` with each call replaced by its text, and the unnamed select items that hold one
/// named after their original text (the server names such a column after the item).
pub(super) fn with_values<'a>(
    sql: &[u8],
    calls: impl Iterator<Item = (&'a IdCall, &'a [u8])>,
) -> Vec<u8> {
    // (position, bytes of the original replaced from there, text put there), in order.
    let mut edits: Vec<(usize, usize, Vec<u8>)> = Vec::new();
    for (call, value) in calls {
        edits.push((call.span.start, call.span.len(), value.to_vec()));
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

/// The `ROW_COUNT()` and `FOUND_ROWS()` calls whose values go in the text, each with its
/// value (`Session::outcome_for_text`).
pub(super) fn outcome_calls<'a>(
    (row_count_calls, row_count): (&'a [IdCall], Option<i64>),
    (found_rows_calls, found_rows): (&'a [IdCall], Option<i64>),
) -> Vec<(&'a IdCall, Vec<u8>)> {
    let mut all = Vec::new();
    for (calls, value, function) in [
        (row_count_calls, row_count, "ROW_COUNT"),
        (found_rows_calls, found_rows, "FOUND_ROWS"),
    ] {
        if let Some(v) = value.map(|v| outcome_value(v, function).into_bytes()) {
            all.extend(calls.iter().map(|c| (c, v.clone())));
        }
    }
    all
}

impl Session {
    /// How the session's backend account shows CONNECTION_ID() (`None` before its first login).
    pub(super) fn id_mode(&self) -> Option<IdentityMode> {
        self.held.target.identity.mode(&self.held.target.user)
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

    /// A query's text as it must run: `rewritten_sql`'s, and the calls whose value the
    /// backend may not have put there in its place: `ROW_COUNT()` and `FOUND_ROWS()` as the
    /// session's previous statement left them, where known, unless the backend the session
    /// holds has them from its own statement (`Visible::row_count_of`); `LAST_INSERT_ID()`
    /// as the session's own, in a
    /// single statement that does not set it, when the backend may have another (then
    /// `rules` presents nothing more); `IS_USED_LOCK()` with the holder's client id for
    /// every session holding named locks. A prepared statement keeps its calls: its
    /// executions run later, after other statements.
    pub(super) fn rewritten_query(
        &self,
        sql: &[u8],
        class: &Classification,
        rules: &mut Rules,
    ) -> Option<Vec<u8>> {
        // Almost every query: no call to replace, nothing to format.
        if class.id_calls.is_empty()
            && class.row_count_calls.is_empty()
            && class.found_rows_calls.is_empty()
            && class.last_insert_id_calls.is_empty()
            && class.lock_holder_calls.is_empty()
        {
            return None;
        }
        let mut all: Vec<(&IdCall, Vec<u8>)> = Vec::new();
        if !class.id_calls.is_empty() && self.id_mode() != Some(IdentityMode::PseudoThreadId) {
            let values = ClientId::new(self.reg.info.id);
            all.extend(
                class
                    .id_calls
                    .iter()
                    .map(|c| (c, values.of(sql, c).to_vec())),
            );
        }
        // The server's values are the session's only on the backend it holds, where its
        // own statement set them last.
        let (row_count, found_rows) = self.outcome_for_text();
        all.extend(outcome_calls(
            (&class.row_count_calls, row_count),
            (&class.found_rows_calls, found_rows),
        ));
        if let Some(v) = self.last_insert_id_in_text(class).map(String::into_bytes) {
            all.extend(class.last_insert_id_calls.iter().map(|c| (c, v.clone())));
            rules.presents.last_insert_id = false;
        }
        if !class.lock_holder_calls.is_empty() {
            // The statement runs on the writer (a lock is no replica's), as do the holders.
            let writer = self
                .ctx
                .topology()
                .topology
                .writer()
                .unwrap_or(self.held.server);
            let holders = self.ctx.registry.lock_holders(writer as u32);
            if !holders.is_empty() {
                for c in &class.lock_holder_calls {
                    all.push((c, lock_holder_value(&sql[c.span.clone()], &holders)));
                }
            }
        }
        if all.is_empty() {
            return None;
        }
        Some(with_values(
            sql,
            all.iter().map(|(c, v)| (*c, v.as_slice())),
        ))
    }

    /// The text for the session's LAST_INSERT_ID() calls, when they go in the text: a single
    /// statement that does not set the value, of a session that knows its value while the
    /// backend it holds (if any) may have another.
    fn last_insert_id_in_text(&self, class: &Classification) -> Option<String> {
        let LastInsertId::Known(v) = self.state.last_insert_id else {
            return None;
        };
        let settles = class.multi_statement || class.effects.contains(&Effect::LastInsertIdSet);
        let held = self
            .held
            .backend
            .as_ref()
            .is_some_and(|b| b.visible.last_insert_id == Some(v));
        (!class.last_insert_id_calls.is_empty() && !settles && !held)
            .then(|| format!("IFNULL(CAST({v} AS UNSIGNED), LAST_INSERT_ID())"))
    }

    /// Lists the session among the lock holders while it holds named locks, on the backend
    /// it keeps for them (each statement's end; almost always nothing changes).
    pub(super) fn list_lock_holder(&mut self) {
        let holds = self.state.holds_named_lock();
        if holds == self.held.lock_listing.is_some() {
            return;
        }
        self.held.lock_listing = match self.held.backend.as_ref().filter(|_| holds) {
            Some(b) => Some(self.ctx.registry.hold_locks(
                self.reg.info.id,
                self.held.server as u32,
                b.thread_id,
            )),
            None => None,
        };
    }

    /// The SET that makes the backend show the session's values where the statement can
    /// see them, sent in the same write just before it (`values::Around`): the client's id
    /// as CONNECTION_ID() (when the account sets `pseudo_thread_id`), and its
    /// LAST_INSERT_ID() for a statement that reads the value or may change it (so that what
    /// is read back after it is the session's). `None`: the backend shows them already.
    pub(super) fn presenting(&self, rules: &Rules) -> Option<Presenting> {
        let b = self.held.backend.as_ref()?;
        let id = self.reg.info.id;
        let pseudo = rules.presents.connection_id
            && self.id_mode() == Some(IdentityMode::PseudoThreadId)
            && b.pseudo_id != id;
        let value = match self.state.last_insert_id {
            LastInsertId::Known(v)
                if rules.presents.last_insert_id || rules.sets_last_insert_id =>
            {
                Some(v).filter(|v| b.visible.last_insert_id != Some(*v))
            }
            // Unknown to sluice: the backend the session holds has it.
            _ => None,
        };
        let mut sets = Vec::new();
        if pseudo {
            sets.push(format!("@@SESSION.pseudo_thread_id = {id}"));
        }
        if let Some(v) = value {
            sets.push(format!("@@SESSION.last_insert_id = {v}"));
        }
        if sets.is_empty() {
            return None;
        }
        let sql = format!("SET {}", sets.join(", "));
        Some(Presenting {
            packet: super::framed(&query_payload(sql.as_bytes())),
            pseudo_id: pseudo.then_some(id),
            last_insert_id: value,
        })
    }

    /// Records what a `presenting` SET set, once the relay has read its answer.
    pub(super) fn presented(&mut self, p: &Presenting, failed: bool) {
        let Some(b) = self.held.backend.as_mut() else {
            return;
        };
        if failed {
            // The probe said the account may; a GRANT revoked since then shows here.
            tracing::warn!(
                client = self.reg.info.id,
                "cannot present the session's identity: the SET before its statement failed"
            );
            return;
        }
        if let Some(id) = p.pseudo_id {
            b.pseudo_id = id;
        }
        if let Some(v) = p.last_insert_id {
            b.visible.last_insert_id = Some(v);
        }
    }
}

/// A SET sent before a statement (`Session::presenting`), and what it sets.
pub(super) struct Presenting {
    pub(crate) packet: bytes::Bytes,
    pub(crate) pseudo_id: Option<u32>,
    pub(crate) last_insert_id: Option<u64>,
}

/// What an `IS_USED_LOCK(...)` call (`call`, its text) becomes while sessions of sluice hold
/// named locks: their backends' thread ids mapped to their client ids, any other holder (a
/// direct connection) as the server names it; typed as the function itself (INT, length 10,
/// nullable) while the ids have at most nine digits.
fn lock_holder_value(call: &[u8], holders: &[(u32, u32)]) -> Vec<u8> {
    let mut out = b"CASE ".to_vec();
    out.extend_from_slice(call);
    for (thread, client) in holders {
        out.extend_from_slice(format!(" WHEN {thread} THEN {client}").as_bytes());
    }
    out.extend_from_slice(b" ELSE ");
    out.extend_from_slice(call);
    out.extend_from_slice(b" END");
    out
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
        let calls = c.row_count_calls.iter().map(|x| (x, rc.as_bytes()));
        let all: Vec<_> = calls
            .chain(c.found_rows_calls.iter().map(|x| (x, fr.as_bytes())))
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
