//! Binary prepared statements, virtualised: each client gets its own statement ids; the SQL
//! is prepared lazily on whichever backend runs it, ids are rewritten in every statement
//! command, and parameter types are re-sent where a backend has not seen them. The packet
//! layouts are `protocol::stmt_execute` / `stmt_bulk_execute`'s; the session's commands
//! are in `handlers`; a statement that reads ROW_COUNT() or FOUND_ROWS() runs as a copy with
//! the session's values in its text (`variants`).

use rustc_hash::FxHashMap;
use std::sync::Arc;

use crate::conn::stmts::{stmt_key, Parse, StmtKey};
use crate::conn::BackendConn;
use crate::protocol::{command::set_stmt_id, frame, stmt_bulk_execute, stmt_execute, ResponseKind};

mod handlers;
mod variants;

pub(crate) use variants::{Bound, OutcomeCalls};

/// What a PREPARE made of one text under one parse. Every id a session prepares for the same
/// key shares one (`ClientStmts::define`): a client that prepares a text again without
/// closing the last one holds another id, not another copy of the text and its parse.
pub(crate) struct StmtDef {
    pub(crate) key: StmtKey,
    /// Where the SQL text starts in `key` (the key ends with it).
    sql_at: usize,
    /// The state the client prepared it under; a backend that lacks it prepares it so.
    pub(crate) parse: Arc<Parse>,
    pub(crate) params: u16,
    /// What an execution asks of the session (the identity it shows, its locks and pins).
    pub(crate) rules: crate::session::state::Rules,
    /// The classifier proved it a read that may be pipelined (`statement::reads_only`).
    pub(crate) reads_only: bool,
    /// What its text tells the router: an execution without a cursor of a replica-safe
    /// read may run on a replica, as the same text sent as a query would.
    pub(crate) route: crate::session::route::Pending,
    /// Its ROW_COUNT() and FOUND_ROWS() calls, if any (`variants`).
    pub(crate) outcome_calls: Option<Box<OutcomeCalls>>,
    /// Its text's digest, which every execution records under: made at PREPARE when
    /// something reads digests, else at the first execution that needs it.
    pub(crate) digest: std::sync::OnceLock<crate::classify::Digest>,
}

impl StmtDef {
    pub(crate) fn sql(&self) -> &[u8] {
        &self.key[self.sql_at..]
    }
}

/// What the classifier makes of a statement's text, for `ClientStmts::define`.
pub(crate) struct Meaning {
    pub(crate) rules: crate::session::state::Rules,
    pub(crate) reads_only: bool,
    pub(crate) route: crate::session::route::Pending,
    pub(crate) outcome_calls: Option<Box<OutcomeCalls>>,
    pub(crate) digest: Option<crate::classify::Digest>,
}

/// One client statement id: the statement it names, and the types last bound to it.
#[derive(Clone)]
pub(crate) struct ClientStmt {
    pub(crate) def: Arc<StmtDef>,
    /// The parameter types the client last bound (sent once, with new-params-bound = 1).
    pub(crate) types: Option<Vec<u8>>,
    /// The copy of `def` that holds its long data or cursor on a backend, when it runs as
    /// one with values in its text (`variants`).
    pub(crate) bound: Option<Bound>,
}

#[derive(Default)]
pub(crate) struct ClientStmts {
    // FxHash: looked up on every execution, and the ids are sluice's own (`next_id`).
    map: FxHashMap<u32, ClientStmt>,
    /// The definitions the ids in `map` name, one per key, with how many ids name each.
    defs: FxHashMap<StmtKey, (Arc<StmtDef>, u32)>,
    next_id: u32,
    /// The id the last successful PREPARE got.
    last: Option<u32>,
}

/// MariaDB's statement id for "the one this connection prepared last": Connector/C sends
/// PREPARE and EXECUTE(-1) back to back (`mariadb_stmt_execute_direct`).
pub(crate) const LAST_PREPARED: u32 = u32::MAX;

