//! The archive's format on the store: object names (`object_key`), claims (`claim`), partitions and
//! offset ranges (`partition`), records (`record`), time buckets (`time_bucket`) and their completeness
//! markers (`completeness`), consumer-group offset snapshots (`group_offsets`), where an archive is (`destination`), and what its listings are (`keys`).
//! Pure: no tokio, AWS SDK or rdkafka; time is passed in.

pub mod claim;
pub mod completeness;
pub mod destination;
pub mod group_offsets;
pub mod keys;
pub mod object_key;
pub mod partition;
pub mod record;
pub mod time_bucket;
