//! Relaying one command and its response: client bytes to the backend, backend packets to
//! the client, byte for byte, while `ResponseTracker` finds where the response ends.
//! Only OK packets are re-encoded: for clients without CLIENT_SESSION_TRACK, and, for those
//! with it, the ones carrying session state the client's own trackers would not report; and
//! the ERR of a statement a query rule's deadline killed becomes the server's timeout error.

use std::time::{Duration, Instant};

use bytes::BytesMut;

use crate::conn::busy_poll::BusyPoll;
use crate::conn::stream::FLUSH_THRESHOLD;
use crate::conn::{BackendConn, Error, PacketStream};
use crate::protocol::frame::HEADER_LEN;
use crate::protocol::{
    err,
    ok::{self, strip_session_track},
    ErrPacket, Feed, ResponseKind, ResponseSummary, ResponseTracker,
};
use crate::registry::Interrupt;

mod drain;
mod infile;

use drain::drain;
use infile::{forward_infile, pass_on};

/// Which side failed; they call for different recovery.
#[derive(Debug)]
pub(crate) enum RelayError {
    /// The client went away or stopped reading; the backend is mid-response.
    Client(Error),
    /// The backend failed. `next_seq` is the sequence id an ERR to the client must carry.
    Backend { error: Error, next_seq: u8 },
    /// The client got its interrupted statement's 1317; the backend then failed while the
    /// rest of the answer was read.
    Interrupted(Error),
}

/// What of an OK's session-state information reaches the client.
#[derive(Clone, Copy)]
pub(crate) enum SessionTrack<'a> {
    /// All of it.
    Keep,
    /// None: the client did not negotiate CLIENT_SESSION_TRACK.
    Strip,
    /// What the client's own session tracks.
    Filter(&'a crate::protocol::Trackers),
}

impl SessionTrack<'_> {
    /// Whether this OK payload is rewritten: only those that carry state (a few
    /// instructions for every other OK).
    fn rewrites(self, payload: &[u8]) -> bool {
        match self {
            SessionTrack::Keep => false,
            SessionTrack::Strip => !ok::strip_keeps(payload),
            SessionTrack::Filter(_) => ok::carries_state(payload),
        }
    }
}

pub(crate) struct RelayOptions<'a> {
    /// What of the OKs' session-state information the client gets.
    pub(crate) session_track: SessionTrack<'a>,
    pub(crate) client_write_timeout: Duration,
    /// For a command on a prepared statement: the id the client knows it by, which its
    /// PREPARE_OK carries instead of the backend's, as does an ERR that names the statement.
    pub(crate) rewrite_stmt_id: Option<u32>,
    /// The command is a query sluice rewrote: a parse error, its answer's one packet, is
    /// read and not passed on (the caller sends the client's own text instead).
    pub(crate) withhold_parse_error: bool,
    /// A framed command of sluice's own (a SET) to send right before the client's, in the
    /// same write: its one-packet answer is read and dropped first, and the flag says
    /// whether it was an ERR.
    pub(crate) before: Option<(&'a [u8], &'a std::sync::atomic::AtomicBool)>,
    /// A framed command of sluice's own to send right behind the client's, in the same
    /// write; its answer is the caller's to read.
    pub(crate) then: Option<&'a [u8]>,
    /// A pipelined statement (`session::pipeline`) that a KILL QUERY may interrupt here
    /// instead of on the server, where the backend may be running another session's.
    pub(crate) interrupt: Option<&'a Interrupt>,
    /// How the wait for the answer's first bytes may busy-poll (`conn::busy_poll`).
    pub(crate) busy_poll: BusyPoll<'a>,
    /// A client that takes none of the answer's bytes for this long is reported, once
    /// (`Relayed::Stalled`).
    pub(crate) stall_after: Option<Duration>,
    /// An answer still coming from the server at this instant is reported, once
    /// (`Relayed::Slow`; pipelined answers only).
    pub(crate) slow_at: Option<Instant>,
    /// A statement that a query rule's deadline stops with a KILL QUERY (the flag is set
    /// before the KILL goes out): its ER_QUERY_INTERRUPTED reaches the client as this ERR,
    /// the server's own for a statement out of time.
    pub(crate) timed_out: Option<(&'a std::sync::atomic::AtomicBool, &'a ErrPacket)>,
}

