//! Azure Blob Storage: object_store's client for reads, listing, deletes and a small object's Put Blob
//! with `If-None-Match: *`; a large object goes up as blocks (Put Block, in parallel) committed by one
//! Put Block List with `If-None-Match: *`, so it appears whole or not at all and never replaces another
//! writer's blob. Block IDs carry a random nonce per upload: two writers of one name (a zombie and its
//! successor) never overwrite each other's uncommitted blocks.

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use futures::{StreamExt, TryStreamExt};
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, IF_NONE_MATCH};
use http::Method;
use object_store::azure::{AzureAuthorizer, AzureConfigKey, MicrosoftAzure, MicrosoftAzureBuilder};
use object_store::client::{HttpClient, HttpConnector, HttpRequestBody, ReqwestConnector};
use object_store::{PutMode, PutOptions, PutPayload};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use super::errors::{classify, from_status, Op};
use super::{
    account_of_endpoint, client_options, exchange, path, retry_config, size, within, AzureCredentials, AzureOptions,
    Bodies, CloudStore, CreateIfAbsent,
};
use crate::encode::spool::SpoolData;
use crate::store::{PutOutcome, StoreError};

/// A blob name's path as object_store encodes it (and so signs it).
const PATH_SET: &AsciiSet = &NON_ALPHANUMERIC.remove(b'/').remove(b'-').remove(b'.').remove(b'_').remove(b'~');
const QUERY_SET: &AsciiSet = NON_ALPHANUMERIC;
/// Azure's error code for a create refused because the blob exists.
const BLOB_ALREADY_EXISTS: &str = "BlobAlreadyExists";

/// Opens `az://container` in the account the options (or AZURE_STORAGE_ACCOUNT_NAME) name, with their
/// credentials, else Azure AD from the environment. Objects of `part_size` × 2 or more go up as blocks of
/// `part_size`, `concurrency` at a time.
pub fn connect_azure(
    container: &str,
    options: &AzureOptions,
    part_size: u64,
    concurrency: usize,
) -> Result<CloudStore, StoreError> {
    let unusable = |e: String| StoreError::Permanent {
        what: format!("cannot use az://{container}: {e}"),
        fix: "check --azure-account, --azure-endpoint and the credentials (--azure-access-key, --azure-sas-token, \
              --azure-connection-string, or Azure AD's AZURE_* variables)"
            .into(),
    };
    let mut builder = MicrosoftAzureBuilder::from_env().with_container_name(container).with_retry(retry_config());
    // The account: the setting, else AZURE_STORAGE_ACCOUNT_NAME, else the one the endpoint names.
    let account = options
        .account
        .clone()
        .or_else(|| builder.get_config_value(&AzureConfigKey::AccountName))
        .or_else(|| options.endpoint.as_deref().and_then(account_of_endpoint))
        .ok_or_else(|| {
            unusable("no storage account is named (--azure-account or AZURE_STORAGE_ACCOUNT_NAME)".into())
        })?;
    // The endpoint: the setting, else AZURE_STORAGE_ENDPOINT, else the account's public one; given to
    // object_store too, so that every request (its own and the block uploads) goes to the same place.
    let endpoint = options
        .endpoint
        .clone()
        .or_else(|| builder.get_config_value(&AzureConfigKey::Endpoint))
        .unwrap_or_else(|| format!("https://{account}.blob.core.windows.net"));
    let endpoint = endpoint.trim_end_matches('/').to_string();
    builder = builder
        .with_account(&account)
        .with_endpoint(endpoint.clone())
        .with_use_emulator(false)
        .with_client_options(client_options(Some(&endpoint)));
    let blob_root = format!("{endpoint}/{container}");
    builder = match &options.credentials {
        AzureCredentials::AccessKey(key) => builder.with_access_key(key),
        AzureCredentials::Sas(query) => builder.with_config(AzureConfigKey::SasKey, query),
        AzureCredentials::Environment => builder,
    };
    let describe = format!("az://{container} (account {account}, endpoint {endpoint})");
    let backend = Arc::new(builder.build().map_err(|e| unusable(e.to_string()))?);
    let http =
        ReqwestConnector::default().connect(&client_options(Some(&endpoint))).map_err(|e| unusable(e.to_string()))?;
    let writer = AzureWriter {
        backend: backend.clone(),
        http,
        account,
        blob_root,
        block_size: part_size,
        concurrency: concurrency.max(1),
        bodies: Bodies::new(part_size, concurrency),
        describe: describe.clone(),
    };
    Ok(CloudStore { backend, writer: Box::new(writer), describe })
}

struct AzureWriter {
    backend: Arc<MicrosoftAzure>,
    http: HttpClient,
    account: String,
    /// `https://ACCOUNT.blob.core.windows.net/CONTAINER` (or the endpoint's).
    blob_root: String,
    block_size: u64,
    concurrency: usize,
    bodies: Bodies,
    describe: String,
}

