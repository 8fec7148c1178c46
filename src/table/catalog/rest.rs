//! Any Iceberg REST catalog (`http(s)://…`: Apache Iceberg's own server, Polaris, Nessie, Lakekeeper…),
//! by the REST catalog API: `GET /v1/config` (the catalog's path prefix for a warehouse), loading a
//! table, registering a new one, and committing with requirements. The archiver writes a new table's
//! first metadata file itself and registers it, so the table's field IDs and partition specs are exactly
//! those the manifests were written with; later metadata files are the catalog's. A commit asks the
//! catalog to add the snapshot only if the table is still the one it was planned on (its UUID, and
//! `main` at the snapshot planned on); a catalog that refuses (409) has changed nothing. An answer lost
//! (a timeout, a 5xx) leaves the commit's outcome unknown: it is an error, its files are kept, and the
//! next attempt plans from whatever the table then records, so a commit that did land is not repeated.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode};
use rustls::pki_types::CertificateDer;
use serde_json::{json, Value};
use tokio::sync::{Mutex, OnceCell};

use super::sigv4::Signer;
use super::{next_metadata_file, write_metadata, Catalog, CatalogError, Committed, Loaded, TableIdent};
use crate::http::{path_segment, send, HttpClient};
use crate::store::ObjectStore;
use crate::table::iceberg::metadata::{Base, Change};

/// How long one request may take before the catalog counts as unavailable.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read: table metadata grows with its snapshots, and this bounds a misbehaving server.
const MAX_ANSWER_BYTES: usize = 256 << 20;
/// The branch the archiver's snapshots go on.
const MAIN: &str = "main";