impl ClientStmts {
    pub(crate) fn next_id(&mut self) -> u32 {
        let bump = |id: u32| match id.wrapping_add(1) {
            0 | LAST_PREPARED => 1,
            n => n,
        };
        self.next_id = bump(self.next_id);
        while self.map.contains_key(&self.next_id) {
            self.next_id = bump(self.next_id);
        }
        self.next_id
    }
    /// The definition of `sql` prepared under `parse` with `params` parameters: the one an
    /// id of this session already names, or a new one (`meaning` classifies its text, and
    /// its parse is shared with the definitions held when equal: it rarely changes).
    pub(crate) fn define(
        &mut self,
        parse: Parse,
        sql: &[u8],
        params: u16,
        meaning: impl FnOnce() -> Meaning,
    ) -> Arc<StmtDef> {
        let key = stmt_key(&parse, sql);
        if let Some((def, _)) = self.defs.get(&key).filter(|(d, _)| d.params == params) {
            return def.clone();
        }
        let parse = match self.defs.values().next() {
            Some((d, _)) if *d.parse == parse => d.parse.clone(),
            _ => Arc::new(parse),
        };
        let Meaning {
            rules,
            reads_only,
            route,
            outcome_calls,
            digest,
        } = meaning();
        Arc::new(StmtDef {
            sql_at: key.len() - sql.len(),
            key,
            parse,
            params,
            rules,
            reads_only,
            route,
            outcome_calls,
            digest: digest.map(Into::into).unwrap_or_default(),
        })
    }
    pub(crate) fn insert(&mut self, id: u32, stmt: ClientStmt) {
        match self.defs.get_mut(&stmt.def.key) {
            Some((def, ids)) if Arc::ptr_eq(def, &stmt.def) => *ids += 1,
            // Another definition of the key (the server counted other parameters): the
            // new one is shared from now on, the ids naming the old keep theirs.
            _ => {
                let entry = (stmt.def.clone(), 1);
                self.defs.insert(stmt.def.key.clone(), entry);
            }
        }
        if let Some(old) = self.map.insert(id, stmt) {
            self.drop_def(&old.def);
        }
        self.last = Some(id);
    }
    /// The id a command means: `LAST_PREPARED` stands for the last prepared statement.
    pub(crate) fn resolve(&self, id: u32) -> u32 {
        match (id, self.last) {
            (LAST_PREPARED, Some(last)) => last,
            _ => id,
        }
    }
    pub(crate) fn get(&self, id: u32) -> Option<&ClientStmt> {
        self.map.get(&id)
    }
    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut ClientStmt> {
        self.map.get_mut(&id)
    }
    pub(crate) fn remove(&mut self, id: u32) -> Option<ClientStmt> {
        let stmt = self.map.remove(&id)?;
        self.drop_def(&stmt.def);
        Some(stmt)
    }
    /// One id less names `def`; forgotten once none does.
    fn drop_def(&mut self, def: &Arc<StmtDef>) {
        if let Some((held, ids)) = self.defs.get_mut(&def.key) {
            if Arc::ptr_eq(held, def) {
                *ids -= 1;
                if *ids == 0 {
                    self.defs.remove(&def.key);
                }
            }
        }
    }
    pub(crate) fn forget_last(&mut self) {
        self.last = None;
    }
    pub(crate) fn clear(&mut self) {
        self.map.clear();
        self.defs.clear();
        self.last = None;
    }
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

pub(crate) use stmt_execute::bound_types;

/// The execute packet for a backend: its statement id, and the client's types spliced in
/// when the client did not send them but the backend's copy has other (or no) types.
/// Returns the framed packet and the types the backend will hold afterwards.
pub(crate) fn execute_for_backend(
    payload: &[u8],
    backend_id: u32,
    stmt: &ClientStmt,
    backend_types: Option<&[u8]>,
) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut body = payload.to_vec();
    let mut holds = backend_types.map(<[u8]>::to_vec);
    if let Some(l) = stmt_execute::layout(payload, stmt.def.params) {
        if l.bound {
            holds = bound_types(payload, stmt.def.params);
        } else if let Some(types) = types_missing_on(stmt, backend_types) {
            body = stmt_execute::with_types(payload, l, types);
            holds = Some(types.clone());
        }
    }
    (addressed(body, backend_id), holds)
}

