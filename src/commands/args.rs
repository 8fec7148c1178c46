//! What the operator commands share on their command lines: where the archive is, librdkafka settings,
//! times.

use std::sync::Arc;

use crate::archive::destination::Destination;
use crate::config;
use crate::store::{self, ObjectStore, Role};

/// Where an archive is, for the commands that read one (the same flags and environment variables as
/// `run`'s).
#[derive(clap::Args)]
pub struct ArchiveArgs {
    /// The archive: s3://bucket/prefix, gs://bucket/prefix, az://container/prefix or file:///absolute/dir.
    #[arg(long, env = "KSA_DEST")]
    dest: String,
    /// Custom S3 endpoint URL (LocalStack, MinIO...); path-style addressing is used with it.
    #[arg(long, env = "KSA_S3_ENDPOINT")]
    s3_endpoint: Option<String>,
    /// S3 region; default: from the standard AWS chain, else us-east-1.
    #[arg(long, env = "KSA_S3_REGION")]
    s3_region: Option<String>,
    /// Custom Google Cloud Storage endpoint URL (an emulator).
    #[arg(long, env = "KSA_GCS_ENDPOINT")]
    gcs_endpoint: Option<String>,
    /// A service-account key or application default credentials JSON file for gs:// archives.
    #[arg(long, env = "KSA_GCS_CREDENTIALS")]
    gcs_credentials: Option<std::path::PathBuf>,
    /// Send Google Cloud Storage no credentials (emulators, public buckets).
    #[arg(long, env = "KSA_GCS_ANONYMOUS", value_name = "true|false")]
    gcs_anonymous: Option<bool>,
    /// The Azure storage account of az:// archives.
    #[arg(long, env = "KSA_AZURE_ACCOUNT")]
    azure_account: Option<String>,
    /// Custom Azure Blob endpoint URL (Azurite: http://127.0.0.1:10000/devstoreaccount1).
    #[arg(long, env = "KSA_AZURE_ENDPOINT")]
    azure_endpoint: Option<String>,
    /// The storage account's shared key.
    #[arg(long, env = "KSA_AZURE_ACCESS_KEY", hide_env_values = true)]
    azure_access_key: Option<String>,
    /// A shared access signature (the query string).
    #[arg(long, env = "KSA_AZURE_SAS_TOKEN", hide_env_values = true)]
    azure_sas_token: Option<String>,
    /// An Azure Storage connection string.
    #[arg(long, env = "KSA_AZURE_CONNECTION_STRING", hide_env_values = true)]
    azure_connection_string: Option<String>,
}

impl ArchiveArgs {
    /// The destination's prefix and a store to read it, checked as `run` checks its flags.
    pub async fn open(self) -> anyhow::Result<(Destination, Arc<dyn ObjectStore>)> {
        let settings = config::Settings {
            dest: Some(self.dest),
            s3_endpoint: self.s3_endpoint,
            s3_region: self.s3_region,
            gcs_endpoint: self.gcs_endpoint,
            gcs_credentials: self.gcs_credentials,
            gcs_anonymous: self.gcs_anonymous,
            azure_account: self.azure_account,
            azure_endpoint: self.azure_endpoint,
            azure_access_key: self.azure_access_key,
            azure_sas_token: self.azure_sas_token,
            azure_connection_string: self.azure_connection_string,
            ..config::Settings::defaults()
        };
        let config::StoreConfig { dest, settings } = settings.store()?;
        let store = store::open(&dest, &settings, Role::Inspect).await?;
        Ok((dest, store))
    }
}

/// Where a Schema Registry is, for the commands that read schemas from one (the same flags and
/// environment variables as `run`'s).
#[derive(clap::Args)]
pub struct RegistryArgs {
    /// The Schema Registry's URL, http(s)://host:port[/path] (Confluent's API; Apicurio Registry's is at
    /// /apis/ccompat/v7).
    #[arg(long, env = "KSA_SCHEMA_REGISTRY_URL")]
    schema_registry_url: Option<String>,
    /// Basic authentication to the Schema Registry: the user name (with --schema-registry-password).
    #[arg(long, env = "KSA_SCHEMA_REGISTRY_USERNAME")]
    schema_registry_username: Option<String>,
    /// Basic authentication to the Schema Registry: the password.
    #[arg(long, env = "KSA_SCHEMA_REGISTRY_PASSWORD", hide_env_values = true)]
    schema_registry_password: Option<String>,
    /// A bearer token for the Schema Registry, instead of basic authentication.
    #[arg(long, env = "KSA_SCHEMA_REGISTRY_TOKEN", hide_env_values = true)]
    schema_registry_token: Option<String>,
    /// For an https:// Schema Registry: a PEM file of the CA certificates its certificate is signed by.
    #[arg(long, env = "KSA_SCHEMA_REGISTRY_CA")]
    schema_registry_ca: Option<std::path::PathBuf>,
}

