//! Off-thread stream decoding for JavaScript: the core's reader on its own
//! thread, delivering ordered batches to a JavaScript callback through a
//! bounded thread-safe function.
//!
//! Two ways to feed a reader:
//! - **pipe**: `openPipe()` creates an OS pipe and hands JavaScript the write
//!   end's file descriptor, to give to `child_process.spawn` as the child's
//!   stdout or stderr. The reader thread reads the pipe directly, so Node's
//!   event loop never sees the bytes (Unix).
//! - **push**: `push(buffer)` passes chunks of any Node stream (in-memory
//!   streams in tests, Windows pipes); the buffers are read off-thread
//!   without a copy.
//!
//! The JavaScript thread's work per line is only creating the string; the
//! TypeScript layer then `JSON.parse`s it.

use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Weak};

use bridge_core::reader::{
    spawn_reader, Batch, BatchSink, Item, ReaderOptions, StreamEnd, StreamKind,
};
use bridge_core::DecodeError;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{check_status, sys, Status};

use crate::external::LineText;
use napi_derive::napi;

/// Batches waiting for the JavaScript thread, per reader. When they are all
/// taken the reader thread blocks, and stops reading: backpressure.
const QUEUED_BATCHES: usize = 4;

/// The callback's arguments: lines, decode errors at the same indices (or
/// `null` when the batch has none), whether the stream ended, and why
/// reading failed, if it did.
type BatchArgs = FnArgs<(
    Lines,
    Option<Vec<Option<DecodeErrorValue>>>,
    bool,
    Option<String>,
)>;
type BatchCallback =
    ThreadsafeFunction<Prepared, (), BatchArgs, Status, false, false, QUEUED_BATCHES>;

/// A batch made ready for JavaScript on the reader thread: large lines are
/// already in the form V8 can take without a copy (see `external.rs`).
pub struct Prepared(BatchArgs);

/// The lines of a batch, becoming a JavaScript array of strings.
pub struct Lines(Vec<LineText>);

impl ToNapiValue for Lines {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> Result<sys::napi_value> {
        let mut array = std::ptr::null_mut();
        check_status!(unsafe {
            sys::napi_create_array_with_length(env, value.0.len(), &mut array)
        })?;
        for (index, line) in value.0.into_iter().enumerate() {
            let string = line.into_js(env)?;
            check_status!(unsafe { sys::napi_set_element(env, array, index as u32, string) })?;
        }
        Ok(array)
    }
}

/// A core decode error that becomes a `BridgeDecodeError` instance when it
/// reaches JavaScript.
pub struct DecodeErrorValue(DecodeError);

impl ToNapiValue for DecodeErrorValue {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> Result<sys::napi_value> {
        let env = Env::from_raw(env);
        let instance = crate::decode_error_instance(&env, &value.0)?;
        Ok(instance)
    }
}

/// Forwards batches to JavaScript; `false` once the consumer is gone.
struct JsSink {
    callback: Arc<BatchCallback>,
    disposed: Arc<AtomicBool>,
}

impl BatchSink for JsSink {
    fn deliver(&mut self, batch: Batch) -> bool {
        if self.disposed.load(Ordering::Acquire) {
            return false;
        }
        self.callback.call(
            Prepared(batch_args(batch)),
            ThreadsafeFunctionCallMode::Blocking,
        ) == Status::Ok
    }
}

/// Chunks pushed from JavaScript, read on the reader thread.
struct PushedChunks {
    receiver: Receiver<Buffer>,
    current: Option<Buffer>,
    offset: usize,
    queued: Arc<AtomicUsize>,
}

impl Read for PushedChunks {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if let Some(chunk) = &self.current {
                let rest = &chunk[self.offset..];
                if !rest.is_empty() {
                    let n = rest.len().min(out.len());
                    out[..n].copy_from_slice(&rest[..n]);
                    self.offset += n;
                    self.queued.fetch_sub(n, Ordering::AcqRel);
                    return Ok(n);
                }
            }
            // The sender is dropped by `end()`: end of stream.
            match self.receiver.recv() {
                Ok(chunk) => {
                    self.current = Some(chunk);
                    self.offset = 0;
                }
                Err(_) => {
                    self.current = None;
                    return Ok(0);
                }
            }
        }
    }
}

/// Reads one output stream of a backend off the JavaScript thread.
#[napi]
pub struct StreamReader {
    options: ReaderOptions,
    callback: Option<BatchCallback>,
    /// The reader thread's function, while it runs.
    running: Weak<BatchCallback>,
    disposed: Arc<AtomicBool>,
    /// Push mode: where chunks go, and how many bytes wait to be read.
    chunks: Option<Sender<Buffer>>,
    queued: Arc<AtomicUsize>,
    /// Pipe mode: the write end, kept until the child has it.
    pipe_writer: Option<std::io::PipeWriter>,
    started: bool,
}

