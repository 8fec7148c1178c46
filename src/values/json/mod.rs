//! JSON values (`--value-format json`, and the JSON of JSON Schema payloads): each value read once,
//! by its schema, straight into the `value` column (`decode`, on `scan`'s reader); one that does not fit
//! is kept raw with the reason, which says where in the value and why.

pub(crate) mod columns;
mod decode;
mod scan;
mod shape;
#[cfg(test)]
mod tests;

use std::fmt;

pub use self::decode::decode;
pub(crate) use self::shape::shape;
use super::column::{Room, Struct};
use super::ValueSchema;

/// A value that fits: how many of its object keys the schema does not declare (ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fit {
    pub ignored_fields: u64,
}

/// Why a value does not fit, and where in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misfit {
    /// From the top: field names and array indexes.
    path: Vec<Step>,
    why: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Field(String),
    Index(usize),
}

impl Misfit {
    fn new(why: String) -> Self {
        Self { path: Vec::new(), why }
    }

    fn under(mut self, step: Step) -> Self {
        self.path.insert(0, step);
        self
    }
}

impl fmt::Display for Misfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("value")?;
        for step in &self.path {
            match step {
                Step::Field(name) => write!(f, ".{name}")?,
                Step::Index(i) => write!(f, "[{i}]")?,
            }
        }
        write!(f, ": {}", self.why)
    }
}

/// Whether a value is a JSON object (or why not), which is all a value must be whose file infers its
/// schema.
pub(crate) fn object(bytes: &[u8]) -> Result<(), String> {
    decode::validate(bytes).map_err(|s| format!("value: not JSON ({s})"))?;
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Ok(()),
        _ => Err("value: not a JSON object".into()),
    }
}

/// An empty `value` column of `schema`'s type, with `room` made.
pub fn value_column(schema: &ValueSchema, room: &Room) -> Struct {
    match super::value_field(schema).data_type() {
        arrow_schema::DataType::Struct(fields) => Struct::new(fields.clone(), room),
        other => unreachable!("the value field is a struct, not {other}"),
    }
}

/// The most room a `Checker` keeps between values.
const CHECKER_KEEPS: usize = 1 << 20;

/// Checks values against a schema without keeping them (a JSON lines file's): each decoded into a
/// column that is emptied again.
pub(crate) struct Checker {
    schema: ValueSchema,
    scratch: Struct,
}

impl Checker {
    pub fn new(schema: ValueSchema) -> Self {
        let scratch = value_column(&schema, &Room::default());
        Self { schema, scratch }
    }

    pub fn check(&mut self, bytes: &[u8]) -> Result<Fit, Misfit> {
        let fit = decode::decode(&self.schema, bytes, &mut self.scratch);
        self.scratch.truncate(0);
        if self.scratch.allocated() > CHECKER_KEEPS {
            // A large value's room is not kept for the file's life.
            self.scratch = value_column(&self.schema, &Room::default());
        }
        fit
    }
}

impl ValueSchema {
    /// Checks a record's value bytes.
    pub fn check(&self, bytes: &[u8]) -> Result<Fit, Misfit> {
        Checker::new(self.clone()).check(bytes)
    }
}
