//! KILL [QUERY | CONNECTION] through sluice: which session a client may kill, and the one
//! home of how a statement is stopped on the server, on whichever backend it runs and never
//! reaching another session's statement.
//!
//! - A statement that runs alone on its backend: `KILL QUERY <thread>` on a control
//!   connection while that backend is fenced (`pool::Pool::fence`): a backend given back
//!   while a kill is in flight is closed, never handed to another session, so the kill can
//!   only land on the victim's statement or on its idle backend (a no-op there). That holds
//!   for a statement whose query id changes as it runs: a stored procedure's loop gives each
//!   statement in it a new one.
//! - A pipelined statement (other sessions' statements share its backend): its client gets
//!   1317 in sluice at once, and the session that reads its answer (its own, or the one that
//!   reads and drops it, `drain_dropped`) stops it on the server by its query id, found by its
//!   text in PROCESSLIST while the backend is still at that answer (`KillPlan`): only when no
//!   statement behind it in the batch has the same text, so the id found is its own (MariaDB;
//!   elsewhere, and when the text is not unique, the statements behind it are cut loose once
//!   it has held them up for the answer's patience, and it runs to its end).

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::relay::{Relay, RelayError};
use super::{Flow, Session, Step};
use crate::classify::KillTarget;
use crate::conn::backend::{BackendConn, BackendTarget, PoolKey};
use crate::conn::PacketStream;
use crate::context::backend_target_for;
use crate::pool::batches::{cut_loose, Rest};
use crate::protocol::request::query as query_payload;
use crate::protocol::{codes, ErrPacket, ResponseSummary};
use crate::stats::{ClientCloseReason, PipelineStats, Stats};

/// PROCESSLIST shows statements up to this long in full; a longer one is not looked up.
const MAX_KILL_TEXT: usize = 60_000;

impl Session {
    /// KILL [QUERY|CONNECTION] id, where id is a sluice connection id (what the client's
    /// CONNECTION_ID() returns). As in MySQL, a client may kill only its own user's sessions:
    /// an unknown id is 1094, another user's 1095. The victim's running statement (on
    /// whichever backend) is killed through a separate control connection; a KILL QUERY of
    /// the session's own id interrupts the KILL itself (1317).
    pub(super) async fn kill(&mut self, target: KillTarget) -> Step {
        let (id, whole) = match target {
            KillTarget::Query(id) => (id, false),
            KillTarget::Connection(id) => (id, true),
        };
        let victim = u32::try_from(id)
            .ok()
            .and_then(|id| self.ctx.registry.get(id));
        let Some(victim) = victim else {
            let msg = format!("Unknown thread id: {id}");
            self.reply_err(
                1,
                &ErrPacket::from_code(codes::NO_SUCH_THREAD, msg.as_bytes()),
            )
            .await?;
            return Ok(Flow::Continue);
        };
        if victim.user() != self.login.user.name {
            let msg = format!("You are not owner of thread {id}");
            self.reply_err(1, &ErrPacket::from_code(codes::KILL_DENIED, msg.as_bytes()))
                .await?;
            return Ok(Flow::Continue);
        }
        if !whole && victim.id == self.reg.info.id {
            // What the session runs is this KILL itself: the server interrupts it, and the
            // session goes on.
            self.reply_err(1, &super::errors::interrupted()).await?;
            return Ok(Flow::Continue);
        }
        if victim.id != self.reg.info.id && victim.pipelined.load(Ordering::SeqCst) {
            // Other sessions' statements share its backend: its answer ends in sluice, and
            // the session reading that answer stops the statement on the server.
            victim.interrupt.set();
        } else if victim.id != self.reg.info.id {
            // On the server the victim's statement runs on, which need not be this session's
            // (thread ids are per server: another server's same id is someone else's).
            let target_for = |server: usize| match server == self.held.server {
                true => Cow::Borrowed(&self.held.target),
                false => Cow::Owned(backend_target_for(
                    &self.config,
                    &self.login.user,
                    &self.ctx,
                    server,
                )),
            };
            let ctx = &self.ctx;
            let pool_for = |server: usize| ctx.pool_for(server).unwrap_or(&ctx.pool);
            if let Err(e) =
                kill_running_statement(target_for, pool_for, &self.login.key, &victim).await
            {
                tracing::warn!(
                    client = self.reg.info.id,
                    "KILL QUERY on backend failed: {e}"
                );
            }
        }
        if whole {
            victim.kill.cancel();
            if victim.id == self.reg.info.id {
                self.reply_err(
                    1,
                    &ErrPacket::from_code(codes::CONNECTION_KILLED, b"Connection was killed"),
                )
                .await?;
                return Err(ClientCloseReason::Killed);
            }
        }
        self.ok_reply().await
    }
}

