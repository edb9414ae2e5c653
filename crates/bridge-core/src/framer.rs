//! Splitting a byte stream into lines the way the reference host does
//! (docs/protocol.md §2.3, Node's `readline` over the raw stream).
//!
//! - `\n`, `\r\n` and a lone `\r` each end a line; the terminator is dropped.
//!   A `\r` that ends one chunk and a `\n` that starts the next are one
//!   terminator, whatever the delay between them (`readline` joins them when
//!   the `\n` comes within 100 ms; a deterministic rule is kinder to tests).
//! - Bytes are decoded as UTF-8 with malformed sequences replaced by U+FFFD.
//!   Line terminators are ASCII and never occur inside a multi-byte
//!   sequence, so decoding each complete line as a whole reassembles
//!   characters split across chunks.
//! - An empty line is a line; a trailing unterminated fragment is delivered
//!   by [`LineFramer::finish`].
//! - A line longer than the configured maximum is not buffered: it becomes
//!   one [`Frame::TooLong`] as soon as it passes the limit (not when, or
//!   whether, its terminator comes), the rest of it is skipped in bounded
//!   memory, and the framer resynchronises at the next terminator, losing
//!   nothing else.

/// What the framer produces, in stream order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// One complete line, without its terminator.
    Line(String),
    /// A line longer than the maximum, produced the moment it passes the
    /// limit: its first bytes (decoded). The rest of the line is skipped.
    TooLong { prefix: String },
}

/// How much of an over-long line is kept, to show in diagnostics.
pub const TOO_LONG_PREFIX_BYTES: usize = 1024;

/// The default maximum line size: large enough for real verbatim payloads
/// (a tool returning hundreds of megabytes), small enough to bound memory.
pub const DEFAULT_MAX_LINE_BYTES: usize = 256 * 1024 * 1024;

/// An incremental line splitter. Feed it chunks with [`push`](Self::push),
/// then call [`finish`](Self::finish) at the end of the stream.
#[derive(Debug)]
pub struct LineFramer {
    max_line_bytes: usize,
    /// Bytes of the line in progress.
    pending: Vec<u8>,
    /// The previous chunk ended with `\r`: a leading `\n` belongs to it.
    after_cr: bool,
    /// Inside an over-long line, already reported: skipping to its end.
    skipping: bool,
}

impl LineFramer {
    pub fn new(max_line_bytes: usize) -> Self {
        LineFramer {
            max_line_bytes: max_line_bytes.max(1),
            pending: Vec::new(),
            after_cr: false,
            skipping: false,
        }
    }

    /// Splits `chunk` and calls `emit` for every frame completed by it.
    pub fn push(&mut self, mut chunk: &[u8], mut emit: impl FnMut(Frame)) {
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while !chunk.is_empty() {
            match memchr::memchr2(b'\n', b'\r', chunk) {
                None => {
                    self.append(chunk, &mut emit);
                    return;
                }
                Some(end) => {
                    self.append(&chunk[..end], &mut emit);
                    if let Some(frame) = self.end_line() {
                        emit(frame);
                    }
                    let crlf = chunk[end] == b'\r' && chunk.get(end + 1) == Some(&b'\n');
                    if chunk[end] == b'\r' && end + 1 == chunk.len() {
                        self.after_cr = true;
                    }
                    chunk = &chunk[end + if crlf { 2 } else { 1 }..];
                }
            }
        }
    }

    /// Ends the stream: the unterminated fragment, if any, is the last frame
    /// (an over-long one was reported already).
    pub fn finish(&mut self) -> Option<Frame> {
        self.after_cr = false;
        if self.pending.is_empty() {
            self.skipping = false;
            return None;
        }
        self.end_line()
    }

