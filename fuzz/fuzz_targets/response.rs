//! The response-end state machine fed arbitrary backend bytes. The first four bytes are the
//! negotiated capabilities, the fifth picks the command kind; the rest is the backend's wire
//! bytes, framed as the proxy frames them. Feeding must never panic, and once the tracker
//! says Done it must refuse more packets.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::protocol::{payload, scan_logical, Capabilities, Feed, ResponseKind, ResponseTracker};

fuzz_target!(|data: &[u8]| {
    let Some((head, mut wire)) = data.split_first_chunk::<5>() else {
        return;
    };
    let caps =
        Capabilities::from_bits_truncate(u32::from_le_bytes([head[0], head[1], head[2], head[3]]));
    let kind = ResponseKind::ALL[usize::from(head[4]) % ResponseKind::ALL.len()];
    let mut tracker = ResponseTracker::new(kind, caps);
    while let Ok(Some(span)) = scan_logical(wire, 1 << 20) {
        let packet = payload(wire, &span);
        wire = &wire[span.raw_len..];
        let was_done = tracker.is_done();
        match tracker.feed(&packet) {
            Ok(Feed::Done | Feed::DoneOk) => assert!(tracker.is_done()),
            Ok(_) => assert!(!was_done, "accepted a packet after the end"),
            Err(_) => return,
        }
    }
    let _ = tracker.into_summary();
});
