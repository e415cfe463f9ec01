//! A statement's answer, from the session's backend to its client (`relay::Relay` does the
//! bytes): `Session::relay_on` relays one command (an [`Outgoing`]) and returns what came of
//! it (an [`Answer`]); on the way, what a stalled client or a slow answer lets go of (the
//! slot, the statements batched behind it), an interrupted pipelined answer, and what a lost
//! backend does to the session: its client loses its connection, as it would directly.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::relay::{Relay, RelayError, RelayOptions, Relayed, SessionTrack};
use super::{acquire, kill, values, Session};
use crate::conn;
use crate::conn::backend::Health;
use crate::conn::busy_poll::BusyPoll;
use crate::pool::batches::{Rest, Turn};
use crate::protocol::{Capabilities, ResponseKind, ResponseSummary};
use crate::registry::ClientPhase;
use crate::stats::ClientCloseReason;

/// An answer's patience never drops below this (`Session::answer_patience`): scheduling on
/// a loaded host alone can delay an answer by milliseconds, and every statement a batch cuts
/// loose runs twice.
const STUCK_FLOOR: Duration = Duration::from_millis(10);

/// The server ends the connection after this answer: an ERR that a connection kill or a
/// shutdown sends to the statement it interrupts.
pub(super) fn ends_connection(summary: &ResponseSummary) -> bool {
    use crate::protocol::codes;
    summary.error.as_ref().is_some_and(|e| {
        [
            codes::CONNECTION_KILLED,
            codes::SHUTDOWN,
            codes::CLIENT_INTERACTION_TIMEOUT,
        ]
        .iter()
        .any(|c| c.code == e.code)
    })
}

/// Resolves once the server sends something on a backend nobody asked anything of (the
/// session holds it between statements): an ERR before it closes the connection, or the
/// close itself; true when that was a reset (what MariaDB does at wait_timeout). Never with
/// no backend.
pub(super) async fn server_speaks(backend: Option<&mut crate::pool::PooledBackend>) -> bool {
    match backend {
        // Whatever it read stays buffered for `held_backend_ended`.
        Some(b) => matches!(
            b.stream.fill().await,
            Err(conn::Error::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionReset
        ),
        None => std::future::pending().await,
    }
}

/// One command on its way to the backend, and what the relay of its answer needs to know.
pub(super) struct Outgoing<'a> {
    /// The framed command; `None`: written already, in a pipelined batch (a KILL QUERY may
    /// then interrupt its answer here).
    pub(crate) packet: Option<&'a [u8]>,
    /// The answer it gets.
    pub(crate) kind: ResponseKind,
    /// For a command on a prepared statement: the statement id the client sees instead of
    /// the backend's (in a PREPARE_OK, and in an ERR that names the statement).
    pub(crate) rewrite_stmt_id: Option<u32>,
    /// A query sluice rewrote: its parse error is not passed on
    /// (`RelayOptions::withhold_parse_error`).
    pub(crate) withhold_parse_error: bool,
    /// What goes around the packet in the same write: a SET before it, the read-back of
    /// LAST_INSERT_ID() after it (`Session::after_around` reads what they answered).
    pub(crate) around: &'a values::Around,
    /// A batch's answer: the statements behind it on the backend, which a slow or stalled
    /// answer cuts loose, and the text a KILL looks for.
    pub(crate) behind: Option<Behind<'a>>,
    /// A batch's answer: the batch's times, which the relay moves on to where the next
    /// answer's hold on the backend begins.
    pub(crate) turn: Option<&'a mut Turn>,
    /// When the relay starts, if its caller read the clock just before (the acquire, with
    /// no round trip since); the relay reads it itself otherwise.
    pub(crate) started: Option<Instant>,
    /// A backend failure before the client saw a byte hands the statement back for a run
    /// elsewhere (`Answer::RetryElsewhere`) instead of ending the session.
    pub(crate) may_retry: bool,
    /// Its query rule's deadline is a KILL QUERY (`relay::RelayOptions::timed_out`).
    pub(crate) timed_out: Option<(
        &'a std::sync::atomic::AtomicBool,
        &'a crate::protocol::ErrPacket,
    )>,
}

