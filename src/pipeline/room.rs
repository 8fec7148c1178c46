//! Making room when the budget is exceeded: shrinking the open files (their buffers written compressed
//! into their spools), then rolling early the files holding the most.

use super::{Pipeline, PipelineError};
use crate::archive::partition::TopicPartition;
use crate::encode::roll::{pick_largest_over_budget, RollReason};
use crate::telemetry::Event;

impl Pipeline {
    /// The budget is exceeded. If memory is, the open files with the largest buffers first write them
    /// compressed into their spools, until the buffers hold at most a quarter of the budget: records then
    /// wait at about their compressed size, in more row groups rather than more files. If that left the
    /// budget within a quarter of full (the spools hold the rest), or the spool directory is over its
    /// own, the open files holding the most, as the budget counts them, roll early, until the open files
    /// hold at most half of it. Batches written behind by now are counted as written first.
    pub(super) fn make_room(&mut self) -> Result<(), PipelineError> {
        self.settle_written()?;
        if !self.budget.exceeded() {
            return Ok(());
        }
        if self.budget.memory_exceeded() {
            let buffers: Vec<(TopicPartition, u64)> =
                self.partitions.iter().filter_map(|(tp, w)| w.shrinkable().map(|size| (tp.clone(), size))).collect();
            let mut shrunk = 0;
            for idx in pick_largest_over_budget(&indexed(&buffers), self.budget.shrink_target()) {
                let tp = &buffers[idx].0;
                let writer = self.partitions.get_mut(tp).expect("listed above");
                let encode = |source| PipelineError::Encode { tp: tp.clone(), source };
                shrunk += u64::from(writer.shrink(&mut self.budget).map_err(encode)?);
            }
            if shrunk > 0 {
                self.metrics.emit(Event::Shrunk { files: shrunk });
            }
            if !self.budget.nearly_full() {
                return Ok(());
            }
        }
        let open: Vec<(TopicPartition, u64)> = self
            .partitions
            .iter()
            .filter_map(|(tp, w)| w.early_rollable_size().map(|size| (tp.clone(), size)))
            .collect();
        for idx in pick_largest_over_budget(&indexed(&open), self.budget.early_roll_target()) {
            self.roll(&open[idx].0, RollReason::Budget)?;
        }
        Ok(())
    }
}

/// The sizes of `files`, by their index.
fn indexed(files: &[(TopicPartition, u64)]) -> Vec<(usize, u64)> {
    files.iter().enumerate().map(|(i, (_, size))| (i, *size)).collect()
}
