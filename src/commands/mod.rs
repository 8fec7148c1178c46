//! The command line (`cli`) and its commands: `run` (the service), the operator commands `verify`,
//! `status`, `ddl` and `restore`, and `demo`. Each command's folder holds its flags and their handling
//! (`cli.rs`), the I/O that gathers what it needs, and the pure part that decides what it reports.

pub mod args;
pub mod cli;
pub mod ddl;
pub mod demo;
pub mod grid;
pub mod reference;
pub mod restore;
pub mod run;
pub mod status;
pub mod verify;
