//! Partitions whose fetcher stopped on an out-of-range position. With `auto.offset.reset=error`,
//! librdkafka stops a partition's fetcher and reports an error that does not say which partition; its
//! statistics do: an assigned, consumed partition whose fetch state is `none` has stopped. Only those
//! are moved. (A partition still delivering records it prefetched from below a new log start is
//! fetching: its records are in memory and are archived; if its own position falls out of range later,
//! its fetcher stops and it is found then.)
//!
//! A partition is looked at when its fetcher is stopped in the first statistics after an out-of-range
//! error, or in two statistics rounds in a row at the same position (whatever stopped it). Its log
//! offsets are read off the polling thread, by a worker with a client of its own, a few times (each
//! failure logged and counted; a partition whose offsets could not be read is looked at again at the
//! next round, so an unreachable partition delays the others queued behind it by its few tries only),
//! and the answer decides (`action`):
//! below the log start, retention deleted records before they were archived (a retention gap, handed
//! over with the next record); above the log end, the log is not the one the archive continues (the
//! partition is stopped); inside, the fetcher is just started again.

use std::collections::{HashMap, HashSet};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::topic_partition_list::Offset;
use tracing::{error, info, warn};

use super::context::{restart_fetch, tpl_of, ArchiverContext, Assigned};
use crate::archive::partition::{OffsetRange, TopicPartition};
use crate::retry::Backoff;
use crate::telemetry::{Event, Metrics, StopReason};

/// How long one watermark request may take.
const WATERMARKS_TIMEOUT: Duration = Duration::from_secs(10);
/// Watermark requests for one stopped partition before the worker answers that it could not tell.
const WATERMARK_ATTEMPTS: u32 = 4;

/// The consumer thread's out-of-range bookkeeping.
#[derive(Debug, Default)]
pub(super) struct OutOfRangeState {
    /// Out-of-range errors seen since the last statistics round.
    errors: u32,
    /// The partitions the last round saw stopped, and where.
    stopped_last_round: HashMap<TopicPartition, Stopped>,
    /// Partitions whose log offsets are being read.
    checking: HashSet<TopicPartition>,
}

impl OutOfRangeState {
    /// `tp` was assigned anew or revoked: what was seen of it before says nothing any more.
    pub(super) fn forget(&mut self, tp: &TopicPartition) {
        self.stopped_last_round.remove(tp);
        self.checking.remove(tp);
    }
}

/// librdkafka's fetch state (in its statistics) of a partition whose fetcher is stopped.
pub(super) const FETCH_STOPPED: &str = "none";

/// A partition found with its fetcher stopped, as the consumer thread knew it then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Stopped {
    pub(super) tp: TopicPartition,
    pub(super) epoch: u64,
    /// The offset it was to deliver next (`None`: nothing delivered since it started at `start`).
    pub(super) next: Option<i64>,
    /// Where it was started (or last moved to).
    pub(super) start: Offset,
}

/// A stopped partition with its log's offsets (`low`, `high`), read after it stopped; `None` when they
/// could not be read.
#[derive(Debug)]
pub(super) struct Measured {
    pub(super) stopped: Stopped,
    pub(super) watermarks: Option<(i64, i64)>,
}

/// The consumed partitions (not being checked already) whose fetch state says their fetcher stopped.
/// Partitions that are fetching are left alone, whatever their position: what they prefetched is in
/// memory and is archived.
fn stopped_fetchers(
    assigned: &HashMap<TopicPartition, Assigned>,
    checking: &HashSet<TopicPartition>,
    fetch_state: impl Fn(&TopicPartition) -> Option<String>,
) -> Vec<Stopped> {
    assigned
        .iter()
        .filter(|(tp, a)| !a.stopped && !checking.contains(*tp))
        .filter(|(tp, _)| fetch_state(tp).is_some_and(|state| state == FETCH_STOPPED))
        .map(|(tp, a)| Stopped { tp: tp.clone(), epoch: a.epoch, next: a.next_offset, start: a.start })
        .collect()
}

/// Which of this round's stopped fetchers to look at: all of them right after an out-of-range error;
/// otherwise those stopped at the same place in the last round too (a fetcher just assigned may show
/// stopped for a moment before it starts).
fn to_check(stopped: Vec<Stopped>, errors: u32, last_round: &HashMap<TopicPartition, Stopped>) -> Vec<Stopped> {
    stopped.into_iter().filter(|s| errors > 0 || last_round.get(&s.tp) == Some(s)).collect()
}