/// The client's known parameter types, when the backend's copy holds other (or no) types.
fn types_missing_on<'a>(stmt: &'a ClientStmt, backend_types: Option<&[u8]>) -> Option<&'a Vec<u8>> {
    stmt.types
        .as_ref()
        .filter(|t| Some(t.as_slice()) != backend_types)
}

/// `body` with its statement id set to `backend_id`, framed.
fn addressed(mut body: Vec<u8>, backend_id: u32) -> Vec<u8> {
    let _ = set_stmt_id(&mut body, backend_id);
    let mut out = bytes::BytesMut::with_capacity(body.len() + 4);
    frame::write_packet(&mut out, 0, &body);
    out.to_vec()
}

/// A command addressed to a prepared statement that runs on a backend (CLOSE is answered by
/// sluice itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StmtCmd {
    Execute,
    /// MariaDB's COM_STMT_BULK_EXECUTE.
    BulkExecute,
    Fetch,
    SendLongData,
    Reset,
}

impl StmtCmd {
    /// The name the server gives the command in errors.
    pub(crate) fn name(self) -> &'static str {
        match self {
            StmtCmd::Execute => "mysqld_stmt_execute",
            StmtCmd::BulkExecute => "mysqld_stmt_bulk_execute",
            StmtCmd::Fetch => "mysqld_stmt_fetch",
            StmtCmd::SendLongData => "mysqld_stmt_send_long_data",
            StmtCmd::Reset => "mysqld_stmt_reset",
        }
    }

    pub(crate) fn response(self) -> ResponseKind {
        match self {
            // A bulk answers like an execute: OK, or a result set (RETURNING).
            StmtCmd::Execute | StmtCmd::BulkExecute => ResponseKind::Execute,
            StmtCmd::Fetch => ResponseKind::Fetch,
            StmtCmd::SendLongData => ResponseKind::None,
            StmtCmd::Reset => ResponseKind::Simple,
        }
    }

    /// Runs the statement (rather than fetching from, feeding or resetting it).
    pub(crate) fn runs(self) -> bool {
        matches!(self, StmtCmd::Execute | StmtCmd::BulkExecute)
    }

    /// The parameter types the client sent with this command, if any.
    pub(crate) fn sent_types(self, payload: &[u8], params: u16) -> Option<Vec<u8>> {
        match self {
            StmtCmd::Execute => bound_types(payload, params),
            StmtCmd::BulkExecute => bulk_types(payload, params),
            _ => None,
        }
    }

    /// The packet for `backend`, addressed to its own copy of `stmt` (with the parameter
    /// types that copy lacks, for a command that runs the statement, which the copy holds
    /// from then on); `None` when `backend` does not hold the statement.
    pub(crate) fn on_backend(
        self,
        payload: &[u8],
        stmt: &ClientStmt,
        backend: &mut BackendConn,
    ) -> Option<Vec<u8>> {
        // One lookup for the held types and their update (the key is the SQL text).
        let held = backend.stmts.get(&stmt.def.key)?;
        if !self.runs() {
            return Some(self.for_backend(payload, held.id, stmt, None).0);
        }
        let (packet, holds) = self.for_backend(payload, held.id, stmt, held.types.as_deref());
        held.types = holds;
        Some(packet)
    }

    /// The packet for a backend whose copy of `stmt` is `backend_id` holding
    /// `backend_types`, and the types it holds afterwards.
    pub(crate) fn for_backend(
        self,
        payload: &[u8],
        backend_id: u32,
        stmt: &ClientStmt,
        backend_types: Option<&[u8]>,
    ) -> (Vec<u8>, Option<Vec<u8>>) {
        match self {
            StmtCmd::Execute => execute_for_backend(payload, backend_id, stmt, backend_types),
            StmtCmd::BulkExecute => bulk_for_backend(payload, backend_id, stmt, backend_types),
            _ => (
                addressed(payload.to_vec(), backend_id),
                backend_types.map(<[u8]>::to_vec),
            ),
        }
    }
}

