//! The request side of a conversation (called by the RPC handlers): each
//! call becomes a core session request and a receiver of its settlement.

use std::sync::Arc;
use std::time::Instant;

use bridge_core::session::{Accepted, Refusal, Session, Ticket};
use connectrpc::ConnectError;
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use super::errors::refusal_error;
use super::stream::{ItemStream, Outlet};
use super::usage::UsageTotals;
use super::{Conversation, RunStream, Settlement, State};

impl Conversation {
    // ---- requests (called by the RPC handlers) -----------------------------

    fn refuse_if_ended(s: &State) -> Result<(), ConnectError> {
        match &s.ended {
            Some(error) => Err(error.clone()),
            // CloseConversation, or the bridge's shutdown (whose guard
            // refuses new calls before they get here).
            None if s.stopping => Err(ConnectError::unavailable(
                "the conversation is closing",
            )),
            None => Ok(()),
        }
    }

    /// Runs a request on the session and returns what will settle it.
    fn request(
        self: &Arc<Self>,
        call: impl FnOnce(&mut Session) -> Result<Accepted, Refusal>,
    ) -> Result<oneshot::Receiver<Settlement>, ConnectError> {
        let mut s = self.lock();
        Self::refuse_if_ended(&s)?;
        s.last_active = Instant::now();
        let (ticket, outputs) = call(&mut s.session).map_err(|r| refusal_error(&r))?;
        let (waiter, settled) = oneshot::channel();
        s.waiters.insert(ticket, waiter);
        self.apply(&mut s, outputs, None);
        Ok(settled)
    }

    pub fn approve(
        self: &Arc<Self>,
        id: &str,
        allowed: bool,
        reason: Option<&str>,
    ) -> Result<oneshot::Receiver<Settlement>, ConnectError> {
        self.request(|session| session.approve(id, allowed, reason))
    }

    pub fn cancel(self: &Arc<Self>) -> Result<oneshot::Receiver<Settlement>, ConnectError> {
        self.request(Session::cancel)
    }

    pub fn reset(self: &Arc<Self>) -> Result<oneshot::Receiver<Settlement>, ConnectError> {
        self.request(|session| session.reset(Instant::now()))
    }

    pub fn configure(
        self: &Arc<Self>,
        patch: Map<String, Value>,
    ) -> Result<oneshot::Receiver<Settlement>, ConnectError> {
        self.request(|session| session.configure(patch))
    }

    /// Starts a run: the answer to wait for (the stream begins, or the
    /// prompt was refused) and the stream. Dropping the stream before its
    /// end cancels the run.
    pub fn prompt(
        self: &Arc<Self>,
        text: &str,
    ) -> Result<(oneshot::Receiver<Result<(), ConnectError>>, ItemStream), ConnectError> {
        let mut s = self.lock();
        Self::refuse_if_ended(&s)?;
        let (ticket, outputs) = s
            .session
            .prompt(text, Instant::now())
            .map_err(|r| refusal_error(&r))?;
        let (outlet, mut stream) = Outlet::new(false);
        let (started, start) = oneshot::channel();
        s.last_active = Instant::now();
        s.run = Some(RunStream {
            usage: UsageTotals::default(),
            ticket,
            outlet: Some(outlet),
            abandoned: false,
            started: Some(started),
        });
        self.apply(&mut s, outputs, None);
        let conversation = Arc::downgrade(self);
        stream.on_drop = Some(Box::new(move || {
            if let Some(conversation) = conversation.upgrade() {
                conversation.prompt_stream_dropped(ticket);
            }
        }));
        Ok((start, stream))
    }

    /// The dropped-stream rule: a client that lets go of its `Prompt`
    /// stream before the terminal event cancels the run.
    fn prompt_stream_dropped(self: &Arc<Self>, ticket: Ticket) {
        let mut s = self.lock();
        if s.run.as_ref().is_some_and(|run| run.ticket == ticket) {
            self.abandon_run(&mut s);
        }
    }

    /// The run's stream is gone (dropped or cut off): cancel the run, once.
    pub(super) fn abandon_run(self: &Arc<Self>, s: &mut State) {
        let Some(run) = &mut s.run else { return };
        run.outlet = None;
        if run.abandoned || s.ended.is_some() {
            return;
        }
        run.abandoned = true;
        let ticket = run.ticket;
        self.end_owned_calls(s, ticket);
        eprintln!(
            "agentlane-bridge: the Prompt stream ended before its run did; cancelling the run"
        );
        if let Ok((_, outputs)) = s.session.cancel() {
            self.apply(s, outputs, None);
        }
    }

    /// Every line from now on, one per message or in batches of events.
    pub fn subscribe(self: &Arc<Self>, batched: bool) -> Result<ItemStream, ConnectError> {
        let mut s = self.lock();
        Self::refuse_if_ended(&s)?;
        let (outlet, stream) = Outlet::new(batched);
        s.last_active = Instant::now();
        s.subscribers.push(outlet);
        Ok(stream)
    }

    /// The shutdown path: new requests are refused, `shutdown` goes to the
    /// backend (once). Returns at once; the exit settles the rest.
    pub fn begin_shutdown(self: &Arc<Self>) {
        let mut s = self.lock();
        s.stopping = true;
        self.close_host_channel(&mut s);
        let (_, outputs) = s.session.shutdown();
        self.apply(&mut s, outputs, None);
    }

    /// Ends every subscriber stream OK (used once the backend is gone after
    /// a shutdown; `on_exit` already did it otherwise).
    pub fn close_streams(&self) {
        let mut s = self.lock();
        s.subscribers.clear();
    }

    /// How long the conversation has been idle: no run, no open stream, no
    /// call; `None` while it is busy.
    pub fn idle_for(&self) -> Option<std::time::Duration> {
        let mut s = self.lock();
        s.subscribers.retain(|outlet| !outlet.is_closed());
        (s.run.is_none() && s.subscribers.is_empty()).then(|| s.last_active.elapsed())
    }

    /// A run is active.
    pub fn running(&self) -> bool {
        self.lock().run.is_some()
    }
}
