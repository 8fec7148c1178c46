//! AWS Signature Version 4 for REST catalogs behind AWS (Glue's Iceberg endpoint, signing name `glue`;
//! S3 Tables', `s3tables`): each request signed as Iceberg's own clients sign them with
//! `rest.sigv4-enabled` — the signing name, the region, and the body's SHA-256 in
//! `x-amz-content-sha256` — with credentials from AWS's default chain (environment, profile, web
//! identity, container and instance roles), as the S3 client takes them. Credentials are kept until five
//! minutes before they expire.

use std::time::{Duration, SystemTime};

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use hyper::header::HOST;
use hyper::{HeaderMap, Method, Request, Uri};
use tokio::sync::{Mutex, OnceCell};

/// How long before credentials expire they are fetched anew.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(300);
/// How long finding AWS's configuration or fetching credentials may take (an STS that never answers).
const CREDENTIALS_TIMEOUT: Duration = Duration::from_secs(30);

/// Signs a REST catalog's requests for `service` in `region`.
pub struct Signer {
    service: String,
    /// The region given, else the one AWS's configuration names.
    region: Option<String>,
    aws: OnceCell<(SharedCredentialsProvider, String)>,
    credentials: Mutex<Option<Credentials>>,
}

impl Signer {
    pub fn new(service: String, region: Option<String>) -> Self {
        Self { service, region, aws: OnceCell::new(), credentials: Mutex::new(None) }
    }

    /// Adds the signature's headers to `request` (whose body is `body`).
    pub async fn sign<B>(&self, request: &mut Request<B>, body: &[u8]) -> Result<(), String> {
        let (provider, region) = self
            .aws
            .get_or_try_init(|| async {
                let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
                if let Some(region) = &self.region {
                    loader = loader.region(aws_config::Region::new(region.clone()));
                }
                let config = tokio::time::timeout(CREDENTIALS_TIMEOUT, loader.load())
                    .await
                    .map_err(|_| format!("AWS's configuration did not load within {CREDENTIALS_TIMEOUT:?}"))?;
                let region = config
                    .region()
                    .map(ToString::to_string)
                    .ok_or("no AWS region to sign for: set --iceberg-signing-region (or AWS_REGION)".to_string())?;
                let provider = config.credentials_provider().ok_or(
                    "no AWS credentials provider: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile or a role",
                )?;
                Ok::<_, String>((provider, region))
            })
            .await?;
        let credentials = {
            let mut held = self.credentials.lock().await;
            let fresh = |c: &Credentials| c.expiry().is_none_or(|at| at > SystemTime::now() + REFRESH_BEFORE_EXPIRY);
            match held.as_ref().filter(|c| fresh(c)) {
                Some(c) => c.clone(),
                None => {
                    let c = tokio::time::timeout(CREDENTIALS_TIMEOUT, provider.provide_credentials())
                        .await
                        .map_err(|_| format!("AWS credentials did not come within {CREDENTIALS_TIMEOUT:?}"))?
                        .map_err(|e| format!("AWS credentials for signing the catalog's requests: {e}"))?;
                    held.insert(c).clone()
                }
            }
        };
        sign_request(request, body, &credentials, &self.service, region, SystemTime::now())
    }

    /// Drops the credentials held (the catalog refused them: revoked, or expired early), so the next
    /// request fetches them anew.
    pub async fn forget(&self) {
        *self.credentials.lock().await = None;
    }
}

/// Signs `request` (its body `body`) for `service` in `region` at `time` with `credentials`: sets its
/// Host (as it is signed) and adds `authorization`, `x-amz-date`, `x-amz-content-sha256` and, for
/// temporary credentials, `x-amz-security-token`.
pub fn sign_request<B>(
    request: &mut Request<B>,
    body: &[u8],
    credentials: &Credentials,
    service: &str,
    region: &str,
    time: SystemTime,
) -> Result<(), String> {
    let host = request.uri().authority().map(|a| a.as_str().to_string()).ok_or("a catalog URL without a host")?;
    request.headers_mut().insert(HOST, host.parse().map_err(|e| format!("host {host}: {e}"))?);
    let identity: Identity = credentials.clone().into();
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| format!("signing parameters: {e}"))?
        .into();
    let instructions = {
        let signable = signable(request.method(), request.uri(), request.headers(), body)?;
        sign(signable, &params).map_err(|e| format!("signing: {e}"))?.into_parts().0
    };
    instructions.apply_to_request_http1x(request);
    Ok(())
}

fn signable<'a>(
    method: &'a Method,
    uri: &'a Uri,
    headers: &'a HeaderMap,
    body: &'a [u8],
) -> Result<SignableRequest<'a>, String> {
    let headers = headers.iter().filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)));
    SignableRequest::new(method.as_str(), uri.to_string(), headers, SignableBody::Bytes(body))
        .map_err(|e| format!("signing: {e}"))
}
