//! A schema inferred from the values themselves (`--value-schema infer`), per file, from its first
//! batch of records. The first record to give a field a type decides it, with one widening: integers
//! and fractions make a double. A field seen only as null is a (null) string. A record whose field
//! has another type than the records before it gave (a string where numbers were, an object where an
//! array was) does not fit: it is kept raw, with the reason. Every inferred field is nullable.

use super::{FieldNode, Node, ValueSchema, ValueType};

/// What inference needs of a JSON value: its kind, an object's keys (sorted, each once: the last one
/// given) and an array's items, not its strings or numbers.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Null,
    Boolean,
    /// A number that is an integer within 64 bits.
    Integer,
    /// Any other number.
    Fraction,
    String,
    Array(Vec<Shape>),
    Object(Vec<(String, Shape)>),
}

/// A type as inferred so far.
#[derive(Debug, Clone, PartialEq)]
enum Inferred {
    /// Only nulls so far.
    Unknown,
    Boolean,
    Long,
    Double,
    String,
    Array(Box<Inferred>),
    Record(Vec<(String, Inferred)>),
}

/// The schema taking shape as values are added.
#[derive(Debug, Default)]
pub struct Inference {
    fields: Vec<(String, Inferred)>,
}

impl Inference {
    /// Adds a value's fields and types, or says why it conflicts (adding nothing then).
    pub fn add(&mut self, value: &[(String, Shape)]) -> Result<(), String> {
        if let Some(why) = record_conflict(&self.fields, value) {
            return Err(why);
        }
        merge_record(&mut self.fields, value);
        Ok(())
    }

    pub fn schema(&self) -> ValueSchema {
        ValueSchema { fields: fields(&self.fields), wrapped: false }
    }
}

fn fields(inferred: &[(String, Inferred)]) -> super::Fields {
    inferred
        .iter()
        .map(|(name, t)| FieldNode { name: name.clone(), node: Node { ty: ty(t), nullable: true } })
        .collect()
}

fn ty(t: &Inferred) -> ValueType {
    match t {
        Inferred::Unknown | Inferred::String => ValueType::String,
        Inferred::Boolean => ValueType::Boolean,
        Inferred::Long => ValueType::Long,
        Inferred::Double => ValueType::Double,
        Inferred::Array(item) => ValueType::Array(Box::new(Node { ty: ty(item), nullable: true })),
        Inferred::Record(f) => ValueType::Record(fields(f)),
    }
}

fn record_conflict(fields: &[(String, Inferred)], value: &[(String, Shape)]) -> Option<String> {
    value.iter().find_map(|(k, v)| {
        let known = fields.iter().find(|(name, _)| name == k).map(|(_, t)| t);
        known.and_then(|t| conflict(t, v)).map(|why| format!(".{k}{why}"))
    })
}

/// Why `v` cannot be merged into `t`: a path suffix and the reason.
fn conflict(t: &Inferred, v: &Shape) -> Option<String> {
    match (t, v) {
        (_, Shape::Null) | (Inferred::Unknown, _) => None,
        (Inferred::Boolean, Shape::Boolean) | (Inferred::String, Shape::String) => None,
        (Inferred::Long | Inferred::Double, Shape::Integer | Shape::Fraction) => None,
        (Inferred::Array(item), Shape::Array(items)) => {
            items.iter().enumerate().find_map(|(i, x)| conflict(item, x).map(|why| format!("[{i}]{why}")))
        }
        (Inferred::Record(fields), Shape::Object(o)) => record_conflict(fields, o),
        _ => Some(format!(": {} here, {} in earlier records of this file", kind(v), name(t))),
    }
}

fn merge_record(fields: &mut Vec<(String, Inferred)>, value: &[(String, Shape)]) {
    for (k, v) in value {
        match fields.iter_mut().find(|(name, _)| name == k) {
            Some((_, t)) => merge(t, v),
            None => {
                let mut t = Inferred::Unknown;
                merge(&mut t, v);
                fields.push((k.clone(), t));
            }
        }
    }
}

