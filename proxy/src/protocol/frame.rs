//! Packet framing: the 4-byte header, sequence ids and the 16 MiB split and join.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_packets.html>,
//! <https://mariadb.com/kb/en/0-packet/>.
//!
//! A logical packet is sent as chunks of `MAX_CHUNK` payload bytes followed by one shorter
//! chunk, which is empty when the length is an exact multiple of `MAX_CHUNK`. This is the
//! only module that knows that; everything else sees logical payloads.

use std::borrow::Cow;

use bytes::{BufMut, BytesMut};

use super::error::{Error, Result};

/// Length of a packet header: 3-byte payload length, 1-byte sequence id.
pub const HEADER_LEN: usize = 4;
/// Largest payload of one chunk; a chunk this long means "more chunks follow".
pub const MAX_CHUNK: usize = 0xFF_FFFF;

/// Where one logical packet lies at the start of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogicalSpan {
    /// Bytes on the wire, headers included.
    pub raw_len: usize,
    /// Payload bytes, headers excluded.
    pub payload_len: usize,
    pub first_seq: u8,
    pub last_seq: u8,
    pub chunks: usize,
}

impl LogicalSpan {
    /// The sequence id the peer's next packet must carry.
    pub fn next_seq(&self) -> u8 {
        self.last_seq.wrapping_add(1)
    }
}

/// The header of the first physical packet in `buf`: (payload length, sequence id).
pub fn peek_header(buf: &[u8]) -> Option<(usize, u8)> {
    match buf {
        [a, b, c, seq, ..] => Some((u32::from_le_bytes([*a, *b, *c, 0]) as usize, *seq)),
        _ => None,
    }
}

/// One complete logical packet (all 16 MiB chunks + the final short chunk) at the start of `buf`, or Ok(None) if more
/// bytes are needed. Errors: seq ids not consecutive inside the packet (SequenceMismatch); payload_len > max_payload
/// (PacketTooLarge, reported as soon as the headers seen so far prove it, without waiting for the bytes).
#[inline]
pub fn scan_logical(buf: &[u8], max_payload: usize) -> Result<Option<LogicalSpan>> {
    // Nearly every packet: one chunk, all of it buffered, within the limit. The same span
    // as the loop below finds, without the loop (it runs for every packet relayed).
    if let [a, b, c, seq, body @ ..] = buf {
        let len = u32::from_le_bytes([*a, *b, *c, 0]) as usize;
        if len < MAX_CHUNK && len <= max_payload && body.len() >= len {
            return Ok(Some(LogicalSpan {
                raw_len: HEADER_LEN + len,
                payload_len: len,
                first_seq: *seq,
                last_seq: *seq,
                chunks: 1,
            }));
        }
    }
    scan_chunks(buf, max_payload)
}

/// `scan_logical` for what its fast path leaves: incomplete, oversized or multi-chunk.
fn scan_chunks(buf: &[u8], max_payload: usize) -> Result<Option<LogicalSpan>> {
    let mut pos = 0usize;
    let mut payload_len = 0usize;
    let mut chunks = 0usize;
    let mut first_seq = 0u8;
    let mut expected = 0u8;
    loop {
        let Some((len, seq)) = buf.get(pos..).and_then(peek_header) else {
            return Ok(None);
        };
        if chunks == 0 {
            first_seq = seq;
        } else if seq != expected {
            return Err(Error::SequenceMismatch { expected, got: seq });
        }
        payload_len = payload_len.saturating_add(len);
        if payload_len > max_payload {
            return Err(Error::PacketTooLarge {
                len: payload_len,
                max: max_payload,
            });
        }
        chunks += 1;
        expected = seq.wrapping_add(1);
        pos += HEADER_LEN + len;
        if buf.len() < pos {
            return Ok(None);
        }
        if len < MAX_CHUNK {
            return Ok(Some(LogicalSpan {
                raw_len: pos,
                payload_len,
                first_seq,
                last_seq: seq,
                chunks,
            }));
        }
    }
}

/// Walks the chunks of a logical packet that is dropped unread (one over
/// `max_allowed_packet`: the peer still sends all of it), as its bytes arrive, keeping
/// none of them. The answer to such a packet carries the sequence id after its last chunk's.
#[derive(Debug, Default)]
pub struct Skip {
    /// Bytes of the current chunk's payload still to come.
    left: usize,
    /// The current chunk is the packet's last (shorter than `MAX_CHUNK`).
    last_chunk: bool,
    /// The current chunk's sequence id (`None` before the first header).
    seq: Option<u8>,
}

