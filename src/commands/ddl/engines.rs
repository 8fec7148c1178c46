//! Table definitions (`ddl`) over a topic's Parquet archive, for the layout in use: DuckDB (a view over
//! `read_parquet` with Hive partitioning), Athena (an external table with partition projection on
//! dt/hour/partition, so no crawler or `MSCK REPAIR` is needed) and Spark (a Hive-style external table).
//! The columns are those the Parquet encoder writes; dt, hour and partition come from the folders.
//! For typed values, given the `value` column's type (from the value schema, or the Schema Registry's),
//! `value` is its struct, followed by `value_raw` and `value_error`.

use std::fmt::Write;

use thiserror::Error;

use arrow_schema::{DataType, Field};

use crate::archive::time_bucket::BucketWidth;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    Duckdb,
    Athena,
    Spark,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum DdlError {
    #[error("Athena's partition projection needs the topic's partition count: pass --partitions N")]
    PartitionCount,
    #[error("Athena reads from S3 only; this archive is at {0}")]
    NotS3(String),
}

/// What the definition describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableLayout {
    /// The table (or view) name.
    pub table: String,
    /// The topic's folder, ending in `/`: `s3://bucket/prefix/topic=orders/` or `/dir/topic=orders/`.
    pub location: String,
    /// The time buckets of its folders, if any.
    pub buckets: Option<BucketWidth>,
    /// The topic's partition count (Athena's projection range).
    pub partitions: Option<i32>,
    /// The earliest `dt` folder (`YYYY-MM-DD`), where Athena's date projection starts.
    pub first_date: Option<String>,
    /// The typed `value` column, for an archive of typed values.
    pub values: Option<Field>,
    /// The typed `key` column, for an archive of typed keys.
    pub keys: Option<Field>,
}

/// A table name from a topic name: letters, digits and `_` (others become `_`).
pub fn table_name(topic: &str) -> String {
    let name: String =
        topic.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("t_{name}")
    } else {
        name
    }
}

/// The folder columns, outermost first, with their SQL type names for (DuckDB, Hive).
fn folder_columns(buckets: Option<BucketWidth>) -> Vec<(&'static str, &'static str, &'static str)> {
    let mut cols = Vec::new();
    if buckets.is_some() {
        cols.push(("dt", "DATE", "date"));
    }
    if buckets == Some(BucketWidth::Hour) {
        cols.push(("hour", "INTEGER", "int"));
    }
    cols.push(("partition", "INTEGER", "int"));
    cols
}

/// The data columns, as Hive/Athena/Spark name their types.
const HIVE_COLUMNS: [(&str, &str); 6] = [
    ("offset", "bigint"),
    ("timestamp", "timestamp"),
    ("timestamp_type", "string"),
    ("key", "binary"),
    ("value", "binary"),
    ("headers", "array<struct<key:string,value:binary,key_encoding:string>>"),
];

pub fn ddl(engine: Engine, layout: &TableLayout) -> Result<String, DdlError> {
    match engine {
        Engine::Duckdb => Ok(duckdb(layout)),
        Engine::Athena => athena(layout),
        Engine::Spark => Ok(spark(layout)),
    }
}

fn duckdb(l: &TableLayout) -> String {
    let types: Vec<String> =
        folder_columns(l.buckets).iter().map(|(name, duck, _)| format!("'{name}': {duck}")).collect();
    format!(
        "CREATE OR REPLACE VIEW \"{}\" AS\nSELECT * FROM read_parquet('{}**/*.parquet',\n    hive_partitioning = true, hive_types = {{{}}});\n",
        l.table,
        l.location,
        types.join(", ")
    )
}

