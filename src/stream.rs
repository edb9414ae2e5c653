//! Off-thread stream decoding for JavaScript: the core's reader on its own
//! thread, delivering ordered batches to a JavaScript callback through a
//! thread-safe function.
//!
//! Two ways to feed a reader:
//! - **socket**: `openSocket()` creates the stream's socket pair (`output_socket.rs`)
//!   and hands JavaScript the child's end's file descriptor, to give to
//!   `child_process.spawn` as the child's stdout or stderr. The reader
//!   thread reads the host's end directly, so Node's event loop never sees
//!   the bytes (Unix).
//! - **push**: `push(buffer)` passes chunks of any Node stream (in-memory
//!   streams in tests, Windows pipes); the buffers are read off-thread
//!   without a copy.
//!
//! What a batch holds, and why, is the core's batch contract
//! (`bridge_core::batch`, prepared on the reader thread); this module only
//! turns a prepared batch into JavaScript values and paces the deliveries.
//!
//! Two batches at a time at most: the reader thread waits for `ack()`, which
//! the TypeScript layer calls from `setImmediate` after handling a batch, so
//! a burst of output never keeps timers and I/O waiting long (Node runs
//! queued thread-safe calls back to back in one loop turn), and a JavaScript
//! thread that falls behind stops the reader (backpressure). A batch that
//! waits for a credit is sent by the `ack()` that frees one (see [`Turn`]).

use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, Weak};

use bridge_core::batch::{prepare, PreparedBatch};
use bridge_core::lift::LiftLimits;
use bridge_core::reader::{spawn_reader, Batch, BatchSink, ReaderOptions, StreamKind};
use bridge_core::DecodeError;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{check_status, sys, Status};
use napi_derive::napi;

use crate::external::LineText;

/// The callback's arguments: part kinds, part texts, decode errors at the
/// same indices (or `null` when the batch has none), whether the stream
/// ended, and why reading failed, if it did.
type BatchArgs = FnArgs<(
    String,
    Parts,
    Option<Vec<Option<DecodeErrorValue>>>,
    bool,
    Option<String>,
)>;
type BatchCallback = ThreadsafeFunction<Prepared, (), BatchArgs, Status, false, false, IN_FLIGHT>;

/// A batch made ready for JavaScript on the reader thread.
pub struct Prepared(BatchArgs);

/// The texts of a batch's parts, becoming a JavaScript array of strings.
pub struct Parts(pub(crate) Vec<LineText>);

impl ToNapiValue for Parts {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> Result<sys::napi_value> {
        let mut array = std::ptr::null_mut();
        // SAFETY: napi-rs calls this with the live environment of the
        // thread-safe call; `array` is a local out-pointer.
        check_status!(unsafe {
            sys::napi_create_array_with_length(env, value.0.len(), &mut array)
        })?;
        for (index, part) in value.0.into_iter().enumerate() {
            let string = part.into_js(env)?;
            // SAFETY: `array` and `string` are live handles of this scope.
            check_status!(unsafe { sys::napi_set_element(env, array, index as u32, string) })?;
        }
        Ok(array)
    }
}

/// A core decode error that becomes a `BridgeDecodeError` instance when it
/// reaches JavaScript.
pub struct DecodeErrorValue(pub(crate) DecodeError);

impl ToNapiValue for DecodeErrorValue {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> Result<sys::napi_value> {
        let env = Env::from_raw(env);
        let instance = crate::decode_error_instance(&env, &value.0)?;
        Ok(instance)
    }
}

/// One read of a backend's output takes at most this much, and the stream
/// made by `openSocket()` buffers as much: while the JavaScript thread is
/// busy the stream fills, and the next batch takes all of it. With Linux's
/// default 64 KiB, 100,000 small events came in about 700 batches, whose
/// fixed costs (a wake-up, the callback, the acknowledgement's system
/// calls) were about 10 ms of a fresh host's JavaScript thread; 128 KiB
/// (about 360 batches) saved as much as 256 KiB did, with less held in the
/// pipe and shorter batches.
const READ_BYTES: usize = 128 * 1024;

/// Batches handed to JavaScript and not yet acknowledged, at most. Two keep
/// the JavaScript thread busy while the reader waits for an `ack()`; Node
/// runs at most these back to back before timers and I/O get their turn.
const IN_FLIGHT: usize = 2;