/// Merges a value known not to conflict.
fn merge(t: &mut Inferred, v: &Shape) {
    match (&mut *t, v) {
        (_, Shape::Null) => {}
        (Inferred::Unknown, _) => *t = first(v),
        (Inferred::Long, Shape::Fraction) => *t = Inferred::Double,
        (Inferred::Array(item), Shape::Array(items)) => items.iter().for_each(|x| merge(item, x)),
        (Inferred::Record(fields), Shape::Object(o)) => merge_record(fields, o),
        _ => {}
    }
}

fn first(v: &Shape) -> Inferred {
    match v {
        Shape::Null => Inferred::Unknown,
        Shape::Boolean => Inferred::Boolean,
        Shape::Integer => Inferred::Long,
        Shape::Fraction => Inferred::Double,
        Shape::String => Inferred::String,
        Shape::Array(items) => {
            let mut item = Inferred::Unknown;
            items.iter().for_each(|x| merge(&mut item, x));
            Inferred::Array(Box::new(item))
        }
        Shape::Object(o) => {
            let mut fields = Vec::new();
            merge_record(&mut fields, o);
            Inferred::Record(fields)
        }
    }
}

fn name(t: &Inferred) -> &'static str {
    match t {
        Inferred::Unknown => "null",
        Inferred::Boolean => "a boolean",
        Inferred::Long | Inferred::Double => "a number",
        Inferred::String => "a string",
        Inferred::Array(_) => "an array",
        Inferred::Record(_) => "an object",
    }
}

/// What a JSON value is, for messages.
fn kind(v: &Shape) -> &'static str {
    match v {
        Shape::Null => "null",
        Shape::Boolean => "a boolean",
        Shape::Integer | Shape::Fraction => "a number",
        Shape::String => "a string",
        Shape::Array(_) => "an array",
        Shape::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn infer(values: &[&str]) -> (ValueSchema, Vec<String>) {
        let mut inference = Inference::default();
        let mut conflicts = Vec::new();
        for v in values {
            if let Err(why) = inference.add(&crate::values::json::shape(v.as_bytes()).unwrap()) {
                conflicts.push(why);
            }
        }
        (inference.schema(), conflicts)
    }

    fn node(ty: ValueType) -> Node {
        Node { ty, nullable: true }
    }

    #[test]
    fn fields_and_types_from_the_values_with_integers_widening_to_doubles() {
        let (schema, conflicts) =
            infer(&[r#"{"a":1,"b":null,"c":{"x":true},"d":[1,2]}"#, r#"{"a":1.5,"c":{"y":"s"},"d":[3.5],"e":"new"}"#]);
        assert!(conflicts.is_empty());
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d", "e"]);
        let ty = |i: usize| schema.fields()[i].node.clone();
        assert_eq!(ty(0), node(ValueType::Double));
        assert_eq!(ty(1), node(ValueType::String), "only nulls: a null string column");
        let ValueType::Record(c) = ty(2).ty else { panic!("c is a record") };
        assert_eq!((c[0].node.clone(), c[1].node.clone()), (node(ValueType::Boolean), node(ValueType::String)));
        assert_eq!(ty(3), node(ValueType::Array(Box::new(node(ValueType::Double)))));
        // What was inferred is what is checked: both values fit it.
        assert!(schema.check(br#"{"a":1.5,"c":{"y":"s"},"d":[3.5],"e":"new"}"#).is_ok());
    }

    #[test]
    fn a_value_of_another_type_conflicts_and_adds_nothing() {
        let (schema, conflicts) =
            infer(&[r#"{"a":1,"l":[{"k":1}]}"#, r#"{"a":"one","z":1}"#, r#"{"a":2,"l":[{"k":1},{"k":[]}]}"#]);
        assert_eq!(
            conflicts,
            [
                ".a: a string here, a number in earlier records of this file",
                ".l[1].k: an array here, a number in earlier records of this file"
            ]
        );
        assert_eq!(schema.fields().len(), 2, "the conflicting values' new fields are not added");
    }
}
