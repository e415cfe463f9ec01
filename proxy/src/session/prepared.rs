//! Binary prepared statements, virtualised: each client gets its own statement ids; the SQL
//! is prepared lazily on whichever backend runs it, ids are rewritten in every statement
//! command, and parameter types are re-sent where a backend has not seen them.

use std::collections::HashMap;
use std::sync::Arc;

use crate::conn::stmts::StmtKey;
use crate::protocol::{command::set_stmt_id, frame, ResponseKind};

#[derive(Clone)]
pub struct ClientStmt {
    pub key: StmtKey,
    pub sql: Arc<[u8]>,
    pub params: u16,
    /// The parameter types the client last bound (sent once, with new-params-bound = 1).
    pub types: Option<Vec<u8>>,
    /// What an execution asks of the session (the identity it shows, its locks and pins).
    pub(crate) rules: crate::session::state::Rules,
}

#[derive(Default)]
pub struct ClientStmts {
    map: HashMap<u32, ClientStmt>,
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

/// Where the parameter block of a COM_STMT_EXECUTE payload is.
struct ExecLayout {
    /// Offset of the new-params-bound flag.
    flag_at: usize,
    bound: bool,
}

/// COM_STMT_EXECUTE payload: 0x17, id(4), flags(1), iterations(4), then for params > 0:
/// null bitmap, new-params-bound flag, [types: 2 bytes each], values.
fn exec_layout(payload: &[u8], params: u16) -> Option<ExecLayout> {
    if params == 0 {
        return None;
    }
    let flag_at = 10 + (params as usize).div_ceil(8);
    let bound = *payload.get(flag_at)? == 1;
    Some(ExecLayout { flag_at, bound })
}

/// The types a client sent with this execute, if it sent any.
pub fn bound_types(payload: &[u8], params: u16) -> Option<Vec<u8>> {
    let l = exec_layout(payload, params)?;
    if !l.bound {
        return None;
    }
    let start = l.flag_at + 1;
    payload
        .get(start..start + 2 * params as usize)
        .map(<[u8]>::to_vec)
}

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
    if let Some(l) = exec_layout(payload, stmt.params) {
        if l.bound {
            holds = bound_types(payload, stmt.params);
        } else if let Some(types) = types_missing_on(stmt, backend_types) {
            body.truncate(l.flag_at);
            body.push(1);
            body.extend_from_slice(types);
            body.extend_from_slice(&payload[l.flag_at + 1..]);
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

/// COM_STMT_BULK_EXECUTE flag: parameter types follow the flags.
const BULK_SEND_TYPES: u16 = 128;

/// The types a bulk command carries (`[0xFA][stmt id][flags u16][2 bytes per parameter]`).
pub fn bulk_types(payload: &[u8], params: u16) -> Option<Vec<u8>> {
    let flags = u16::from_le_bytes([*payload.get(5)?, *payload.get(6)?]);
    if flags & BULK_SEND_TYPES == 0 {
        return None;
    }
    payload.get(7..7 + 2 * params as usize).map(<[u8]>::to_vec)
}

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
    } else if let (Some(flags), Some(types)) =
        (payload.get(5..7), types_missing_on(stmt, backend_types))
    {
        let flags = u16::from_le_bytes([flags[0], flags[1]]) | BULK_SEND_TYPES;
        body.truncate(5);
        body.extend_from_slice(&flags.to_le_bytes());
        body.extend_from_slice(types);
        body.extend_from_slice(&payload[7..]);
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

mod handlers {
    //! The session side: PREPARE, EXECUTE, BULK_EXECUTE, FETCH, SEND_LONG_DATA, RESET and
    //! CLOSE.

    use std::sync::Arc;

    use super::{ClientStmt, StmtCmd};
    use crate::conn::stmts::stmt_key;
    use crate::protocol::{ErrPacket, ResponseKind};
    use crate::session::{Flow, Session, Step};
    use crate::stats::{ClientCloseReason, PinReason, Stats};

    impl Session {
        /// COM_STMT_PREPARE runs on any backend; the client sees its own statement id.
        pub(in crate::session) async fn prepare(&mut self, packet: &[u8], sql: &[u8]) -> Step {
            Stats::incr(&self.ctx.stats.statements);
            let class = crate::classify::classify(sql);
            // With the client's id in its text the statement is this client's own: its
            // backend copy is keyed by that text, so no other client reuses it.
            let rewritten = self.rewritten_sql(sql, &class);
            let framed_prepare = rewritten.as_ref().map(|q| {
                let mut payload = Vec::with_capacity(q.len() + 1);
                payload.push(0x16);
                payload.extend_from_slice(q);
                crate::session::framed(&payload)
            });
            let packet = framed_prepare.as_deref().unwrap_or(packet);
            let sql = rewritten.as_deref().unwrap_or(sql);
            // As the server does, a PREPARE that fails leaves no "last prepared" statement,
            // so a pipelined EXECUTE(-1) fails instead of running an older one.
            self.stmts.forget_last();
            if let Err(err) = self.acquire().await {
                self.release_if_possible();
                self.reply_err(1, &err).await?;
                return Ok(Flow::Continue);
            }
            let client_id = self.stmts.next_id();
            let Some(summary) = self
                .relay_on_backend(packet, ResponseKind::Prepare, Some(client_id))
                .await?
            else {
                self.release_if_possible();
                return Ok(Flow::Continue);
            };
            if let (Some(ok), Some(b)) = (summary.prepare_ok.as_ref(), self.backend.as_mut()) {
                let key = stmt_key(self.state.movable.schema.as_deref(), sql);
                let cap = self.ctx.config().max_prepared_statements_per_backend as usize;
                for old in b.stmts.insert(key.clone(), ok.stmt_id, cap) {
                    b.queue_stmt_close(old);
                }
                self.stmts.insert(
                    client_id,
                    ClientStmt {
                        key,
                        sql: Arc::from(sql),
                        params: ok.params,
                        types: None,
                        rules: crate::session::state::Rules::of(&class),
                    },
                );
            }
            // Preparing runs nothing: the statement's effects count when it is executed.
            self.after_statement(&summary, None).await;
            self.release_if_possible();
            Ok(Flow::Continue)
        }

        /// EXECUTE, BULK_EXECUTE, FETCH, SEND_LONG_DATA and RESET: find or create the
        /// statement on the backend that runs it, re-address the packet, relay.
        pub(in crate::session) async fn stmt_command(
            &mut self,
            payload: &[u8],
            client_id: u32,
            cmd: StmtCmd,
        ) -> Step {
            let kind = cmd.response();
            let client_id = self.stmts.resolve(client_id);
            let Some(mut stmt) = self.stmts.get(client_id).cloned() else {
                if kind == ResponseKind::None {
                    return Ok(Flow::Continue); // SEND_LONG_DATA has no response, even for errors
                }
                let msg = format!(
                    "Unknown prepared statement handler ({client_id}) given to {}",
                    cmd.name()
                );
                self.reply_err(1, &ErrPacket::new(1243, "HY000", msg.as_bytes()))
                    .await?;
                return Ok(Flow::Continue);
            };
            if cmd == StmtCmd::Reset && self.backend.is_none() {
                // Nothing pending anywhere: long data and cursors pin the session.
                return self
                    .send_ok(1)
                    .await
                    .map(|_| Flow::Continue)
                    .map_err(|_| ClientCloseReason::Eof);
            }
            if let Some(types) = cmd.sent_types(payload, stmt.params) {
                stmt.types = Some(types.clone());
                if let Some(s) = self.stmts.get_mut(client_id) {
                    s.types = Some(types);
                }
            }
            self.reg
                .info
                .queries
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Stats::incr(&self.ctx.stats.statements);
            // An execution that will pin gets its place first, as a query does.
            let reserved = match cmd.runs() {
                true => self.reserve_pin(Some(&stmt.rules)).await,
                false => Ok(()),
            };
            if let Err(err) = reserved {
                self.reply_err(1, &err).await?;
                return Ok(Flow::Continue);
            }
            if let Err(err) = self.acquire().await {
                self.release_if_possible();
                if kind != ResponseKind::None {
                    self.reply_err(1, &err).await?;
                }
                return Ok(Flow::Continue);
            }
            if cmd.runs() {
                self.present_identity(stmt.rules.presents).await;
            }
            let backend_id = match self.ensure_prepared(&stmt).await {
                Ok(id) => id,
                Err(err) => {
                    self.release_if_possible();
                    if kind != ResponseKind::None {
                        self.reply_err(1, &err).await?;
                    }
                    return Ok(Flow::Continue);
                }
            };
            let packet = match self.backend.as_mut() {
                Some(b) if cmd.runs() => {
                    let held = b.stmts.get(&stmt.key).and_then(|s| s.types.clone());
                    let (packet, holds) =
                        cmd.for_backend(payload, backend_id, &stmt, held.as_deref());
                    if let Some(s) = b.stmts.get(&stmt.key) {
                        s.types = holds;
                    }
                    packet
                }
                _ => cmd.for_backend(payload, backend_id, &stmt, None).0,
            };
            let mut flow = Flow::Continue;
            if let Some(summary) = self.relay_on_backend(&packet, kind, None).await? {
                // An execution does what its statement does: locks and pins as for a query
                // (before, a prepared GET_LOCK() left its lock unseen).
                let rules = cmd.runs().then_some(&stmt.rules);
                flow = self.after_statement(&summary, rules).await;
            }
            if kind == ResponseKind::None {
                // SEND_LONG_DATA: the data waits on this backend for the EXECUTE.
                self.pin(PinReason::PreparedStatement);
            } else if cmd.runs() {
                self.state.unpin(PinReason::PreparedStatement);
                self.reg.info.set_pin(self.state.pin_reason());
            }
            self.release_if_possible();
            if matches!(flow, Flow::Quit) {
                self.flush_response().await?; // see `Session::statement`
            }
            Ok(flow)
        }

        /// The backend id of `stmt` on the session's backend, preparing it there first if
        /// needed (the PREPARE_OK is consumed, never forwarded).
        async fn ensure_prepared(&mut self, stmt: &ClientStmt) -> Result<u32, ErrPacket> {
            let cap = self.ctx.config().max_prepared_statements_per_backend as usize;
            let Some(b) = self.backend.as_mut() else {
                return Err(ErrPacket::from_code(
                    crate::protocol::codes::BACKEND_LOST,
                    &b"no backend"[..],
                ));
            };
            if let Some(s) = b.stmts.get(&stmt.key) {
                return Ok(s.id);
            }
            match b.prepare_internal(&stmt.sql).await {
                Ok(Ok(ok)) => {
                    for old in b.stmts.insert(stmt.key.clone(), ok.stmt_id, cap) {
                        b.queue_stmt_close(old);
                    }
                    Ok(ok.stmt_id)
                }
                Ok(Err(err)) => Err(err),
                Err(e) => {
                    b.health = crate::conn::backend::Health::Broken;
                    self.backend = None;
                    Err(ErrPacket::from_code(
                        crate::protocol::codes::BACKEND_LOST,
                        format!("Lost connection to backend while preparing: {e}; retry")
                            .as_bytes(),
                    ))
                }
            }
        }

        /// COM_STMT_CLOSE frees the client's id; the backend copy stays for reuse until the
        /// cache evicts it.
        pub(in crate::session) fn close_stmt(&mut self, client_id: u32) {
            let client_id = self.stmts.resolve(client_id);
            self.stmts.remove(client_id);
        }
    }
}