pub(crate) use stmt_bulk_execute::sent_types as bulk_types;

/// A bulk command for a backend, like `execute_for_backend`: the statement id, and the
/// client's known types spliced in when it sent none and the backend's copy holds others.
pub(crate) fn bulk_for_backend(
    payload: &[u8],
    backend_id: u32,
    stmt: &ClientStmt,
    backend_types: Option<&[u8]>,
) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut body = payload.to_vec();
    let mut holds = backend_types.map(<[u8]>::to_vec);
    if let Some(sent) = bulk_types(payload, stmt.def.params) {
        holds = Some(sent);
    } else if let Some((typed, types)) = types_missing_on(stmt, backend_types)
        .and_then(|t| Some((stmt_bulk_execute::with_types(payload, t)?, t)))
    {
        body = typed;
        holds = Some(types.clone());
    }
    (addressed(body, backend_id), holds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(schema: Option<&[u8]>) -> Parse {
        Parse {
            schema: schema.map(<[u8]>::to_vec),
            vars: vec![Some(b"STRICT_TRANS_TABLES".to_vec()), None],
        }
    }

    fn meaning() -> Meaning {
        Meaning {
            rules: Default::default(),
            reads_only: false,
            route: Default::default(),
            outcome_calls: None,
            digest: None,
        }
    }

    fn stmt(params: u16, types: Option<Vec<u8>>) -> ClientStmt {
        let def = ClientStmts::default().define(parse(None), b"SELECT ?", params, meaning);
        ClientStmt {
            def,
            types,
            bound: None,
        }
    }

    /// Prepares `sql` under `schema` as a session does, with a new id.
    fn prepare(c: &mut ClientStmts, schema: Option<&[u8]>, sql: &[u8]) -> u32 {
        let def = c.define(parse(schema), sql, 1, meaning);
        let id = c.next_id();
        c.insert(
            id,
            ClientStmt {
                def,
                types: None,
                bound: None,
            },
        );
        id
    }

    #[test]
    fn ids_of_one_text_share_its_definition_until_the_last_is_closed() {
        let mut c = ClientStmts::default();
        let ids: Vec<u32> = (0..100)
            .map(|_| prepare(&mut c, Some(b"db"), b"SELECT ? + 1"))
            .collect();
        let first = c.get(ids[0]).map(|s| s.def.clone()).expect("held");
        assert_eq!(first.sql(), b"SELECT ? + 1");
        assert_eq!(c.defs.len(), 1);
        assert!(ids
            .iter()
            .all(|id| Arc::ptr_eq(&c.get(*id).expect("held").def, &first)));
        // Another text shares the parse; another schema is another statement.
        let other = prepare(&mut c, Some(b"db"), b"SELECT ? + 2");
        let elsewhere = prepare(&mut c, Some(b"other"), b"SELECT ? + 1");
        let (other, elsewhere) = (c.get(other).unwrap(), c.get(elsewhere).unwrap());
        assert!(Arc::ptr_eq(&other.def.parse, &first.parse));
        assert!(!Arc::ptr_eq(&elsewhere.def, &first));
        assert_eq!(c.defs.len(), 3);
        for id in &ids[1..] {
            c.remove(*id);
        }
        assert!(c.defs.contains_key(&first.key), "one id still names it");
        c.remove(ids[0]);
        assert!(!c.defs.contains_key(&first.key));
        c.clear();
        assert!(c.defs.is_empty() && c.is_empty());
    }

    /// BULK_EXECUTE stmt 5, one BIGINT param, no types sent, rows: indicator 0 + 41.
    const BULK_UNTYPED: &[u8] = &[0xFA, 5, 0, 0, 0, 0, 0, 0, 41, 0, 0, 0, 0, 0, 0, 0];

    #[test]
    fn bulk_gets_the_known_types_where_the_backend_lacks_them() {
        let s = stmt(1, Some(vec![0x08, 0x00]));
        let (packet, holds) = bulk_for_backend(BULK_UNTYPED, 9, &s, None);
        let body = &packet[4..];
        assert_eq!(&body[..5], &[0xFA, 9, 0, 0, 0]);
        assert_eq!(&body[5..7], &128u16.to_le_bytes());
        assert_eq!(&body[7..9], &[0x08, 0x00]);
        assert_eq!(&body[9..], &BULK_UNTYPED[7..]);
        assert_eq!(holds, Some(vec![0x08, 0x00]));
        assert_eq!(bulk_types(body, 1), Some(vec![0x08, 0x00]));
        // The backend already holds them: only the id changes.
        let (packet, _) = bulk_for_backend(BULK_UNTYPED, 9, &s, Some(&[0x08, 0x00]));
        assert_eq!(&packet[4 + 5..], &BULK_UNTYPED[5..]);
    }

    #[test]
    fn last_prepared_resolves_until_a_prepare_fails() {
        let mut c = ClientStmts::default();
        assert_eq!(c.resolve(LAST_PREPARED), LAST_PREPARED);
        let id = c.next_id();
        c.insert(id, stmt(0, None));
        assert_eq!(c.resolve(LAST_PREPARED), id);
        assert_eq!(c.resolve(id), id);
        c.forget_last();
        assert_eq!(c.resolve(LAST_PREPARED), LAST_PREPARED);
    }

    /// EXECUTE stmt 5, one BIGINT (0x08) param = 41, with types.
    const BOUND: &[u8] = &[
        0x17, 5, 0, 0, 0, 0, 1, 0, 0, 0, 0x00, 0x01, 0x08, 0x00, 41, 0, 0, 0, 0, 0, 0, 0,
    ];
    /// The same without types (new-params-bound = 0).
    const UNBOUND: &[u8] = &[
        0x17, 5, 0, 0, 0, 0, 1, 0, 0, 0, 0x00, 0x00, 41, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn reads_bound_types() {
        assert_eq!(bound_types(BOUND, 1), Some(vec![0x08, 0x00]));
        assert_eq!(bound_types(UNBOUND, 1), None);
        assert_eq!(bound_types(&[0x17, 1], 1), None);
    }

    #[test]
    fn splices_types_for_a_backend_that_lacks_them() {
        let s = stmt(1, Some(vec![0x08, 0x00]));
        let (packet, holds) = execute_for_backend(UNBOUND, 9, &s, None);
        assert_eq!(
            &packet[4..],
            &[&[0x17, 9, 0, 0, 0][..], &BOUND[5..]].concat()[..]
        );
        assert_eq!(holds, Some(vec![0x08, 0x00]));
        // A backend that already holds the same types gets the packet as sent.
        let (packet, _) = execute_for_backend(UNBOUND, 9, &s, Some(&[0x08, 0x00]));
        assert_eq!(
            &packet[4..],
            &[&[0x17, 9, 0, 0, 0][..], &UNBOUND[5..]].concat()[..]
        );
    }

    #[test]
    fn client_ids_are_unique_and_nonzero() {
        let mut c = ClientStmts::default();
        let a = c.next_id();
        c.insert(a, stmt(0, None));
        let b = c.next_id();
        assert!(a != 0 && b != 0 && a != b);
    }
}
