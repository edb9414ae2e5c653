//! The HTTP side: accepts connections on the loopback listener (HTTP/1.1,
//! and HTTP/2 cleartext for classic gRPC clients), runs the [`Guard`] on
//! every request before the Connect layer reads its body, bounds the error
//! every answer may carry (`bounded.rs`), and winds down gracefully when
//! told to.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use connectrpc::{ConnectRpcBody, ConnectRpcService};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower_service::Service;

use crate::bounded::bound_response;
use crate::guard::{Guard, Refusal};

/// How long open connections may take to finish once the bridge stops.
const DRAIN: Duration = Duration::from_secs(3);
/// How much of a refused request's body is read before the answer, and
/// for how long: up to 8 MiB, or the whole body an authorized client
/// declared too large, up to 256 MiB (loopback reads 100 MB in well under
/// the 2 s).
const REFUSED_BODY_BYTES: usize = 8 * 1024 * 1024;
const REFUSED_DECLARED_BODY_BYTES: u64 = 256 * 1024 * 1024;
const REFUSED_BODY_WAIT: Duration = Duration::from_secs(2);

/// The answer to a refused request. Its body is read and dropped first (up
/// to a bound): a client still writing it would otherwise see its
/// connection reset instead of the answer. The connection then closes.
async fn refuse(request: Request<Incoming>, refusal: Refusal) -> hyper::Response<ConnectRpcBody> {
    let Refusal {
        error,
        declared_body_bytes,
    } = refusal;
    let bound = declared_body_bytes.map_or(REFUSED_BODY_BYTES as u64, |declared| {
        declared.min(REFUSED_DECLARED_BODY_BYTES)
    });
    let mut response = error.into_http_response(request.headers());
    let http1 = request.version() < http::Version::HTTP_2;
    let mut body = request.into_body();
    let drain = async {
        let mut read = 0u64;
        while let Some(Ok(frame)) = body.frame().await {
            read += frame.data_ref().map_or(0, |data| data.len() as u64);
            if read >= bound {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(REFUSED_BODY_WAIT, drain).await;
    if http1 {
        response.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
    response
}

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
            let refused = guard.check(&request).err();
            let mut connect = connect.clone();
            async move {
                let response = match refused {
                    Some(refusal) => refuse(request, refusal).await,
                    None => match connect.call(request).await {
                        Ok(response) => response,
                        Err(never) => match never {},
                    },
                };
                Ok::<_, Infallible>(bound_response(response).await)
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
