//! The SQL classifier on arbitrary text, and the fast path against the full scan: whenever
//! the fast path answers, the full scan must answer the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::classify::{classify, classify_full_scan};

fuzz_target!(|data: &[u8]| {
    let fast = classify(data);
    assert_eq!(fast, classify_full_scan(data), "fast path disagrees");
});
