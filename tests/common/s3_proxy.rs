//! A fault-injecting HTTP proxy between archivers and S3 (LocalStack), for the chaos and zombie tests.
//! Every request is classified (claim PUT, data PUT, multipart, list, get...) and counted; a test-set
//! rule decides per request whether to pass it, answer with an S3 error, reset the connection, stall
//! the response past the client's timeout, drop the response after S3 stored the object, or hold the
//! request and forward it much later (after its client gave up).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What kind of S3 request a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    PutClaim,
    PutData,
    Multipart,
    List,
    Get,
    Head,
    Delete,
    Other,
}

#[derive(Debug, Clone)]
pub struct RequestInfo {
    pub kind: Kind,
    /// The object key (path after the bucket), percent-decoded.
    pub key: String,
    /// The query string, percent-decoded (a list's `prefix=`...).
    pub query: String,
    /// The `x-amz-expected-bucket-owner` header (S3 test servers ignore it; AWS answers 403 when another
    /// account owns the bucket).
    pub expected_owner: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Pass,
    /// Answer with this HTTP status and S3 error code; S3 never sees the request.
    Status(u16, &'static str),
    /// Close the connection without an answer; S3 never sees the request.
    Reset,
    /// Forward, then hold the answer this long (past the client's timeout).
    StallResponse(Duration),
    /// Forward (S3 stores the object), then close the connection without an answer.
    DropResponse,
    /// Hold the request this long, then forward it whatever the client did meanwhile.
    Hold(Duration),
    /// Hold the request until [`S3Proxy::release_held`], then forward it.
    HoldUntilReleased,
    /// Forward without its `If-None-Match` header (GCS: `ifGenerationMatch` parameter): a store that
    /// ignores conditional writes.
    StripConditional,
}

impl Fault {
    fn name(&self) -> &'static str {
        match self {
            Fault::Pass => "pass",
            Fault::Status(503, _) => "503 SlowDown",
            Fault::Status(409, _) => "409 ConditionalRequestConflict",
            Fault::Status(..) => "500 InternalError",
            Fault::Reset => "connection reset",
            Fault::StallResponse(_) => "response stalled past timeout",
            Fault::DropResponse => "response dropped after store",
            Fault::Hold(_) | Fault::HoldUntilReleased => "request held, forwarded late",
            Fault::StripConditional => "If-None-Match dropped",
        }
    }
}

type Rule = Box<dyn Fn(&RequestInfo) -> Fault + Send + Sync>;

#[derive(Default)]
pub struct ProxyCounts {
    pub requests: BTreeMap<Kind, u64>,
    pub faults: BTreeMap<&'static str, u64>,
    /// Held requests that reached S3 after their hold.
    pub forwarded_late: u64,
    /// Requests being answered now, and the most there ever were at once.
    pub in_flight: u64,
    pub max_in_flight: u64,
}

/// Counts a request in flight until dropped.
struct InFlight(Arc<Mutex<ProxyCounts>>);