impl<'a> Outgoing<'a> {
    /// `packet`, answered with `kind`, with `around` it in the same write; nothing else.
    pub(crate) fn new(packet: &'a [u8], kind: ResponseKind, around: &'a values::Around) -> Self {
        Outgoing {
            packet: Some(packet),
            kind,
            rewrite_stmt_id: None,
            withhold_parse_error: false,
            around,
            behind: None,
            turn: None,
            started: None,
            may_retry: false,
            timed_out: None,
        }
    }
}

/// When a relay ran: from the write of its command (or of its batch) to the end of its
/// answer; the statement's time on the server (the two clock reads the relay makes anyway).
#[derive(Clone, Copy, Debug)]
pub(super) struct Took {
    pub(crate) started: Instant,
    pub(crate) ended: Instant,
}

/// What an answer of a batch knows of the statements behind it on the backend: the ones a
/// slow or stalled answer cuts loose, and its own text, by which a KILL finds it on the
/// server.
pub(super) struct Behind<'a> {
    pub(crate) rest: &'a mut Rest,
    pub(crate) own: Option<&'a [u8]>,
}

/// What came of a relay that left the session going.
pub(super) enum Answer {
    /// The whole answer went to the client (its last bytes may still be queued), and when
    /// the relay ran.
    Done(ResponseSummary, Took),
    /// Nothing to note: there was no backend, or the backend failed after an interrupted
    /// answer's 1317 (the client has its answer).
    Nothing,
    /// The backend of server `.0` (a replica) failed before the client saw a byte: the
    /// statement runs again elsewhere.
    RetryElsewhere(usize),
}

/// What of its OKs' session-state information the client gets: what its own session
/// tracks (`trackers`, known from its first `backend` on), all of it before that, or none
/// for a client without CLIENT_SESSION_TRACK.
fn session_track<'t>(
    caps: Capabilities,
    trackers: &'t mut Option<values::ClientTrackers>,
    backend: Option<&crate::pool::PooledBackend>,
) -> SessionTrack<'t> {
    if !caps.contains(Capabilities::CLIENT_SESSION_TRACK) {
        return SessionTrack::Strip;
    }
    if trackers.is_none() {
        *trackers = backend.map(|b| values::ClientTrackers::new(&b.baseline.trackers));
    }
    match trackers {
        Some(t) => SessionTrack::Filter(&t.now),
        None => SessionTrack::Keep,
    }
}

impl Session {
    /// The server ended the backend the session held between statements (KILL CONNECTION,
    /// wait_timeout or idle_transaction_timeout, a shutdown): the transaction or pinned state
    /// on it is gone. The client gets what the server sent (an ERR, if any) and loses its
    /// connection at once, as a direct connection would: reset when the server reset the
    /// backend without a word (`reset`), as it would have reset the client's own.
    pub(super) async fn held_backend_ended(&mut self, reset: bool) -> ClientCloseReason {
        tracing::info!(client = self.reg.info.id, backend = %self.held.target.addr, "the server ended the backend this session held; closing the client's connection");
        let mut said = 0;
        if let Some(mut b) = self.held.backend.take() {
            said = b.stream.buffered_from(0).0.len();
            b.stream.forward(said, &mut self.client);
            b.health = Health::Broken;
        }
        self.state.reset_transaction();
        self.release_if_possible();
        let _ = self.flush_response().await;
        if reset && said == 0 {
            self.client.reset_on_close();
        } else {
            self.client.shutdown().await;
        }
        ClientCloseReason::BackendLost
    }

