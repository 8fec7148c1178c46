//! Iceberg's table format as the archive writes it (format version 2): the schema and partition specs
//! ([`spec`]) and their evolution ([`evolve`]), manifests and manifest lists in Avro ([`manifest`],
//! [`avro_file`]) with each file's column statistics ([`stats`]), merged once there are many
//! ([`merge`]), and table metadata ([`metadata`]) whose old snapshots expire ([`expire`]). An appended
//! data file is the archive's own object, named where it is. Pure: what is read from and written to
//! the store and the catalog is the caller's.

pub mod avro_file;
pub mod evolve;
pub mod expire;
pub mod manifest;
pub mod merge;
pub mod metadata;
pub mod spec;
pub mod stats;
