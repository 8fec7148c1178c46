//! Recovery's cost on a long partition: writes N data objects and their N claims into one partition of
//! a new S3 bucket (straight to the store, as the archiver names them), then times finding the
//! partition's end — the work of every start and every assignment — with the commit hint, with only
//! the log-end offset, and with no hint at all, counting the requests it makes.
//!
//! Usage (services from localstack/with-services.sh): localstack/bench-recovery.sh [objects]

#[path = "common/bucket.rs"]
mod bucket;
#[path = "common/counting.rs"]
mod counting;

use std::time::Instant;

use bucket::new_bucket;
use counting::Counting;

use kafka_s3_archiver::archive::object_key::Prefix;
use kafka_s3_archiver::archive::partition::{OffsetRange, TopicPartition};
use kafka_s3_archiver::commands::demo::generate::write_synthetic_archive;
use kafka_s3_archiver::recovery::tail::{find_tail, TailHints};
use kafka_s3_archiver::recovery::CommitHint;
use kafka_s3_archiver::retry::Patience;

/// Records per object.
const RECORDS: i64 = 100;
/// PUTs in flight while writing the archive.
const WRITERS: usize = 64;

#[tokio::main]
async fn main() {
    let objects: i64 = std::env::args().nth(1).map_or(100_000, |a| a.parse().expect("objects"));
    let store = new_bucket("recovery", "localstack/bench-recovery.sh").await;
    let (prefix, tp) = (Prefix::new("arch"), TopicPartition::new("t", 0).expect("partition"));
    let started = Instant::now();
    let ranges =
        (0..objects).map(|i| (tp.clone(), OffsetRange::new(i * RECORDS, i * RECORDS + RECORDS - 1).expect("range")));
    write_synthetic_archive(store.as_ref(), &prefix, ranges, WRITERS).await.expect("write the archive");
    let secs = started.elapsed().as_secs_f64();
    println!(
        "wrote {objects} data objects and {objects} claims in {secs:.0}s ({:.0} PUTs/s)",
        2.0 * objects as f64 / secs
    );
    let end = objects * RECORDS;
    let last_start = end - RECORDS;
    let cases = [
        (
            "commit hint (offset and chain position)",
            Some(CommitHint { next_offset: end, chain_start: Some(last_start) }),
            Some(end),
        ),
        ("log-end offset only (no commit)", None, Some(end)),
        ("no hint at all", None, None),
    ];
    println!("\n| hints | list requests | GETs | other requests | seconds |\n|---|---|---|---|---|");
    for (name, commit, log_end) in cases {
        let counting = Counting::new(store.clone());
        let t0 = Instant::now();
        let found =
            find_tail(&counting, &prefix, &tp, TailHints { commit, log_end }, true, Patience::Attempts(3), None)
                .await
                .expect("recovery");
        let secs = t0.elapsed().as_secs_f64();
        assert_eq!(found.tail, kafka_s3_archiver::recovery::Tail::Complete { next: end }, "{name}");
        let [lists, gets, puts, others] = counting.counts();
        println!("| {name} | {lists} | {gets} | {} | {secs:.2} |", puts + others);
    }
}
