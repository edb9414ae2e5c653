//! The framer on arbitrary bytes in arbitrary chunkings: it never panics,
//! and the frames do not depend on how the stream was cut into chunks.
#![no_main]

use bridge_core::framer::{Frame, LineFramer};
use libfuzzer_sys::fuzz_target;

fn frames(chunks: &[&[u8]], max: usize) -> Vec<Frame> {
    let mut framer = LineFramer::new(max);
    let mut out = Vec::new();
    for chunk in chunks {
        framer.push(chunk, |f| out.push(f));
    }
    out.extend(framer.finish());
    out
}

fuzz_target!(|input: (Vec<u8>, Vec<u8>, u16)| {
    let (data, cuts, max) = input;
    let max = usize::from(max.max(1));
    // Chunk boundaries from `cuts`, each a length in 0..=255.
    let mut chunks = Vec::new();
    let mut at = 0;
    for &cut in &cuts {
        let end = (at + usize::from(cut)).min(data.len());
        chunks.push(&data[at..end]);
        at = end;
    }
    chunks.push(&data[at..]);
    let whole = frames(&[&data], max);
    assert_eq!(frames(&chunks, max), whole, "framing depends on chunking");
    // Every complete line is text without terminators, at most `max` input
    // bytes (each malformed byte becomes a 3-byte U+FFFD, hence the 3).
    for frame in &whole {
        if let Frame::Line(line) = frame {
            assert!(!line.contains(['\n', '\r']));
            assert!(line.len() <= 3 * max);
        }
    }
});