/// Kills the statement `victim` runs now on a backend of its own, if any, and never one of
/// another session. `target_for` and `pool_for` reach a server by its `Config::endpoints`
/// index: the victim's, seen with its thread id and rechecked with it once the backend is
/// fenced, so that it cannot go to anyone else before the KILL has landed.
pub(super) async fn kill_running_statement<'a>(
    target_for: impl FnOnce(usize) -> Cow<'a, BackendTarget>,
    pool_for: impl FnOnce(usize) -> &'a crate::pool::Pool,
    key: &PoolKey,
    victim: &crate::registry::ClientInfo,
) -> Result<(), crate::conn::Error> {
    // The thread first: a thread stored after `pipelined` was set sees it set.
    let running = || {
        (
            victim.backend_thread.load(Ordering::SeqCst),
            victim.queries.load(Ordering::SeqCst),
            victim.backend_server.load(Ordering::SeqCst),
            victim.pipelined.load(Ordering::SeqCst),
        )
    };
    let seen = running();
    if seen.0 == 0 || seen.3 {
        return Ok(());
    }
    let server = seen.2 as usize;
    let mut control = BackendConn::connect(&target_for(server), key.clone()).await?;
    let _fence = pool_for(server).fence(seen.0);
    if running() != seen {
        return Ok(());
    }
    let sql = format!("KILL QUERY {}", seen.0);
    match control.run_simple(&query_payload(sql.as_bytes())).await? {
        Ok(_) => Ok(()),
        // 1094 Unknown thread id: the backend closed meanwhile, nothing to kill.
        Err(e) if e.code == codes::NO_SUCH_THREAD.code => Ok(()),
        Err(e) => Err(crate::conn::Error::Server(e)),
    }
}

/// How a pipelined statement is found and stopped on the server: by its text, on its batch's
/// backend thread (`unique_text` says when that finds it and nothing else).
pub(super) struct KillPlan {
    target: BackendTarget,
    key: PoolKey,
    thread: u32,
    text: Vec<u8>,
}

impl KillPlan {
    pub(super) fn new(target: &BackendTarget, key: &PoolKey, thread: u32, text: &[u8]) -> Self {
        KillPlan {
            target: target.clone(),
            key: key.clone(),
            thread,
            text: text.to_vec(),
        }
    }

    /// Looks the statement up and kills it by its query id (a no-op once it is over). Its
    /// future may be dropped at any point: a KILL sent is one of that statement's id.
    async fn run(self, stats: &PipelineStats) {
        let Ok(mut control) = BackendConn::connect(&self.target, self.key).await else {
            return;
        };
        if !control.server.version.windows(7).any(|w| w == b"MariaDB") {
            return;
        }
        let hex: String = self.text.iter().map(|b| format!("{b:02x}")).collect();
        let find = format!(
            "SELECT QUERY_ID FROM information_schema.PROCESSLIST WHERE ID = {} AND INFO_BINARY = X'{hex}'",
            self.thread
        );
        let Ok(Ok(Some(query_id))) = control.query_first_u64(find.as_bytes()).await else {
            return;
        };
        let kill = format!("KILL QUERY ID {query_id}");
        if let Ok(Ok(_)) = control.run_simple(&query_payload(kill.as_bytes())).await {
            Stats::incr(&stats.kills);
        }
    }
}

/// The text PROCESSLIST shows for a statement (`own`) when it tells that statement apart on
/// its backend: every statement behind it in the batch (`rest`; the ones before it are over)
/// has a known text of its own.
pub(super) fn unique_text<'a>(own: Option<&'a [u8]>, rest: &Rest) -> Option<&'a [u8]> {
    let own = own.filter(|t| !t.is_empty() && t.len() <= MAX_KILL_TEXT)?;
    let unique = rest
        .as_slice()
        .iter()
        .all(|m| m.work.text().is_some_and(|t| t != own));
    unique.then_some(own)
}

/// A pipelined answer a KILL QUERY interrupted: its client gets its 1317 now (queued by the
/// relay); the rest of the server's answer is read and dropped, the statement is stopped on
/// the server by its query id when its text (`behind.0`) tells it apart from those behind it
/// (`behind.1`), and these are cut loose once that takes longer than `behind.2`. `who`: the
/// backend's server and account, for the control connection.
pub(super) async fn interrupted(
    (client, write_timeout): (&mut PacketStream, Duration),
    backend: &mut BackendConn,
    relay: &mut Relay,
    behind: (Option<&[u8]>, Option<&mut Rest>, Duration),
    who: (&BackendTarget, &PoolKey),
    stats: &PipelineStats,
) -> Result<ResponseSummary, RelayError> {
    client
        .flush(Some(write_timeout))
        .await
        .map_err(RelayError::Client)?;
    let (own, rest, patience) = behind;
    let plan = rest
        .as_deref()
        .and_then(|r| unique_text(own, r))
        .map(|text| KillPlan::new(who.0, who.1, backend.thread_id, text));
    drain_dropped(
        backend,
        relay,
        plan,
        Duration::ZERO,
        (rest, patience),
        stats,
    )
    .await
}

/// Reads and drops the rest of an answer nobody gets (interrupted, or its session left the
/// batch). After `kill_after` its statement is stopped on the server (`plan`, if any); after
/// `cut.1` the statements behind it (`cut.0`) stop waiting and run on their own.
pub(super) async fn drain_dropped(
    backend: &mut BackendConn,
    relay: &mut Relay,
    plan: Option<KillPlan>,
    kill_after: Duration,
    cut: (Option<&mut Rest>, Duration),
    stats: &PipelineStats,
) -> Result<ResponseSummary, RelayError> {
    let (mut behind, cut_after) = cut;
    let drain = relay.drain(backend);
    tokio::pin!(drain);
    let kill = async {
        match plan {
            Some(plan) => {
                tokio::time::sleep(kill_after).await;
                plan.run(stats).await
            }
            None => std::future::pending().await,
        }
    };
    tokio::pin!(kill);
    let cut_at = tokio::time::sleep(cut_after);
    tokio::pin!(cut_at);
    let mut killed = false;
    loop {
        tokio::select! {
            biased;
            r = &mut drain => return r,
            _ = &mut kill, if !killed => killed = true,
            _ = &mut cut_at, if behind.is_some() => {
                if let Some(rest) = behind.take() {
                    cut_loose(rest, stats);
                }
            }
        }
    }
}