/// What to do with a stopped partition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Action {
    /// Retention deleted `missing` before it was archived: fetch from the log start.
    RetentionGap { missing: OffsetRange, resume_at: i64 },
    /// The archive holds offsets up to `archived_through` but the log ends at `log_end`: stop.
    AheadOfLog { archived_through: i64, log_end: i64 },
    /// The position is inside the log (the broker's answer came from a moment of change), or nothing
    /// was delivered since the partition started: fetch again from there.
    RestartFetch { at: Offset },
}

/// What a stopped partition needs, its log being `[low, high)`.
pub(super) fn action(stopped: &Stopped, low: i64, high: i64) -> Action {
    match stopped.next {
        Some(next) if next < low => {
            Action::RetentionGap { missing: OffsetRange::new(next, low - 1).expect("next < low"), resume_at: low }
        }
        Some(next) if next > high => Action::AheadOfLog { archived_through: next - 1, log_end: high },
        Some(next) => Action::RestartFetch { at: Offset::Offset(next) },
        None => Action::RestartFetch { at: stopped.start },
    }
}

/// The worker that reads stopped partitions' watermarks.
pub(super) struct Watermarks {
    requests: std_mpsc::Sender<Stopped>,
    results: std_mpsc::Receiver<Measured>,
}

impl Watermarks {
    /// Starts the worker, with a client made from `config` (it joins no group).
    pub(super) fn spawn(config: ClientConfig, metrics: Arc<Metrics>) -> std::io::Result<Self> {
        let (requests, asked) = std_mpsc::channel::<Stopped>();
        let (answer, results) = std_mpsc::channel();
        std::thread::Builder::new().name("out-of-range".into()).spawn(move || {
            let consumer: Option<BaseConsumer> = config.create().map_err(|e| error!("{e}")).ok();
            for stopped in asked {
                let watermarks = consumer.as_ref().and_then(|c| watermarks(c, &stopped.tp, &metrics));
                if answer.send(Measured { stopped, watermarks }).is_err() {
                    return;
                }
            }
        })?;
        Ok(Self { requests, results })
    }

    pub(super) fn ask(&self, stopped: Stopped) {
        let _ = self.requests.send(stopped);
    }

    /// The answers that came since last asked.
    pub(super) fn answers(&self) -> Vec<Measured> {
        self.results.try_iter().collect()
    }
}

/// `tp`'s watermarks, asked for a few times.
fn watermarks(consumer: &BaseConsumer, tp: &TopicPartition, metrics: &Metrics) -> Option<(i64, i64)> {
    let backoff = Backoff::default();
    for attempt in 0..WATERMARK_ATTEMPTS {
        match consumer.fetch_watermarks(tp.topic(), tp.partition(), WATERMARKS_TIMEOUT) {
            Ok(watermarks) => return Some(watermarks),
            Err(e) => {
                metrics.emit(Event::OutOfRangeLookupFailed { tp, why: &e.to_string() });
                std::thread::sleep(backoff.delay(attempt, fastrand::f64()));
            }
        }
    }
    None
}

impl ArchiverContext {
    /// librdkafka reported an out-of-range position (it does not say of which partition).
    pub(super) fn out_of_range_seen(&self) {
        self.state.lock().expect("source state").out_of_range.errors += 1;
    }

    /// The consumed partitions whose fetcher the statistics say is stopped (see the module's text) have
    /// their log offsets read (off this thread).
    pub(super) fn find_stopped_fetchers(&self, statistics: &rdkafka::Statistics) {
        let mut state = self.state.lock().expect("source state");
        let fetch_state = |tp: &TopicPartition| {
            let partition = statistics.topics.get(tp.topic()).and_then(|t| t.partitions.get(&tp.partition()));
            partition.map(|p| p.fetch_state.clone())
        };
        let stopped = stopped_fetchers(&state.assigned, &state.out_of_range.checking, fetch_state);
        let found = &mut state.out_of_range;
        let check = to_check(stopped.clone(), std::mem::take(&mut found.errors), &found.stopped_last_round);
        found.stopped_last_round = stopped.into_iter().map(|s| (s.tp.clone(), s)).collect();
        let watermarks = self.watermarks.lock().expect("watermarks");
        for s in check {
            warn!(tp = %s.tp, next = ?s.next, "fetching stopped on an out-of-range position; reading the log's offsets");
            found.checking.insert(s.tp.clone());
            watermarks.ask(s);
        }
    }

