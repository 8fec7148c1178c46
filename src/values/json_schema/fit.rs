//! Which versions of a JSON Schema a file's holds: JSON values are read by name, so a value written
//! under another version decodes under the file's when every property it may have is the file's too,
//! of the same type (a nested object's held the same way), nullable in the file's if it is in its own,
//! and every property of the file's it lacks is nullable there; and both are of objects, or neither.

use crate::values::{Fields, Node, ValueSchema, ValueType};

/// Whether values of `writer` decode whole under `file`; else the first property that does not.
pub fn holds(file: &ValueSchema, writer: &ValueSchema) -> Result<(), String> {
    match (file.wrapped(), writer.wrapped()) {
        (true, false) => Err("it is of objects, the file's is not".into()),
        (false, true) => Err("it is not of objects, the file's is".into()),
        _ => fields_hold(file.fields(), writer.fields()),
    }
}

fn fields_hold(file: &Fields, writer: &Fields) -> Result<(), String> {
    for w in writer.iter() {
        let f = file.iter().find(|f| f.name == w.name).ok_or_else(|| format!("{} is not in the file's", w.name))?;
        node_holds(&f.node, &w.node).map_err(|why| format!("{}: {why}", w.name))?;
    }
    match file.iter().find(|f| !f.node.nullable && !writer.iter().any(|w| w.name == f.name)) {
        Some(missing) => Err(format!("{} is required by the file's and not in the version", missing.name)),
        None => Ok(()),
    }
}

fn node_holds(file: &Node, writer: &Node) -> Result<(), String> {
    if writer.nullable && !file.nullable {
        return Err("nullable, and the file's is not".into());
    }
    match (&file.ty, &writer.ty) {
        (ValueType::Record(f), ValueType::Record(w)) => fields_hold(f, w),
        (ValueType::Array(f), ValueType::Array(w)) | (ValueType::Map(f), ValueType::Map(w)) => node_holds(f, w),
        (ValueType::Enum(f), ValueType::Enum(w)) if w.iter().all(|s| f.contains(s)) => Ok(()),
        (f, w) if f == w => Ok(()),
        _ => Err("the type changed".into()),
    }
}