fn hive_columns(l: &TableLayout) -> String {
    let mut columns: Vec<(String, String)> =
        HIVE_COLUMNS.iter().map(|(name, ty)| (name.to_string(), ty.to_string())).collect();
    if let Some(value) = &l.values {
        columns[4].1 = hive_type(value.data_type());
        columns.push(("value_raw".into(), "binary".into()));
        columns.push(("value_error".into(), "string".into()));
    }
    if let Some(key) = &l.keys {
        columns[3].1 = hive_type(key.data_type());
        columns.push(("key_raw".into(), "binary".into()));
        columns.push(("key_error".into(), "string".into()));
    }
    columns.iter().map(|(name, ty)| format!("  `{name}` {ty}")).collect::<Vec<_>>().join(",\n")
}

fn hive_struct<'a>(fields: impl Iterator<Item = &'a Field>) -> String {
    let fields: Vec<String> = fields
        .map(|f| {
            let plain = f.name().bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            let name = if plain { f.name().clone() } else { format!("`{}`", f.name().replace('`', "``")) };
            format!("{name}:{}", hive_type(f.data_type()))
        })
        .collect();
    format!("struct<{}>", fields.join(","))
}

/// An Arrow type, as Hive/Athena/Spark name the Parquet column the encoder writes for it. Unsigned
/// integers take the next wider signed type (a uint64 a decimal of 20 digits); durations and times of
/// day, which Parquet keeps as counts, their integer.
fn hive_type(ty: &DataType) -> String {
    match ty {
        DataType::Boolean => "boolean".into(),
        DataType::Int8 => "tinyint".into(),
        DataType::Int16 | DataType::UInt8 => "smallint".into(),
        DataType::Int32 | DataType::UInt16 | DataType::Time32(_) => "int".into(),
        DataType::Int64 | DataType::UInt32 | DataType::Time64(_) | DataType::Duration(_) => "bigint".into(),
        DataType::UInt64 => "decimal(20,0)".into(),
        DataType::Float16 | DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Timestamp(..) => "timestamp".into(),
        DataType::Date32 | DataType::Date64 => "date".into(),
        DataType::Decimal128(precision, scale) | DataType::Decimal256(precision, scale) => {
            format!("decimal({precision},{scale})")
        }
        DataType::List(item) | DataType::LargeList(item) | DataType::FixedSizeList(item, _) => {
            format!("array<{}>", hive_type(item.data_type()))
        }
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                format!("map<{},{}>", hive_type(kv[0].data_type()), hive_type(kv[1].data_type()))
            }
            other => unreachable!("a map's entries are a struct of key and value, not {other}"),
        },
        DataType::Struct(fields) => hive_struct(fields.iter().map(|f| f.as_ref())),
        DataType::Binary | DataType::LargeBinary | DataType::FixedSizeBinary(_) | DataType::BinaryView => {
            "binary".into()
        }
        // Strings, and the placeholder column of a file without a schema (all null).
        _ => "string".into(),
    }
}

fn athena(l: &TableLayout) -> Result<String, DdlError> {
    if !l.location.starts_with("s3://") {
        return Err(DdlError::NotS3(l.location.clone()));
    }
    let partitions = l.partitions.ok_or(DdlError::PartitionCount)?;
    // Athena projects folder values as strings; dt and hour stay strings so `dt = '2026-11-30'` prunes.
    let folders: Vec<String> = folder_columns(l.buckets)
        .iter()
        .map(|(name, _, _)| format!("`{name}` {}", if *name == "partition" { "int" } else { "string" }))
        .collect();
    let mut props = vec![("projection.enabled".to_string(), "true".to_string())];
    let mut template = l.location.clone();
    if l.buckets.is_some() {
        let first = l.first_date.clone().unwrap_or_else(|| "2020-01-01".into());
        props.extend([
            ("projection.dt.type".into(), "date".into()),
            ("projection.dt.format".into(), "yyyy-MM-dd".into()),
            ("projection.dt.range".into(), format!("{first},NOW")),
            ("projection.dt.interval".into(), "1".into()),
            ("projection.dt.interval.unit".into(), "DAYS".into()),
        ]);
        template.push_str("dt=${dt}/");
    }
    if l.buckets == Some(BucketWidth::Hour) {
        props.extend([
            ("projection.hour.type".into(), "integer".into()),
            ("projection.hour.range".into(), "0,23".into()),
            ("projection.hour.digits".into(), "2".into()),
        ]);
        template.push_str("hour=${hour}/");
    }
    props.extend([
        ("projection.partition.type".into(), "integer".into()),
        ("projection.partition.range".into(), format!("0,{}", partitions - 1)),
    ]);
    template.push_str("partition=${partition}/");
    props.push(("storage.location.template".into(), template));
    let mut out = format!(
        "CREATE EXTERNAL TABLE IF NOT EXISTS `{}` (\n{}\n)\nPARTITIONED BY ({})\nSTORED AS PARQUET\nLOCATION '{}'\nTBLPROPERTIES (\n",
        l.table,
        hive_columns(l),
        folders.join(", "),
        l.location
    );
    let props: Vec<String> = props.iter().map(|(k, v)| format!("  '{k}' = '{v}'")).collect();
    let _ = writeln!(out, "{}\n);", props.join(",\n"));
    Ok(out)
}