impl AzureWriter {
    fn url(&self, key: &str, query: &str) -> String {
        format!("{}/{}?{query}", self.blob_root, utf8_percent_encode(key, PATH_SET))
    }

    /// Sends a request signed with the store's current credential, within its deadline; the status and
    /// the body's text.
    async fn send(
        &self,
        key: &str,
        request: http::request::Builder,
        body: HttpRequestBody,
    ) -> Result<(u16, String), StoreError> {
        let len = body.content_length() as u64;
        let mut request = request.body(body).map_err(|e| StoreError::Permanent {
            what: format!("writing {key} on {}: the request cannot be made: {e}", self.describe),
            fix: "check --azure-endpoint".into(),
        })?;
        let credential =
            self.backend.credentials().get_credential().await.map_err(|e| classify(Op::Put, key, &self.describe, e))?;
        AzureAuthorizer::new(&credential, &self.account)
            .try_authorize(&mut request)
            .map_err(|e| classify(Op::Put, key, &self.describe, e))?;
        let (status, _, text) = exchange(&self.http, request, len, key, &self.describe).await?;
        Ok((status, text))
    }

    async fn put_block(&self, key: &str, id: &str, body: PutPayload) -> Result<(), StoreError> {
        let url = self.url(key, &format!("comp=block&blockid={}", utf8_percent_encode(id, QUERY_SET)));
        let request =
            http::Request::builder().method(Method::PUT).uri(url).header(CONTENT_LENGTH, body.content_length());
        match self.send(key, request, HttpRequestBody::from(body)).await? {
            (200 | 201, _) => Ok(()),
            (status, text) => Err(from_status(Op::Put, key, &self.describe, status, &text)),
        }
    }

    async fn put_blocks(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError> {
        let nonce = format!("{:016x}", fastrand::u64(..));
        let blocks = len.div_ceil(self.block_size);
        let ids: Vec<String> = (0..blocks)
            .map(|i| base64::engine::general_purpose::STANDARD.encode(format!("ksa-{nonce}-{i:08}")))
            .collect();
        let ids = &ids;
        futures::stream::iter(0..blocks)
            .map(|i| async move {
                let offset = i * self.block_size;
                let body = self.bodies.read(data, offset, self.block_size.min(len - offset)).await?;
                self.put_block(key, &ids[i as usize], body.payload.clone()).await
            })
            .buffer_unordered(self.concurrency)
            .try_collect::<Vec<()>>()
            .await?;
        let list: String = ids.iter().map(|id| format!("<Latest>{id}</Latest>")).collect();
        let body = format!("<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>{list}</BlockList>");
        let request = http::Request::builder()
            .method(Method::PUT)
            .uri(self.url(key, "comp=blocklist"))
            .header(IF_NONE_MATCH, "*")
            .header(CONTENT_TYPE, "application/xml")
            .header(CONTENT_LENGTH, body.len());
        match self.send(key, request, HttpRequestBody::from(body)).await? {
            (200 | 201, _) => Ok(PutOutcome::Created),
            // If-None-Match: * refused (a 409 for any other reason is not "already there").
            (412, _) => Ok(PutOutcome::AlreadyExists),
            (409, text) if text.contains(BLOB_ALREADY_EXISTS) => Ok(PutOutcome::AlreadyExists),
            // Another writer's commit of this name discarded our uncommitted blocks.
            (400, text)
                if text.contains("InvalidBlockList")
                    && size(self.backend.as_ref(), key, &self.describe).await?.is_some() =>
            {
                Ok(PutOutcome::AlreadyExists)
            }
            (status, text) => Err(from_status(Op::Put, key, &self.describe, status, &text)),
        }
    }

    /// Put Blob with `If-None-Match: *` (object_store's conditional put).
    async fn put_blob(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError> {
        let path = path(Op::Put, key, &self.describe)?;
        let body = self.bodies.read(data, 0, len).await?;
        let options = PutOptions { mode: PutMode::Create, ..Default::default() };
        let put = async {
            let put = object_store::ObjectStore::put_opts(self.backend.as_ref(), &path, body.payload.clone(), options);
            match put.await {
                Ok(_) => Ok(PutOutcome::Created),
                Err(object_store::Error::Precondition { .. }) => Ok(PutOutcome::AlreadyExists),
                // object_store takes any 409 for "already exists": only Azure's BlobAlreadyExists is.
                Err(e @ object_store::Error::AlreadyExists { .. }) if e.to_string().contains(BLOB_ALREADY_EXISTS) => {
                    Ok(PutOutcome::AlreadyExists)
                }
                Err(e) => Err(classify(Op::Put, key, &self.describe, e)),
            }
        };
        within(len, || format!("writing {key} on {}", self.describe), put).await
    }
}

#[async_trait]
impl CreateIfAbsent for AzureWriter {
    async fn create(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError> {
        if len < self.block_size * 2 {
            self.put_blob(key, data, len).await
        } else {
            self.put_blocks(key, data, len).await
        }
    }
}