    /// Relays one command on the session's backend (which `acquire` provided) and says
    /// what came of it. `Err` ends the session: the client is gone, or the backend was lost
    /// mid-answer (the client loses its connection, as it would directly).
    pub(in crate::session) async fn relay_on(
        &mut self,
        out: Outgoing<'_>,
    ) -> Result<Answer, ClientCloseReason> {
        let Outgoing {
            packet,
            kind,
            rewrite_stmt_id,
            withhold_parse_error,
            around,
            mut behind,
            turn,
            started,
            may_retry,
            timed_out,
        } = out;
        let then = around.read_back.then(values::read_back_packet);
        // Only a pipelined answer (sent already) may be interrupted here: no clone otherwise.
        let info = packet.is_none().then(|| Arc::clone(&self.reg.info));
        let patience = self.answer_patience();
        // A batch's answer with others behind it cuts them loose once it is slow.
        let slow_at = match (&behind, &turn) {
            (Some(b), Some(t)) if b.rest.len() > 0 => Some(t.from + patience),
            _ => None,
        };
        let stall_after = self.stall_after();
        let caps = self.login.caps;
        let backend = self.held.backend.as_ref();
        let session_track = session_track(caps, &mut self.trackers, backend);
        let opts = RelayOptions {
            session_track,
            client_write_timeout: self.config.client_write_timeout,
            rewrite_stmt_id,
            withhold_parse_error,
            before: around
                .before
                .as_ref()
                .map(|p| (&p.packet[..], &around.before_failed)),
            then: then.as_deref(),
            interrupt: info.as_deref().map(|i| &i.interrupt),
            busy_poll: BusyPoll {
                budget: self.config.backend_busy_poll,
                busy: &self.ctx.busy,
                stats: &self.ctx.stats.busy_poll,
            },
            stall_after: Some(stall_after),
            slow_at,
            timed_out,
        };
        let Some(backend) = self.held.backend.as_mut() else {
            return Ok(Answer::Nothing);
        };
        // Mid-response until proven otherwise: if this future is dropped now, the backend closes.
        backend.health = Health::Broken;
        self.reg
            .info
            .running_on(backend.thread_id, self.held.server);
        self.reg.info.set_phase(ClientPhase::Active);
        // A pipelined answer's backend time (and statement time) starts at its batch's write.
        let sent_at = turn.as_ref().map(|t| t.sent);
        let started = started.or(sent_at).unwrap_or_else(Instant::now);
        // Counted as queued: the response's tail is flushed after the statement (`run`).
        let written = self.client.bytes_written() + self.client.queued() as u64;
        let pool = self
            .ctx
            .pool_for(self.held.server)
            .unwrap_or(&self.ctx.pool);
        let mut relay = Relay::start(backend, packet, kind, &opts).await;
        let result = loop {
            let relay = match relay.as_mut() {
                Ok(relay) => relay,
                Err(_) => break relay.map(|_| None),
            };
            // Biased, as in `run`: the relay first, the hard stop whenever it waits.
            let step = tokio::select! {
                biased;
                r = relay.run(&mut self.client, backend, &opts) => r,
                _ = self.hard_stop.as_mut() => return Err(ClientCloseReason::Shutdown),
            };
            match step {
                Err(e) => break Err(e),
                Ok(Relayed::Done(summary)) => break Ok(Some(summary)),
                // Nobody waits on this client's reading speed (stalled): not the statements
                // behind it, nor (while the server only waits for the client) the slot
                // queue; nor for long on its statement's server time (slow).
                Ok(held_up @ (Relayed::Stalled | Relayed::Slow)) => {
                    if let Some(b) = behind.as_mut() {
                        crate::pool::batches::cut_loose(b.rest, &self.ctx.stats.pipeline);
                    }
                    if matches!(held_up, Relayed::Stalled) {
                        acquire::give_up_slot(&mut self.held.slot, &mut self.held.place, pool);
                    }
                }
                Ok(Relayed::Interrupted) => {
                    let who = (&self.held.target, &self.login.key);
                    let (own, rest) = match behind.take() {
                        Some(b) => (b.own, Some(b.rest)),
                        None => (None, None),
                    };
                    let client = (&mut self.client, opts.client_write_timeout);
                    let stats = &self.ctx.stats.pipeline;
                    let behind = (own, rest, patience);
                    let drained = kill::interrupted(client, backend, relay, behind, who, stats);
                    break drained.await.map(Some);
                }
            }
        };
        let ended = self.relay_ended(started, written, turn);
        self.relayed(result, may_retry, Took { started, ended })
            .await
    }

    /// Counts a relay that began at `started` with `written` bytes out to the client: its
    /// backend time, its slot time (a pipelined answer's from the end of the answer before
    /// it, `turn`), the bytes; and it no longer runs on its backend. Returns when it ended.
    fn relay_ended(&mut self, started: Instant, written: u64, turn: Option<&mut Turn>) -> Instant {
        let ended = Instant::now();
        self.ctx.latency.backend_time.record(ended - started);
        let held_from = turn.map_or(started, |t| t.answered(ended));
        self.pool().slots().record_service(ended - held_from);
        self.ctx.stats.bytes_to_clients.fetch_add(
            self.client.bytes_written() + self.client.queued() as u64 - written,
            Ordering::Relaxed,
        );
        // SeqCst: a KILL that still sees the thread has fenced the backend (`pool::fence`)
        // before the session can give it back.
        self.reg.info.backend_thread.store(0, Ordering::SeqCst);
        ended
    }

