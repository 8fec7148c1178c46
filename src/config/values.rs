//! `--value-format`, `--value-schema` and `--keep-raw-value`, resolved into how values are archived.

use std::sync::Arc;

use super::{invalid, set, ConfigError, KeyFormatName, Settings, ValueFormatName};
use crate::encode::Format;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use crate::registry::{RegistryAuth, RegistryOptions, SchemaCache};
use crate::values::{JsonValues, SchemaType, ValueFormat, ValueSchema};

impl Settings {
    pub(super) fn dlq_topic(&self) -> Result<Option<String>, ConfigError> {
        let Some(topic) = &self.dlq_topic else { return Ok(None) };
        crate::archive::partition::validate_topic(topic).map_err(|e| invalid("--dlq-topic", topic, e.to_string()))?;
        if matches!(self.value_format, None | Some(ValueFormatName::Raw)) {
            let why = "dead letters are records whose value does not fit its schema: use --value-format json, avro, \
                       protobuf, json-schema or registry";
            return Err(invalid("--dlq-topic", topic, why.into()));
        }
        let matched = self.topic_regex.as_deref().is_some_and(|re| super::topics::subscribed_by_regex(re, topic));
        if matched || self.topics.iter().flatten().any(|t| t == topic) {
            return Err(invalid("--dlq-topic", topic, "it is a topic being archived".into()));
        }
        Ok(Some(topic.clone()))
    }
}

/// `--value-schema infer`: each file's schema from its own records.
const INFER: &str = "infer";

impl Settings {
    pub(super) fn values(&self, schemas: &Arc<SchemaCache>) -> Result<ValueFormat, ConfigError> {
        let format = set(self.value_format, "--value-format")?;
        let keep_raw = set(self.keep_raw_value, "--keep-raw-value")?;
        let registry =
            [ValueFormatName::Avro, ValueFormatName::Protobuf, ValueFormatName::JsonSchema, ValueFormatName::Registry];
        if registry.contains(&format) {
            return self.registry_values(format, schemas, keep_raw);
        }
        if format == ValueFormatName::Raw {
            if let Some(path) = &self.value_schema {
                let why = "a value schema is used only with --value-format json";
                return Err(invalid("--value-schema", &path.display().to_string(), why.into()));
            }
            return Ok(ValueFormat::Raw);
        }
        let path = self.value_schema.as_ref().ok_or(ConfigError::Missing {
            name: "--value-schema",
            how: "--value-format json needs an Avro schema file (.avsc) declaring the values' fields, or `infer`",
        })?;
        let shown = path.display().to_string();
        let declared = match shown.as_str() {
            INFER => None,
            _ => {
                let text =
                    std::fs::read_to_string(path).map_err(|e| invalid("--value-schema", &shown, e.to_string()))?;
                Some(ValueSchema::from_avro(&text).map_err(|e| invalid("--value-schema", &shown, e.to_string()))?)
            }
        };
        Ok(ValueFormat::Json(Arc::new(JsonValues { declared, keep_raw })))
    }
}

impl Settings {
    /// `--value-format avro|protobuf|json-schema|registry`: values in the Schema Registry's wire format,
    /// each decoded by its schema.
    fn registry_values(
        &self,
        format: ValueFormatName,
        schemas: &Arc<SchemaCache>,
        keep_raw: bool,
    ) -> Result<ValueFormat, ConfigError> {
        if let Some(path) = &self.value_schema {
            let why = format!(
                "with --value-format {format} each value's schema comes from the Schema Registry: leave it out"
            );
            return Err(invalid("--value-schema", &path.display().to_string(), why));
        }
        if self.schema_registry_url.is_none() {
            let how =
                "--value-format avro, protobuf, json-schema and registry read the schema each value names from the registry";
            return Err(ConfigError::Missing { name: "--schema-registry-url", how });
        }
        if set(self.format, "--format")? != Format::Parquet {
            let why =
                "JSON lines do not embed Schema Registry values yet: use --format parquet (or --value-format raw)";
            return Err(invalid("--value-format", &format.to_string(), why.into()));
        }
        let ty = match format {
            ValueFormatName::Protobuf => Some(SchemaType::Protobuf),
            ValueFormatName::JsonSchema => Some(SchemaType::Json),
            ValueFormatName::Registry => None,
            _ => Some(SchemaType::Avro),
        };
        Ok(ValueFormat::registered(ty, schemas.clone(), keep_raw))
    }

