//! HTTP and HTTPS to the services the archiver asks besides Kafka and the store (the Schema Registry,
//! Iceberg REST catalogs): one client shape (the TLS stack the AWS SDK already builds; the system's
//! roots or a CA given), one way to send a request with a deadline and a bounded answer, and errors that
//! say whether waiting may mend them.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Request, StatusCode};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use thiserror::Error;

/// A client for HTTP and HTTPS URLs; request bodies are whole (JSON, forms).
pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum HttpError {
    /// The TLS handshake failed (a certificate not trusted, a protocol refused): waiting will not mend it.
    #[error("TLS: {0}")]
    Tls(String),
    /// No answer, or one cut off: the server may come back.
    #[error("{0}")]
    Unavailable(String),
    /// The answer is larger than any the caller expects: the server's fault.
    #[error("an answer of more than {0} bytes")]
    TooLarge(usize),
}

/// A client trusting `ca`'s certificates, or the system's roots (those that can be read; none found
/// leaves the store empty, and a request then fails saying the certificate is not trusted).
pub fn client(ca: Option<&[CertificateDer<'static>]>) -> HttpClient {
    let tls = tls_config(ca);
    let connector = HttpsConnectorBuilder::new().with_tls_config(tls).https_or_http().enable_http1().build();
    Client::builder(TokioExecutor::new()).build(connector)
}

/// TLS trusting `ca`'s certificates, or the system's roots (those that can be read).
pub fn tls_config(ca: Option<&[CertificateDer<'static>]>) -> ClientConfig {
    let mut roots = RootCertStore::empty();
    match ca {
        Some(certificates) => drop(roots.add_parsable_certificates(certificates.iter().cloned())),
        None => drop(roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs)),
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("the provider's default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// Sends `request` and reads its answer: its status and body (at most `max_bytes`), within `timeout`.
pub async fn send(
    http: &HttpClient,
    request: Request<Full<Bytes>>,
    max_bytes: usize,
    timeout: Duration,
) -> Result<(StatusCode, Bytes), HttpError> {
    let answer = async {
        let response = http.request(request).await.map_err(|e| match tls_error(&e) {
            Some(tls) => HttpError::Tls(tls.to_string()),
            None => HttpError::Unavailable(format!("{e:?}")),
        })?;
        let status = response.status();
        let body = Limited::new(response.into_body(), max_bytes).collect().await;
        // An answer too large is the server's fault; one cut off (a connection reset) may pass.
        let body = body.map_err(|e| match e.downcast_ref::<http_body_util::LengthLimitError>() {
            Some(_) => HttpError::TooLarge(max_bytes),
            None => HttpError::Unavailable(format!("reading the answer: {e}")),
        })?;
        Ok((status, body.to_bytes()))
    };
    tokio::time::timeout(timeout, answer)
        .await
        .map_err(|_| HttpError::Unavailable(format!("no answer within {} s", timeout.as_secs())))?
}

/// The TLS error a request failed on, if it failed on one.
fn tls_error<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        // An I/O error's source is its inner error's source, not the inner error itself.
        next = match e.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref) {
            Some(inner) => Some(inner),
            None => e.source(),
        };
    }
    None
}

/// `text` as one segment of a URL's path (every byte but the unreserved ones percent-encoded).
pub fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(b as char),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