#[napi]
impl StreamReader {
    /// `kind` is `"events"` (stdout: every line validated) or `"text"`
    /// (stderr). `onBatch(lines, errors, done, failure)` is called on the
    /// JavaScript thread for every batch, in stream order.
    #[napi(
        constructor,
        ts_args_type = "kind: 'events' | 'text', maxLineBytes: number, onBatch: (lines: string[], errors: (Error | null)[] | null, done: boolean, failure: string | null) => void"
    )]
    pub fn new(
        kind: String,
        max_line_bytes: f64,
        on_batch: Function<BatchArgs, ()>,
    ) -> Result<Self> {
        let kind = match kind.as_str() {
            "events" => StreamKind::Events,
            "text" => StreamKind::Text,
            other => {
                return Err(Error::new(
                    Status::InvalidArg,
                    format!("Unknown stream kind: {other}"),
                ))
            }
        };
        // Also refuses NaN.
        if max_line_bytes.is_nan() || max_line_bytes < 1.0 {
            return Err(Error::new(
                Status::InvalidArg,
                "maxLineBytes must be at least 1",
            ));
        }
        let callback = on_batch
            .build_threadsafe_function::<Prepared>()
            .max_queue_size::<QUEUED_BATCHES>()
            .build_callback(|context| Ok(context.value.0))?;
        Ok(StreamReader {
            options: ReaderOptions {
                max_line_bytes: max_line_bytes as usize,
                ..ReaderOptions::new(kind)
            },
            callback: Some(callback),
            running: Weak::new(),
            disposed: Arc::new(AtomicBool::new(false)),
            chunks: None,
            queued: Arc::new(AtomicUsize::new(0)),
            pipe_writer: None,
            started: false,
        })
    }

    fn start(&mut self, source: impl Read + Send + 'static) -> Result<()> {
        if self.started {
            return Err(Error::from_reason("The reader has already started."));
        }
        let callback = Arc::new(
            self.callback
                .take()
                .ok_or_else(|| Error::from_reason("The reader was disposed."))?,
        );
        // Only the reader thread owns the thread-safe function, so that it is
        // released when reading ends; `dispose` may still reach it.
        self.running = Arc::downgrade(&callback);
        self.started = true;
        let sink = JsSink {
            callback,
            disposed: self.disposed.clone(),
        };
        spawn_reader(source, self.options.clone(), sink)?;
        Ok(())
    }

    /// Starts the reader on chunks pushed from JavaScript.
    fn start_pushed(&mut self) -> Result<()> {
        let (sender, receiver) = channel();
        let source = PushedChunks {
            receiver,
            current: None,
            offset: 0,
            queued: self.queued.clone(),
        };
        self.start(source)?;
        self.chunks = Some(sender);
        Ok(())
    }

    /// Creates an OS pipe, starts reading its read end, and returns the
    /// write end's file descriptor for `spawn`'s `stdio`. Call
    /// `closePipeWriter()` once the child has been spawned.
    #[napi(catch_unwind)]
    pub fn open_pipe(&mut self) -> Result<i32> {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let (reader, writer) = std::io::pipe()?;
            self.start(reader)?;
            let fd = writer.as_raw_fd();
            self.pipe_writer = Some(writer);
            Ok(fd)
        }
        #[cfg(not(unix))]
        {
            Err(Error::from_reason(
                "openPipe is only available on Unix; use push().",
            ))
        }
    }

    /// Closes this process's copy of the pipe's write end, so that the
    /// reader sees end of file when the child exits.
    #[napi(catch_unwind)]
    pub fn close_pipe_writer(&mut self) {
        self.pipe_writer = None;
    }

    /// Queues a chunk of the stream. Returns the number of bytes waiting to
    /// be read, so that the caller can pause its source when it is large.
    #[napi(catch_unwind)]
    pub fn push(&mut self, chunk: Buffer) -> Result<u32> {
        if self.chunks.is_none() {
            self.start_pushed()?;
        }
        let length = chunk.len();
        if let Some(chunks) = &self.chunks {
            self.queued.fetch_add(length, Ordering::AcqRel);
            if chunks.send(chunk).is_err() {
                self.queued.fetch_sub(length, Ordering::AcqRel);
            }
        }
        Ok(self.queued_bytes())
    }

    /// Bytes pushed but not read yet.
    #[napi]
    pub fn queued_bytes(&self) -> u32 {
        self.queued.load(Ordering::Acquire).min(u32::MAX as usize) as u32
    }

    /// Ends a pushed stream: the reader delivers the trailing fragment and
    /// the last batch.
    #[napi(catch_unwind)]
    pub fn end(&mut self) -> Result<()> {
        if !self.started {
            self.start_pushed()?;
        }
        // Dropping the sender is the end of the stream for the reader.
        self.chunks = None;
        Ok(())
    }

    /// Stops delivering batches. The callback is not called again, and the
    /// reader no longer keeps the event loop alive: a reader thread still
    /// blocked on a pipe that a grandchild holds open must not keep the host
    /// process from exiting.
    #[napi(catch_unwind)]
    pub fn dispose(&mut self, env: Env) -> Result<()> {
        self.disposed.store(true, Ordering::Release);
        self.callback = None;
        if let Some(callback) = self.running.upgrade() {
            // Holding `callback` keeps the function alive during the call.
            check_status!(unsafe { sys::napi_unref_threadsafe_function(env.raw(), callback.raw()) })?;
        }
        self.chunks = None;
        self.pipe_writer = None;
        Ok(())
    }
}

fn batch_args(batch: Batch) -> BatchArgs {
    let mut lines = Vec::with_capacity(batch.items.len());
    let mut errors: Option<Vec<Option<DecodeErrorValue>>> = None;
    let count = batch.items.len();
    for (index, item) in batch.items.into_iter().enumerate() {
        match item {
            Item::Event { line, .. } | Item::Text(line) => lines.push(LineText::prepare(line)),
            Item::Invalid { line, error } => {
                lines.push(LineText::prepare(line));
                let errors = errors.get_or_insert_with(|| {
                    let mut all = Vec::with_capacity(count);
                    all.resize_with(count, || None);
                    all
                });
                errors[index] = Some(DecodeErrorValue(error));
            }
        }
    }
    let (done, failure) = match batch.end {
        None => (false, None),
        Some(StreamEnd::Eof) => (true, None),
        Some(StreamEnd::Failed(error)) => (true, Some(error.to_string())),
    };
    FnArgs::from((Lines(lines), errors, done, failure))
}