    /// What a relay's outcome does to the session: the answer, or a lost backend (which
    /// ends the session unless the read `may_retry` elsewhere).
    async fn relayed(
        &mut self,
        result: Result<Option<ResponseSummary>, RelayError>,
        may_retry: bool,
        took: Took,
    ) -> Result<Answer, ClientCloseReason> {
        match result {
            Ok(Some(summary)) if ends_connection(&summary) => {
                // The server ended the connection with this answer (KILL CONNECTION, a
                // shutdown): the client gets it, then loses its connection, as directly.
                tracing::info!(client = self.reg.info.id, backend = %self.held.target.addr, "the server ended the backend connection of a running statement");
                self.held.backend = None;
                self.flush_response().await?;
                Err(ClientCloseReason::BackendLost)
            }
            Ok(Some(summary)) => {
                self.track_write(&summary);
                Ok(Answer::Done(summary, took))
            }
            Ok(None) => Ok(Answer::Nothing),
            Err(RelayError::Client(e)) => {
                tracing::debug!(client = self.reg.info.id, "client failed mid-response: {e}");
                Err(match e {
                    conn::Error::Timeout(_) => ClientCloseReason::WriteTimeout,
                    _ => ClientCloseReason::Eof,
                })
            }
            // Nothing reached the client (the next packet would be its first): the read
            // runs again elsewhere, and the client never sees the replica fail.
            Err(RelayError::Backend { error, next_seq: 1 }) if may_retry => {
                tracing::info!(client = self.reg.info.id, backend = %self.held.target.addr, "replica failed before the first byte of a read ({error}); retrying it on another server");
                self.held.backend = None;
                self.release_if_possible();
                Ok(Answer::RetryElsewhere(self.held.server))
            }
            Err(RelayError::Backend { error, .. }) => Err(self.backend_lost(error).await),
            // The client has its answer (1317): only the backend is gone.
            Err(RelayError::Interrupted(error)) => {
                tracing::warn!(client = self.reg.info.id, backend = %self.held.target.addr, "backend lost while an interrupted answer was read: {error}");
                self.held.backend = None;
                self.release_if_possible();
                Ok(Answer::Nothing)
            }
        }
    }

    /// How long an answer may keep the statements behind it in its batch waiting on the
    /// server before they stop waiting and run on their own: a few statements' own server
    /// time, and never less than `stall_after`.
    pub(in crate::session) fn answer_patience(&self) -> Duration {
        let slots = self.pool().slots();
        let cost = slots.statement_cost(slots.server_cpus(self.config.server_cpus));
        (cost * 4).max(self.stall_after())
    }

    /// How long a client may take none of its answer before it counts as not reading (its
    /// slot and the statements behind it stop waiting for it), and a dropped answer may run
    /// before its statement is stopped on the server: `STUCK_FLOOR`, or pipeline_max_delay
    /// if longer. A client that reads takes its bytes far sooner, even over a slow network:
    /// the socket's send buffer holds megabytes.
    pub(in crate::session) fn stall_after(&self) -> Duration {
        self.config.pipeline_max_delay.max(STUCK_FLOOR)
    }

    /// The backend died mid-statement. The client loses its connection, as it would have
    /// directly (its driver reports 2013 and reconnects): it gets what it was sent so far
    /// and no error of sluice's, and whatever ran or held on that backend is gone.
    pub(in crate::session) async fn backend_lost(
        &mut self,
        error: conn::Error,
    ) -> ClientCloseReason {
        tracing::warn!(client = self.reg.info.id, backend = %self.held.target.addr, "backend lost mid-statement: {error}; closing the client's connection");
        self.held.backend = None;
        self.state.reset_transaction();
        self.release_if_possible();
        if self.flush_response().await.is_err() {
            return ClientCloseReason::Eof;
        }
        ClientCloseReason::BackendLost
    }
}
