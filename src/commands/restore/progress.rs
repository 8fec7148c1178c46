//! `restore`'s progress on stderr while it runs: on a terminal, a bar (indicatif) of offsets dealt with
//! against those the selected objects span, with rate and ETA; otherwise (logs, CI) a plain line every
//! few seconds. The final line is printed by the caller.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tokio::task::JoinHandle;

use crate::commands::restore::RestoreProgressCounters;

/// How often the bar is redrawn from the counters.
const BAR_EVERY: Duration = Duration::from_millis(200);
/// How often a plain progress line is printed when stderr is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(5);

/// The running display; [`Progress::finish`] clears it.
pub struct Progress {
    task: JoinHandle<()>,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// Starts showing `counters` on stderr.
    pub fn show(counters: Arc<RestoreProgressCounters>, started: Instant) -> Self {
        if !std::io::stderr().is_terminal() {
            let task = tokio::spawn(async move {
                loop {
                    tokio::time::sleep(LINE_EVERY).await;
                    eprintln!("{}", counters.line(started.elapsed()));
                }
            });
            return Self { task, bar: None };
        }
        let bar = ProgressBar::new(0).with_style(
            ProgressStyle::with_template("{bar:30} {pos}/~{len} offsets, {per_sec}, ETA {eta}  {msg}")
                .expect("a valid template"),
        );
        let shown = bar.clone();
        let task = tokio::spawn(async move {
            loop {
                let (done, expected) = counters.offsets();
                shown.set_length(expected);
                shown.set_position(done);
                shown.set_message(counters.summary());
                tokio::time::sleep(BAR_EVERY).await;
            }
        });
        Self { task, bar: Some(bar) }
    }

    pub fn finish(self) {
        self.task.abort();
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
