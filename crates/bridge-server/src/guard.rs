//! The checks every request passes before the Connect layer reads its body:
//! no browser (`Origin` refused, no CORS), a loopback `Host` (against DNS
//! rebinding), `POST` only (no Connect GET), and the bearer token.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use connectrpc::ConnectError;
use http::header::{AUTHORIZATION, HOST, ORIGIN};
use http::{Method, Request};

use crate::token::TokenFile;

pub struct Guard {
    token: Arc<TokenFile>,
    /// The `host:port` forms a loopback client sends.
    hosts: [String; 3],
    /// Set once the bridge is shutting down: every new call is refused.
    stopping: AtomicBool,
}

impl Guard {
    pub fn new(token: Arc<TokenFile>, port: u16) -> Guard {
        Guard {
            token,
            hosts: [
                format!("127.0.0.1:{port}"),
                format!("localhost:{port}"),
                format!("[::1]:{port}"),
            ],
            stopping: AtomicBool::new(false),
        }
    }

    pub fn stop_accepting(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Why the request is refused, if it is.
    pub fn check<B>(&self, request: &Request<B>) -> Result<(), ConnectError> {
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