    /// Adds bytes of the line in progress; the moment the line passes the
    /// limit, `emit`s its [`Frame::TooLong`] and starts skipping.
    fn append(&mut self, bytes: &[u8], emit: &mut impl FnMut(Frame)) {
        if self.skipping {
            return;
        }
        if self.pending.len() + bytes.len() <= self.max_line_bytes {
            self.pending.extend_from_slice(bytes);
            return;
        }
        // The same prefix however the line was cut into chunks: its first
        // KiB, or (under a limit below 1 KiB) all of it that was seen.
        let keep = TOO_LONG_PREFIX_BYTES.min(self.max_line_bytes + 1);
        let mut prefix = std::mem::take(&mut self.pending);
        let room = keep.saturating_sub(prefix.len());
        prefix.extend_from_slice(&bytes[..room.min(bytes.len())]);
        prefix.truncate(keep);
        prefix.shrink_to_fit();
        self.skipping = true;
        emit(Frame::TooLong {
            prefix: decode(prefix),
        });
    }

    /// A terminator (or the end of the stream) ends the line in progress:
    /// its frame, or nothing when it was over-long (already reported).
    fn end_line(&mut self) -> Option<Frame> {
        if std::mem::replace(&mut self.skipping, false) {
            return None;
        }
        let capacity = self.pending.capacity();
        let line = std::mem::take(&mut self.pending);
        // Keep a modest buffer for the next line, not the largest one seen.
        if capacity <= 64 * 1024 {
            self.pending.reserve(capacity);
        }
        Some(Frame::Line(decode(line)))
    }
}

impl Default for LineFramer {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_LINE_BYTES)
    }
}