/// How many more batches the reader may hand to JavaScript now, the batch
/// it holds ready when it may not, and whether the reader was disposed.
///
/// Node runs queued thread-safe calls back to back, so the two batches in
/// flight are often delivered in one turn and acknowledged together; the
/// JavaScript thread would then wait for the reader thread to wake and hand
/// over the next. So a reader without a credit *parks* its prepared batch
/// here, and the `ack()` that returns a credit sends that batch itself, on
/// the JavaScript thread: the next turn has it, however late the reader
/// thread gets a core.
struct Turn {
    state: Mutex<TurnState>,
    changed: Condvar,
}

struct TurnState {
    credits: usize,
    disposed: bool,
    /// The reader's next batch, waiting for a credit (the reader waits too,
    /// until it has been sent: it holds the thread-safe function, which
    /// must outlive the send).
    parked: Option<Prepared>,
    /// An `ack()` took the parked batch and is sending it.
    sending: bool,
    /// A parked batch could not be sent: the consumer is gone.
    closed: bool,
}

/// What became of a batch handed to [`Turn::pass`].
enum Passed {
    /// A credit was free: the caller sends the batch now.
    Send(Prepared),
    /// It was parked, and an `ack()` sent it.
    Sent,
    /// Disposed, or the consumer is gone.
    Stopped,
}

impl Turn {
    fn new() -> Self {
        Turn {
            state: Mutex::new(TurnState {
                credits: IN_FLIGHT,
                disposed: false,
                parked: None,
                sending: false,
                closed: false,
            }),
            changed: Condvar::new(),
        }
    }

    /// The reader thread's side: takes a credit for `batch`, or parks it
    /// and waits until an `ack()` has sent it.
    fn pass(&self, batch: Prepared) -> Passed {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.disposed || state.closed {
            return Passed::Stopped;
        }
        if state.credits > 0 {
            state.credits -= 1;
            return Passed::Send(batch);
        }
        state.parked = Some(batch);
        while (state.parked.is_some() || state.sending) && !state.disposed {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        if state.disposed || state.closed {
            state.parked = None;
            return Passed::Stopped;
        }
        Passed::Sent
    }

    /// The JavaScript thread's side (`ack`): a credit back, given at once
    /// to the parked batch if there is one, which is returned for sending
    /// (then call [`Turn::handed`]).
    fn give(&self) -> Option<Prepared> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let parked = state.parked.take();
        if parked.is_some() {
            state.sending = true;
        } else {
            state.credits = (state.credits + 1).min(IN_FLIGHT);
        }
        parked
    }

    /// The batch `give` returned was sent (or could not be: the consumer
    /// is gone); the reader goes on.
    fn handed(&self, sent: bool) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.sending = false;
        state.closed |= !sent;
        self.changed.notify_all();
    }

    /// No more batches: a waiting reader returns.
    fn dispose(&self) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.disposed = true;
        state.parked = None;
        self.changed.notify_all();
    }
}

/// Hands a batch to the thread-safe function; `false` once it is closed.
fn send(callback: &BatchCallback, activity: &Activity, batch: Prepared) -> bool {
    activity.in_transit.fetch_add(1, Ordering::AcqRel);
    // Never blocks: at most IN_FLIGHT batches are unacknowledged, and the
    // queue holds that many.
    let sent = callback.call(batch, ThreadsafeFunctionCallMode::NonBlocking) == Status::Ok;
    if !sent {
        activity.in_transit.fetch_sub(1, Ordering::AcqRel);
    }
    sent
}

/// What both the reader thread and a stop request reach: the credits, and
/// in socket mode the waker of a blocked read.
struct Shared {
    turn: Turn,
    #[cfg(unix)]
    socket: Mutex<Option<Arc<crate::output_socket::StreamControl>>>,
}

impl crate::teardown::Stop for Shared {
    /// Disposal or the environment's end: no more batches, and a read
    /// blocked on the socket returns, so the thread ends and the socket closes.
    fn stop(&self) {
        self.turn.dispose();
        #[cfg(unix)]
        if let Some(socket) = self.socket.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            socket.stop();
        }
    }
}

