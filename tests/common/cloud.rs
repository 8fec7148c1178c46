//! Google Cloud Storage and Azure Blob Storage for the tests: their emulators (fake-gcs-server and
//! Azurite, started by `localstack/start.sh`), a fresh bucket or container per test.

use kafka_s3_archiver::store::cloud::{
    AzureCredentials, AzureOptions, GcsOptions, AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY,
};
use object_store::azure::{AzureAccessKey, AzureAuthorizer, AzureCredential};
use object_store::client::{HttpClient, HttpConnector, HttpRequestBody, ReqwestConnector};

use super::env;

pub fn gcs_endpoint() -> String {
    env("KSA_TEST_GCS_ENDPOINT")
}

pub fn azure_endpoint() -> String {
    env("KSA_TEST_AZURE_ENDPOINT")
}

/// The emulator takes no credentials.
pub fn gcs_options() -> GcsOptions {
    GcsOptions { endpoint: Some(gcs_endpoint()), credentials: None, anonymous: true }
}

/// Azurite's development account, with its shared key (every request signed, as on Azure).
pub fn azure_options() -> AzureOptions {
    AzureOptions {
        account: Some(AZURITE_ACCOUNT.into()),
        endpoint: Some(azure_endpoint()),
        credentials: AzureCredentials::AccessKey(AZURITE_ACCOUNT_KEY.into()),
    }
}

/// The `run` flags that reach the emulators.
pub fn gcs_flags(endpoint: &str) -> Vec<String> {
    ["--gcs-endpoint", endpoint, "--gcs-anonymous", "true"].map(String::from).to_vec()
}

pub fn azure_flags(endpoint: &str) -> Vec<String> {
    ["--azure-endpoint", endpoint, "--azure-account", AZURITE_ACCOUNT, "--azure-access-key", AZURITE_ACCOUNT_KEY]
        .map(String::from)
        .to_vec()
}

fn http() -> HttpClient {
    let options = object_store::ClientOptions::new().with_allow_http(true);
    ReqwestConnector::default().connect(&options).expect("an HTTP client")
}

/// Creates a bucket on the GCS emulator (JSON API).
pub async fn create_gcs_bucket(bucket: &str) {
    let request = http::Request::post(format!("{}/storage/v1/b", gcs_endpoint()))
        .header("content-type", "application/json")
        .body(HttpRequestBody::from(format!("{{\"name\":\"{bucket}\"}}")))
        .unwrap();
    let status = http().execute(request).await.expect("the GCS emulator answers").status();
    assert!(status.is_success(), "creating bucket {bucket} on the GCS emulator: HTTP {status}");
}

/// Puts an object on the GCS emulator by the JSON API, whatever its name (a foreign writer's).
pub async fn put_gcs_object(bucket: &str, name: &str, body: &[u8]) {
    let name: String = name.bytes().map(|b| format!("%{b:02X}")).collect();
    let url = format!("{}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={name}", gcs_endpoint());
    let request = http::Request::post(url).body(HttpRequestBody::from(body.to_vec())).unwrap();
    let status = http().execute(request).await.expect("the GCS emulator answers").status();
    assert!(status.is_success(), "putting {name} on the GCS emulator: HTTP {status}");
}

/// Creates a container on Azurite (Create Container, signed with the development account's key).
pub async fn create_azure_container(container: &str) {
    let mut request = http::Request::put(format!("{}/{container}?restype=container", azure_endpoint()))
        .header("content-length", "0")
        .body(HttpRequestBody::empty())
        .unwrap();
    let credential = AzureCredential::AccessKey(AzureAccessKey::try_new(AZURITE_ACCOUNT_KEY).unwrap());
    AzureAuthorizer::new(&credential, AZURITE_ACCOUNT).try_authorize(&mut request).unwrap();
    let status = http().execute(request).await.expect("Azurite answers").status();
    assert!(status.is_success(), "creating container {container} on Azurite: HTTP {status}");
}
