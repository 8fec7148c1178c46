//! `--value-format`, `--value-schema` and `--keep-raw-value`, resolved into how values are archived.

use std::sync::Arc;

use super::{invalid, set, ConfigError, Settings, ValueFormatName};
use crate::values::{JsonValues, ValueFormat, ValueSchema};

impl Settings {
    pub(super) fn dlq_topic(&self) -> Result<Option<String>, ConfigError> {
        let Some(topic) = &self.dlq_topic else { return Ok(None) };
        crate::archive::partition::validate_topic(topic).map_err(|e| invalid("--dlq-topic", topic, e.to_string()))?;
        if self.value_format != Some(ValueFormatName::Json) {
            let why = "dead letters are records whose value does not fit --value-schema: use --value-format json";
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
    pub(super) fn values(&self) -> Result<ValueFormat, ConfigError> {
        let format = set(self.value_format, "--value-format")?;
        let keep_raw = set(self.keep_raw_value, "--keep-raw-value")?;
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
