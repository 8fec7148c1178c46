//! Plain S3 PUTs of as many objects as `run` to S3 made, of the same sizes (claims and markers
//! included), as many in flight as the archiver may have (one per partition, at most its default
//! `--s3-max-requests`): the store's ceiling for that many objects. With many partitions the archiver
//! makes many small objects, and the 16 MiB PUTs are not that ceiling.

use kafka_s3_archiver::config::DEFAULT_S3_MAX_REQUESTS;
use kafka_s3_archiver::store::{S3Options, S3Store};

use crate::archiver::{bucket, Target};
use crate::measure::MachineCpu;
use crate::{env, put_objects, Bench, Row, Started};

/// The row's contender, as the targets' ratios find it.
pub const REPLAYED_PUTS: &str = "S3 PUTs of as many objects as run to S3 made, of their sizes";

pub async fn replay_puts(bench: &Bench) -> Row {
    let endpoint = env("KSA_TEST_S3_ENDPOINT");
    let connect =
        |bucket: String| S3Store::connect(bucket, S3Options::new(Some(endpoint.clone()), Some("us-east-1".into())));
    let archive = bucket(bench, Target::S3);
    let source = connect(archive.clone()).await;
    let mut sizes = Vec::new();
    let mut pages = source.client().list_objects_v2().bucket(&archive).into_paginator().send();
    while let Some(page) = pages.next().await {
        sizes.extend(page.expect("list the archive").contents().iter().map(|o| o.size().unwrap_or(0) as usize));
    }
    let replay = format!("{archive}-replay");
    let store = connect(replay.clone()).await;
    store.client().create_bucket().bucket(&replay).send().await.unwrap();
    let mut rng = fastrand::Rng::with_seed(13);
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let body = bytes::Bytes::from((0..largest).map(|_| rng.u8(..)).collect::<Vec<u8>>());
    let in_flight = (bench.partitions as usize).clamp(1, DEFAULT_S3_MAX_REQUESTS);
    let machine_at_start = MachineCpu::now();
    let started = Started::now();
    put_objects(&store, sizes.iter().copied(), &body, in_flight).await;
    let row = Row::since(&started, REPLAYED_PUTS.into(), bench.values);
    println!(
        "{REPLAYED_PUTS} ({}): {} objects, {in_flight} at once, {:.1}s; {}",
        bench.values.name(),
        sizes.len(),
        row.seconds,
        MachineCpu::now().since(machine_at_start, row.cpu_seconds)
    );
    row
}
