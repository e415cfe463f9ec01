//! LOAD DATA LOCAL INFILE within a relayed answer: the server's file request goes to the
//! client at once, and the client's file, packet by packet, to the server.

use super::{RelayError, RelayOptions};
use crate::conn::stream::FLUSH_THRESHOLD;
use crate::conn::{BackendConn, Error, PacketStream};

/// Passes the first `run` buffered bytes of the answer on to the client as they are, and
/// writes out what the client has queued.
pub(super) async fn pass_on(
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
pub(super) async fn forward_infile(
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