/// Where a relay stopped.
#[derive(Debug)]
pub(crate) enum Relayed {
    /// The whole answer went to the client (its last bytes may still be queued).
    Done(ResponseSummary),
    /// The client took nothing for `RelayOptions::stall_after`: it is not reading. The
    /// relay goes on where it was when run again (its write timeout starts over).
    Stalled,
    /// `RelayOptions::slow_at` passed with the answer still coming from the server; run
    /// again to go on.
    Slow,
    /// A KILL QUERY of a pipelined statement: the client's answer ends with 1317 (queued);
    /// what is left of the server's is for `Relay::drain`.
    Interrupted,
}

/// One command's answer on its way to the client. It keeps where it got to, so that a relay
/// that stopped to report something (`Relayed`) goes on from there.
pub(crate) struct Relay {
    kind: ResponseKind,
    tracker: ResponseTracker,
    /// The sequence id of the next packet to read from the backend.
    next_seq: u8,
    first_wait: bool,
    /// Each is reported once.
    stall_reported: bool,
    slow_reported: bool,
}

/// Writes `command` with what `opts` puts around it (`before`, `then`) in one write, and
/// reads the answer to `before` (one packet), noting whether it was an ERR.
async fn send_around(
    backend: &mut BackendConn,
    command: &[u8],
    opts: &RelayOptions<'_>,
) -> Result<(), RelayError> {
    let lost = |error| RelayError::Backend { error, next_seq: 1 };
    if let Some((before, _)) = opts.before {
        backend.stream.queue_raw(before);
    }
    backend.stream.queue_raw(command);
    if let Some(then) = opts.then {
        backend.stream.queue_raw(then);
    }
    // The socket nearly always takes a command at once.
    let sent = match backend.stream.try_flush() {
        Ok(true) => Ok(()),
        Ok(false) => backend.stream.flush(None).await,
        Err(e) => Err(e),
    };
    sent.map_err(lost)?;
    if let Some((_, failed)) = opts.before {
        let span = backend.stream.expect_packet().await.map_err(lost)?;
        let is_err = backend.stream.payload(&span).first() == Some(&0xFF);
        failed.store(is_err, std::sync::atomic::Ordering::Relaxed);
        backend.stream.consume(&span);
    }
    Ok(())
}

impl Relay {
    /// Sends `command` (`None`: it was sent already, in a pipelined batch) and makes ready
    /// for its answer.
    pub(crate) async fn start(
        backend: &mut BackendConn,
        command: Option<&[u8]>,
        kind: ResponseKind,
        opts: &RelayOptions<'_>,
    ) -> Result<Relay, RelayError> {
        if let Some(command) = command {
            send_around(backend, command, opts).await?;
        }
        Ok(Relay::sent(backend, kind))
    }

    /// Makes ready for the answer to a command sent already (in a pipelined batch).
    pub(crate) fn sent(backend: &BackendConn, kind: ResponseKind) -> Relay {
        Relay {
            kind,
            tracker: ResponseTracker::new(kind, backend.caps),
            next_seq: 1,
            first_wait: true,
            stall_reported: false,
            slow_reported: false,
        }
    }

    /// The summary so far; the relay starts over (only for an answer that is complete).
    fn summary(&mut self, backend: &BackendConn) -> ResponseSummary {
        let fresh = ResponseTracker::new(self.kind, backend.caps);
        std::mem::replace(&mut self.tracker, fresh).into_summary()
    }

