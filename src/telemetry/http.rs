//! The metrics endpoint of `run` (`--metrics-addr`): Prometheus text at `/metrics` (the `prometheus`
//! crate's encoder), `/healthz` (the process answers) and `/readyz` (no recovery under way, the
//! archive store answers, and no partition waits for a schema from the Schema Registry).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus::{Encoder, TextEncoder};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::warn;

use super::Metrics;

/// Binds the address before anything starts, so a port in use fails the start with a clear error.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves until the task is aborted.
pub fn serve(listener: TcpListener, metrics: Arc<Metrics>) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    warn!("metrics endpoint: accept failed: {e}");
                    continue;
                }
            };
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| answer(req, metrics.clone()));
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    })
}

async fn answer(
    req: Request<hyper::body::Incoming>,
    metrics: Arc<Metrics>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let text = |status: StatusCode, body: String| {
        Response::builder()
            .status(status)
            .header("content-type", "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from(body)))
    };
    let response = match req.uri().path() {
        "/metrics" => {
            let encoder = TextEncoder::new();
            let mut body = Vec::new();
            match encoder.encode(&metrics.registry.gather(), &mut body) {
                Ok(()) => {
                    Response::builder().header("content-type", encoder.format_type()).body(Full::new(Bytes::from(body)))
                }
                Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("encoding metrics failed: {e}\n")),
            }
        }
        "/healthz" => text(StatusCode::OK, "ok\n".into()),
        "/readyz" if metrics.ready() => text(StatusCode::OK, "ready\n".into()),
        "/readyz" => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not ready: {} recoveries in progress ({} waiting for their topic's ID), archive store {}, {} \
                 partitions waiting for a schema from the Schema Registry\n",
                metrics.recoveries_in_progress.get(),
                metrics.topic_ids_waiting.get(),
                if metrics.store_up.get() == 1 { "answering" } else { "failing" },
                metrics.partitions_waiting_for_schemas.get()
            ),
        ),
        _ => text(StatusCode::NOT_FOUND, "try /metrics, /healthz or /readyz\n".into()),
    };
    Ok(response.expect("a valid response"))
}
