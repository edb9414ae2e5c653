//! The stream side of a conversation: every stdout line as one shared
//! [`Item`], and the bounded queues of the streams that carry them. A
//! client that falls behind loses its stream (`resource_exhausted`), never
//! the backend, whose output is always read.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bridge_core::EventType;
use connectrpc::ConnectError;
use futures::Stream;
use tokio::sync::mpsc;

use super::usage::UsageTotals;

/// How many bytes of lines a stream may have queued before it is cut off.
/// A single line larger than this still passes when the queue is empty.
pub const STREAM_QUEUE_BYTES: usize = 64 * 1024 * 1024;

/// One stdout line of the backend, numbered from 1 (the `ready` line).
#[derive(Debug)]
pub enum Item {
    Event {
        seq: u64,
        event_type: EventType,
        /// Shared by every stream that sends it.
        line: Arc<String>,
        /// On a `tool_approval` run event: the approval's bridge-wide id.
        approval_id: Option<Box<str>>,
    },
    Invalid {
        seq: u64,
        code: &'static str,
        message: String,
        fields: Vec<String>,
        head: String,
    },
}

impl Item {
    pub(super) fn size(&self) -> usize {
        match self {
            Item::Event { line, .. } => line.len(),
            Item::Invalid { head, .. } => head.len(),
        }
    }
}

pub type Shared = Arc<Item>;

/// An item of the host channel's (`host_side.rs`), not a stdout line.
#[derive(Debug)]
pub enum Side {
    ToolCall {
        id: String,
        conversation_id: String,
        name: String,
        arguments: String,
        tool_call_id: String,
        run_id: String,
        timeout_ms: u32,
    },
    ToolCallEnded {
        id: String,
        conversation_id: String,
        reason: &'static str,
    },
    Snapshot {
        conversation_id: String,
        json: Arc<String>,
        revision: u64,
    },
}

impl Side {
    fn size(&self) -> usize {
        match self {
            Side::ToolCall { arguments, .. } => arguments.len() + 64,
            Side::ToolCallEnded { .. } => 64,
            Side::Snapshot { json, .. } => json.len(),
        }
    }
}

/// What one stream message carries: one line, or (for subscribers that
/// asked for batches) consecutive events that came from the backend together.
#[derive(Debug)]
pub enum Out {
    One(Shared),
    /// Consecutive events from `first_seq` on, their lines joined as one
    /// JSON array text (built once, shared by every batched subscriber).
    Batch {
        first_seq: u64,
        json: Arc<String>,
    },
    /// A run's terminal item on its `Prompt` stream, with the run's usage.
    Final { item: Shared, usage: UsageTotals },
    /// A tool call, its end, or a snapshot.
    Side(Arc<Side>),
}

impl Out {
    fn size(&self) -> usize {
        match self {
            Out::One(item) | Out::Final { item, .. } => item.size(),
            Out::Batch { json, .. } => json.len(),
            Out::Side(side) => side.size(),
        }
    }
}

/// The sending side of one stream.
pub(super) struct Outlet {
    tx: mpsc::UnboundedSender<Result<Out, ConnectError>>,
    queued: Arc<AtomicUsize>,
    /// The subscriber asked for batches.
    pub(super) batched: bool,
}

impl Outlet {
    pub(super) fn new(batched: bool) -> (Outlet, ItemStream) {
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        (
            Outlet {
                tx,
                queued: queued.clone(),
                batched,
            },
            ItemStream {
                rx,
                queued,
                on_drop: None,
                ended: false,
            },
        )
    }

    /// Queues a message; `false` once the stream is gone or was cut off.
    pub(super) fn push(&self, out: Out) -> bool {
        let size = out.size();
        let queued = self.queued.load(Ordering::SeqCst);
        if queued > 0 && queued + size > STREAM_QUEUE_BYTES {
            let _ = self.tx.send(Err(ConnectError::resource_exhausted(
                "this stream fell too far behind the backend and was cut off",
            )));
            return false;
        }
        self.queued.fetch_add(size, Ordering::SeqCst);
        self.tx.send(Ok(out)).is_ok()
    }

    pub(super) fn fail(self, error: ConnectError) {
        let _ = self.tx.send(Err(error));
    }

    /// The stream's reader has gone (a subscriber that hung up).
    pub(super) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// The receiving side of one stream: messages in order, then the end
/// (`None` for an OK end, or one error).
pub struct ItemStream {
    rx: mpsc::UnboundedReceiver<Result<Out, ConnectError>>,
    queued: Arc<AtomicUsize>,
    pub(super) on_drop: Option<Box<dyn FnOnce() + Send>>,
    ended: bool,
}

impl Stream for ItemStream {
    type Item = Result<Out, ConnectError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        let polled = self.rx.poll_recv(cx);
        match &polled {
            Poll::Ready(Some(Ok(out))) => {
                self.queued.fetch_sub(out.size(), Ordering::SeqCst);
            }
            Poll::Ready(Some(Err(_)) | None) => self.ended = true,
            Poll::Pending => {}
        }
        polled
    }
}

impl Drop for ItemStream {
    fn drop(&mut self) {
        if let Some(on_drop) = self.on_drop.take() {
            if !self.ended {
                on_drop();
            }
        }
    }
}

/// Sends the events gathered so far to the subscribers that take batches.
pub(super) fn flush(subscribers: &mut Vec<Outlet>, batch: &mut Vec<Shared>) {
    if batch.is_empty() {
        return;
    }
    let events = std::mem::take(batch);
    if !subscribers.iter().any(|outlet| outlet.batched) {
        return;
    }
    let first_seq = match &*events[0] {
        Item::Event { seq, .. } | Item::Invalid { seq, .. } => *seq,
    };
    let mut json = String::with_capacity(events.iter().map(|e| e.size() + 1).sum::<usize>() + 1);
    json.push('[');
    for (i, event) in events.iter().enumerate() {
        if let Item::Event { line, .. } = &**event {
            if i > 0 {
                json.push(',');
            }
            json.push_str(line);
        }
    }
    json.push(']');
    let json = Arc::new(json);
    subscribers.retain(|outlet| {
        !outlet.batched
            || outlet.push(Out::Batch {
                first_seq,
                json: json.clone(),
            })
    });
}

/// At most `max` bytes of `line`, cut at a character boundary.
pub(super) fn head(line: &str, max: usize) -> &str {
    let mut end = line.len().min(max);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