    /// Relays the answer until it is complete or there is something to report.
    ///
    /// Packets that reach the client as they are pile up as a run at the head of the
    /// backend's read buffer (`run` bytes) and are copied to the client in one go
    /// (`PacketStream::forward`): before a rewritten packet, before any wait or flush, and
    /// before the relay returns, on every path. The client gets the same bytes with the
    /// same flushes as packet by packet.
    pub(crate) async fn run(
        &mut self,
        client: &mut PacketStream,
        backend: &mut BackendConn,
        opts: &RelayOptions<'_>,
    ) -> Result<Relayed, RelayError> {
        if self.kind == ResponseKind::None {
            return Ok(Relayed::Done(self.summary(backend)));
        }
        let mut scratch = BytesMut::new();
        let mut run = 0usize;
        loop {
            if opts.interrupt.is_some_and(Interrupt::is_set) {
                backend.stream.forward(run, client);
                // The client has its 1317 now; the server's answer may take much longer.
                interrupted(client, self.next_seq);
                return Ok(Relayed::Interrupted);
            }
            let (buf, max_payload) = backend.stream.buffered_from(run);
            if buf.len() > HEADER_LEN {
                // Counts, definitions and rows go on as they are: skimmed in one loop. The
                // packet the skim stops at is handled below. An interrupt is checked once per
                // buffered run, before every wait and flush: a KILL that lands while a run is
                // skimmed races with it anyway, as one on the server races with its rows.
                let limit = FLUSH_THRESHOLD.saturating_sub(client.queued() + run);
                if let (bytes, Some(seq)) = self.tracker.skim(buf, max_payload, limit) {
                    run += bytes;
                    self.next_seq = seq.wrapping_add(1);
                    if client.queued() + run >= FLUSH_THRESHOLD {
                        backend.stream.forward(run, client);
                        run = 0;
                        if self.flush_client(client, opts).await? {
                            return Ok(Relayed::Stalled);
                        }
                        continue;
                    }
                }
            }
            let span = match backend.stream.buffered_packet_at(run) {
                Ok(Some(span)) => span,
                Ok(None) => {
                    // Nothing complete is buffered: let the client have what we have, then wait.
                    backend.stream.forward(run, client);
                    run = 0;
                    match self.wait(client, backend, opts).await? {
                        Some(report) => return Ok(report),
                        None => continue,
                    }
                }
                Err(e) => {
                    backend.stream.forward(run, client);
                    return Err(RelayError::Backend {
                        error: e,
                        next_seq: self.next_seq,
                    });
                }
            };
            let feed = self.pass(client, backend, &mut run, &span, &mut scratch, opts)?;
            self.next_seq = span.last_seq.wrapping_add(1);
            match feed {
                // The last bytes stay queued: the session writes them once it has given back
                // what the statement no longer needs (`Session::flush_response`).
                Feed::Done | Feed::DoneOk => {
                    backend.stream.forward(run, client);
                    return Ok(Relayed::Done(self.summary(backend)));
                }
                Feed::LocalInfile => {
                    // The client sends its file next: no pause in between.
                    pass_on(backend, client, run, opts).await?;
                    run = 0;
                    forward_infile(client, backend).await?;
                }
                Feed::Continue | Feed::ContinueOk => {
                    if client.queued() + run >= FLUSH_THRESHOLD {
                        backend.stream.forward(run, client);
                        run = 0;
                        if self.flush_client(client, opts).await? {
                            return Ok(Relayed::Stalled);
                        }
                    }
                }
            }
        }
    }

