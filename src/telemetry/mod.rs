//! What the archiver tells its operators: Prometheus metrics (`metrics`), the events that move them
//! together with their log lines (`events`), and the HTTP endpoint that serves them (`http`).

pub mod events;
pub mod http;
pub mod metrics;

pub use events::{DropReason, Event};
pub use metrics::Metrics;
