//! The in-process channel's reading side: frames a backend's output stream
//! and validates every stdout line off the consumer's thread, handing out
//! ordered batches through a bounded sink.
//!
//! One reader per stream, on its own thread (see [`spawn_reader`]). Each
//! read from the stream becomes at most a few batches: a trickle of events is
//! delivered line by line, a burst in large batches. Valid events and decode
//! failures stay in stream order. The sink blocks when the consumer falls
//! behind, and then the reader stops reading: the pipe fills up and the
//! backend waits, instead of this process buffering without limit.

use std::io::{ErrorKind, Read};
use std::sync::mpsc::SyncSender;
use std::thread::JoinHandle;

use crate::decode::validate_event_line;
use crate::error::DecodeError;
use crate::framer::{Frame, LineFramer, DEFAULT_MAX_LINE_BYTES};
use crate::lift::{validate_and_lift, LiftLimits, Lifted};
use crate::schema::EventType;

/// What a stream carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// stdout: protocol lines, each validated as an event.
    Events,
    /// stderr: diagnostics, delivered as text lines.
    Text,
}

/// One framed line, judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A valid event line; parsing it gives the event. `lifted` holds it
    /// with its large values cut out, when the options ask for that (see
    /// [`crate::lift`]).
    Event {
        line: String,
        event_type: EventType,
        lifted: Option<Box<Lifted>>,
    },
    /// A stdout line that is not a valid event. For a line over the maximum
    /// size, `line` holds its first kilobyte.
    Invalid { line: String, error: DecodeError },
    /// A stderr line (for a line over the maximum size, its first kilobyte).
    Text(String),
}

impl Item {
    fn size(&self) -> usize {
        match self {
            Item::Event { line, .. } | Item::Invalid { line, .. } | Item::Text(line) => line.len(),
        }
    }
}

/// How a stream ended.
#[derive(Debug)]
pub enum StreamEnd {
    /// End of file: the writer closed the stream.
    Eof,
    /// The source was told to stop reading (it failed with [`Cut`]): what
    /// was read is delivered, an unterminated fragment is dropped.
    Cut,
    /// Reading failed; nothing more will come.
    Failed(std::io::Error),
}

/// The error a source returns (inside an [`std::io::Error`]) when its owner
/// told it to stop reading before end of file, e.g. because the process
/// that wrote the stream has exited and whatever still holds the pipe open
/// must not keep the reader. The stream ends as [`StreamEnd::Cut`].
#[derive(Debug)]
pub struct Cut;

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("reading was cut off")
    }
}

impl std::error::Error for Cut {}

impl Cut {
    /// The `io::Error` a source returns to cut its stream off.
    pub fn error() -> std::io::Error {
        std::io::Error::other(Cut)
    }

    fn is(error: &std::io::Error) -> bool {
        error.get_ref().is_some_and(|inner| inner.is::<Cut>())
    }
}

/// Consecutive items of one stream. The last batch of a stream has `end`.
#[derive(Debug)]
pub struct Batch {
    pub items: Vec<Item>,
    pub end: Option<StreamEnd>,
}

/// Where batches go. `deliver` may block (that is the backpressure) and
/// returns `false` once the consumer is gone, which stops the reader.
pub trait BatchSink {
    fn deliver(&mut self, batch: Batch) -> bool;
}

impl BatchSink for SyncSender<Batch> {
    fn deliver(&mut self, batch: Batch) -> bool {
        self.send(batch).is_ok()
    }
}

/// Reader settings.
#[derive(Clone, Debug)]
pub struct ReaderOptions {
    pub kind: StreamKind,
    /// Lines longer than this become one decode error (or a truncated stderr
    /// line) and the reader resynchronises at the next line.
    pub max_line_bytes: usize,
    /// A batch is delivered once it holds this many items…
    pub max_batch_items: usize,
    /// …or this many bytes of lines, even if more input is at hand.
    pub max_batch_bytes: usize,
    /// Valid event lines of at least [`LARGE_LINE_BYTES`] get their
    /// large values lifted out (for JavaScript hosts; `None`, the default,
    /// lifts nothing).
    pub lift: Option<LiftLimits>,
}

