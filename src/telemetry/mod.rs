//! What the archiver tells its operators: Prometheus metrics (`metrics`), the events that move them
//! together with their log lines (`events`), the HTTP endpoint that serves them (`http`), and a panic,
//! which ends the process at once (`panic`).

pub mod events;
pub mod http;
pub mod metrics;
mod panic;

pub use events::{DropReason, Event, StopReason};
pub use metrics::Metrics;
pub use panic::exit_on_panic;
