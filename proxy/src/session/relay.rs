//! Relaying one command and its response: client bytes to the backend, backend packets to
//! the client, byte for byte, while `ResponseTracker` finds where the response ends.
//! Only OK packets are re-encoded, and only for clients without CLIENT_SESSION_TRACK.

use std::time::Duration;

use bytes::BytesMut;

use crate::conn::busy_poll::BusyPoll;
use crate::conn::stream::FLUSH_THRESHOLD;
use crate::conn::{BackendConn, Error, PacketStream};
use crate::protocol::frame::HEADER_LEN;
use crate::protocol::{
    ok::{self, strip_session_track},
    Feed, ResponseKind, ResponseSummary, ResponseTracker,
};
use crate::registry::Interrupt;

/// Which side failed; they call for different recovery.
#[derive(Debug)]
pub enum RelayError {
    /// The client went away or stopped reading; the backend is mid-response.
    Client(Error),
    /// The backend failed. `next_seq` is the sequence id an ERR to the client must carry.
    Backend { error: Error, next_seq: u8 },
    /// The client got its interrupted statement's 1317; the backend then failed while the
    /// rest of the answer was read.
    Interrupted(Error),
}

pub struct RelayOptions<'a> {
    /// Rewrite OK packets for a client that did not negotiate CLIENT_SESSION_TRACK.
    pub strip_session_track: bool,
    pub client_write_timeout: Duration,
    /// For COM_STMT_PREPARE: the statement id the client sees instead of the backend's.
    pub rewrite_stmt_id: Option<u32>,
    /// A pipelined statement (`session::pipeline`) that a KILL QUERY may interrupt here
    /// instead of on the server, where the backend may be running another session's.
    pub interrupt: Option<&'a Interrupt>,
    /// How the wait for the answer's first bytes may busy-poll (`conn::busy_poll`).
    pub busy_poll: BusyPoll<'a>,
}

pub async fn relay(
    client: &mut PacketStream,
    backend: &mut BackendConn,
    command: &[u8],
    kind: ResponseKind,
    opts: &RelayOptions<'_>,
) -> Result<ResponseSummary, RelayError> {
    relay_command(client, backend, Some(command), kind, opts).await
}

/// Relays the answer to a command already sent (by `relay`, or in a pipelined batch).
pub async fn relay_response(
    client: &mut PacketStream,
    backend: &mut BackendConn,
    kind: ResponseKind,
    opts: &RelayOptions<'_>,
) -> Result<ResponseSummary, RelayError> {
    relay_command(client, backend, None, kind, opts).await
}