impl RegistryArgs {
    /// A client of the registry, checked as `run` checks its flags; `None` without a URL.
    pub fn client(self) -> anyhow::Result<Option<crate::registry::RegistryClient>> {
        let settings = config::Settings {
            schema_registry_url: self.schema_registry_url,
            schema_registry_username: self.schema_registry_username,
            schema_registry_password: self.schema_registry_password,
            schema_registry_token: self.schema_registry_token,
            schema_registry_ca: self.schema_registry_ca,
            ..Default::default()
        };
        Ok(settings.registry()?.map(crate::registry::RegistryClient::new))
    }
}

/// Where the topics' Iceberg tables are, for the commands that check them (the same flags and
/// environment variables as `run`'s).
#[derive(clap::Args)]
pub struct CatalogArgs {
    /// Each topic's Iceberg table in this catalog, beside the archive (verify checks it, status shows
    /// where it stands): sqlite:///absolute/path.db, postgresql://user@host:port/database (SQL catalogs)
    /// or http(s)://host:port[/path] (a REST catalog).
    #[arg(long, env = "KSA_ICEBERG_CATALOG")]
    iceberg_catalog: Option<String>,
    /// The password of a PostgreSQL catalog's user.
    #[arg(long, env = "KSA_ICEBERG_CATALOG_PASSWORD", hide_env_values = true)]
    iceberg_catalog_password: Option<String>,
    /// The catalog's name in a SQL catalog's rows.
    #[arg(long, env = "KSA_ICEBERG_CATALOG_NAME", default_value = config::DEFAULT_ICEBERG_CATALOG_NAME)]
    iceberg_catalog_name: String,
    /// The namespace of the topics' tables.
    #[arg(long, env = "KSA_ICEBERG_NAMESPACE", default_value = config::DEFAULT_ICEBERG_NAMESPACE)]
    iceberg_namespace: String,
    /// A REST catalog's warehouse.
    #[arg(long, env = "KSA_ICEBERG_WAREHOUSE")]
    iceberg_warehouse: Option<String>,
    /// A bearer token for the REST catalog.
    #[arg(long, env = "KSA_ICEBERG_TOKEN", hide_env_values = true)]
    iceberg_token: Option<String>,
    /// OAuth2 client credentials for the REST catalog, CLIENT_ID:CLIENT_SECRET.
    #[arg(long, env = "KSA_ICEBERG_CREDENTIAL", hide_env_values = true)]
    iceberg_credential: Option<String>,
    /// Sign the REST catalog's requests with AWS Signature Version 4 for this service (glue, s3tables).
    #[arg(long, env = "KSA_ICEBERG_SIGNING_NAME")]
    iceberg_signing_name: Option<String>,
    /// The region requests are signed for with --iceberg-signing-name.
    #[arg(long, env = "KSA_ICEBERG_SIGNING_REGION")]
    iceberg_signing_region: Option<String>,
    /// The OAuth2 scope asked for with --iceberg-credential.
    #[arg(long, env = "KSA_ICEBERG_SCOPE", default_value = config::DEFAULT_ICEBERG_SCOPE)]
    iceberg_scope: String,
    /// For an https:// REST catalog or a PostgreSQL catalog over TLS: a PEM file of the CA certificates
    /// its certificate is signed by.
    #[arg(long, env = "KSA_ICEBERG_CA")]
    iceberg_ca: Option<std::path::PathBuf>,
}

impl CatalogArgs {
    /// The catalog, checked as `run` checks its flags; `None` without `--iceberg-catalog`.
    pub fn catalog(self) -> anyhow::Result<Option<config::CatalogConfig>> {
        let settings = config::Settings {
            iceberg_catalog: self.iceberg_catalog,
            iceberg_catalog_password: self.iceberg_catalog_password,
            iceberg_catalog_name: Some(self.iceberg_catalog_name),
            iceberg_namespace: Some(self.iceberg_namespace),
            iceberg_warehouse: self.iceberg_warehouse,
            iceberg_token: self.iceberg_token,
            iceberg_credential: self.iceberg_credential,
            iceberg_signing_name: self.iceberg_signing_name,
            iceberg_signing_region: self.iceberg_signing_region,
            iceberg_scope: Some(self.iceberg_scope),
            iceberg_ca: self.iceberg_ca,
            ..Default::default()
        };
        Ok(settings.catalog()?)
    }
}

pub fn parse_time(s: &str) -> Result<i64, String> {
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    let t = humantime::parse_rfc3339_weak(s)
        .map_err(|e| format!("{s:?} is neither RFC 3339 (2026-11-29T10:00:00Z) nor milliseconds: {e}"))?;
    Ok(t.duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| "times before 1970 are not supported".to_string())?
        .as_millis() as i64)
}

pub fn kafka_props(kafka: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    Ok(kafka.iter().map(|kv| config::parse_kafka_setting(kv)).collect::<Result<_, _>>()?)
}
