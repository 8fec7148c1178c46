//! `--dlq-topic`: a file's records whose value does not fit are sent to the dead-letter sink before
//! the file's data object is uploaded, retried until the sink takes them; they stay in the object too.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::harness::*;
use crate::archive::object_key::{FileKind, ObjectKey, Prefix};
use crate::archive::partition::{OffsetRange, TopicPartition};
use crate::encode::{decode, DeadLetter};
use crate::pipeline::DeadLetterSink;
use crate::source::Fetched;
use crate::store::ObjectStore;

/// Fails its first `failures` sends, then keeps what it is sent.
#[derive(Default)]
struct FlakySink {
    failures: AtomicU32,
    calls: AtomicU32,
    sent: Mutex<Vec<(String, TopicPartition, DeadLetter)>>,
}

#[async_trait]
impl DeadLetterSink for FlakySink {
    async fn send(&self, to: &str, source: &TopicPartition, letters: &[DeadLetter]) -> Result<(), String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.failures.load(Ordering::SeqCst) > 0 {
            self.failures.fetch_sub(1, Ordering::SeqCst);
            return Err("the broker is away".into());
        }
        self.sent.lock().unwrap().extend(letters.iter().map(|l| (to.to_string(), source.clone(), l.clone())));
        Ok(())
    }
}

#[tokio::test]
async fn misfits_reach_the_dead_letter_sink_before_their_object_is_uploaded() {
    let sink = Arc::new(FlakySink { failures: AtomicU32::new(2), ..FlakySink::default() });
    let h = harness_typed(policy(3), sink.clone());
    h.assign(0, Some(0)).await;
    let epoch = h.epochs.lock().unwrap()[&0];
    for (offset, value) in [(0, &br#"{"a":1}"#[..]), (1, b"not json"), (2, br#"{"a":"two"}"#)] {
        let record = crate::archive::record::Record { value: Some(value.to_vec()), ..rec(offset, 0) };
        h.records.send(vec![Fetched { tp: tp(0), epoch, record, retention_gap: None }]).await.unwrap();
    }
    // While the sink fails, the file waits: no data object yet.
    eventually("the sink was tried", || sink.calls.load(Ordering::SeqCst) >= 1).await;
    assert!(h.keys().await.is_empty(), "uploaded before its dead letters were sent");
    let key = ObjectKey::new(Prefix::default(), tp(0), OffsetRange::new(0, 2).unwrap(), FileKind::Parquet);
    assert_eq!(h.wait_keys(1).await, vec![key.to_string()]);
    assert_eq!(sink.calls.load(Ordering::SeqCst), 3, "two failures, then taken");
    let sent = sink.sent.lock().unwrap().clone();
    let offsets: Vec<i64> = sent.iter().map(|(_, _, l)| l.record.offset).collect();
    assert_eq!(offsets, [1, 2]);
    assert!(sent.iter().all(|(to, from, _)| to == DEAD_LETTERS && *from == tp(0)), "to the profile's topic");
    assert_eq!(sent[1].2.record.value.as_deref(), Some(&br#"{"a":"two"}"#[..]));
    assert_eq!(sent[1].2.error, r#"value.a: expected a 64-bit integer, got "two""#);
    eventually("the letters and failures counted", || {
        h.metrics.dead_letters.get() == 2 && h.metrics.dead_letter_failures.get() == 2
    })
    .await;
    // And they are in the archive too.
    let decoded = decode(FileKind::Parquet, h.store.inner.get(&key.to_string()).await.unwrap()).unwrap();
    assert_eq!((decoded.records.len(), decoded.misfits), (3, 2));
    h.task.abort();
}

/// Misfits found only when the file's last batch is taken (here: a value the file's inferred schema
/// cannot hold, found as the schema is inferred) are counted like any other: a file's stats are read
/// once it is finished.
#[tokio::test]
async fn misfits_found_as_the_last_batch_is_taken_are_counted() {
    let h = harness_inferred(policy(3));
    h.assign(0, Some(0)).await;
    let epoch = h.epochs.lock().unwrap()[&0];
    for (offset, value) in [(0, &br#"{"a":1}"#[..]), (1, br#"{"a":"one"}"#), (2, br#"{"a":2}"#)] {
        let record = crate::archive::record::Record { value: Some(value.to_vec()), ..rec(offset, 0) };
        h.records.send(vec![Fetched { tp: tp(0), epoch, record, retention_gap: None }]).await.unwrap();
    }
    h.wait_keys(1).await;
    eventually("the misfit counted", || h.metrics.value_misfits.get() == 1).await;
    h.task.abort();
}
