//! Binary prepared statements, virtualised: each client gets its own statement ids; the SQL
//! is prepared lazily on whichever backend runs it, ids are rewritten in every statement
//! command, and parameter types are re-sent where a backend has not seen them. The packet
//! layouts are `protocol::stmt_execute` / `stmt_bulk_execute`'s; the session's commands
//! are in `handlers`.

use rustc_hash::FxHashMap;
use std::sync::Arc;

use crate::conn::stmts::StmtKey;
use crate::protocol::{command::set_stmt_id, frame, stmt_bulk_execute, stmt_execute, ResponseKind};

mod handlers;

#[derive(Clone)]
pub struct ClientStmt {
    pub key: StmtKey,
    pub sql: Arc<[u8]>,
    pub params: u16,
    /// The parameter types the client last bound (sent once, with new-params-bound = 1).
    pub types: Option<Vec<u8>>,
    /// What an execution asks of the session (the identity it shows, its locks and pins).
    pub(crate) rules: crate::session::state::Rules,
    /// The classifier proved it a read that may be pipelined (`pipeline::reads_only`).
    pub(crate) reads_only: bool,
    /// What its text tells the router: an execution without a cursor of a replica-safe
    /// read may run on a replica, as the same text sent as a query would.
    pub(crate) route: crate::session::route::Pending,
}

#[derive(Default)]
pub struct ClientStmts {
    // FxHash: looked up on every execution, and the ids are sluice's own (`next_id`).
    map: FxHashMap<u32, ClientStmt>,
    next_id: u32,
    /// The id the last successful PREPARE got.
    last: Option<u32>,
}

/// MariaDB's statement id for "the one this connection prepared last": Connector/C sends
/// PREPARE and EXECUTE(-1) back to back (`mariadb_stmt_execute_direct`).
pub const LAST_PREPARED: u32 = u32::MAX;

impl ClientStmts {
    pub fn next_id(&mut self) -> u32 {
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
    pub fn insert(&mut self, id: u32, stmt: ClientStmt) {
        self.map.insert(id, stmt);
        self.last = Some(id);
    }
    /// The id a command means: `LAST_PREPARED` stands for the last prepared statement.
    pub fn resolve(&self, id: u32) -> u32 {
        match (id, self.last) {
            (LAST_PREPARED, Some(last)) => last,
            _ => id,
        }
    }
    pub fn get(&self, id: u32) -> Option<&ClientStmt> {
        self.map.get(&id)
    }
    pub fn get_mut(&mut self, id: u32) -> Option<&mut ClientStmt> {
        self.map.get_mut(&id)
    }
    pub fn remove(&mut self, id: u32) -> Option<ClientStmt> {
        self.map.remove(&id)
    }
    pub fn forget_last(&mut self) {
        self.last = None;
    }
    pub fn clear(&mut self) {
        self.map.clear();
        self.last = None;
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

pub use stmt_execute::bound_types;

/// The execute packet for a backend: its statement id, and the client's types spliced in
/// when the client did not send them but the backend's copy has other (or no) types.
/// Returns the framed packet and the types the backend will hold afterwards.
pub fn execute_for_backend(
    payload: &[u8],
    backend_id: u32,
    stmt: &ClientStmt,
    backend_types: Option<&[u8]>,
) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut body = payload.to_vec();
    let mut holds = backend_types.map(<[u8]>::to_vec);
    if let Some(l) = stmt_execute::layout(payload, stmt.params) {
        if l.bound {
            holds = bound_types(payload, stmt.params);
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
pub enum StmtCmd {
    Execute,
    /// MariaDB's COM_STMT_BULK_EXECUTE.
    BulkExecute,
    Fetch,
    SendLongData,
    Reset,
}

impl StmtCmd {
    /// The name the server gives the command in errors.
    pub fn name(self) -> &'static str {
        match self {
            StmtCmd::Execute => "mysqld_stmt_execute",
            StmtCmd::BulkExecute => "mysqld_stmt_bulk_execute",
            StmtCmd::Fetch => "mysqld_stmt_fetch",
            StmtCmd::SendLongData => "mysqld_stmt_send_long_data",
            StmtCmd::Reset => "mysqld_stmt_reset",
        }
    }

    pub fn response(self) -> ResponseKind {
        match self {
            // A bulk answers like an execute: OK, or a result set (RETURNING).
            StmtCmd::Execute | StmtCmd::BulkExecute => ResponseKind::Execute,
            StmtCmd::Fetch => ResponseKind::Fetch,
            StmtCmd::SendLongData => ResponseKind::None,
            StmtCmd::Reset => ResponseKind::Simple,
        }
    }

    /// Runs the statement (rather than fetching from, feeding or resetting it).
    pub fn runs(self) -> bool {
        matches!(self, StmtCmd::Execute | StmtCmd::BulkExecute)
    }

    /// The parameter types the client sent with this command, if any.
    pub fn sent_types(self, payload: &[u8], params: u16) -> Option<Vec<u8>> {
        match self {
            StmtCmd::Execute => bound_types(payload, params),
            StmtCmd::BulkExecute => bulk_types(payload, params),
            _ => None,
        }
    }

    /// The packet for a backend whose copy of `stmt` is `backend_id` holding
    /// `backend_types`, and the types it holds afterwards.
    pub fn for_backend(
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

pub use stmt_bulk_execute::sent_types as bulk_types;

/// A bulk command for a backend, like `execute_for_backend`: the statement id, and the
/// client's known types spliced in when it sent none and the backend's copy holds others.
pub fn bulk_for_backend(
    payload: &[u8],
    backend_id: u32,
    stmt: &ClientStmt,
    backend_types: Option<&[u8]>,
) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut body = payload.to_vec();
    let mut holds = backend_types.map(<[u8]>::to_vec);
    if let Some(sent) = bulk_types(payload, stmt.params) {
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
    use crate::conn::stmts::stmt_key;

    fn stmt(params: u16, types: Option<Vec<u8>>) -> ClientStmt {
        ClientStmt {
            key: stmt_key(None, b"SELECT ?"),
            sql: Arc::from(&b"SELECT ?"[..]),
            params,
            types,
            rules: Default::default(),
            reads_only: false,
            route: Default::default(),
        }
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