    /// `--key-format`: keys in the Schema Registry's wire format, each decoded by its schema as values
    /// are; every key keeps its bytes (`key_raw`).
    pub(super) fn keys(&self, schemas: &Arc<SchemaCache>) -> Result<ValueFormat, ConfigError> {
        let format = set(self.key_format, "--key-format")?;
        if format == KeyFormatName::Raw {
            return Ok(ValueFormat::Raw);
        }
        if self.schema_registry_url.is_none() {
            let how = "--key-format reads the schema each key names from the registry";
            return Err(ConfigError::Missing { name: "--schema-registry-url", how });
        }
        if set(self.format, "--format")? != Format::Parquet {
            let why = "JSON lines keep keys as they are: use --format parquet (or --key-format raw)";
            return Err(invalid("--key-format", &format.to_string(), why.into()));
        }
        let ty = match format {
            KeyFormatName::Protobuf => Some(SchemaType::Protobuf),
            KeyFormatName::JsonSchema => Some(SchemaType::Json),
            KeyFormatName::Registry => None,
            KeyFormatName::Avro | KeyFormatName::Raw => Some(SchemaType::Avro),
        };
        Ok(ValueFormat::registered(ty, schemas.clone(), true))
    }

    /// `--schema-registry-url` and its credentials.
    pub fn registry(&self) -> Result<Option<RegistryOptions>, ConfigError> {
        let (user, password, token) =
            (&self.schema_registry_username, &self.schema_registry_password, &self.schema_registry_token);
        let Some(url) = &self.schema_registry_url else {
            if user.is_some() || password.is_some() || token.is_some() {
                let how = "the Schema Registry's credentials need its URL";
                return Err(ConfigError::Missing { name: "--schema-registry-url", how });
            }
            return Ok(None);
        };
        let Some(rest) = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")) else {
            return Err(invalid("--schema-registry-url", url, "write http(s)://host:port[/path]".into()));
        };
        if rest.is_empty() {
            return Err(invalid("--schema-registry-url", url, "write http(s)://host:port[/path]".into()));
        }
        if rest.split('/').next().unwrap_or_default().contains('@') {
            let why = "give the user name and password as --schema-registry-username and --schema-registry-password \
                       (a password in the URL would be shown and logged)";
            return Err(invalid("--schema-registry-url", "http://****@…", why.into()));
        }
        let ca = self.registry_ca(url.starts_with("https://"))?;
        let auth = match (user, password, token) {
            (None, None, None) => RegistryAuth::None,
            (Some(username), Some(password), None) => {
                RegistryAuth::Basic { username: username.clone(), password: password.clone() }
            }
            (None, None, Some(token)) => RegistryAuth::Bearer(token.clone()),
            (Some(_), None, _) | (None, Some(_), _) => {
                let why = "basic authentication needs both --schema-registry-username and --schema-registry-password";
                return Err(invalid("--schema-registry-username", user.as_deref().unwrap_or(""), why.into()));
            }
            (Some(_), Some(_), Some(_)) => {
                let why = "give a bearer token or a user name and password, not both";
                return Err(invalid("--schema-registry-token", "****", why.into()));
            }
        };
        Ok(Some(RegistryOptions { url: url.trim_end_matches('/').to_string(), auth, ca }))
    }

    /// `--schema-registry-ca`: the certificates of its PEM file, for an HTTPS registry.
    fn registry_ca(&self, https: bool) -> Result<Option<Vec<CertificateDer<'static>>>, ConfigError> {
        read_ca("--schema-registry-ca", self.schema_registry_ca.as_deref(), https, "an https:// Schema Registry")
    }
}

/// The certificates of the PEM file at `path` (flag `name`), the CA of an HTTPS server (`what`).
pub(super) fn read_ca(
    name: &'static str,
    path: Option<&std::path::Path>,
    https: bool,
    what: &str,
) -> Result<Option<Vec<CertificateDer<'static>>>, ConfigError> {
    let Some(path) = path else { return Ok(None) };
    let shown = path.display().to_string();
    if !https {
        return Err(invalid(name, &shown, format!("a CA is for {what}")));
    }
    let pem = std::fs::read(path).map_err(|e| invalid(name, &shown, e.to_string()))?;
    let certificates: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&pem).collect();
    match certificates {
        Ok(certificates) if !certificates.is_empty() => Ok(Some(certificates)),
        Ok(_) => Err(invalid(name, &shown, "no PEM certificate in it".into())),
        Err(e) => Err(invalid(name, &shown, format!("not PEM certificates: {e}"))),
    }
}