/// Lines at least this long are *large*: worth lifting values from, and
/// handed to a JavaScript host as parts of their own (see [`crate::batch`]),
/// which the binding gives V8 without a copy.
pub const LARGE_LINE_BYTES: usize = 64 * 1024;

impl ReaderOptions {
    pub fn new(kind: StreamKind) -> Self {
        ReaderOptions {
            kind,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_batch_items: 1024,
            max_batch_bytes: 4 * 1024 * 1024,
            lift: None,
        }
    }
}

/// Reads `source` to its end on the calling thread, delivering batches to
/// `sink` in stream order; the last batch carries the [`StreamEnd`].
pub fn read_stream(mut source: impl Read, options: &ReaderOptions, sink: &mut impl BatchSink) {
    let mut decoder = LineDecoder::new(options.clone());
    let mut buffer = vec![0u8; 64 * 1024];
    let mut batch = Vec::new();
    let mut batch_bytes = 0;
    loop {
        let read = match source.read(&mut buffer) {
            Ok(read) => read,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) if Cut::is(&error) => {
                sink.deliver(Batch {
                    items: batch,
                    end: Some(StreamEnd::Cut),
                });
                return;
            }
            Err(error) => {
                sink.deliver(Batch {
                    items: batch,
                    end: Some(StreamEnd::Failed(error)),
                });
                return;
            }
        };
        if read == 0 {
            batch.extend(decoder.finish());
            sink.deliver(Batch {
                items: batch,
                end: Some(StreamEnd::Eof),
            });
            return;
        }
        let mut consumer_gone = false;
        decoder.push(&buffer[..read], |item| {
            batch_bytes += item.size();
            batch.push(item);
            if !consumer_gone
                && (batch.len() >= options.max_batch_items
                    || batch_bytes >= options.max_batch_bytes)
            {
                consumer_gone = !sink.deliver(Batch {
                    items: std::mem::take(&mut batch),
                    end: None,
                });
                batch_bytes = 0;
            }
        });
        if !batch.is_empty() && !consumer_gone {
            consumer_gone = !sink.deliver(Batch {
                items: std::mem::take(&mut batch),
                end: None,
            });
            batch_bytes = 0;
        }
        if consumer_gone {
            return;
        }
    }
}

/// Frames and judges a stream's bytes as they come, on the caller's thread:
/// what [`read_stream`] does per read, for a host that gets the bytes itself
/// (a JavaScript stream's `data` event) and wants the items at once.
pub struct LineDecoder {
    framer: LineFramer,
    options: ReaderOptions,
}

impl LineDecoder {
    pub fn new(options: ReaderOptions) -> Self {
        LineDecoder {
            framer: LineFramer::new(options.max_line_bytes),
            options,
        }
    }

    /// Frames `bytes` and calls `emit` with every line they complete, judged.
    pub fn push(&mut self, bytes: &[u8], mut emit: impl FnMut(Item)) {
        let options = &self.options;
        self.framer.push(bytes, |frame| emit(judge(frame, options)));
    }

    /// Ends the stream: the unterminated fragment, if any, judged.
    pub fn finish(&mut self) -> Option<Item> {
        self.framer
            .finish()
            .map(|frame| judge(frame, &self.options))
    }
}

/// Starts [`read_stream`] on a new thread.
pub fn spawn_reader<R, S>(
    source: R,
    options: ReaderOptions,
    mut sink: S,
) -> std::io::Result<JoinHandle<()>>
where
    R: Read + Send + 'static,
    S: BatchSink + Send + 'static,
{
    let name = match options.kind {
        StreamKind::Events => "bridge-stdout",
        StreamKind::Text => "bridge-stderr",
    };
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || read_stream(source, &options, &mut sink))
}

