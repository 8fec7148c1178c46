//! The running service: the archiver (`archiver`: source, pipeline and store wired together) and the
//! `_SUCCESS` markers it puts beside (`markers`).

pub mod archiver;
pub mod markers;
pub mod tables;
