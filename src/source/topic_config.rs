//! Topic settings the archive's completeness depends on: how late the brokers let records be stamped
//! (`message.timestamp.type`, `message.timestamp.before.max.ms`), read with DescribeConfigs.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use tracing::warn;

use super::offsets::OffsetsError;
use crate::archive::completeness::Lateness;

/// Brokers answer DescribeConfigs at once; some (librdkafka's mock cluster) never do.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Each topic's lateness bound. A topic whose settings cannot be read (no DescribeConfigs permission, a
/// broker without it) counts as unbounded, with a warning: completeness then rests on the archive alone.
pub async fn topic_lateness(
    brokers: &str,
    props: &[(String, String)],
    topics: &[String],
) -> Result<BTreeMap<String, Lateness>, OffsetsError> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", brokers);
    for (k, v) in props {
        config.set(k, v);
    }
    let admin: AdminClient<DefaultClientContext> = config.create().map_err(OffsetsError::Create)?;
    let specifiers: Vec<ResourceSpecifier> = topics.iter().map(|t| ResourceSpecifier::Topic(t)).collect();
    let options = AdminOptions::new().request_timeout(Some(REQUEST_TIMEOUT));
    let mut out: BTreeMap<String, Lateness> = topics.iter().map(|t| (t.clone(), Lateness::Unbounded)).collect();
    let described = match admin.describe_configs(&specifiers, &options).await {
        Ok(described) => described,
        Err(e) => {
            warn!(
                "cannot read the topics' timestamp settings ({e}): quiet partitions hold their last time bucket open"
            );
            return Ok(out);
        }
    };
    for (topic, result) in topics.iter().zip(described) {
        let lateness = match result {
            Ok(resource) => Lateness::of_topic(
                resource.get("message.timestamp.type").and_then(|e| e.value.as_deref()),
                resource.get("message.timestamp.before.max.ms").and_then(|e| e.value.as_deref()),
            ),
            Err(_) => Lateness::Unbounded,
        };
        out.insert(topic.clone(), lateness);
    }
    Ok(out)
}
