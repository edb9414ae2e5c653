//! The HTTP side: accepts connections on the loopback listener (HTTP/1.1,
//! and HTTP/2 cleartext for classic gRPC clients), runs the [`Guard`] on
//! every request before the Connect layer reads its body, and winds down
//! gracefully when told to.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use connectrpc::ConnectRpcService;
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower_service::Service;

use crate::guard::Guard;

/// How long open connections may take to finish once the bridge stops.
const DRAIN: Duration = Duration::from_secs(3);

pub async fn serve(
    listener: TcpListener,
    connect: ConnectRpcService,
    guard: Arc<Guard>,
    mut stop: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    let builder = auto::Builder::new(TokioExecutor::new());
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    eprintln!("agentlane-bridge: accept failed: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = async { let _ = stop.wait_for(|stop| *stop).await; } => break,
        };
        let _ = stream.set_nodelay(true);
        let connect = connect.clone();
        let guard = guard.clone();
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let refused = guard
                .check(&request)
                .err()
                .map(|e| e.into_http_response(request.headers()));
            let mut connect = connect.clone();
            async move {
                match refused {
                    Some(response) => Ok::<_, Infallible>(response),
                    None => connect.call(request).await,
                }
            }
        });
        let connection = builder
            .serve_connection(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
}
