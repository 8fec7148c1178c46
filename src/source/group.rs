//! A consumer group that refuses this member for one of its settings: a session timeout outside the
//! broker's bounds, no right to the group, an invalid group ID. librdkafka reports such a refusal
//! and joins again every few seconds, forever; it can only succeed once the setting changes, so the
//! archiver stops instead, with one line that names the setting and the broker's bound. `run --check`
//! compares the session timeout with the broker's bounds before anything joins.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::RDKafkaErrorCode;

use super::consumer::uses_consumer_protocol;
use super::probe::connection_settings;

/// librdkafka's default `session.timeout.ms`.
const DEFAULT_SESSION_TIMEOUT_MS: i64 = 45_000;
/// How long reading the broker's group settings may take.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether a join refused with `code` fails for a setting, so that retrying can never succeed.
pub(super) fn refused_for_a_setting(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::InvalidSessionTimeout
            | RDKafkaErrorCode::GroupAuthorizationFailed
            | RDKafkaErrorCode::InvalidGroupId
            | RDKafkaErrorCode::InconsistentGroupProtocol
            | RDKafkaErrorCode::GroupMaxSizeReached
    )
}

/// The broker's bounds of a classic group member's session timeout (ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SessionBounds {
    pub(super) min: i64,
    pub(super) max: i64,
}

/// The session timeout `--kafka` sets (or librdkafka's default), in ms.
fn session_timeout(props: &[(String, String)]) -> i64 {
    props
        .iter()
        .find(|(k, _)| k == "session.timeout.ms")
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(DEFAULT_SESSION_TIMEOUT_MS)
}

/// Why `timeout` is refused by `bounds`, if it is.
fn outside(timeout: i64, bounds: SessionBounds) -> Option<String> {
    let SessionBounds { min, max } = bounds;
    (timeout < min || timeout > max).then(|| {
        format!(
            "session.timeout.ms={timeout} is outside the broker's bounds (group.min.session.timeout.ms={min}, \
             group.max.session.timeout.ms={max}): set --kafka session.timeout.ms within them"
        )
    })
}

/// What to say of a join refused with `code`, and what to do.
pub(super) fn explain(
    code: RDKafkaErrorCode,
    group: &str,
    props: &[(String, String)],
    bounds: Option<SessionBounds>,
) -> String {
    let timeout = session_timeout(props);
    match code {
        RDKafkaErrorCode::InvalidSessionTimeout => match bounds {
            Some(bounds) => outside(timeout, bounds).unwrap_or_else(|| {
                format!("session.timeout.ms={timeout} was refused by the broker (its bounds could not be read)")
            }),
            None => format!(
                "session.timeout.ms={timeout} is outside the broker's bounds (group.min.session.timeout.ms, \
                 Kafka's default 6000, and group.max.session.timeout.ms, default 1800000): set --kafka \
                 session.timeout.ms within them"
            ),
        },
        RDKafkaErrorCode::GroupAuthorizationFailed => {
            format!("the credentials may not use group {group:?}: grant them READ on the group, or pick --group")
        }
        RDKafkaErrorCode::InvalidGroupId => format!("the broker refuses the group ID {group:?}: pick another --group"),
        RDKafkaErrorCode::InconsistentGroupProtocol => format!(
            "group {group:?} is used by consumers with another partition assignment protocol: give the archiver a \
             group of its own (--group)"
        ),
        RDKafkaErrorCode::GroupMaxSizeReached => format!(
            "group {group:?} has as many members as the broker allows (group.max.size): run fewer instances, or \
             raise the broker's bound"
        ),
        other => format!("{other}"),
    }
}

/// The broker's session timeout bounds, from a broker's configuration (DescribeConfigs).
pub(super) fn session_bounds(brokers: &str, props: &[(String, String)]) -> Result<SessionBounds, String> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", brokers);
    for (k, v) in connection_settings(props) {
        config.set(k, v);
    }
    let admin: AdminClient<DefaultClientContext> = config.create().map_err(|e| e.to_string())?;
    let metadata = admin.inner().fetch_metadata(None, DESCRIBE_TIMEOUT).map_err(|e| e.to_string())?;
    // The answering broker's own ID (`orig_broker_id` may be the bootstrap connection's, -1).
    let broker = metadata.brokers().first().map_or(metadata.orig_broker_id(), |b| b.id());
    let options = AdminOptions::new().request_timeout(Some(DESCRIBE_TIMEOUT));
    let described = futures::executor::block_on(admin.describe_configs(&[ResourceSpecifier::Broker(broker)], &options))
        .map_err(|e| e.to_string())?;
    let resource = described.into_iter().next().ok_or("no answer")?.map_err(|code| code.to_string())?;
    let value = |name: &str| {
        let entry = resource.get(name).and_then(|e| e.value.clone()).ok_or(format!("no {name}"))?;
        entry.parse::<i64>().map_err(|e| format!("{name}={entry}: {e}"))
    };
    Ok(SessionBounds { min: value("group.min.session.timeout.ms")?, max: value("group.max.session.timeout.ms")? })
}

/// `run --check`: why the session timeout is refused, if it is outside the broker's bounds (classic
/// groups; with KIP-848's consumer protocol the broker sets it). Bounds that cannot be read decide
/// nothing.
pub(super) fn session_timeout_refused(brokers: &str, props: &[(String, String)]) -> Option<String> {
    if uses_consumer_protocol(props) {
        return None;
    }
    let bounds = session_bounds(brokers, props).ok()?;
    outside(session_timeout(props), bounds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_timeout_outside_the_brokers_bounds_is_named_with_them() {
        let props = |v: &str| vec![("session.timeout.ms".to_string(), v.to_string())];
        let bounds = SessionBounds { min: 6000, max: 1_800_000 };
        let said = explain(RDKafkaErrorCode::InvalidSessionTimeout, "g", &props("3000"), Some(bounds));
        assert!(said.contains("session.timeout.ms=3000") && said.contains("group.min.session.timeout.ms=6000"));
        assert!(outside(3000, bounds).is_some());
        assert_eq!(outside(45_000, bounds), None);
        assert!(outside(2_000_000, bounds).is_some());
        assert_eq!(session_timeout(&[]), 45_000, "librdkafka's default");
        assert!(explain(RDKafkaErrorCode::InvalidSessionTimeout, "g", &[], None).contains("Kafka's default 6000"));
        assert!(refused_for_a_setting(RDKafkaErrorCode::GroupAuthorizationFailed));
        assert!(!refused_for_a_setting(RDKafkaErrorCode::CoordinatorNotAvailable), "retrying helps");
    }
}