/// How requests authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestAuth {
    None,
    /// A token sent as is.
    Bearer(String),
    /// OAuth2's client credentials, exchanged for a token at the catalog's `/v1/oauth/tokens` (again
    /// when the catalog says a token has expired).
    ClientCredentials {
        client_id: String,
        client_secret: String,
        scope: String,
    },
    /// AWS Signature Version 4 for the service `signing_name` (`glue`, `s3tables`) in `region` (none:
    /// the region of AWS's configuration), with AWS's default credentials.
    SigV4 {
        signing_name: String,
        region: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestOptions {
    /// The catalog's base URL, without `/v1`.
    pub url: String,
    /// The warehouse asked for in `GET /v1/config` (some catalogs serve several).
    pub warehouse: Option<String>,
    pub auth: RestAuth,
    /// The certificates an HTTPS catalog's is to be signed by (`None`: the system's roots).
    pub ca: Option<Vec<CertificateDer<'static>>>,
}

pub struct RestCatalog {
    options: RestOptions,
    http: HttpClient,
    store: Arc<dyn ObjectStore>,
    /// `/v1` and the catalog's prefix, once asked.
    base: OnceCell<String>,
    /// The OAuth2 token in use.
    token: Mutex<Option<String>>,
    /// The signer of requests, with AWS Signature Version 4.
    signer: Option<Signer>,
}

impl RestCatalog {
    pub fn new(options: RestOptions, store: Arc<dyn ObjectStore>) -> Self {
        let http = crate::http::client(options.ca.as_deref());
        let signer = match &options.auth {
            RestAuth::SigV4 { signing_name, region } => Some(Signer::new(signing_name.clone(), region.clone())),
            _ => None,
        };
        Self { options, http, store, base: OnceCell::new(), token: Mutex::new(None), signer }
    }

    fn failed(&self, why: impl std::fmt::Display) -> CatalogError {
        CatalogError::Catalog { catalog: self.options.url.clone(), why: why.to_string() }
    }

    /// `{url}/v1[/{prefix}]`, from the catalog's config.
    async fn base(&self) -> Result<&str, CatalogError> {
        let base = self.base.get_or_try_init(|| async {
            let query = match &self.options.warehouse {
                Some(w) => format!("?warehouse={}", path_segment(w)),
                None => String::new(),
            };
            let config = self.call(Method::GET, &format!("{}/v1/config{query}", self.options.url), None).await?;
            let config =
                expect(config, &[StatusCode::OK]).map_err(|why| self.failed(format!("GET /v1/config: {why}")))?;
            let prefix = config.1["overrides"]["prefix"].as_str().or(config.1["defaults"]["prefix"].as_str());
            Ok::<_, CatalogError>(match prefix {
                Some(p) => format!("{}/v1/{}", self.options.url, p.trim_matches('/')),
                None => format!("{}/v1", self.options.url),
            })
        });
        Ok(base.await?.as_str())
    }

    async fn namespace_url(&self, table: &TableIdent) -> Result<String, CatalogError> {
        Ok(format!("{}/namespaces/{}", self.base().await?, path_segment(&table.namespace)))
    }

    async fn table_url(&self, table: &TableIdent) -> Result<String, CatalogError> {
        Ok(format!("{}/tables/{}", self.namespace_url(table).await?, path_segment(&table.name)))
    }

    /// Sends a request (authenticated; once more with a new token when an OAuth2 token was refused, or
    /// with fresh AWS credentials when signed ones were).
    async fn call(&self, method: Method, url: &str, body: Option<&Value>) -> Result<(StatusCode, Value), CatalogError> {
        let mut answer = self.send_once(method.clone(), url, body).await?;
        if answer.0 == StatusCode::UNAUTHORIZED && matches!(self.options.auth, RestAuth::ClientCredentials { .. }) {
            *self.token.lock().await = None;
            answer = self.send_once(method, url, body).await?;
        } else if let (StatusCode::FORBIDDEN, Some(signer)) = (answer.0, &self.signer) {
            // Credentials revoked or expired early: signed again with fresh ones.
            signer.forget().await;
            answer = self.send_once(method, url, body).await?;
        }
        Ok(answer)
    }

    async fn send_once(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), CatalogError> {
        let mut request = Request::builder().method(method.clone()).uri(url).header(ACCEPT, "application/json");
        if let Some(token) = self.token().await? {
            request = request.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        let body = match body {
            Some(json) => {
                request = request.header(CONTENT_TYPE, "application/json");
                Bytes::from(serde_json::to_vec(json).expect("JSON serialises"))
            }
            None => Bytes::new(),
        };
        let mut request = request.body(Full::new(body.clone())).map_err(|e| self.failed(e))?;
        if let Some(signer) = &self.signer {
            signer.sign(&mut request, &body).await.map_err(|why| self.failed(why))?;
        }
        self.exchange(request, &format!("{method} {url}")).await
    }

    async fn exchange(&self, request: Request<Full<Bytes>>, what: &str) -> Result<(StatusCode, Value), CatalogError> {
        let (status, body) = send(&self.http, request, MAX_ANSWER_BYTES, REQUEST_TIMEOUT)
            .await
            .map_err(|e| self.failed(format!("{what}: {e}")))?;
        let json = match body.is_empty() {
            true => Value::Null,
            false => serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(lossy(&body))),
        };
        Ok((status, json))
    }

    /// The token to send, fetched first for client credentials.
    async fn token(&self) -> Result<Option<String>, CatalogError> {
        let (client_id, client_secret, scope) = match &self.options.auth {
            RestAuth::None | RestAuth::SigV4 { .. } => return Ok(None),
            RestAuth::Bearer(token) => return Ok(Some(token.clone())),
            RestAuth::ClientCredentials { client_id, client_secret, scope } => (client_id, client_secret, scope),
        };
        let mut held = self.token.lock().await;
        if let Some(token) = held.as_ref() {
            return Ok(Some(token.clone()));
        }
        let form = format!(
            "grant_type=client_credentials&client_id={}&client_secret={}&scope={}",
            path_segment(client_id),
            path_segment(client_secret),
            path_segment(scope)
        );
        let url = format!("{}/v1/oauth/tokens", self.options.url);
        let request = Request::post(&url)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json")
            .body(Full::new(Bytes::from(form)))
            .map_err(|e| self.failed(e))?;
        let answer = self.exchange(request, &format!("POST {url}")).await?;
        let (_, json) = expect(answer, &[StatusCode::OK]).map_err(|why| {
            self.failed(format!("the OAuth2 token request was refused: {why}; check --iceberg-credential"))
        })?;
        let token =
            json["access_token"].as_str().ok_or_else(|| self.failed("the OAuth2 answer has no access_token"))?;
        *held = Some(token.to_string());
        Ok(Some(token.to_string()))
    }

    /// The table a load, register or commit answered.
    fn loaded(&self, answer: &Value) -> Result<Loaded, CatalogError> {
        let location = answer["metadata-location"].as_str();
        match (location, answer.get("metadata")) {
            (Some(location), Some(metadata)) if metadata.is_object() => {
                Ok(Loaded { metadata: metadata.clone(), location: location.to_string() })
            }
            _ => Err(self.failed("the answer names no metadata-location and metadata")),
        }
    }

    /// Creates the namespace; one that exists already is fine (also when creating it failed because
    /// another committer created it at the same time: some catalogs answer that race with a 500).
    async fn create_namespace(&self, table: &TableIdent) -> Result<(), CatalogError> {
        let url = format!("{}/namespaces", self.base().await?);
        let body = json!({ "namespace": [table.namespace], "properties": {} });
        let answer = self.call(Method::POST, &url, Some(&body)).await?;
        let Err(why) = expect(answer, &[StatusCode::OK, StatusCode::CONFLICT]) else { return Ok(()) };
        match self.call(Method::GET, &self.namespace_url(table).await?, None).await?.0 {
            StatusCode::OK => Ok(()),
            _ => Err(self.failed(format!("creating namespace {}: {why}", table.namespace))),
        }
    }
}

#[async_trait]
impl Catalog for RestCatalog {
    async fn load(&self, table: &TableIdent) -> Result<Option<Loaded>, CatalogError> {
        let answer = self.call(Method::GET, &self.table_url(table).await?, None).await?;
        match answer.0 {
            StatusCode::NOT_FOUND => Ok(None),
            _ => {
                let (_, json) =
                    expect(answer, &[StatusCode::OK]).map_err(|why| self.failed(format!("loading {table}: {why}")))?;
                Ok(Some(self.loaded(&json)?))
            }
        }
    }

    async fn check(&self) -> Result<String, CatalogError> {
        let answer = self.call(Method::GET, &format!("{}/namespaces", self.base().await?), None).await?;
        let (_, json) =
            expect(answer, &[StatusCode::OK]).map_err(|why| self.failed(format!("listing namespaces: {why}")))?;
        let namespaces = json["namespaces"].as_array().map_or(0, Vec::len);
        Ok(format!("REST catalog {}: reachable, {namespaces} namespaces", self.options.url))
    }

    async fn create(&self, table: &TableIdent, metadata: &Value) -> Result<Option<Loaded>, CatalogError> {
        let location =
            metadata["location"].as_str().ok_or_else(|| self.failed("new table metadata has no location"))?;
        self.create_namespace(table).await?;
        let file = next_metadata_file(location, None);
        let key = write_metadata(self.store.as_ref(), table, &file, metadata).await?;
        let url = format!("{}/register", self.namespace_url(table).await?);
        let answer =
            self.call(Method::POST, &url, Some(&json!({ "name": table.name, "metadata-location": file }))).await?;
        // A 4xx changed nothing, so this file is nobody's; after a 5xx it may be the table's.
        let refused_outright = answer.0.is_client_error();
        let refused = match expect(answer, &[StatusCode::OK]) {
            Ok((_, json)) => return Ok(Some(self.loaded(&json)?)),
            Err(why) => why,
        };
        // A 409, or a failure while another committer registered it (some catalogs answer that race with
        // a 500, and an answer may be lost after the table was registered): load what is there.
        let theirs = self.load(table).await?;
        if refused_outright {
            let _ = self.store.delete(&key).await; // Another committer's table, or none: nobody's file.
        }
        match theirs {
            Some(_) => Ok(None), // Whoever's it is, the committer loads it.
            None => Err(self.failed(format!("registering {table}: {refused}"))),
        }
    }

    async fn commit(
        &self,
        table: &TableIdent,
        base: &Loaded,
        change: &Change,
        _now_ms: i64,
    ) -> Result<Committed, CatalogError> {
        let body = commit_request(table, base, change).map_err(|why| self.failed(why))?;
        let answer = self.call(Method::POST, &self.table_url(table).await?, Some(&body)).await?;
        if answer.0 == StatusCode::CONFLICT {
            return Ok(Committed::Conflict);
        }
        let (_, json) = expect(answer, &[StatusCode::OK]).map_err(|why| {
            self.failed(format!("committing to {table} (its outcome is unknown until it is loaded again): {why}"))
        })?;
        Ok(Committed::Done(self.loaded(&json)?))
    }
}

/// The commit of `change` on `base`: its requirements (the same table, `main` where it was) and updates.
fn commit_request(table: &TableIdent, base: &Loaded, change: &Change) -> Result<Value, String> {
    let uuid = base.metadata["table-uuid"].as_str().ok_or("the table's metadata has no table-uuid")?;
    let snapshot_id = change.snapshot["snapshot-id"].as_i64().ok_or("the snapshot has no snapshot-id")?;
    let properties: serde_json::Map<String, Value> =
        change.properties.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    let mut requirements = vec![
        json!({ "type": "assert-table-uuid", "uuid": uuid }),
        json!({ "type": "assert-ref-snapshot-id", "ref": MAIN, "snapshot-id": Base(&base.metadata).snapshot_id() }),
    ];
    let mut updates = Vec::new();
    if let Some(new) = &change.schema {
        // The schema evolves in the same commit as the files that need it, and only from the one planned on.
        let current = &base.metadata["current-schema-id"];
        let last = &base.metadata["last-column-id"];
        requirements.push(json!({ "type": "assert-current-schema-id", "current-schema-id": current }));
        requirements.push(json!({ "type": "assert-last-assigned-field-id", "last-assigned-field-id": last }));
        updates.push(json!({ "action": "add-schema", "schema": new.schema, "last-column-id": new.last_column_id }));
        updates.push(json!({ "action": "set-current-schema", "schema-id": -1 }));
    }
    updates.extend([
        json!({ "action": "add-snapshot", "snapshot": change.snapshot }),
        json!({ "action": "set-snapshot-ref", "ref-name": MAIN, "type": "branch", "snapshot-id": snapshot_id }),
        json!({ "action": "set-properties", "updates": properties }),
    ]);
    if !change.expired.is_empty() {
        let ids: Vec<i64> = change.expired.iter().map(|e| e.snapshot_id).collect();
        updates.push(json!({ "action": "remove-snapshots", "snapshot-ids": ids }));
    }
    Ok(json!({
        "identifier": { "namespace": [table.namespace], "name": table.name },
        "requirements": requirements,
        "updates": updates,
    }))
}

/// The answer if its status is one of `ok`, else what went wrong: the status and the catalog's message.
fn expect(answer: (StatusCode, Value), ok: &[StatusCode]) -> Result<(StatusCode, Value), String> {
    if ok.contains(&answer.0) {
        return Ok(answer);
    }
    let message = answer.1["error"]["message"].as_str().map(str::to_string).unwrap_or_else(|| {
        let text = answer.1.to_string();
        text.chars().take(300).collect()
    });
    Err(match answer.0 {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            format!(
                "HTTP {}: {message}; check --iceberg-token, --iceberg-credential or, with --iceberg-signing-name, the AWS \
                 credentials and their IAM permissions",
                answer.0
            )
        }
        status => format!("HTTP {status}: {message}"),
    })
}

