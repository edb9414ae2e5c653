//! The backend's side of the session: each valid event and the backend's
//! exit, and the settlements they make. The host's requests are in
//! `mod.rs`; the rules both follow are the module docs there.

use std::time::Instant;

use super::{
    remove, settle_all, settled, Ack, Approval, Close, CloseReason, Outcome, Output, Sent, Session,
    Signal, Ticket, RACE_RETRIES, RACE_RETRY_STEP, RESET_WHILE_ACTIVE, RUN_ALREADY_ACTIVE,
};

impl Session {
    /// Processes one valid event, in stream order. Events before the first
    /// `ready` and after the session closed change nothing.
    /// `now` is when it is processed (the race rules compare times).
    pub fn on_event(&mut self, signal: &Signal, now: Instant) -> Vec<Output> {
        let mut out = Vec::new();
        if self.closed.is_some() {
            return out;
        }
        if !self.ready {
            self.ready = *signal == Signal::Ready;
            return out;
        }
        match signal {
            Signal::Ready | Signal::RunEvent => {}
            Signal::Config {
                ok,
                has_config,
                error,
            } => self.settle_configure(*ok, *has_config, error, &mut out),
            Signal::RunStart => {
                self.take(Ack::Prompt);
            }
            Signal::RunComplete => self.end_run(Outcome::Completed, now, &mut out),
            Signal::RunCancelled => self.end_run(Outcome::Cancelled, now, &mut out),
            Signal::RunError { message } => self.end_run(
                Outcome::Failed {
                    message: message.clone(),
                },
                now,
                &mut out,
            ),
            Signal::CommandError { message } => self.command_error(message, &mut out),
            Signal::CancelRequested | Signal::CancelIgnored => {
                self.take(Ack::Cancel);
                if self.run.is_none() {
                    settle_all(&mut self.cancel_waiters, Outcome::Done, &mut out);
                }
            }
            Signal::Reset => {
                self.take(Ack::Reset);
                self.close_approvals(&mut out);
                settle_all(&mut self.reset_waiters, Outcome::Done, &mut out);
            }
            Signal::Shutdown => {
                self.take(Ack::Shutdown);
                self.close_approvals(&mut out);
                self.backend_announced_shutdown = true;
            }
            Signal::ApprovalPending { request_id } => {
                if let Some(old) = self.approvals.iter().position(|a| a.id == *request_id) {
                    let old = self.approvals.remove(old);
                    if let Some(ticket) = old.answer {
                        out.push(settled(ticket, Outcome::ApprovalClosed));
                    }
                }
                self.approvals.push(Approval {
                    id: request_id.clone(),
                    answer: None,
                });
            }
            Signal::ApprovalResolved { request_id } => {
                if let Some(i) = self
                    .sent
                    .iter()
                    .position(|s| matches!(s, Sent::Approve { id, .. } if id == request_id))
                {
                    self.sent.remove(i);
                }
                if let Some(i) = self.approvals.iter().position(|a| a.id == *request_id) {
                    if let Some(ticket) = self.approvals.remove(i).answer {
                        out.push(settled(ticket, Outcome::Resolved));
                    }
                }
            }
        }
        out
    }

    /// The backend exited: every waiting request settles `Closed`, then
    /// `shutdown` requests settle `Done`.
    pub fn on_exit(&mut self, code: Option<i32>, signal: Option<i32>) -> Vec<Output> {
        let mut out = Vec::new();
        let reason = if self.close_requested || self.backend_announced_shutdown {
            CloseReason::Shutdown
        } else {
            CloseReason::Exit
        };
        self.teardown(
            Close {
                reason,
                code,
                signal,
            },
            &mut out,
        );
        out
    }

    /// Removes the oldest entry an acknowledgement takes; `approve` entries
    /// older than it were handled without an answer (an error would have
    /// come first), so they leave too. Their approvals stay open.
    fn take(&mut self, ack: Ack) -> Option<Sent> {
        let index = self.sent.iter().position(|s| ack.takes(s))?;
        let entry = self.sent.remove(index);
        let mut position = 0;
        self.sent.retain(|s| {
            position += 1;
            position > index || !s.is_approve()
        });
        entry
    }

    fn end_run(&mut self, outcome: Outcome, now: Instant, out: &mut Vec<Output>) {
        self.last_terminal_at = Some(now);
        self.close_approvals(out);
        if let Some(run) = self.run.take() {
            out.push(settled(run.ticket, outcome));
        }
        settle_all(&mut self.cancel_waiters, Outcome::Done, out);
    }

    fn close_approvals(&mut self, out: &mut Vec<Output>) {
        for approval in self.approvals.drain(..) {
            if let Some(ticket) = approval.answer {
                out.push(settled(ticket, Outcome::ApprovalClosed));
            }
        }
    }