    /// Moves the stopped partitions whose log offsets came, unless revoked, re-positioned or
    /// delivering again since.
    pub(super) fn apply_out_of_range(&self, consumer: &BaseConsumer<ArchiverContext>) {
        let answers = self.watermarks.lock().expect("watermarks").answers();
        for Measured { stopped, watermarks } in answers {
            let mut state = self.state.lock().expect("source state");
            state.out_of_range.checking.remove(&stopped.tp);
            let current = state
                .assigned
                .get_mut(&stopped.tp)
                .filter(|a| !a.stopped && a.epoch == stopped.epoch && a.next_offset == stopped.next);
            // Offsets that could not be read: the next statistics round finds it again if still stopped.
            let (Some(a), Some((low, high))) = (current, watermarks) else { continue };
            let tp = &stopped.tp;
            match action(&stopped, low, high) {
                Action::RetentionGap { missing, resume_at } => {
                    a.next_offset = Some(resume_at);
                    a.start = Offset::Offset(resume_at);
                    a.gap_before_next = Some(a.gap_before_next.map_or(missing, |earlier| {
                        OffsetRange::new(earlier.start(), missing.end()).expect("gaps grow forward")
                    }));
                    drop(state);
                    restart_fetch(consumer, tp, Offset::Offset(resume_at));
                }
                Action::AheadOfLog { archived_through, log_end } => {
                    a.stopped = true;
                    drop(state);
                    let _ = consumer.pause(&tpl_of([tp]));
                    let why = format!(
                        "the archive of {tp} already holds offsets up to {archived_through}, but the partition's log \
                         ends at {log_end}: the topic was probably deleted and re-created (or its log truncated). This \
                         partition is stopped so that nothing is skipped silently; archive the new topic under \
                         another --dest prefix (or move the old archive away) and restart"
                    );
                    self.metrics.emit(Event::PartitionStopped { tp, reason: StopReason::ArchiveAheadOfLog, why: &why });
                }
                Action::RestartFetch { at } => {
                    drop(state);
                    info!(%tp, ?at, "the position is inside the log; fetching again");
                    restart_fetch(consumer, tp, at);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stopped(p: i32, next: Option<i64>) -> Stopped {
        Stopped { tp: TopicPartition::new("t", p).unwrap(), epoch: 7, next, start: Offset::End }
    }

    #[test]
    fn only_partitions_whose_fetcher_stopped_are_moved() {
        let tp = |p| TopicPartition::new("t", p).unwrap();
        let assigned = |next, stopped| Assigned {
            epoch: 7,
            stopped,
            next_offset: Some(next),
            start: Offset::Offset(next),
            gap_before_next: None,
        };
        // Retention moved the log start of 0, 1 and 2 to 500, past where each delivered. Partition 0's
        // fetcher stopped on it; 1 still delivers the records it prefetched (in memory: they are
        // archived); 2 is not consumed; 3's fetcher stopped but is being checked already.
        let partitions = HashMap::from([
            (tp(0), assigned(100, false)),
            (tp(1), assigned(100, false)),
            (tp(2), assigned(100, true)),
            (tp(3), assigned(100, false)),
        ]);
        let states = HashMap::from([(tp(0), "none"), (tp(1), "active"), (tp(2), "none"), (tp(3), "none")]);
        let checking = HashSet::from([tp(3)]);
        let found = stopped_fetchers(&partitions, &checking, |tp| states.get(tp).map(|s| s.to_string()));
        assert_eq!(found, vec![Stopped { tp: tp(0), epoch: 7, next: Some(100), start: Offset::Offset(100) }]);
    }

    #[test]
    fn a_stopped_partition_goes_on_as_its_log_says() {
        assert_eq!(
            action(&stopped(0, Some(100)), 250, 900),
            Action::RetentionGap { missing: OffsetRange::new(100, 249).unwrap(), resume_at: 250 }
        );
        assert_eq!(action(&stopped(0, Some(1000)), 0, 20), Action::AheadOfLog { archived_through: 999, log_end: 20 });
        assert_eq!(action(&stopped(0, Some(300)), 250, 900), Action::RestartFetch { at: Offset::Offset(300) });
        assert_eq!(action(&stopped(0, Some(900)), 250, 900), Action::RestartFetch { at: Offset::Offset(900) });
        assert_eq!(action(&stopped(0, None), 250, 900), Action::RestartFetch { at: Offset::End }, "where it started");
    }

    #[test]
    fn stopped_fetchers_are_looked_at_after_an_error_or_when_they_stay_stopped() {
        let last_round = HashMap::from([(stopped(0, Some(5)).tp, stopped(0, Some(5)))]);
        let now = vec![stopped(0, Some(5)), stopped(1, Some(9))];
        assert_eq!(to_check(now.clone(), 1, &last_round), now, "after an error, all of them");
        assert_eq!(to_check(now.clone(), 0, &last_round), vec![stopped(0, Some(5))], "else those that stay stopped");
        assert_eq!(to_check(vec![stopped(0, Some(6))], 0, &last_round), vec![], "it delivered since");
    }
}
