//! Which of a partition's durable files a commit can add under the table's schema: the schema evolves
//! where a file has columns it lacks, and the run is cut before the first file it cannot hold (a column
//! whose type changed as Iceberg does not allow), so the position never passes a file left out.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema};
use parquet::file::metadata::ParquetMetaData;

use super::chain::{columns, DurableLink};
use super::committer::TableError;
use super::iceberg::evolve::evolve;
use super::iceberg::metadata::NewSchema;
use super::iceberg::spec::PARTITION_COLUMN;
use super::iceberg::stats::{column_stats, ColumnStats};

/// The table's schema as a commit is planned: its current one, evolved by each file that needs it.
pub struct Evolving {
    schema: serde_json::Value,
    last_column_id: i32,
    /// The ID an evolved schema takes.
    id: i32,
    evolved: bool,
}

impl Evolving {
    /// The table's current `schema` (its highest column ID `last_column_id`); `id` for an evolved one.
    pub fn new(schema: serde_json::Value, last_column_id: i32, id: i32) -> Self {
        Self { schema, last_column_id, id, evolved: false }
    }

    /// The schema the commit adds, if a file evolved it.
    pub fn evolved(self) -> Option<NewSchema> {
        self.evolved.then_some(NewSchema { schema: self.schema, last_column_id: self.last_column_id })
    }

    /// The run of `links` (to chain position `to`) whose files the schema holds, evolving it where a
    /// file has columns it lacks, each with its column statistics (from the footers read to find the
    /// files durable); cut before the first file it cannot hold, with why: the position returned is then
    /// that file's chain position, so the table never records a position past a file it lacks.
    pub fn fit(
        &mut self,
        to: i64,
        links: Vec<DurableLink>,
    ) -> (i64, Vec<(DurableLink, ColumnStats)>, Option<TableError>) {
        let mut fitted = Vec::with_capacity(links.len());
        for mut d in links {
            let taken = match (d.footer.take(), d.link.object.as_deref()) {
                (Some(footer), Some(key)) => self.take(key, &footer),
                _ => Ok(ColumnStats::default()),
            };
            match taken {
                Ok(stats) => fitted.push((d, stats)),
                Err(e) => return (d.link.covers.start(), fitted, Some(e)),
            }
        }
        (to, fitted, None)
    }

    /// Makes the schema hold the file at `key` (evolving it where it lacks the file's columns); the
    /// file's column statistics by the field IDs its columns then have.
    fn take(&mut self, key: &str, footer: &ParquetMetaData) -> Result<ColumnStats, TableError> {
        let columns = with_partition(&columns(key, footer)?);
        if let Some((schema, last)) = evolve(&self.schema, self.last_column_id, &columns, self.id)? {
            (self.schema, self.last_column_id, self.evolved) = (schema, last, true);
        }
        Ok(column_stats(footer, &self.schema))
    }
}

/// The files' columns and the table's own, `partition` (the Kafka partition, from each file's
/// partition value: the files do not hold it).
pub fn with_partition(columns: &Arc<Schema>) -> Schema {
    let mut fields: Vec<Field> = columns.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(PARTITION_COLUMN, DataType::Int32, true)); // Optional: readers fill it (pyiceberg only then).
    Schema::new(fields)
}

#[cfg(test)]
mod tests;