impl InFlight {
    fn start(counts: &Arc<Mutex<ProxyCounts>>) -> Self {
        let mut c = counts.lock().unwrap();
        c.in_flight += 1;
        c.max_in_flight = c.max_in_flight.max(c.in_flight);
        Self(counts.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.lock().unwrap().in_flight -= 1;
    }
}

pub struct S3Proxy {
    pub url: String,
    rule: Arc<RwLock<Rule>>,
    counts: Arc<Mutex<ProxyCounts>>,
    /// Set once: the requests held until released go ahead.
    released: tokio::sync::watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl S3Proxy {
    /// Starts a proxy on a free 127.0.0.1 port in front of `upstream` (http://host:port).
    pub async fn start(upstream: &str) -> Self {
        Self::start_with(upstream, false).await
    }

    /// The same, sending on `upstream`'s own host in the Host header (fake-gcs-server routes its XML API
    /// by it; S3's signatures cover it, so the S3 proxy keeps the client's).
    pub async fn start_as_upstream(upstream: &str) -> Self {
        Self::start_with(upstream, true).await
    }

    async fn start_with(upstream: &str, as_upstream: bool) -> Self {
        let upstream: SocketAddr =
            upstream.trim_start_matches("http://").trim_end_matches('/').parse().expect("upstream is http://ip:port");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let rule: Arc<RwLock<Rule>> = Arc::new(RwLock::new(Box::new(|_| Fault::Pass)));
        let counts = Arc::new(Mutex::new(ProxyCounts::default()));
        let (released, gate) = tokio::sync::watch::channel(false);
        let (r, c) = (rule.clone(), counts.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let (r, c, g) = (r.clone(), c.clone(), gate.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                        if as_upstream {
                            let host = hyper::header::HeaderValue::from_str(&upstream.to_string()).unwrap();
                            req.headers_mut().insert(hyper::header::HOST, host);
                        }
                        handle(req, upstream, r.clone(), c.clone(), g.clone())
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { url, rule, counts, released, task }
    }

    pub fn set_rule(&self, rule: impl Fn(&RequestInfo) -> Fault + Send + Sync + 'static) {
        *self.rule.write().unwrap() = Box::new(rule);
    }

    /// Lets the requests held by [`Fault::HoldUntilReleased`] go ahead (and any held later).
    pub fn release_held(&self) {
        self.released.send_replace(true);
    }

    pub fn pass_all(&self) {
        self.set_rule(|_| Fault::Pass);
    }

    pub fn counts(&self) -> std::sync::MutexGuard<'_, ProxyCounts> {
        self.counts.lock().unwrap()
    }
}

impl Drop for S3Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn classify(req: &Request<Incoming>) -> RequestInfo {
    let path = req.uri().path();
    let query = req.uri().query().unwrap_or("");
    let has = |q: &str| query.split('&').any(|p| p == q || p.starts_with(&format!("{q}=")));
    // GCS's JSON API uploads name their object in the query: POST /upload/storage/v1/b/<bucket>/o?name=<key>
    let gcs_upload = path.starts_with("/upload/storage/v1/b/") && req.method() == "POST";
    let key = if gcs_upload {
        query.split('&').find_map(|p| p.strip_prefix("name=")).map(percent_decode).unwrap_or_default()
    } else {
        // Path style: /<bucket>/<key> (Azurite's /<account>/<container>/<key> keeps the container in it).
        path.trim_start_matches('/').split_once('/').map(|(_, k)| percent_decode(k)).unwrap_or_default()
    };
    let method = if gcs_upload && !has("upload_id") { "PUT" } else { req.method().as_str() };
    let kind = match method {
        "PUT" if has("partNumber") || has("uploadId") => Kind::Multipart,
        "PUT" if key.contains("/_claims/") || key.starts_with("_claims/") => Kind::PutClaim,
        "PUT" => Kind::PutData,
        "POST" if has("uploads") || has("uploadId") => Kind::Multipart,
        "GET" if has("list-type") => Kind::List,
        "GET" if !key.is_empty() => Kind::Get,
        "HEAD" => Kind::Head,
        "DELETE" => Kind::Delete,
        _ => Kind::Other,
    };
    let expected_owner =
        req.headers().get("x-amz-expected-bucket-owner").and_then(|v| v.to_str().ok()).map(str::to_string);
    RequestInfo { kind, key, query: percent_decode(query), expected_owner }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

type Answer = Response<Full<Bytes>>;

async fn handle(
    req: Request<Incoming>,
    upstream: SocketAddr,
    rule: Arc<RwLock<Rule>>,
    counts: Arc<Mutex<ProxyCounts>>,
    mut released: tokio::sync::watch::Receiver<bool>,
) -> Result<Answer, std::io::Error> {
    let _in_flight = InFlight::start(&counts);
    let info = classify(&req);
    let fault = (rule.read().unwrap())(&info);
    let (mut parts, body) = req.into_parts();
    let body = body.collect().await.map_err(std::io::Error::other)?.to_bytes();
    // The body is forwarded whole, with a length.
    parts.headers.remove(hyper::header::TRANSFER_ENCODING);
    if fault == Fault::StripConditional {
        parts.headers.remove(hyper::header::IF_NONE_MATCH);
        // GCS's precondition is a query parameter.
        if let Some(query) = parts.uri.query().filter(|q| q.contains("ifGenerationMatch=")) {
            let kept: Vec<&str> = query.split('&').filter(|p| !p.starts_with("ifGenerationMatch=")).collect();
            parts.uri = format!("{}?{}", parts.uri.path(), kept.join("&")).parse().unwrap();
        }
    }
    let forward_req = Request::from_parts(parts, Full::new(body));
    {
        let mut c = counts.lock().unwrap();
        *c.requests.entry(info.kind).or_default() += 1;
        if fault != Fault::Pass {
            *c.faults.entry(fault.name()).or_default() += 1;
        }
    }
    match fault {
        Fault::Pass | Fault::StripConditional => forward(upstream, forward_req).await,
        Fault::Status(status, code) => {
            let xml = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>injected by the test proxy</Message></Error>");
            Ok(Response::builder()
                .status(status)
                .header("content-type", "application/xml")
                .body(Full::new(Bytes::from(xml)))
                .unwrap())
        }
        Fault::Reset => Err(std::io::Error::other("injected connection reset")),
        Fault::StallResponse(d) => {
            let answer = forward(upstream, forward_req).await;
            tokio::time::sleep(d).await;
            answer
        }
        Fault::DropResponse => {
            forward(upstream, forward_req).await?;
            Err(std::io::Error::other("injected: response dropped after the request was stored"))
        }
        Fault::Hold(d) => {
            // Detached, so it goes ahead even when the client has given up and closed the connection.
            let late = tokio::spawn(async move {
                tokio::time::sleep(d).await;
                let answer = forward(upstream, forward_req).await;
                counts.lock().unwrap().forwarded_late += 1;
                answer
            });
            late.await.map_err(std::io::Error::other)?
        }
        Fault::HoldUntilReleased => {
            let late = tokio::spawn(async move {
                let _ = released.wait_for(|go| *go).await;
                let answer = forward(upstream, forward_req).await;
                counts.lock().unwrap().forwarded_late += 1;
                answer
            });
            late.await.map_err(std::io::Error::other)?
        }
    }
}

async fn forward(upstream: SocketAddr, req: Request<Full<Bytes>>) -> Result<Answer, std::io::Error> {
    let stream = TcpStream::connect(upstream).await?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(std::io::Error::other)?;
    tokio::spawn(conn);
    let response = sender.send_request(req).await.map_err(std::io::Error::other)?;
    let (mut parts, body) = response.into_parts();
    let body = body.collect().await.map_err(std::io::Error::other)?.to_bytes();
    parts.headers.remove(hyper::header::TRANSFER_ENCODING);
    Ok(Response::from_parts(parts, Full::new(body)))
}