fn judge(frame: Frame, options: &ReaderOptions) -> Item {
    match (frame, options.kind) {
        (Frame::Line(line), StreamKind::Events) => {
            let (verdict, lifted) = match options.lift {
                Some(limits) if line.len() >= LARGE_LINE_BYTES => validate_and_lift(&line, limits),
                _ => (validate_event_line(&line), None),
            };
            match verdict {
                Ok(event_type) => Item::Event {
                    line,
                    event_type,
                    lifted: lifted.map(Box::new),
                },
                Err(error) => Item::Invalid { line, error },
            }
        }
        (Frame::TooLong { prefix }, StreamKind::Events) => Item::Invalid {
            line: prefix,
            error: DecodeError::line_too_long(options.max_line_bytes),
        },
        (Frame::Line(line), StreamKind::Text) => Item::Text(line),
        (Frame::TooLong { prefix }, StreamKind::Text) => Item::Text(prefix),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;
    use std::sync::mpsc::sync_channel;

    const SHUTDOWN: &str = r#"{"protocol_version":"1.0","type":"shutdown","ts":1}"#;

    fn collect(input: Vec<u8>, options: ReaderOptions) -> Vec<Batch> {
        let (tx, rx) = sync_channel(1);
        let handle = spawn_reader(Cursor::new(input), options, tx).unwrap();
        let batches: Vec<Batch> = rx.iter().collect();
        handle.join().unwrap();
        batches
    }

    #[test]
    fn events_and_failures_keep_stream_order() {
        let input = format!(
            "{SHUTDOWN}\nnot json\n\n{SHUTDOWN}\r\n{{\"protocol_version\":\"2.0\"}}\r{SHUTDOWN}"
        );
        let batches = collect(input.into_bytes(), ReaderOptions::new(StreamKind::Events));
        assert!(matches!(batches.last().unwrap().end, Some(StreamEnd::Eof)));
        let items: Vec<&Item> = batches.iter().flat_map(|b| &b.items).collect();
        let kinds: Vec<&str> = items
            .iter()
            .map(|i| match i {
                Item::Event { .. } => "event",
                Item::Invalid { .. } => "invalid",
                Item::Text(_) => "text",
            })
            .collect();
        assert_eq!(
            kinds,
            ["event", "invalid", "invalid", "event", "invalid", "event"]
        );
        match items[2] {
            Item::Invalid { line, error } => {
                assert_eq!(line, "");
                assert!(error
                    .message
                    .starts_with("Invalid JSON bridge event: SyntaxError: "));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn stderr_lines_are_text() {
        let batches = collect(
            b"warning\r\ntraceback\n\xff".to_vec(),
            ReaderOptions::new(StreamKind::Text),
        );
        let items: Vec<Item> = batches.into_iter().flat_map(|b| b.items).collect();
        assert_eq!(
            items,
            [
                Item::Text("warning".into()),
                Item::Text("traceback".into()),
                Item::Text("\u{fffd}".into())
            ]
        );
    }

    #[test]
    fn batches_are_bounded_and_lines_larger_than_a_batch_pass_whole() {
        let big = format!(
            r#"{{"protocol_version":"1.0","type":"run_start","ts":1,"prompt":"{}"}}"#,
            "p".repeat(3 << 20)
        );
        let mut input = String::new();
        for _ in 0..5000 {
            input.push_str(SHUTDOWN);
            input.push('\n');
        }
        input.push_str(&big);
        input.push('\n');
        let options = ReaderOptions {
            max_batch_items: 100,
            max_batch_bytes: 1 << 20,
            ..ReaderOptions::new(StreamKind::Events)
        };
        let batches = collect(input.into_bytes(), options);
        assert!(batches.iter().all(|b| b.items.len() <= 100));
        let items: Vec<Item> = batches.into_iter().flat_map(|b| b.items).collect();
        assert_eq!(items.len(), 5001);
        assert!(matches!(&items[5000], Item::Event { line, .. } if line.len() == big.len()));
    }

    #[test]
    fn an_over_long_line_is_one_failure_and_reading_goes_on() {
        let options = ReaderOptions {
            max_line_bytes: 4096,
            ..ReaderOptions::new(StreamKind::Events)
        };
        let input = format!("{SHUTDOWN}\n{}\n{SHUTDOWN}\n", "z".repeat(10_000));
        let items: Vec<Item> = collect(input.into_bytes(), options)
            .into_iter()
            .flat_map(|b| b.items)
            .collect();
        assert_eq!(items.len(), 3);
        match &items[1] {
            Item::Invalid { line, error } => {
                assert_eq!(line.len(), 1024);
                assert_eq!(
                    error.message,
                    "Bridge event line exceeds the maximum line size of 4096 bytes."
                );
                assert!(error.fields.is_empty());
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(items[2], Item::Event { .. }));
    }

    /// A source that yields its input in fixed chunks, to check framing
    /// across reads.
    struct Chunked(Vec<u8>, usize, usize);

    impl Read for Chunked {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(out.len()).min(self.0.len() - self.2);
            out[..n].copy_from_slice(&self.0[self.2..self.2 + n]);
            self.2 += n;
            Ok(n)
        }
    }

    #[test]
    fn a_cut_off_source_ends_the_stream_without_its_fragment() {
        struct CutAfter(Vec<u8>, bool);
        impl Read for CutAfter {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                if std::mem::replace(&mut self.1, true) {
                    return Err(Cut::error());
                }
                out[..self.0.len()].copy_from_slice(&self.0);
                Ok(self.0.len())
            }
        }
        let (tx, rx) = sync_channel(1);
        let options = ReaderOptions::new(StreamKind::Events);
        let source = CutAfter(format!("{SHUTDOWN}\n{{\"partial").into_bytes(), false);
        let handle = std::thread::spawn(move || read_stream(source, &options, &mut { tx }));
        let batches: Vec<Batch> = rx.iter().collect();
        handle.join().unwrap();
        assert!(matches!(batches.last().unwrap().end, Some(StreamEnd::Cut)));
        let items: Vec<&Item> = batches.iter().flat_map(|b| &b.items).collect();
        assert_eq!(items.len(), 1);
        assert!(matches!(items[0], Item::Event { .. }));
    }

    #[test]
    fn one_byte_reads_give_the_same_items() {
        let input = format!("{SHUTDOWN}\r\n{{\"protocol_version\":\"1.0\",\"type\":\"run_start\",\"ts\":1,\"prompt\":\"é😀\"}}\rtail").into_bytes();
        let (tx, rx) = sync_channel(1);
        let options = ReaderOptions::new(StreamKind::Events);
        let handle =
            std::thread::spawn(move || read_stream(Chunked(input, 1, 0), &options, &mut { tx }));
        let items: Vec<Item> = rx.iter().flat_map(|b| b.items).collect();
        handle.join().unwrap();
        assert_eq!(items.len(), 3);
        assert!(matches!(&items[1], Item::Event { line, .. } if line.contains("é😀")));
        assert!(matches!(&items[2], Item::Invalid { line, .. } if line == "tail"));
    }

    #[test]
    fn a_stalled_consumer_stops_the_reader() {
        // Unbounded input from a generator; the consumer takes one batch and
        // then stops taking. The reader must block rather than read on.
        struct Endless(std::sync::Arc<std::sync::atomic::AtomicUsize>);
        impl Read for Endless {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                let line = format!("{SHUTDOWN}\n");
                let n = out.len() / line.len();
                for i in 0..n {
                    out[i * line.len()..(i + 1) * line.len()].copy_from_slice(line.as_bytes());
                }
                self.0
                    .fetch_add(n * line.len(), std::sync::atomic::Ordering::SeqCst);
                Ok(n * line.len())
            }
        }
        let counter = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (tx, rx) = sync_channel(2);
        let _reader = spawn_reader(
            Endless(counter.clone()),
            ReaderOptions::new(StreamKind::Events),
            tx,
        )
        .unwrap();
        let first = rx.recv().unwrap();
        assert!(!first.items.is_empty());
        // An unbounded reader would read gigabytes in this time; a bounded one
        // reads the batch taken, two queued, one being delivered and one read
        // buffer. (A slow machine only makes the count smaller.)
        std::thread::sleep(std::time::Duration::from_millis(500));
        let read_while_stalled = counter.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            read_while_stalled <= 6 * 64 * 1024,
            "read {read_while_stalled} bytes while stalled"
        );
        drop(rx);
    }
}