/// What a reader is doing, for `isWorking()`: a host that waits for a
/// backend's output to go quiet must not take the reader's own work, or
/// batches on their way to JavaScript, for quiet.
#[derive(Default)]
struct Activity {
    /// The reader thread is inside `read()`: waiting for input.
    waiting_for_input: AtomicBool,
    /// The reader thread has finished.
    ended: AtomicBool,
    /// Batches handed to the thread-safe function, not yet in JavaScript.
    in_transit: AtomicUsize,
}

impl Activity {
    fn working(&self) -> bool {
        self.in_transit.load(Ordering::Acquire) > 0
            || !(self.waiting_for_input.load(Ordering::Acquire)
                || self.ended.load(Ordering::Acquire))
    }
}

/// A source whose reads are recorded in an [`Activity`].
struct Watched<R> {
    source: R,
    activity: Arc<Activity>,
}

impl<R: Read> Read for Watched<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        self.activity
            .waiting_for_input
            .store(true, Ordering::Release);
        let read = self.source.read(out);
        self.activity
            .waiting_for_input
            .store(false, Ordering::Release);
        read
    }
}

/// Forwards batches to JavaScript; `false` once the consumer is gone.
struct JsSink {
    callback: Arc<BatchCallback>,
    shared: Arc<Shared>,
    activity: Arc<Activity>,
}

impl BatchSink for JsSink {
    fn deliver(&mut self, batch: Batch) -> bool {
        match self.shared.turn.pass(Prepared(batch_args(batch))) {
            Passed::Send(prepared) => send(&self.callback, &self.activity, prepared),
            Passed::Sent => true,
            Passed::Stopped => false,
        }
    }
}

