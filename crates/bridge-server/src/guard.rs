//! The checks every request passes before the Connect layer reads its body:
//! no browser (`Origin` refused, no CORS), a loopback `Host` (against DNS
//! rebinding), `POST` only (no Connect GET), the bearer token, and a
//! declared body no larger than the bridge takes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use connectrpc::ConnectError;
use http::header::{AUTHORIZATION, CONTENT_LENGTH, HOST, ORIGIN};
use http::{Method, Request};

use crate::token::TokenFile;

pub struct Guard {
    token: Arc<TokenFile>,
    /// The `host:port` forms a loopback client sends.
    hosts: [String; 3],
    /// Set once the bridge is shutting down: every new call is refused.
    stopping: AtomicBool,
    /// The largest request body taken.
    max_body_bytes: usize,
    /// The largest body of a call that carries a tool's result back (a
    /// 20 MB result is the application's business): the Connect layer's
    /// own limit.
    max_data_body_bytes: usize,
}

/// The calls whose bodies may be as large as `max_data_body_bytes`.
const DATA_METHODS: [&str; 1] = ["/agentlane.bridge.v1.AgentService/AnswerToolCall"];

/// What the guard decided against a request.
pub struct Refusal {
    /// The Connect error the client gets.
    pub error: ConnectError,
    /// The body this request declared (`Content-Length`), when it was
    /// refused for being larger than the bridge takes: the answer is sent
    /// once that much was read (bounded), so that a client still writing it
    /// gets the answer and not a reset connection.
    pub declared_body_bytes: Option<u64>,
}

impl From<ConnectError> for Refusal {
    fn from(error: ConnectError) -> Refusal {
        Refusal {
            error,
            declared_body_bytes: None,
        }
    }
}

impl Guard {
    pub fn new(token: Arc<TokenFile>, port: u16, max_body_bytes: usize, max_data_body_bytes: usize) -> Guard {
        Guard {
            token,
            hosts: [
                format!("127.0.0.1:{port}"),
                format!("localhost:{port}"),
                format!("[::1]:{port}"),
            ],
            stopping: AtomicBool::new(false),
            max_body_bytes,
            max_data_body_bytes,
        }
    }

    pub fn stop_accepting(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Why the request is refused, if it is.
    pub fn check<B>(&self, request: &Request<B>) -> Result<(), Refusal> {
        self.check_access(request)?;
        // Checked after the token: only an authorized client's large body
        // is read before the answer.
        let declared = request
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
        let limit = if DATA_METHODS.contains(&request.uri().path()) {
            self.max_data_body_bytes
        } else {
            self.max_body_bytes
        };
        if let Some(length) = declared.filter(|&length| length > limit as u64) {
            return Err(Refusal {
                error: ConnectError::resource_exhausted(format!(
                    "the request body is {length} bytes; agentlane-bridge takes at most {limit}"
                )),
                declared_body_bytes: Some(length),
            });
        }
        Ok(())
    }

    /// The browser, host, method, token and shutdown checks.
    fn check_access<B>(&self, request: &Request<B>) -> Result<(), ConnectError> {
        if request.headers().contains_key(ORIGIN) {
            return Err(ConnectError::permission_denied(
                "agentlane-bridge refuses requests that carry an Origin header: it does not serve browsers",
            ));
        }
        // HTTP/1.1 sends Host; HTTP/2 sends the :authority pseudo-header.
        let host = match request.headers().get(HOST) {
            Some(value) => value.to_str().ok(),
            None => request.uri().authority().map(|a| a.as_str()),
        };
        if !host.is_some_and(|h| {
            self.hosts
                .iter()
                .any(|allowed| h.eq_ignore_ascii_case(allowed))
        }) {
            return Err(ConnectError::permission_denied(
                "agentlane-bridge only answers requests addressed to a loopback host (127.0.0.1, localhost or [::1] with its port)",
            ));
        }
        if request.method() != Method::POST {
            return Err(ConnectError::method_not_allowed(
                "agentlane-bridge only accepts POST",
            ));
        }
        let authorized = request
            .headers()
            .get(AUTHORIZATION)
            .is_some_and(|value| self.token.accepts(value.as_bytes()));
        if !authorized {
            return Err(ConnectError::unauthenticated(
                "missing or wrong bearer token (send Authorization: Bearer <the token file's content>)",
            ));
        }
        if self.stopping.load(Ordering::SeqCst) {
            return Err(ConnectError::unavailable(
                "agentlane-bridge is shutting down",
            ));
        }
        Ok(())
    }
}