/// `relay` of `command`, or with `None` `relay_response`: one future for both, which the
/// session awaits directly (a layer of futures fewer on every poll).
///
/// Packets that reach the client as they are pile up as a run at the head of the backend's
/// read buffer (`run` bytes) and are copied to the client in one go (`PacketStream::forward`):
/// before a rewritten packet, before any wait or flush, and before the relay returns, on
/// every path. The client gets the same bytes with the same flushes as packet by packet.
pub async fn relay_command(
    client: &mut PacketStream,
    backend: &mut BackendConn,
    command: Option<&[u8]>,
    kind: ResponseKind,
    opts: &RelayOptions<'_>,
) -> Result<ResponseSummary, RelayError> {
    if let Some(command) = command {
        backend.stream.queue_raw(command);
        // The socket nearly always takes a command at once.
        let sent = match backend.stream.try_flush() {
            Ok(true) => Ok(()),
            Ok(false) => backend.stream.flush(None).await,
            Err(e) => Err(e),
        };
        sent.map_err(|error| RelayError::Backend { error, next_seq: 1 })?;
    }
    let backend_err = |error, next_seq| RelayError::Backend { error, next_seq };
    let mut tracker = ResponseTracker::new(kind, backend.caps);
    if kind == ResponseKind::None {
        return Ok(tracker.into_summary());
    }
    let mut next_seq = 1u8;
    let mut scratch = BytesMut::new();
    let mut run = 0usize;
    let mut first_wait = true;
    loop {
        if opts.interrupt.is_some_and(Interrupt::is_set) {
            backend.stream.forward(run, client);
            // The client has its 1317 now; the server's answer may take much longer.
            interrupted(client, next_seq);
            client
                .flush(Some(opts.client_write_timeout))
                .await
                .map_err(RelayError::Client)?;
            return drain(backend, tracker, next_seq)
                .await
                .map_err(|e| match e {
                    RelayError::Backend { error, .. } => RelayError::Interrupted(error),
                    other => other,
                });
        }
        let (buf, max_payload) = backend.stream.buffered_from(run);
        if buf.len() > HEADER_LEN {
            // Counts, definitions and rows go on as they are: skimmed in one loop. The packet
            // the skim stops at is handled below. An interrupt is checked once per buffered
            // run, before every wait and flush: a KILL that lands while a run is skimmed
            // races with it anyway, as one on the server races with its rows.
            let limit = FLUSH_THRESHOLD.saturating_sub(client.queued() + run);
            if let (bytes, Some(seq)) = tracker.skim(buf, max_payload, limit) {
                run += bytes;
                next_seq = seq.wrapping_add(1);
                if client.queued() + run >= FLUSH_THRESHOLD {
                    pass_on(backend, client, run, opts).await?;
                    run = 0;
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
                if client.queued() > 0 {
                    client
                        .flush(Some(opts.client_write_timeout))
                        .await
                        .map_err(RelayError::Client)?;
                }
                let filled = match opts.interrupt {
                    None if std::mem::take(&mut first_wait) => {
                        let b = &mut **backend;
                        opts.busy_poll.fill(&mut b.stream, &mut b.polls).await
                    }
                    None => backend.stream.fill().await,
                    Some(i) => {
                        tokio::select! {
                            biased;
                            _ = i.wait() => continue,
                            r = backend.stream.fill() => r,
                        }
                    }
                };
                match filled {
                    Ok(true) => continue,
                    Ok(false) => return Err(backend_err(Error::Closed, next_seq)),
                    Err(e) => return Err(backend_err(e, next_seq)),
                }
            }
            Err(e) => {
                backend.stream.forward(run, client);
                return Err(backend_err(e, next_seq));
            }
        };
        let fed = {
            let payload = backend.stream.payload_at(run, &span);
            tracker
                .feed(&payload)
                .map_err(Error::from)
                .and_then(|feed| {
                    let out = if let Some(id) = opts
                        .rewrite_stmt_id
                        .filter(|_| kind == ResponseKind::Prepare && next_seq == 1)
                    {
                        scratch.clear();
                        scratch.extend_from_slice(backend.stream.raw_at(run, &span));
                        crate::protocol::prepare_ok::patch_stmt_id(&mut scratch, id);
                        Out::Raw
                    } else if opts.strip_session_track
                        && matches!(feed, Feed::ContinueOk | Feed::DoneOk)
                        && !ok::strip_keeps(&payload)
                    {
                        scratch.clear();
                        strip_session_track(&payload, &mut scratch)?;
                        Out::Framed
                    } else {
                        Out::AsIs
                    };
                    Ok((feed, out))
                })
        };
        let feed = match fed {
            Ok((feed, Out::AsIs)) => {
                run += span.raw_len;
                feed
            }
            Ok((feed, out)) => {
                backend.stream.forward(run, client);
                run = 0;
                if out == Out::Raw {
                    client.queue_raw(&scratch);
                } else {
                    client.queue_packet(span.first_seq, &scratch);
                }
                backend.stream.consume(&span);
                feed
            }
            Err(e) => {
                backend.stream.forward(run, client);
                return Err(backend_err(e, next_seq));
            }
        };
        next_seq = span.last_seq.wrapping_add(1);
        match feed {
            // The last bytes stay queued: the session writes them once it has given back
            // what the statement no longer needs (`Session::flush_response`).
            Feed::Done | Feed::DoneOk => {
                backend.stream.forward(run, client);
                return Ok(tracker.into_summary());
            }
            Feed::LocalInfile => {
                pass_on(backend, client, run, opts).await?;
                run = 0;
                forward_infile(client, backend).await?;
            }
            Feed::Continue | Feed::ContinueOk => {
                if client.queued() + run >= FLUSH_THRESHOLD {
                    pass_on(backend, client, run, opts).await?;
                    run = 0;
                }
            }
        }
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
    /// its session-state block).
    Framed,
}

/// The client's answer ends with ER_QUERY_INTERRUPTED, as a killed statement's does.
fn interrupted(client: &mut PacketStream, seq: u8) {
    let err = super::errors::interrupted();
    let mut out = BytesMut::new();
    err.encode(&mut out);
    client.queue_packet(seq, &out);
}

/// Reads the rest of an answer the client no longer gets, so that the backend is at the
/// next command's answer. `next_seq` is that of the first packet not yet read.
pub async fn drain(
    backend: &mut BackendConn,
    mut tracker: ResponseTracker,
    mut next_seq: u8,
) -> Result<ResponseSummary, RelayError> {
    let backend_err = |error, next_seq| RelayError::Backend { error, next_seq };
    loop {
        let span = match backend.stream.buffered_packet() {
            Ok(Some(span)) => span,
            Ok(None) => match backend.stream.fill().await {
                Ok(true) => continue,
                Ok(false) => return Err(backend_err(Error::Closed, next_seq)),
                Err(e) => return Err(backend_err(e, next_seq)),
            },
            Err(e) => return Err(backend_err(e, next_seq)),
        };
        let feed = tracker
            .feed(&backend.stream.payload(&span))
            .map_err(|e| backend_err(e.into(), next_seq))?;
        next_seq = span.last_seq.wrapping_add(1);
        backend.stream.consume(&span);
        match feed {
            Feed::Done | Feed::DoneOk => return Ok(tracker.into_summary()),
            // The client sends no file for an answer it does not see: the server gets the
            // empty packet that ends one.
            Feed::LocalInfile => {
                backend.stream.queue_raw(&[0, 0, 0, next_seq]);
                backend
                    .stream
                    .flush(None)
                    .await
                    .map_err(|e| backend_err(e, next_seq))?;
            }
            Feed::Continue | Feed::ContinueOk => {}
        }
    }
}

/// A fresh tracker for the answer to a command of `kind`, on `backend`.
pub fn tracker_for(backend: &BackendConn, kind: ResponseKind) -> ResponseTracker {
    ResponseTracker::new(kind, backend.caps)
}

/// Passes the first `run` buffered bytes of the answer on to the client as they are, and
/// writes out what the client has queued.
async fn pass_on(
    backend: &mut BackendConn,
    client: &mut PacketStream,
    run: usize,
    opts: &RelayOptions<'_>,
) -> Result<(), RelayError> {
    backend.stream.forward(run, client);
    client
        .flush(Some(opts.client_write_timeout))
        .await
        .map_err(RelayError::Client)
}

/// LOAD DATA LOCAL INFILE: the client streams the file as packets ending with an empty one.
async fn forward_infile(
    client: &mut PacketStream,
    backend: &mut BackendConn,
) -> Result<(), RelayError> {
    loop {
        let span = client
            .next_packet()
            .await
            .map_err(RelayError::Client)?
            .ok_or(RelayError::Client(Error::Closed))?;
        let last = span.payload_len == 0;
        backend.stream.queue_raw(client.raw(&span));
        client.consume(&span);
        if last || backend.stream.queued() >= FLUSH_THRESHOLD {
            backend
                .stream
                .flush(None)
                .await
                .map_err(|error| RelayError::Backend {
                    error,
                    next_seq: span.last_seq.wrapping_add(1),
                })?;
        }
        if last {
            return Ok(());
        }
    }
}
