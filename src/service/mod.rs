//! The running service: the archiver (`archiver`: source, pipeline and store wired together), the
//! `_SUCCESS` markers it puts beside (`markers`), the consumer groups' offsets it keeps
//! (`group_offsets`) and its tables (`tables`).

pub mod archiver;
pub mod group_offsets;
pub mod markers;
pub mod tables;