fn lossy(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::iceberg::expire::Expired;
    use crate::table::iceberg::metadata::NewSchema;

    #[test]
    fn a_commit_requires_the_table_and_main_where_they_were_planned() {
        let table = TableIdent { namespace: "kafka".into(), name: "t".into() };
        let metadata = json!({ "table-uuid": "u-1", "current-snapshot-id": 7 });
        let base = Loaded { metadata, location: "s3://b/m.json".into() };
        let change = Change {
            snapshot: json!({ "snapshot-id": 8 }),
            properties: vec![("k".into(), "v".into())],
            schema: None,
            expired: vec![],
        };
        let body = commit_request(&table, &base, &change).unwrap();
        assert_eq!(body["requirements"][0], json!({ "type": "assert-table-uuid", "uuid": "u-1" }));
        assert_eq!(body["requirements"][1]["snapshot-id"], json!(7));
        assert_eq!(body["updates"][1]["snapshot-id"], json!(8));
        assert_eq!(body["updates"][2]["updates"], json!({ "k": "v" }));
        // A table without a snapshot yet: main must still have none.
        let empty = Loaded { metadata: json!({ "table-uuid": "u-1", "current-snapshot-id": -1 }), ..base };
        let body = commit_request(&table, &empty, &change).unwrap();
        assert_eq!(body["requirements"][1]["snapshot-id"], Value::Null);
    }

    #[test]
    fn a_commit_that_evolves_the_schema_requires_the_schema_it_was_planned_on() {
        let table = TableIdent { namespace: "kafka".into(), name: "t".into() };
        let metadata =
            json!({ "table-uuid": "u-1", "current-snapshot-id": 7, "current-schema-id": 0, "last-column-id": 9 });
        let base = Loaded { metadata, location: "s3://b/m.json".into() };
        let schema = json!({ "type": "struct", "schema-id": 1, "fields": [] });
        let new = NewSchema { schema: schema.clone(), last_column_id: 10 };
        let expired = vec![Expired { snapshot_id: 3, manifest_list: None }];
        let change = Change { snapshot: json!({ "snapshot-id": 8 }), properties: vec![], schema: Some(new), expired };
        let body = commit_request(&table, &base, &change).unwrap();
        assert_eq!(body["requirements"][2], json!({ "type": "assert-current-schema-id", "current-schema-id": 0 }));
        assert_eq!(body["requirements"][3]["last-assigned-field-id"], json!(9));
        assert_eq!(body["updates"][0], json!({ "action": "add-schema", "schema": schema, "last-column-id": 10 }));
        assert_eq!(body["updates"][1], json!({ "action": "set-current-schema", "schema-id": -1 }));
        assert_eq!(body["updates"][2]["action"], "add-snapshot", "the files come in the same commit");
        assert_eq!(body["updates"][5], json!({ "action": "remove-snapshots", "snapshot-ids": [3] }));
    }

    #[test]
    fn a_refusal_says_what_the_catalog_said() {
        let answer = (StatusCode::BAD_REQUEST, json!({ "error": { "message": "no such field", "code": 400 } }));
        assert_eq!(expect(answer, &[StatusCode::OK]).unwrap_err(), "HTTP 400 Bad Request: no such field");
        let answer = (StatusCode::UNAUTHORIZED, Value::Null);
        assert!(expect(answer, &[StatusCode::OK]).unwrap_err().contains("--iceberg-token"));
    }
}