impl Drop for JsSink {
    /// The reader thread ends with its sink.
    fn drop(&mut self) {
        self.activity.ended.store(true, Ordering::Release);
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
    shared: Arc<Shared>,
    /// Push mode: where chunks go, and how many bytes wait to be read.
    chunks: Option<Sender<Buffer>>,
    queued: Arc<AtomicUsize>,
    /// Pipe mode: the child's end, kept until the child has it.
    #[cfg(unix)]
    child_end: Option<std::os::unix::net::UnixStream>,
    started: bool,
    activity: Arc<Activity>,
}

#[napi]
impl StreamReader {
    /// `kind` is `"events"` (stdout: every line validated) or `"text"`
    /// (stderr). `onBatch(kinds, parts, errors, done, failure)` is called on
    /// the JavaScript thread for every batch, in stream order; what the
    /// parts are is the core's batch contract (`bridge_core::batch`, and
    /// `batchContract()` for its constants). Call `ack()` after each.
    #[napi(
        constructor,
        ts_args_type = "kind: 'events' | 'text', maxLineBytes: number, onBatch: (kinds: string, parts: string[], errors: (Error | null)[] | null, done: boolean, failure: string | null) => void"
    )]
    pub fn new(
        env: Env,
        kind: String,
        max_line_bytes: f64,
        on_batch: Function<BatchArgs, ()>,
    ) -> Result<Self> {
        let (kind, max_line_bytes) = reader_settings(&kind, max_line_bytes)?;
        let activity = Arc::new(Activity::default());
        let received = activity.clone();
        let callback = on_batch
            .build_threadsafe_function::<Prepared>()
            .max_queue_size::<IN_FLIGHT>()
            .build_callback(move |context| {
                received.in_transit.fetch_sub(1, Ordering::AcqRel);
                Ok(context.value.0)
            })?;
        let shared = Arc::new(Shared {
            turn: Turn::new(),
            #[cfg(unix)]
            socket: Mutex::new(None),
        });
        let stoppable: Arc<dyn crate::teardown::Stop> = shared.clone();
        crate::teardown::stop_on_env_teardown(&env, &stoppable)?;
        Ok(StreamReader {
            options: ReaderOptions {
                max_line_bytes,
                lift: Some(LiftLimits::default()),
                read_bytes: READ_BYTES,
                ..ReaderOptions::new(kind)
            },
            callback: Some(callback),
            running: Weak::new(),
            shared,
            activity,
            chunks: None,
            queued: Arc::new(AtomicUsize::new(0)),
            #[cfg(unix)]
            child_end: None,
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
            shared: self.shared.clone(),
            activity: self.activity.clone(),
        };
        let source = Watched {
            source,
            activity: self.activity.clone(),
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

    /// Creates the stream's socket pair (`output_socket.rs`), starts reading the
    /// host's end, and returns the child's end's file descriptor for
    /// `spawn`'s `stdio`. Call `closeChildEnd()` once the child has been
    /// spawned. This is the only descriptor a stream holds in the host.
    #[napi(catch_unwind)]
    pub fn open_socket(&mut self) -> Result<i32> {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            // A stream that buffers more lets a busy JavaScript thread get
            // larger batches (see READ_BYTES).
            let (host, child) = crate::output_socket::output_pair(READ_BYTES)?;
            let (reader, control) = crate::output_socket::OutputStream::new(host);
            *self.shared.socket.lock().unwrap_or_else(|e| e.into_inner()) = Some(control);
            self.start(reader)?;
            let fd = child.as_raw_fd();
            self.child_end = Some(child);
            Ok(fd)
        }
        #[cfg(not(unix))]
        {
            Err(Error::from_reason(
                "openSocket is only available on Unix; use push().",
            ))
        }
    }

    /// Closes this process's copy of the child's end of the socket pair, so
    /// that the reader sees end of file when the child exits.
    #[napi(catch_unwind)]
    pub fn close_child_end(&mut self) {
        #[cfg(unix)]
        {
            self.child_end = None;
        }
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

    /// Lets the reader deliver its next batch (the one it holds ready is
    /// sent from here). The TypeScript layer calls it from `setImmediate`
    /// after handling a batch, so that other work gets a turn of the event
    /// loop between batches.
    #[napi(catch_unwind)]
    pub fn ack(&self) {
        let Some(parked) = self.shared.turn.give() else {
            return;
        };
        // A parked batch means the reader thread waits in `pass` and holds
        // the function until `handed`.
        let sent = self
            .running
            .upgrade()
            .is_some_and(|callback| send(&callback, &self.activity, parked));
        self.shared.turn.handed(sent);
    }

    /// Whether the reader is busy with input: reading and judging lines, or
    /// holding batches JavaScript has not received yet (not while it waits
    /// for input, nor once it has ended). A host waiting for the output to
    /// go quiet should not count such time as quiet.
    #[napi]
    pub fn is_working(&self) -> bool {
        self.started && self.activity.working()
    }

    /// Socket mode: stops reading once what the socket holds now is read (up to
    /// a few MiB), then ends the stream without its unterminated fragment.
    /// For a backend that has exited while something else still holds its
    /// socket open: everything the backend wrote is delivered, and the reader
    /// lets go.
    #[napi(catch_unwind)]
    pub fn cut_off(&self) {
        #[cfg(unix)]
        if let Some(socket) = self
            .shared
            .socket
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            socket.cut();
        }
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
        crate::teardown::Stop::stop(&*self.shared);
        self.callback = None;
        if let Some(callback) = self.running.upgrade() {
            // SAFETY: holding `callback` keeps the thread-safe function alive
            // during the call, and `env` is the environment it was made in.
            check_status!(unsafe {
                sys::napi_unref_threadsafe_function(env.raw(), callback.raw())
            })?;
        }
        self.chunks = None;
        #[cfg(unix)]
        {
            self.child_end = None;
        }
        Ok(())
    }
}

/// The stream kind and the line limit a JavaScript caller gave, checked.
pub(crate) fn reader_settings(kind: &str, max_line_bytes: f64) -> Result<(StreamKind, usize)> {
    let kind = match kind {
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
    Ok((kind, max_line_bytes as usize))
}

/// Makes a batch ready for JavaScript, on the reader thread: the core
/// prepares the parts, and large texts become external strings here.
fn batch_args(batch: Batch) -> BatchArgs {
    let PreparedBatch {
        kinds,
        parts,
        errors,
        done,
        failure,
    } = prepare(batch);
    let parts = Parts(parts.into_iter().map(LineText::prepare).collect());
    let errors = (!errors.is_empty()).then(|| {
        errors
            .into_iter()
            .map(|e| e.map(DecodeErrorValue))
            .collect()
    });
    FnArgs::from((kinds, parts, errors, done, failure))
}
