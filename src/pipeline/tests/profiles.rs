//! Each partition's writer writes by its topic's profile, not the default one.

use super::harness::*;
use parquet::basic::{Compression as Codec, ZstdLevel};
use parquet::file::metadata::ParquetMetaDataReader;

use crate::archive::object_key::FileKind;
use crate::archive::record::Record;
use crate::archive::time_bucket::{BucketWidth, Bucketing, TimeSource};
use crate::encode::{decode, Compression, FileSpec, Format};
use crate::pipeline::{TopicMatch, TopicProfile, TopicProfiles};
use crate::source::Fetched;
use crate::store::ObjectStore;

#[tokio::test]
async fn a_writer_rolls_and_names_its_files_by_its_topics_profile() {
    let default = TopicProfile {
        spec: FileSpec::new(Format::Parquet, Compression::Zstd).unwrap(),
        bucketing: Some(Bucketing { width: BucketWidth::Hour, source: TimeSource::Record }),
        ..plain(policy(100))
    };
    // The harness's topic is `t`: its own profile rolls every 2 records, into JSON lines, unbucketed.
    let profiles = TopicProfiles::uniform(default).with(TopicMatch::Name("t".into()), plain(policy(2)));
    let h = harness_profiles(profiles);
    h.assign(0, Some(0)).await;
    h.send(0, 0..4, 10).await;
    assert_eq!(h.wait_keys(2).await, vec![key(0, 0, 1), key(0, 2, 3)]);
    let claims = h.claims(0).await;
    assert!(claims.iter().all(|c| c.time_source.is_none()), "not bucketed: {claims:?}");
    h.task.abort();
}

#[tokio::test]
async fn a_pattern_profile_applies_when_no_name_does() {
    let profiles = TopicProfiles::uniform(plain(policy(100)))
        .with(TopicMatch::Name("other".into()), plain(policy(50)))
        .with(TopicMatch::Pattern(regex_automata::meta::Regex::new("^t$").unwrap()), plain(policy(3)));
    let h = harness_profiles(profiles);
    h.assign(0, Some(0)).await;
    h.send(0, 0..3, 10).await;
    assert_eq!(h.wait_keys(1).await, vec![key(0, 0, 2)]);
    h.task.abort();
}

#[tokio::test]
async fn a_partitions_files_follow_what_its_last_files_taught() {
    // Random values do not compress; random keys, all distinct, gain nothing from a dictionary.
    let zstd = TopicProfile { spec: FileSpec::new(Format::Parquet, Compression::Zstd).unwrap(), ..plain(policy(100)) };
    let h = harness_profiles(TopicProfiles::uniform(zstd));
    h.assign(0, Some(0)).await;
    let mut rng = fastrand::Rng::with_seed(5);
    let mut random = |n: usize| Some((0..n).map(|_| rng.u8(..)).collect::<Vec<u8>>());
    let sent: Vec<Record> = (0..300).map(|o| Record { key: random(1024), value: random(1024), ..rec(o, 0) }).collect();
    let epoch = h.epochs.lock().unwrap()[&0];
    for record in &sent {
        h.records.send(vec![Fetched { tp: tp(0), epoch, record: record.clone(), retention_gap: None }]).await.unwrap();
    }
    let keys = h.wait_keys(3).await;
    let mut read = Vec::new();
    let (mut value_codecs, mut key_dictionaries) = (Vec::new(), Vec::new());
    for key in &keys {
        let bytes = h.store.inner.get(key).await.unwrap();
        let footer = ParquetMetaDataReader::new().parse_and_finish(&bytes).unwrap();
        let column = |name: &str| {
            let columns = footer.row_group(0).columns();
            columns.iter().find(|c| c.column_path().string() == name).unwrap().clone()
        };
        value_codecs.push((column("value").compression(), column("offset").compression()));
        key_dictionaries.push(column("key").dictionary_page_offset().is_some());
        read.extend(decode(FileKind::Parquet, bytes).unwrap().records);
    }
    let (zstd, plain) = (Codec::ZSTD(ZstdLevel::default()), Codec::UNCOMPRESSED);
    assert_eq!(
        value_codecs,
        [(zstd, zstd), (plain, zstd), (plain, zstd)],
        "random values compressed in the first file only; offsets in every file"
    );
    assert_eq!(key_dictionaries, [true, false, false], "distinct keys in a dictionary in the first file only");
    assert_eq!(read, sent, "every record comes back the same");
    h.task.abort();
}
