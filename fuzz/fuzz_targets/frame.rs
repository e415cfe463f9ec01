//! The frame decoder: `scan_logical` on arbitrary bytes must return a span inside the buffer
//! (or "need more" / an error), and writing the joined payload back must reproduce it.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use sluice::protocol::{payload, scan_logical, write_packet, MAX_CHUNK};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the payload limit, so PacketTooLarge is reachable too.
    let Some((&limit, wire)) = data.split_first() else {
        return;
    };
    let max = if limit == 0 {
        usize::MAX
    } else {
        usize::from(limit) * 64
    };
    let mut rest = wire;
    while let Ok(Some(span)) = scan_logical(rest, max) {
        assert!(span.raw_len <= rest.len(), "span past the buffer");
        assert!(span.payload_len <= max, "limit not enforced");
        let joined = payload(rest, &span);
        assert_eq!(joined.len(), span.payload_len);
        let mut out = BytesMut::new();
        let next = write_packet(&mut out, span.first_seq, &joined);
        assert_eq!(next, span.next_seq());
        // Small payloads have one canonical framing: the bytes read are the bytes written.
        if span.payload_len < MAX_CHUNK {
            assert_eq!(&out[..], &rest[..span.raw_len]);
        }
        rest = &rest[span.raw_len..];
    }
});
