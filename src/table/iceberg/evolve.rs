//! Schema evolution: the table schema that holds both the table's current columns and a file's. A
//! column the file adds (at any depth) is added, optional, with a new field ID; a column the file
//! lacks stays, made optional (the file's rows read it as null); a type widens as Iceberg allows (int
//! to long, float to double) and a required column becomes optional when the file's may be null.
//! Nothing is ever dropped or renamed, so every file the table held before reads as it did.

use arrow_schema::Schema;
use serde_json::{json, Value};

use super::spec::{table_schema, SpecError};

/// The schema (ID `schema_id`) of `current` (whose last field ID is `last_id`) with `file`'s columns
/// too, and its last field ID; none when `current` holds them already. An error for a column whose
/// type changed other than as Iceberg allows.
pub fn evolve(current: &Value, last_id: i32, file: &Schema, schema_id: i32) -> Result<Option<(Value, i32)>, SpecError> {
    let (of_file, last) = table_schema(file, Some(current), last_id, schema_id)?;
    let fields = merge_fields(&current["fields"], &of_file["fields"]);
    if fields == current["fields"] {
        return Ok(None);
    }
    Ok(Some((json!({"type": "struct", "schema-id": schema_id, "fields": fields}), last)))
}

/// `current`'s fields, each merged with the file's of its name, then the file's new ones.
fn merge_fields(current: &Value, file: &Value) -> Value {
    let (current, file) = (as_slice(current), as_slice(file));
    let mut out: Vec<Value> = current
        .iter()
        .map(|c| match file.iter().find(|f| f["name"] == c["name"]) {
            Some(f) => merge_field(c, f),
            None => optional(c.clone()),
        })
        .collect();
    let added = file.iter().filter(|f| !current.iter().any(|c| c["name"] == f["name"]));
    out.extend(added.cloned().map(optional));
    Value::Array(out)
}

fn merge_field(current: &Value, file: &Value) -> Value {
    let mut merged = current.clone();
    merged["type"] = merge_type(&current["type"], &file["type"]);
    if file["required"] == false {
        merged["required"] = json!(false);
    }
    merged
}

/// A type holding both (their kinds agree: `table_schema` refused others).
fn merge_type(current: &Value, file: &Value) -> Value {
    let mut merged = current.clone();
    match current["type"].as_str() {
        Some("struct") => merged["fields"] = merge_fields(&current["fields"], &file["fields"]),
        Some("list") => {
            merged["element"] = merge_type(&current["element"], &file["element"]);
            if file["element-required"] == false {
                merged["element-required"] = json!(false);
            }
        }
        Some("map") => {
            merged["value"] = merge_type(&current["value"], &file["value"]);
            if file["value-required"] == false {
                merged["value-required"] = json!(false);
            }
        }
        // A primitive: the wider of the two (a file's int in a table's long reads as it is).
        _ if promotes(current, file) => return file.clone(),
        _ => {}
    }
    merged
}

/// Whether `to` is a promotion of `from` that Iceberg allows.
pub(super) fn promotes(from: &Value, to: &Value) -> bool {
    matches!((from.as_str(), to.as_str()), (Some("int"), Some("long")) | (Some("float"), Some("double")))
}

fn optional(mut field: Value) -> Value {
    field["required"] = json!(false);
    field
}

fn as_slice(fields: &Value) -> &[Value] {
    fields.as_array().map(Vec::as_slice).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use arrow_schema::{DataType, Field, Fields};

    use super::*;

    fn value(fields: Vec<Field>) -> Schema {
        Schema::new(vec![
            Field::new("offset", DataType::Int64, false),
            Field::new("value", DataType::Struct(Fields::from(fields)), true),
        ])
    }

    fn first() -> (Value, i32) {
        let v1 = value(vec![Field::new("id", DataType::Int32, false), Field::new("name", DataType::Utf8, false)]);
        table_schema(&v1, None, 0, 0).unwrap()
    }

    #[test]
    fn a_file_of_the_same_columns_changes_nothing() {
        let (current, last) = first();
        let same = value(vec![Field::new("id", DataType::Int32, false), Field::new("name", DataType::Utf8, false)]);
        assert_eq!(evolve(&current, last, &same, 1).unwrap(), None);
    }

    #[test]
    fn added_columns_are_optional_with_new_ids_and_missing_ones_stay_optional() {
        let (current, last) = first();
        assert_eq!(last, 4);
        let v2 = value(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("coupon", DataType::Utf8, false),
            Field::new("tags", DataType::List(std::sync::Arc::new(Field::new("item", DataType::Utf8, true))), false),
        ]);
        let (evolved, last) = evolve(&current, last, &v2, 1).unwrap().unwrap();
        let expected = json!({"type": "struct", "schema-id": 1, "fields": [
            {"id": 1, "name": "offset", "required": true, "type": "long"},
            {"id": 2, "name": "value", "required": false, "type": {"type": "struct", "fields": [
                {"id": 3, "name": "id", "required": true, "type": "long"},
                {"id": 4, "name": "name", "required": false, "type": "string"},
                {"id": 5, "name": "coupon", "required": false, "type": "string"},
                {"id": 6, "name": "tags", "required": false,
                 "type": {"type": "list", "element-id": 7, "element": "string", "element-required": false}}]}}]});
        assert_eq!((evolved.clone(), last), (expected, 7));
        // An older file after it (the table is evolved already): nothing more.
        let v1 = value(vec![Field::new("id", DataType::Int32, false), Field::new("name", DataType::Utf8, false)]);
        assert_eq!(evolve(&evolved, last, &v1, 2).unwrap(), None, "int reads as long; name is optional already");
    }

    #[test]
    fn a_change_iceberg_does_not_allow_is_refused() {
        let (current, last) = first();
        let changed = value(vec![Field::new("id", DataType::Utf8, false), Field::new("name", DataType::Utf8, false)]);
        let refused = evolve(&current, last, &changed, 1).unwrap_err();
        assert!(matches!(&refused, SpecError::Changed { path, .. } if path == "value.id"), "{refused}");
    }
}