/// UTF-8 with U+FFFD for malformed sequences (maximal subparts, as
/// `TextDecoder` does), without copying valid input.
fn decode(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(chunks: &[&[u8]], max: usize) -> Vec<Frame> {
        let mut framer = LineFramer::new(max);
        let mut out = Vec::new();
        for chunk in chunks {
            framer.push(chunk, |f| out.push(f));
        }
        out.extend(framer.finish());
        out
    }

    fn lines(chunks: &[&[u8]]) -> Vec<String> {
        frames(chunks, DEFAULT_MAX_LINE_BYTES)
            .into_iter()
            .map(|f| match f {
                Frame::Line(l) => l,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn all_three_terminators_and_empty_lines() {
        assert_eq!(lines(&[b"a\nb\r\nc\rd"]), ["a", "b", "c", "d"]);
        assert_eq!(lines(&[b"\n\n"]), ["", ""]);
        assert_eq!(lines(&[b"a\r\r\nb"]), ["a", "", "b"]);
        assert_eq!(lines(&[b"a\n\rb"]), ["a", "", "b"]);
        assert_eq!(lines(&[b""]), Vec::<String>::new());
        assert_eq!(lines(&[b"tail"]), ["tail"]);
        assert_eq!(lines(&[b"x\n"]), ["x"]);
    }

    #[test]
    fn crlf_split_across_chunks_is_one_terminator() {
        assert_eq!(lines(&[b"a\r", b"\nb"]), ["a", "b"]);
        assert_eq!(lines(&[b"a\r", b"", b"\nb"]), ["a", "b"]);
        assert_eq!(lines(&[b"a\r", b"b"]), ["a", "b"]);
        assert_eq!(lines(&[b"a\r", b"\r\n"]), ["a", ""]);
    }

    #[test]
    fn every_split_of_every_multibyte_character() {
        let text = "é€😀 x\u{2028}y\r\nz";
        let bytes = text.as_bytes();
        let expected = vec!["é€😀 x\u{2028}y".to_owned(), "z".to_owned()];
        for split in 0..=bytes.len() {
            assert_eq!(
                lines(&[&bytes[..split], &bytes[split..]]),
                expected,
                "split at {split}"
            );
        }
        for first in 0..=bytes.len() {
            for second in first..=bytes.len() {
                let chunks = [&bytes[..first], &bytes[first..second], &bytes[second..]];
                assert_eq!(lines(&chunks), expected, "splits at {first}, {second}");
            }
        }
    }

    #[test]
    fn one_byte_per_chunk() {
        let text = "{\"a\":\"é😀\"}\r\n\r\n\n\rlast";
        let chunks: Vec<&[u8]> = text.as_bytes().chunks(1).collect();
        assert_eq!(lines(&chunks), ["{\"a\":\"é😀\"}", "", "", "", "last"]);
    }

    #[test]
    fn malformed_utf8_becomes_replacement_characters() {
        assert_eq!(lines(&[b"a\xffb\n"]), ["a\u{fffd}b"]);
        // A truncated sequence before a terminator is replaced once.
        assert_eq!(lines(&[b"\xe2\x82\nz"]), ["\u{fffd}", "z"]);
        // The same across chunk boundaries.
        assert_eq!(lines(&[b"\xe2", b"\x82", b"\xac\n"]), ["€"]);
        assert_eq!(lines(&[b"\xe2", b"\x82\n"]), ["\u{fffd}"]);
        assert_eq!(lines(&[b"\xc0\xaf\n"]), ["\u{fffd}\u{fffd}"]);
        assert_eq!(lines(&[b"\x00\n"]), ["\u{0}"]);
    }

    #[test]
    fn the_limit_counts_input_bytes_not_decoded_text() {
        // Found by the framer fuzz target (its invariant was wrong, not the
        // framer): each malformed byte becomes a 3-byte U+FFFD, so a line
        // within the limit can decode to up to three times its size.
        let got = frames(&[&[0x99; 100], b"\n"], 100);
        assert_eq!(got, [Frame::Line("\u{fffd}".repeat(100))]);
        let got = frames(&[&[0x99; 101], b"\n"], 100);
        assert!(matches!(&got[0], Frame::TooLong { .. }));
        assert_eq!(got.len(), 1);
    }

    #[test]
    fn megabyte_chunks() {
        let line = "x".repeat(3 << 20);
        let stream = format!("{line}\n{line}\nend");
        let chunks: Vec<&[u8]> = stream.as_bytes().chunks(1 << 20).collect();
        let got = lines(&chunks);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].len(), 3 << 20);
        assert_eq!(got[2], "end");
    }

    #[test]
    fn an_over_long_line_is_one_frame_and_the_stream_resynchronises() {
        let long = "y".repeat(5000);
        let stream = format!("first\n{long}\nnext\r\nlast");
        for chunk_size in [1, 7, 100, 4096, 100_000] {
            let chunks: Vec<&[u8]> = stream.as_bytes().chunks(chunk_size).collect();
            let got = frames(&chunks, 1000);
            assert_eq!(got.len(), 4, "chunk size {chunk_size}");
            assert_eq!(got[0], Frame::Line("first".into()));
            match &got[1] {
                Frame::TooLong { prefix } => {
                    assert_eq!(prefix.len(), 1001, "the bytes up to the limit and one more");
                    assert!(prefix.bytes().all(|b| b == b'y'));
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(got[2], Frame::Line("next".into()));
            assert_eq!(got[3], Frame::Line("last".into()));
        }
        // Exactly at the limit is still a line.
        let at_limit = "z".repeat(1000);
        assert_eq!(
            frames(&[format!("{at_limit}\n").as_bytes()], 1000),
            [Frame::Line(at_limit)]
        );
        // An over-long fragment at the end of the stream.
        let got = frames(&[b"ok\n", "w".repeat(2000).as_bytes()], 1000);
        assert!(matches!(&got[1], Frame::TooLong { .. }));
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn an_over_long_line_is_reported_the_moment_it_passes_the_limit() {
        let mut framer = LineFramer::new(1000);
        let mut out = Vec::new();
        framer.push(&[b'x'; 999], |f| out.push(f));
        assert!(out.is_empty());
        framer.push(b"xy", |f| out.push(f));
        assert!(matches!(&out[..], [Frame::TooLong { prefix }] if prefix.len() == 1001));
        // The rest of the line, however long, is skipped in bounded memory.
        for _ in 0..100 {
            framer.push(&[b'z'; 100_000], |f| out.push(f));
        }
        assert_eq!(out.len(), 1);
        assert!(framer.pending.capacity() <= 64 * 1024);
        framer.push(b"zzz\nnext\n", |f| out.push(f));
        assert_eq!(out[1], Frame::Line("next".into()));
        assert_eq!(framer.finish(), None);
        // Under the default limit, the prefix is the line's first KiB.
        let mut framer = LineFramer::new(4096);
        let mut out = Vec::new();
        framer.push(&[b'q'; 5000], |f| out.push(f));
        assert!(
            matches!(&out[..], [Frame::TooLong { prefix }] if prefix.len() == TOO_LONG_PREFIX_BYTES)
        );
    }
}
