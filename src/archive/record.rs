//! One Kafka record as archived: everything needed to put it back byte for byte.

/// How the broker or producer set the timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimestampKind {
    NotAvailable,
    CreateTime,
    LogAppendTime,
}

impl TimestampKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TimestampKind::NotAvailable => "not_available",
            TimestampKind::CreateTime => "create_time",
            TimestampKind::LogAppendTime => "log_append_time",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [TimestampKind::NotAvailable, TimestampKind::CreateTime, TimestampKind::LogAppendTime]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// A record header. Its name is bytes, as Kafka's protocol carries it: Kafka's own clients send UTF-8,
/// but C and Go producers can send any bytes (a NUL included), and the archive keeps them as they came.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Header {
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Record {
    pub offset: i64,
    /// Milliseconds since the Unix epoch, absent when the kind is `NotAvailable`.
    pub timestamp_ms: Option<i64>,
    pub timestamp_kind: TimestampKind,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<Header>,
}

impl Record {
    /// Payload bytes held (key, value, header keys and values) plus a fixed per-record overhead:
    /// what memory accounting and the budget count.
    pub fn payload_size(&self) -> u64 {
        let headers: usize = self.headers.iter().map(|h| h.key.len() + h.value.as_ref().map_or(0, Vec::len)).sum();
        (self.key.as_ref().map_or(0, Vec::len) + self.value.as_ref().map_or(0, Vec::len) + headers + 32) as u64
    }
}