fn spark(l: &TableLayout) -> String {
    let location = l.location.strip_prefix("s3://").map_or(l.location.clone(), |rest| format!("s3a://{rest}"));
    let folders: Vec<String> =
        folder_columns(l.buckets).iter().map(|(name, _, hive)| format!("  `{name}` {hive}")).collect();
    let names: Vec<String> = folder_columns(l.buckets).iter().map(|(name, _, _)| format!("`{name}`")).collect();
    format!(
        "CREATE TABLE IF NOT EXISTS `{}` (\n{},\n{}\n)\nUSING PARQUET\nPARTITIONED BY ({})\nLOCATION '{}';\n\
         -- Spark finds the partitions (folders) present now; run again as new ones appear:\n\
         ALTER TABLE `{}` RECOVER PARTITIONS;\n",
        l.table,
        hive_columns(l),
        folders.join(",\n"),
        names.join(", "),
        location,
        l.table
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(buckets: Option<BucketWidth>) -> TableLayout {
        TableLayout {
            table: table_name("orders.v2"),
            location: "s3://b/kafka/topic=orders.v2/".into(),
            buckets,
            partitions: Some(12),
            first_date: Some("2026-11-01".into()),
            values: None,
            keys: None,
        }
    }

    #[test]
    fn table_names_are_identifiers() {
        assert_eq!(table_name("Orders.v2-eu"), "orders_v2_eu");
        assert_eq!(table_name("7days"), "t_7days");
    }

    #[test]
    fn duckdb_types_the_folder_columns_of_the_layout() {
        let hourly = ddl(Engine::Duckdb, &layout(Some(BucketWidth::Hour))).unwrap();
        assert!(hourly.contains("read_parquet('s3://b/kafka/topic=orders.v2/**/*.parquet'"), "{hourly}");
        assert!(hourly.contains("hive_types = {'dt': DATE, 'hour': INTEGER, 'partition': INTEGER}"), "{hourly}");
        let flat = ddl(Engine::Duckdb, &layout(None)).unwrap();
        assert!(flat.contains("hive_types = {'partition': INTEGER}"), "{flat}");
    }

    #[test]
    fn athena_projects_every_folder_level_onto_the_layout() {
        let hourly = ddl(Engine::Athena, &layout(Some(BucketWidth::Hour))).unwrap();
        for part in [
            "PARTITIONED BY (`dt` string, `hour` string, `partition` int)",
            "'projection.dt.range' = '2026-11-01,NOW'",
            "'projection.hour.digits' = '2'",
            "'projection.partition.range' = '0,11'",
            "'storage.location.template' = 's3://b/kafka/topic=orders.v2/dt=${dt}/hour=${hour}/partition=${partition}/'",
            "`headers` array<struct<key:string,value:binary,key_encoding:string>>",
        ] {
            assert!(hourly.contains(part), "{part} missing from:\n{hourly}");
        }
        let daily = ddl(Engine::Athena, &layout(Some(BucketWidth::Day))).unwrap();
        assert!(daily.contains("topic=orders.v2/dt=${dt}/partition=${partition}/'") && !daily.contains("hour"));
        let flat = ddl(Engine::Athena, &layout(None)).unwrap();
        assert!(flat.contains("PARTITIONED BY (`partition` int)") && !flat.contains("dt"), "{flat}");
        let unknown = TableLayout { partitions: None, ..layout(None) };
        assert_eq!(ddl(Engine::Athena, &unknown), Err(DdlError::PartitionCount));
        let local = TableLayout { location: "/data/topic=x/".into(), ..layout(None) };
        assert!(matches!(ddl(Engine::Athena, &local), Err(DdlError::NotS3(_))));
    }

    #[test]
    fn typed_values_are_declared_as_their_struct() {
        let schema = crate::values::ValueSchema::from_avro(
            r#"{"type":"record","name":"O","fields":[{"name":"id","type":"long"},
              {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
              {"name":"user-name","type":["null","string"]},
              {"name":"items","type":{"type":"array","items":{"type":"record","name":"I","fields":[{"name":"sku","type":"string"}]}}},
              {"name":"attrs","type":{"type":"map","values":"double"}},
              {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}]}"#,
        )
        .unwrap();
        let typed = TableLayout { values: Some(crate::values::value_field(&schema)), ..layout(None) };
        let value = "`value` struct<id:bigint,amount:decimal(12,2),`user-name`:string,items:array<struct<sku:string>>,\
                     attrs:map<string,double>,at:timestamp>,\n  `headers` array<struct<key:string,value:binary,key_encoding:string>>,\n  \
                     `value_raw` binary,\n  `value_error` string";
        for engine in [Engine::Athena, Engine::Spark] {
            let text = ddl(engine, &typed).unwrap();
            assert!(text.contains(value), "{engine:?}:\n{text}");
        }
    }

    /// The types Avro and Protobuf values add to JSON's: unsigned integers, durations, times, fixed.
    #[test]
    fn registry_value_and_key_types_are_declared_as_their_parquet_columns_read() {
        use arrow_schema::TimeUnit::Microsecond;
        let fields: Vec<Field> = [
            ("u64", DataType::UInt64),
            ("u32", DataType::UInt32),
            ("took", DataType::Duration(Microsecond)),
            ("at", DataType::Time64(Microsecond)),
            ("digest", DataType::FixedSizeBinary(4)),
            ("placed", DataType::Timestamp(Microsecond, Some("+00:00".into()))),
        ]
        .into_iter()
        .map(|(name, ty)| Field::new(name, ty, true))
        .collect();
        let value = Field::new("value", DataType::Struct(fields.into()), true);
        let id = Field::new("id", DataType::Int32, true);
        let key = Field::new("key", DataType::Struct(vec![id].into()), true);
        let text = ddl(Engine::Athena, &TableLayout { values: Some(value), keys: Some(key), ..layout(None) }).unwrap();
        let want = "`value` struct<u64:decimal(20,0),u32:bigint,took:bigint,at:bigint,digest:binary,placed:timestamp>";
        assert!(text.contains(want), "{text}");
        assert!(text.contains("`key` struct<id:int>,"), "a typed key: {text}");
        assert!(text.contains("`value_error` string,\n  `key_raw` binary,\n  `key_error` string\n)"), "{text}");
    }

    #[test]
    fn spark_reads_through_s3a_and_recovers_partitions() {
        let hourly = ddl(Engine::Spark, &layout(Some(BucketWidth::Hour))).unwrap();
        assert!(hourly.contains("LOCATION 's3a://b/kafka/topic=orders.v2/'"), "{hourly}");
        assert!(hourly.contains("PARTITIONED BY (`dt`, `hour`, `partition`)"), "{hourly}");
        assert!(hourly.contains("`dt` date,\n  `hour` int,\n  `partition` int"), "{hourly}");
        assert!(hourly.contains("ALTER TABLE `orders_v2` RECOVER PARTITIONS;"), "{hourly}");
    }
}
