//! How to reach Google Cloud Storage and Azure Blob Storage: endpoints and credentials, and the
//! Azure Storage connection string (pure: parsed and tested without a server).

use std::fmt;
use std::path::PathBuf;

/// Azurite's well-known development account (`UseDevelopmentStorage=true`).
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
/// Azurite's published development account key (not a secret).
pub const AZURITE_ACCOUNT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const AZURITE_BLOB_ENDPOINT: &str = "http://127.0.0.1:10000/devstoreaccount1";

/// Google Cloud Storage (`gs://`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcsOptions {
    /// The JSON API's and XML API's root; `None`: https://storage.googleapis.com.
    pub endpoint: Option<String>,
    /// A service-account key or application-default-credentials file; `None`: the standard chain.
    pub credentials: Option<PathBuf>,
    /// Send no credentials (emulators, public buckets).
    pub anonymous: bool,
}

/// How requests to Azure Blob Storage are authorised.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum AzureCredentials {
    /// Azure AD from the environment (client secret, workload identity, managed identity, Azure CLI),
    /// as the object_store crate reads it.
    #[default]
    Environment,
    /// The storage account's shared key.
    AccessKey(String),
    /// A shared access signature (a query string).
    Sas(String),
}

impl fmt::Debug for AzureCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AzureCredentials::Environment => "Environment",
            AzureCredentials::AccessKey(_) => "AccessKey(****)",
            AzureCredentials::Sas(_) => "Sas(****)",
        })
    }
}

/// Azure Blob Storage (`az://`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AzureOptions {
    /// The storage account; `None`: AZURE_STORAGE_ACCOUNT_NAME.
    pub account: Option<String>,
    /// The Blob service's URL; `None`: https://ACCOUNT.blob.core.windows.net.
    pub endpoint: Option<String>,
    pub credentials: AzureCredentials,
}

/// The parts of an Azure Storage connection string that reach the Blob service.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ConnectionString {
    pub account: Option<String>,
    pub endpoint: Option<String>,
    pub credentials: AzureCredentials,
}

/// Parses `Key=Value;...` as the Azure SDKs do: `AccountName`, `AccountKey`, `SharedAccessSignature`,
/// `BlobEndpoint`, `DefaultEndpointsProtocol` with `EndpointSuffix`, and `UseDevelopmentStorage=true`
/// (Azurite on its default port). Says what is wrong when it cannot be used.
pub fn parse_connection_string(text: &str) -> Result<ConnectionString, String> {
    let mut parts = std::collections::BTreeMap::new();
    for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) =
            part.split_once('=').ok_or("a part is not Key=Value (the string is not shown: it may be a secret)")?;
        parts.insert(key.to_ascii_lowercase(), value.to_string());
    }
    if parts.get("usedevelopmentstorage").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(ConnectionString {
            account: Some(AZURITE_ACCOUNT.into()),
            endpoint: Some(AZURITE_BLOB_ENDPOINT.into()),
            credentials: AzureCredentials::AccessKey(AZURITE_ACCOUNT_KEY.into()),
        });
    }
    let account = parts.remove("accountname");
    let credentials = match (parts.remove("accountkey"), parts.remove("sharedaccesssignature")) {
        (Some(_), Some(_)) => return Err("it has both AccountKey and SharedAccessSignature; keep one".into()),
        (Some(key), None) => AzureCredentials::AccessKey(key),
        (None, Some(sas)) => AzureCredentials::Sas(sas.trim_start_matches('?').to_string()),
        (None, None) => AzureCredentials::Environment,
    };
    let endpoint = match (parts.remove("blobendpoint"), &account) {
        (Some(url), _) => Some(url.trim_end_matches('/').to_string()),
        (None, Some(account)) => {
            let protocol = parts.remove("defaultendpointsprotocol").unwrap_or_else(|| "https".into());
            let suffix = parts.remove("endpointsuffix").unwrap_or_else(|| "core.windows.net".into());
            Some(format!("{protocol}://{account}.blob.{suffix}"))
        }
        (None, None) => None,
    };
    if account.is_none() && endpoint.is_none() {
        return Err("it names no account: give AccountName (or BlobEndpoint)".into());
    }
    Ok(ConnectionString { account, endpoint, credentials })
}

/// The account a Blob endpoint names in its path (Azurite's and other emulators' path-style URLs,
/// `http://host:port/ACCOUNT`) or its host (`https://ACCOUNT.blob.core.windows.net`).
pub fn account_of_endpoint(endpoint: &str) -> Option<String> {
    let rest = endpoint.split_once("://").map(|(_, r)| r).unwrap_or(endpoint);
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let in_path = path.split('/').find(|s| !s.is_empty());
    match in_path {
        Some(account) => Some(account.to_string()),
        None => host.split_once(".blob.").map(|(account, _)| account.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_strings_give_account_endpoint_and_credentials() {
        let cs = parse_connection_string(
            "DefaultEndpointsProtocol=https;AccountName=arch;AccountKey=a2V5;EndpointSuffix=core.windows.net",
        )
        .unwrap();
        assert_eq!(cs.account.as_deref(), Some("arch"));
        assert_eq!(cs.endpoint.as_deref(), Some("https://arch.blob.core.windows.net"));
        assert_eq!(cs.credentials, AzureCredentials::AccessKey("a2V5".into()));

        let cs = parse_connection_string(
            "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1/;SharedAccessSignature=?sv=2024&sig=x%3D",
        )
        .unwrap();
        assert_eq!(cs.account, None);
        assert_eq!(cs.endpoint.as_deref(), Some("http://127.0.0.1:10000/devstoreaccount1"));
        assert_eq!(cs.credentials, AzureCredentials::Sas("sv=2024&sig=x%3D".into()));

        let dev = parse_connection_string("UseDevelopmentStorage=true").unwrap();
        assert_eq!(dev.account.as_deref(), Some(AZURITE_ACCOUNT));
        assert_eq!(dev.credentials, AzureCredentials::AccessKey(AZURITE_ACCOUNT_KEY.into()));

        assert!(parse_connection_string("AccountName=a;AccountKey=k;SharedAccessSignature=s")
            .unwrap_err()
            .contains("both"));
        assert!(parse_connection_string("AccountKey=k").unwrap_err().contains("no account"));
        let bare = parse_connection_string("c2VjcmV0").unwrap_err();
        assert!(bare.contains("Key=Value") && !bare.contains("c2VjcmV0"), "{bare}");
    }

    #[test]
    fn secrets_are_not_printed() {
        let shown = format!(
            "{:?}",
            AzureOptions { credentials: AzureCredentials::AccessKey("s3cr3t".into()), ..Default::default() }
        );
        assert!(!shown.contains("s3cr3t"), "{shown}");
    }

    #[test]
    fn the_account_is_read_from_path_style_and_host_style_endpoints() {
        assert_eq!(account_of_endpoint("http://127.0.0.1:10000/devstoreaccount1").as_deref(), Some("devstoreaccount1"));
        assert_eq!(account_of_endpoint("https://arch.blob.core.windows.net/").as_deref(), Some("arch"));
        assert_eq!(account_of_endpoint("https://example.com"), None);
    }
}
