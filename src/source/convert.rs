//! Kafka messages to archive records and back: what the consumer archives, and what `restore` and the
//! test producer (`generate`) write.

use rdkafka::message::{Message, OwnedHeaders, Timestamp};
use rdkafka::producer::FutureRecord;

use super::headers::{self, NativeHeaders};
use crate::archive::record::{Record, TimestampKind};

/// A consumed message as the archive keeps it: offset, timestamp and its kind, key, value, headers
/// (names and values byte for byte).
pub fn to_record<M: Message>(msg: &M) -> Record
where
    M::Headers: NativeHeaders,
{
    let (timestamp_ms, timestamp_kind) = match msg.timestamp() {
        Timestamp::NotAvailable => (None, TimestampKind::NotAvailable),
        Timestamp::CreateTime(t) => (Some(t), TimestampKind::CreateTime),
        Timestamp::LogAppendTime(t) => (Some(t), TimestampKind::LogAppendTime),
    };
    let headers = msg.headers().map(headers::read).unwrap_or_default();
    Record {
        offset: msg.offset(),
        timestamp_ms,
        timestamp_kind,
        key: msg.key().map(<[u8]>::to_vec),
        value: msg.payload().map(<[u8]>::to_vec),
        headers,
    }
}

/// A record's headers for producing, in order, byte for byte.
pub fn kafka_headers(rec: &Record) -> OwnedHeaders {
    headers::owned(&rec.headers)
}

/// A record to produce to `topic`/`partition` with the record's key, value and timestamp (when it has
/// one) and `headers`: the inverse of [`to_record`].
pub fn to_future_record<'a>(
    topic: &'a str,
    partition: i32,
    rec: &'a Record,
    headers: OwnedHeaders,
) -> FutureRecord<'a, [u8], [u8]> {
    let mut fr: FutureRecord<'a, [u8], [u8]> = FutureRecord::to(topic).partition(partition).headers(headers);
    if let Some(ts) = rec.timestamp_ms {
        fr = fr.timestamp(ts);
    }
    if let Some(k) = rec.key.as_deref() {
        fr = fr.key(k);
    }
    if let Some(v) = rec.value.as_deref() {
        fr = fr.payload(v);
    }
    fr
}

#[cfg(test)]
mod tests {
    use rdkafka::message::OwnedMessage;

    use super::*;
    use crate::archive::record::Header;

    fn record(timestamp: Option<i64>, key: Option<&[u8]>, value: Option<&[u8]>) -> Record {
        Record {
            offset: 42,
            timestamp_ms: timestamp,
            timestamp_kind: if timestamp.is_some() { TimestampKind::CreateTime } else { TimestampKind::NotAvailable },
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            headers: vec![
                Header { key: "h1".into(), value: Some(vec![0, 255]) },
                Header { key: "h1".into(), value: None },
                Header { key: "h2".into(), value: Some(vec![]) },
                Header { key: b"\xff\xfe-not-utf8".to_vec(), value: Some(b"v".to_vec()) },
                Header { key: b"nul\x00inside".to_vec(), value: None },
            ],
        }
    }

    /// Produce then consume, as Kafka would carry it: the record comes back the same.
    fn round_trip(rec: &Record) -> Record {
        let fr = to_future_record("t", 3, rec, kafka_headers(rec));
        assert_eq!((fr.topic, fr.partition), ("t", Some(3)));
        let timestamp = fr.timestamp.map_or(Timestamp::NotAvailable, Timestamp::CreateTime);
        let msg = OwnedMessage::new(
            fr.payload.map(<[u8]>::to_vec),
            fr.key.map(<[u8]>::to_vec),
            "t".into(),
            timestamp,
            3,
            rec.offset,
            fr.headers,
        );
        to_record(&msg)
    }

    #[test]
    fn records_survive_producing_and_consuming() {
        for rec in [
            record(Some(1_700_000_000_000), Some(b"k"), Some(b"\x00\xffvalue")),
            record(None, None, None),
            record(Some(0), Some(b""), Some(b"")),
        ] {
            assert_eq!(round_trip(&rec), rec);
        }
    }

    #[test]
    fn log_append_time_is_kept_as_such() {
        let msg = OwnedMessage::new(None, None, "t".into(), Timestamp::LogAppendTime(7), 0, 1, None);
        let rec = to_record(&msg);
        assert_eq!((rec.timestamp_ms, rec.timestamp_kind), (Some(7), TimestampKind::LogAppendTime));
        assert!(rec.headers.is_empty());
    }
}
