//! Kafka topic IDs (KIP-516). A topic deleted and re-created under the same name gets a new ID and
//! restarts its offsets at 0, so the archive records the ID of the topic it holds and never lets another
//! incarnation continue its chain. librdkafka's DescribeTopics gives the IDs; rdkafka does not wrap it,
//! so it is called here through the raw bindings rdkafka re-exports (with `headers` and the panic exit,
//! the crate's only unsafe code).

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::client::Client;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::ClientContext;
use thiserror::Error;

use crate::recovery::TopicIdLookup;
use crate::recovery::TopicIdentity;

#[derive(Debug, Error)]
pub enum TopicIdError {
    #[error("describing topics {topics:?} did not answer within {timeout:?}")]
    Timeout { topics: Vec<String>, timeout: Duration },
    #[error("describing topics {topics:?} failed: {why}")]
    Failed { topics: Vec<String>, why: String },
}

/// The identity of each of `topics` the brokers described: its topic ID (base64, as Kafka's tools print
/// it), or that the brokers have no topic IDs (the zero ID). A topic the brokers answered with an error
/// for (one created or deleted moments ago, for one) is left out: ask again. Blocks for up to `timeout`.
pub fn topic_ids<C: ClientContext>(
    client: &Client<C>,
    topics: &[String],
    timeout: Duration,
) -> Result<BTreeMap<String, TopicIdentity>, TopicIdError> {
    let failed = |why: String| TopicIdError::Failed { topics: topics.to_vec(), why };
    // Asked of the broker that answers metadata (any broker can tell IDs), not of the controller
    // librdkafka's admin requests go to by default: it may not be known to clients (KRaft; librdkafka's
    // mock cluster names none).
    let broker = client
        .fetch_metadata(topics.first().map(String::as_str), timeout)
        .map_err(|e| failed(format!("reading metadata: {e}")))?
        .orig_broker_id();
    let names: Vec<CString> =
        topics.iter().map(|t| CString::new(t.as_str())).collect::<Result<_, _>>().map_err(|e| failed(e.to_string()))?;
    let mut name_ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: every pointer handed to librdkafka is valid for the call (the names and their array
    // outlive it; the collection, options and queue are created here and destroyed below, after the
    // event that may refer to them is destroyed); the result's strings are copied before destroying it.
    unsafe {
        let rk = client.native_ptr();
        let queue = rd::rd_kafka_queue_new(rk);
        let collection = rd::rd_kafka_TopicCollection_of_topic_names(name_ptrs.as_mut_ptr(), name_ptrs.len());
        let options = rd::rd_kafka_AdminOptions_new(rk, rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBETOPICS);
        let mut errstr = [0 as c_char; 256];
        rd::rd_kafka_AdminOptions_set_request_timeout(options, timeout_ms, errstr.as_mut_ptr(), errstr.len());
        rd::rd_kafka_AdminOptions_set_broker(options, broker, errstr.as_mut_ptr(), errstr.len());
        rd::rd_kafka_DescribeTopics(rk, collection, options, queue);
        let event = rd::rd_kafka_queue_poll(queue, timeout_ms);
        let result = if event.is_null() {
            Err(TopicIdError::Timeout { topics: topics.to_vec(), timeout })
        } else if rd::rd_kafka_event_error(event) != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            Err(failed(text(rd::rd_kafka_event_error_string(event))))
        } else {
            let described = rd::rd_kafka_event_DescribeTopics_result(event);
            let mut count = 0;
            let descriptions = rd::rd_kafka_DescribeTopics_result_topics(described, &mut count);
            let mut ids = BTreeMap::new();
            for i in 0..count {
                let description = *descriptions.add(i);
                let error = rd::rd_kafka_TopicDescription_error(description);
                let id = rd::rd_kafka_TopicDescription_topic_id(description);
                if (error.is_null()
                    || rd::rd_kafka_error_code(error) == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR)
                    && !id.is_null()
                {
                    let zero = rd::rd_kafka_Uuid_most_significant_bits(id) == 0
                        && rd::rd_kafka_Uuid_least_significant_bits(id) == 0;
                    let identity = match zero {
                        true => TopicIdentity::NoIds,
                        false => TopicIdentity::Id(text(rd::rd_kafka_Uuid_base64str(id))),
                    };
                    ids.insert(text(rd::rd_kafka_TopicDescription_name(description)), identity);
                }
            }
            Ok(ids)
        };
        if !event.is_null() {
            rd::rd_kafka_event_destroy(event);
        }
        rd::rd_kafka_AdminOptions_destroy(options);
        rd::rd_kafka_TopicCollection_destroy(collection);
        rd::rd_kafka_queue_destroy(queue);
        result
    }
}

/// A C string librdkafka owns, copied.
///
/// # Safety
/// `s` is null or a valid NUL-terminated string.
unsafe fn text(s: *const c_char) -> String {
    if s.is_null() {
        String::new()
    } else {
        CStr::from_ptr(s).to_string_lossy().into_owned()
    }
}

/// How long one lookup for the pipeline may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Tells the pipeline a topic's identity when an assignment could not: a client of its own (it joins
/// no group), made once.
pub struct TopicIdClient {
    consumer: BaseConsumer,
}

impl TopicIdClient {
    /// A client with `config` (the brokers and connection settings: `probe::probe_config`).
    pub fn new(config: &ClientConfig) -> Result<Self, KafkaError> {
        Ok(Self { consumer: config.create()? })
    }
}

impl TopicIdLookup for TopicIdClient {
    fn lookup(&self, topic: &str) -> Result<TopicIdentity, String> {
        let mut ids =
            topic_ids(self.consumer.client(), &[topic.to_string()], LOOKUP_TIMEOUT).map_err(|e| e.to_string())?;
        ids.remove(topic).ok_or_else(|| format!("the brokers answered with an error for topic {topic:?}"))
    }
}
