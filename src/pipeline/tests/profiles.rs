//! Each partition's writer writes by its topic's profile, not the default one.

use super::harness::*;
use crate::archive::time_bucket::{BucketWidth, Bucketing, TimeSource};
use crate::encode::{Compression, FileSpec, Format};
use crate::pipeline::{TopicMatch, TopicProfile, TopicProfiles};

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
