//! The rest of an answer nobody gets (an interrupted statement's, or one whose session
//! left its batch), read and dropped so that the backend is at the next command's answer.

use super::RelayError;
use crate::conn::{BackendConn, Error};
use crate::protocol::{Feed, ResponseSummary, ResponseTracker};

/// Reads the rest of an answer the client no longer gets, so that the backend is at the
/// next command's answer. `next_seq` is that of the first packet not yet read.
pub(super) async fn drain(
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