    /// A command-scoped error belongs to the oldest command still waiting.
    fn command_error(&mut self, message: &str, out: &mut Vec<Output>) {
        let rejected = || Output::Rejected {
            message: message.to_owned(),
        };
        match self.sent.pop_front() {
            None | Some(Sent::Shutdown) => out.push(rejected()),
            Some(Sent::Approve { id, ticket }) => {
                out.push(rejected());
                if let Some(approval) = self
                    .approvals
                    .iter_mut()
                    .find(|a| a.id == id && a.answer == Some(ticket))
                {
                    approval.answer = None;
                    out.push(settled(
                        ticket,
                        Outcome::Refused {
                            message: message.to_owned(),
                        },
                    ));
                }
            }
            Some(Sent::Prompt) => {
                let cancelled_after = self
                    .sent
                    .iter()
                    .any(|s| matches!(s, Sent::Cancel(_) | Sent::Reset { .. }));
                match &mut self.run {
                    None => out.push(rejected()),
                    // The race, with a cancel or reset sent after the prompt:
                    // resending would put the prompt behind them. The run
                    // never started.
                    Some(run)
                        if message == RUN_ALREADY_ACTIVE && run.raceable && cancelled_after =>
                    {
                        let run = self.run.take().expect("matched Some");
                        out.push(settled(run.ticket, Outcome::Cancelled));
                    }
                    Some(run)
                        if message == RUN_ALREADY_ACTIVE
                            && run.raceable
                            && run.retries < RACE_RETRIES =>
                    {
                        run.retries += 1;
                        run.awaiting_retry = true;
                        out.push(Output::RetryAfter {
                            ticket: run.ticket,
                            after: RACE_RETRY_STEP * run.retries,
                        });
                    }
                    Some(_) => {
                        let run = self.run.take().expect("matched Some");
                        out.push(settled(
                            run.ticket,
                            Outcome::Refused {
                                message: message.to_owned(),
                            },
                        ));
                    }
                }
            }
            Some(Sent::Cancel(ticket)) => {
                if remove(&mut self.cancel_waiters, ticket) {
                    out.push(settled(
                        ticket,
                        Outcome::Refused {
                            message: message.to_owned(),
                        },
                    ));
                }
            }
            Some(Sent::Reset {
                ticket,
                sent_at,
                retries,
            }) => {
                // The reset race: its own cancel just ended the run, and
                // nothing else was sent since: send it again shortly.
                let ended_since = self.last_terminal_at.is_some_and(|at| at >= sent_at);
                if message == RESET_WHILE_ACTIVE
                    && ended_since
                    && retries < RACE_RETRIES
                    && self.sent.is_empty()
                    && self.reset_waiters.contains(&ticket)
                {
                    self.reset_retries.push((ticket, retries + 1));
                    out.push(Output::RetryAfter {
                        ticket,
                        after: RACE_RETRY_STEP * (retries + 1),
                    });
                } else if remove(&mut self.reset_waiters, ticket) {
                    out.push(settled(
                        ticket,
                        Outcome::Refused {
                            message: message.to_owned(),
                        },
                    ));
                }
            }
            Some(Sent::Configure(ticket)) => {
                out.push(settled(
                    ticket,
                    Outcome::Refused {
                        message: message.to_owned(),
                    },
                ));
            }
        }
    }

    fn settle_configure(
        &mut self,
        ok: bool,
        has_config: bool,
        error: &Option<(String, String)>,
        out: &mut Vec<Output>,
    ) {
        let Some(Sent::Configure(ticket)) = self.take(Ack::Configure) else {
            return self.protocol_error(
                "Unexpected config event without pending configure.",
                None,
                out,
            );
        };
        let outcome = match (ok, error) {
            (true, _) if !has_config => {
                return self.protocol_error(
                    "Successful config event did not include config.",
                    Some(ticket),
                    out,
                )
            }
            (true, _) => Outcome::Configured,
            (false, None) => {
                return self.protocol_error(
                    "Failed config event did not include error.",
                    Some(ticket),
                    out,
                )
            }
            (false, Some((code, message))) => Outcome::ConfigRejected {
                code: code.clone(),
                message: message.clone(),
            },
        };
        out.push(settled(ticket, outcome));
    }

    /// The backend broke the session's rules (§7.4): the session closes and
    /// the host should kill the backend. `taken` is a request already out of
    /// the FIFO that settles with the others.
    fn protocol_error(&mut self, message: &str, taken: Option<Ticket>, out: &mut Vec<Output>) {
        let close = Close {
            reason: CloseReason::ProtocolError {
                message: message.to_owned(),
            },
            code: None,
            signal: None,
        };
        if let Some(ticket) = taken {
            out.push(settled(ticket, Outcome::Closed(close.clone())));
        }
        self.teardown(close, out);
    }

    /// Runs once, whatever the cause.
    fn teardown(&mut self, close: Close, out: &mut Vec<Output>) {
        if self.closed.is_some() {
            return;
        }
        self.closed = Some(close.clone());
        let closed = || Outcome::Closed(close.clone());
        for approval in self.approvals.drain(..) {
            if let Some(ticket) = approval.answer {
                out.push(settled(ticket, closed()));
            }
        }
        if let Some(run) = self.run.take() {
            out.push(settled(run.ticket, closed()));
        }
        for entry in self.sent.drain(..) {
            if let Sent::Configure(ticket) = entry {
                out.push(settled(ticket, closed()));
            }
        }
        settle_all(&mut self.cancel_waiters, closed(), out);
        settle_all(&mut self.reset_waiters, closed(), out);
        settle_all(&mut self.close_waiters, Outcome::Done, out);
        out.push(Output::Closed(close));
    }
}