    /// Lets the client have what it has queued, then waits for more of the answer:
    /// `Some` when there is something to report first, `None` to go on (more bytes came, or
    /// an interrupt, which the loop finds).
    async fn wait(
        &mut self,
        client: &mut PacketStream,
        backend: &mut BackendConn,
        opts: &RelayOptions<'_>,
    ) -> Result<Option<Relayed>, RelayError> {
        if client.queued() > 0 && self.flush_client(client, opts).await? {
            return Ok(Some(Relayed::Stalled));
        }
        let filled = match opts.interrupt {
            None if std::mem::take(&mut self.first_wait) => {
                let b = &mut **backend;
                opts.busy_poll.fill(&mut b.stream, &mut b.polls).await
            }
            None => backend.stream.fill().await,
            Some(i) => {
                let slow = opts.slow_at.filter(|_| !self.slow_reported);
                let slow = async move {
                    match slow {
                        Some(at) => tokio::time::sleep_until(at.into()).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    _ = i.wait() => return Ok(None),
                    r = backend.stream.fill() => r,
                    _ = slow => {
                        self.slow_reported = true;
                        return Ok(Some(Relayed::Slow));
                    }
                }
            }
        };
        let error = match filled {
            Ok(true) => return Ok(None),
            Ok(false) => Error::Closed,
            Err(e) => e,
        };
        Err(RelayError::Backend {
            error,
            next_seq: self.next_seq,
        })
    }

    /// Feeds the buffered packet `span` (at `run`) to the tracker and passes it on: in the
    /// run as it is, or rewritten (a PREPARE_OK with the client's statement id, an OK without
    /// its session-state block) after the run.
    fn pass(
        &mut self,
        client: &mut PacketStream,
        backend: &mut BackendConn,
        run: &mut usize,
        span: &crate::protocol::frame::LogicalSpan,
        scratch: &mut BytesMut,
        opts: &RelayOptions<'_>,
    ) -> Result<Feed, RelayError> {
        let kind = self.kind;
        let next_seq = self.next_seq;
        let fed = {
            let payload = backend.stream.payload_at(*run, span);
            self.tracker
                .feed(&payload)
                .map_err(Error::from)
                .and_then(|feed| {
                    let is_err = err::is_err(&payload);
                    let out = if let Some(id) = opts
                        .rewrite_stmt_id
                        .filter(|_| kind == ResponseKind::Prepare && next_seq == 1)
                    {
                        scratch.clear();
                        scratch.extend_from_slice(backend.stream.raw_at(*run, span));
                        crate::protocol::prepare_ok::patch_stmt_id(scratch, id);
                        Out::Raw
                    } else if is_err
                        && opts.withhold_parse_error
                        && next_seq == 1
                        && err::is_parse_error(&payload)
                    {
                        Out::Withheld
                    } else if let Some(err) = super::errors::deadline_err(opts.timed_out, &payload)
                        .filter(|_| matches!(feed, Feed::Done))
                    {
                        scratch.clear();
                        err.encode(scratch);
                        Out::Framed
                    } else if let Some(id) = opts.rewrite_stmt_id.filter(|_| is_err) {
                        scratch.clear();
                        match err::with_stmt_id(&payload, id, scratch) {
                            true => Out::Framed,
                            false => Out::AsIs,
                        }
                    } else if matches!(feed, Feed::ContinueOk | Feed::DoneOk)
                        && opts.session_track.rewrites(&payload)
                    {
                        scratch.clear();
                        match opts.session_track {
                            SessionTrack::Filter(t) => {
                                ok::filter_session_state(&payload, t, scratch)?
                            }
                            _ => strip_session_track(&payload, scratch)?,
                        }
                        Out::Framed
                    } else {
                        Out::AsIs
                    };
                    Ok((feed, out))
                })
        };
        match fed {
            Ok((feed, Out::AsIs)) => {
                *run += span.raw_len;
                Ok(feed)
            }
            Ok((feed, out)) => {
                backend.stream.forward(*run, client);
                *run = 0;
                match out {
                    Out::Raw => client.queue_raw(scratch),
                    Out::Framed => {
                        client.queue_packet(span.first_seq, scratch);
                    }
                    Out::AsIs | Out::Withheld => {}
                }
                backend.stream.consume(span);
                Ok(feed)
            }
            Err(e) => {
                backend.stream.forward(*run, client);
                *run = 0;
                Err(RelayError::Backend { error: e, next_seq })
            }
        }
    }

    /// Writes what the client has queued. True: it took nothing for `stall_after` (the
    /// first time only; the rest stays queued, and later flushes wait for the write timeout).
    async fn flush_client(
        &mut self,
        client: &mut PacketStream,
        opts: &RelayOptions<'_>,
    ) -> Result<bool, RelayError> {
        match opts.stall_after.filter(|_| !self.stall_reported) {
            Some(after) => {
                let done = client
                    .flush_within(after)
                    .await
                    .map_err(RelayError::Client)?;
                self.stall_reported = !done;
                Ok(!done)
            }
            None => client
                .flush(Some(opts.client_write_timeout))
                .await
                .map(|_| false)
                .map_err(RelayError::Client),
        }
    }

    /// Reads what is left of an answer the client no longer gets (after `Interrupted`),
    /// so that the backend is at the next command's answer.
    pub(crate) async fn drain(
        &mut self,
        backend: &mut BackendConn,
    ) -> Result<ResponseSummary, RelayError> {
        let tracker = std::mem::replace(
            &mut self.tracker,
            ResponseTracker::new(self.kind, backend.caps),
        );
        drain(backend, tracker, self.next_seq)
            .await
            .map_err(|e| match e {
                RelayError::Backend { error, .. } => RelayError::Interrupted(error),
                other => other,
            })
    }
}

/// What reaches the client in place of a backend packet.
#[derive(PartialEq, Eq)]
enum Out {
    /// The packet as it is (in the run).
    AsIs,
    /// `scratch`, framed already (a PREPARE_OK with the client's statement id).
    Raw,
    /// `scratch` as the payload, framed from the packet's sequence id (an OK stripped of
    /// its session-state block, an ERR naming the client's statement id).
    Framed,
    /// Nothing: a parse error of sluice's rewrite (`RelayOptions::withhold_parse_error`).
    Withheld,
}

/// The client's answer ends with ER_QUERY_INTERRUPTED, as a killed statement's does.
fn interrupted(client: &mut PacketStream, seq: u8) {
    let err = super::errors::interrupted();
    let mut out = BytesMut::new();
    err.encode(&mut out);
    client.queue_packet(seq, &out);
}
