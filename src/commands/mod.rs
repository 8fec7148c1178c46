//! The operator commands besides `run`: `verify`, `status`, `ddl`, `restore` and `demo`, each with
//! the pure part that decides what it reports next to the I/O that gathers it.

pub mod ddl;
pub mod demo;
pub mod restore;
pub mod status;
pub mod table;
pub mod verify;