impl Skip {
    /// Feeds the bytes that arrived since the last call (the first call: from the packet's
    /// first header on). Returns how many of them belong to the packet, to be dropped, and
    /// whether it is over; bytes after it are not counted, nor a header not yet complete
    /// (fed again with what follows it).
    pub fn feed(&mut self, buf: &[u8]) -> (usize, bool) {
        let mut pos = 0;
        loop {
            let take = self.left.min(buf.len() - pos);
            pos += take;
            self.left -= take;
            if self.left > 0 {
                return (pos, false);
            }
            if self.last_chunk {
                return (pos, true);
            }
            let Some((len, seq)) = buf.get(pos..).and_then(peek_header) else {
                return (pos, false);
            };
            pos += HEADER_LEN;
            self.left = len;
            self.last_chunk = len < MAX_CHUNK;
            self.seq = Some(seq);
        }
    }

    /// The last chunk's sequence id, once its header has been fed (its payload may still
    /// be coming).
    pub fn last_seq(&self) -> Option<u8> {
        self.seq.filter(|_| self.last_chunk)
    }
}

/// The payload of a scanned logical packet: borrowed when it is one chunk, joined when it is several.
///
/// `raw` must start with the packet `span` was scanned from; a shorter `raw` yields what is there.
#[inline]
pub fn payload<'a>(raw: &'a [u8], span: &LogicalSpan) -> Cow<'a, [u8]> {
    let raw = raw.get(..span.raw_len).unwrap_or(raw);
    if span.chunks == 1 {
        return Cow::Borrowed(raw.get(HEADER_LEN..).unwrap_or_default());
    }
    let mut joined = Vec::with_capacity(span.payload_len);
    let mut rest = raw;
    while let Some((len, _)) = peek_header(rest) {
        let end = (HEADER_LEN + len).min(rest.len());
        joined.extend_from_slice(&rest[HEADER_LEN..end]);
        rest = &rest[end..];
    }
    Cow::Owned(joined)
}

/// Appends `payload` framed as packets starting at `seq` (split at MAX_CHUNK, trailing empty chunk when the length
/// is an exact multiple), returns the next sequence id.
pub fn write_packet(out: &mut BytesMut, seq: u8, payload: &[u8]) -> u8 {
    let mut seq = seq;
    let mut rest = payload;
    out.reserve(payload.len() + HEADER_LEN * (payload.len() / MAX_CHUNK + 1));
    loop {
        let n = rest.len().min(MAX_CHUNK);
        out.put_uint_le(n as u64, 3);
        out.put_u8(seq);
        out.put_slice(&rest[..n]);
        seq = seq.wrapping_add(1);
        rest = &rest[n..];
        if n < MAX_CHUNK {
            return seq;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// COM_QUERY "SELECT 1" as a client sends it (seq 0).
    const QUERY: &[u8] = &[
        0x09, 0x00, 0x00, 0x00, 0x03, b'S', b'E', b'L', b'E', b'C', b'T', b' ', b'1',
    ];

    #[test]
    fn scans_one_chunk_packet() {
        let span = scan_logical(QUERY, 1024).unwrap().unwrap();
        assert_eq!(
            span,
            LogicalSpan {
                raw_len: 13,
                payload_len: 9,
                first_seq: 0,
                last_seq: 0,
                chunks: 1
            }
        );
        assert_eq!(span.next_seq(), 1);
        assert!(matches!(
            payload(QUERY, &span),
            Cow::Borrowed(b"\x03SELECT 1")
        ));
    }

    #[test]
    fn leaves_following_packets_alone() {
        let mut two = QUERY.to_vec();
        two.extend_from_slice(&[0x01, 0x00, 0x00, 0x00, 0x0e]);
        assert_eq!(scan_logical(&two, 1024).unwrap().unwrap().raw_len, 13);
    }

    #[test]
    fn every_prefix_needs_more_bytes() {
        for end in 0..QUERY.len() {
            assert_eq!(scan_logical(&QUERY[..end], 1024), Ok(None), "prefix {end}");
        }
    }

    #[test]
    fn exact_multiple_gets_a_trailing_empty_chunk_and_round_trips() {
        let data = vec![0xAB; MAX_CHUNK];
        let mut out = BytesMut::new();
        assert_eq!(write_packet(&mut out, 3, &data), 5);
        assert_eq!(out.len(), MAX_CHUNK + 2 * HEADER_LEN);
        assert_eq!(&out[MAX_CHUNK + HEADER_LEN..], &[0, 0, 0, 4]);
        // Without the empty chunk the packet is incomplete.
        assert_eq!(
            scan_logical(&out[..MAX_CHUNK + HEADER_LEN], usize::MAX),
            Ok(None)
        );
        let span = scan_logical(&out, usize::MAX).unwrap().unwrap();
        assert_eq!((span.chunks, span.first_seq, span.last_seq), (2, 3, 4));
        assert_eq!(span.payload_len, MAX_CHUNK);
        assert_eq!(payload(&out, &span).as_ref(), &data[..]);
    }

    #[test]
    fn joins_three_chunks_with_seq_wrapping() {
        let data: Vec<u8> = (0..2 * MAX_CHUNK + 10).map(|i| i as u8).collect();
        let mut out = BytesMut::new();
        assert_eq!(write_packet(&mut out, 0xFF, &data), 2);
        let span = scan_logical(&out, usize::MAX).unwrap().unwrap();
        assert_eq!((span.chunks, span.first_seq, span.last_seq), (3, 0xFF, 1));
        assert_eq!(span.raw_len, out.len());
        assert!(payload(&out, &span).as_ref() == &data[..]);
    }

    #[test]
    fn detects_sequence_gap_inside_a_logical_packet() {
        let mut raw = vec![0xFF, 0xFF, 0xFF, 0x01];
        raw.resize(HEADER_LEN + MAX_CHUNK, 0);
        raw.extend_from_slice(&[0x00, 0x00, 0x00, 0x05]);
        assert_eq!(
            scan_logical(&raw, usize::MAX),
            Err(Error::SequenceMismatch {
                expected: 2,
                got: 5
            })
        );
    }

    #[test]
    fn too_large_is_reported_from_the_header_alone() {
        // Only the header of a 16 MiB chunk has arrived.
        let head = [0xFF, 0xFF, 0xFF, 0x00];
        assert_eq!(
            scan_logical(&head, 1 << 20),
            Err(Error::PacketTooLarge {
                len: MAX_CHUNK,
                max: 1 << 20
            })
        );
        assert_eq!(scan_logical(&head, usize::MAX), Ok(None));
    }

    #[test]
    fn a_skipped_packet_ends_at_its_last_chunk_fed_in_any_pieces() {
        let data = vec![7u8; 2 * MAX_CHUNK + 5];
        let mut out = BytesMut::new();
        assert_eq!(write_packet(&mut out, 0, &data), 3);
        out.extend_from_slice(QUERY); // the next command is not part of it
        for piece in [3, 4, 5, 4096, MAX_CHUNK, usize::MAX] {
            let mut skip = Skip::default();
            let (mut at, mut end, mut done) = (0usize, 0usize, false);
            while !done {
                // `piece` more bytes arrive; those not taken (a cut header) are fed again
                // with them.
                end = end.saturating_add(piece).min(out.len());
                let (n, over) = skip.feed(&out[at..end]);
                at += n;
                done = over;
                // The last chunk's id is known from its header on.
                let last_header = 2 * (HEADER_LEN + MAX_CHUNK) + HEADER_LEN;
                assert_eq!(skip.last_seq().is_some(), at >= last_header, "at {at}");
            }
            assert_eq!(at, out.len() - QUERY.len(), "pieces of {piece}");
            assert_eq!(skip.last_seq(), Some(2));
        }
        // An exact multiple of MAX_CHUNK ends with its empty chunk.
        let mut exact = BytesMut::new();
        write_packet(&mut exact, 0, &vec![1u8; MAX_CHUNK]);
        let mut skip = Skip::default();
        assert_eq!(skip.feed(&exact), (exact.len(), true));
        assert_eq!(skip.last_seq(), Some(1));
        assert_eq!(Skip::default().feed(&[0, 0]), (0, false));
    }

    #[test]
    fn empty_payload_is_one_header() {
        let mut out = BytesMut::new();
        assert_eq!(write_packet(&mut out, 2, &[]), 3);
        assert_eq!(&out[..], &[0, 0, 0, 2]);
        let span = scan_logical(&out, 0).unwrap().unwrap();
        assert_eq!(payload(&out, &span).len(), 0);
    }
}
