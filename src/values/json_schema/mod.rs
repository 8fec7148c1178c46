//! JSON Schema values (`--value-format json-schema`): a registry's JSON Schema read as the value schema
//! JSON values are typed by (a [`ValueSchema`] of [`Node`]s, as `--value-schema` declares one), so the
//! JSON after the wire format's header is checked and decoded exactly as `--value-format json` does
//! (`columns`). Objects with `properties` are records (a property not `required`, or whose type allows
//! `null`, is nullable); an object with only `additionalProperties` is a map; `array` with `items` a
//! list; `integer`, `number`, `boolean`, `string` (formats `date-time`, `date` and `uuid` typed as such,
//! a string `enum` an enum); a type list or a `oneOf`/`anyOf` of `null` and one schema is nullable;
//! `$ref` to the document's own `#/definitions/…` or `#/$defs/…`. Anything else is refused with where
//! and why (its values are then misfits). A record's fields are in the order its properties are written.

pub(crate) mod columns;
pub mod fit;
mod order;

use std::sync::Arc;

use serde_json::{Map, Value};

use order::KeyOrder;

use super::{FieldNode, Node, SchemaError, TimeUnit, ValueSchema, ValueType};

/// `$ref`s nested in one another, at most.
const MAX_REFS: usize = 64;

/// Schemas read in all, `$ref`s expanded, at most: definitions that each refer to the next twice would
/// otherwise expand exponentially.
const MAX_NODES: usize = 100_000;

/// The value schema a JSON Schema declares: an object's properties, or a schema of another type whose
/// values are each read as an object's one field (`ValueSchema::wrapping`; a key of `{"type":
/// "string"}`, say).
pub fn parse(text: &str) -> Result<ValueSchema, SchemaError> {
    let root: Value = serde_json::from_str(text).map_err(|e| SchemaError::NotJson(e.to_string()))?;
    let order = KeyOrder::new(text, &root).map_err(|e| SchemaError::NotJson(e.to_string()))?;
    let mut reader = Reader { root: &root, order, path: vec!["schema".into()], expanding: Vec::new(), nodes: 0 };
    let node = reader.node(&root)?;
    Ok(match node.ty {
        ValueType::Record(fields) => ValueSchema { fields, wrapped: false },
        _ => ValueSchema::wrapping(node),
    })
}

struct Reader<'a> {
    root: &'a Value,
    /// The order of the text's keys, which `root` does not keep.
    order: KeyOrder,
    path: Vec<String>,
    /// The `$ref`s being expanded, outermost first (one among them again is a cycle).
    expanding: Vec<String>,
    /// Schemas read so far (see `MAX_NODES`).
    nodes: usize,
}

impl<'a> Reader<'a> {
    fn fail(&self, why: &str) -> SchemaError {
        SchemaError::Unsupported { path: self.path.join("."), why: why.into() }
    }

    fn node(&mut self, schema: &'a Value) -> Result<Node, SchemaError> {
        let Value::Object(o) = schema else { return Err(self.fail("a schema is an object here")) };
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(self.fail(&format!("more than {MAX_NODES} types once its $refs are expanded")));
        }
        if let Some(Value::String(target)) = o.get("$ref") {
            return self.reference(target);
        }
        for union in ["oneOf", "anyOf"] {
            if let Some(branches) = o.get(union) {
                return self.union(branches);
            }
        }
        if o.contains_key("allOf") || o.contains_key("not") || o.contains_key("if") {
            return Err(self.fail("allOf, not and if/then are not supported: declare the field's one type"));
        }
        let (ty, nullable) = match o.get("type") {
            Some(Value::String(t)) => (t.as_str(), false),
            Some(Value::Array(types)) => {
                let names: Vec<&str> = types.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect();
                match names.as_slice() {
                    [one] => (*one, names.len() < types.len()),
                    _ => return Err(self.fail("a type list is supported with null and one other type")),
                }
            }
            None if o.contains_key("properties") => ("object", false),
            _ => return Err(self.fail("a schema needs a type (or properties)")),
        };
        let ty = match ty {
            "object" => self.object(o)?,
            "array" => {
                let items = o.get("items").ok_or_else(|| self.fail("an array needs items"))?;
                ValueType::Array(Box::new(self.child("items", items)?))
            }
            "integer" => ValueType::Long,
            "number" => ValueType::Double,
            "boolean" => ValueType::Boolean,
            "string" => string(o),
            "null" => return Err(self.fail("null is supported only with one other type")),
            other => return Err(self.fail(&format!("unknown type {other:?}"))),
        };
        Ok(Node { ty, nullable })
    }

    fn object(&mut self, o: &'a Map<String, Value>) -> Result<ValueType, SchemaError> {
        let Some(properties) = o.get("properties") else {
            return match o.get("additionalProperties") {
                Some(values @ Value::Object(_)) => {
                    Ok(ValueType::Map(Box::new(self.child("additionalProperties", values)?)))
                }
                _ => Err(self.fail("an object needs properties, or additionalProperties with a schema (a map)")),
            };
        };
        let Value::Object(properties) = properties else { return Err(self.fail("properties is an object")) };
        let required: Vec<&str> = o
            .get("required")
            .and_then(Value::as_array)
            .map_or_else(Vec::new, |r| r.iter().filter_map(Value::as_str).collect());
        let mut fields = Vec::with_capacity(properties.len());
        for (name, schema) in self.order.entries(properties) {
            let mut node = self.child(name, schema)?;
            node.nullable |= !required.contains(&name.as_str());
            fields.push(FieldNode { name: name.clone(), node });
        }
        Ok(ValueType::Record(Arc::from(fields)))
    }

    fn child(&mut self, step: &str, schema: &'a Value) -> Result<Node, SchemaError> {
        self.path.push(step.into());
        let node = self.node(schema)?;
        self.path.pop();
        Ok(node)
    }

    fn union(&mut self, branches: &'a Value) -> Result<Node, SchemaError> {
        let branches = branches.as_array().ok_or_else(|| self.fail("oneOf and anyOf are lists"))?;
        let is_null = |b: &Value| b.get("type").and_then(Value::as_str) == Some("null");
        let others: Vec<&Value> = branches.iter().filter(|b| !is_null(b)).collect();
        match others.as_slice() {
            [one] => {
                let mut node = self.node(one)?;
                node.nullable |= others.len() < branches.len();
                Ok(node)
            }
            _ => Err(self.fail("oneOf and anyOf are supported with null and one other schema")),
        }
    }

    fn reference(&mut self, target: &str) -> Result<Node, SchemaError> {
        if self.expanding.iter().any(|r| r == target) {
            return Err(self.fail(&format!("$ref {target:?} contains itself (Arrow has no recursive type)")));
        }
        if self.expanding.len() == MAX_REFS {
            return Err(self.fail(&format!("$refs nested more than {MAX_REFS} deep")));
        }
        let pointer = target.strip_prefix('#').ok_or_else(|| {
            self.fail(&format!("$ref {target:?} is outside this schema (only #/definitions/… and #/$defs/…)"))
        })?;
        let schema =
            self.root.pointer(pointer).ok_or_else(|| self.fail(&format!("$ref {target:?} is not in the schema")))?;
        self.expanding.push(target.to_string());
        let node = self.node(schema);
        self.expanding.pop();
        node
    }
}

/// A string, typed by its format or enum.
fn string(o: &Map<String, Value>) -> ValueType {
    if let Some(Value::Array(symbols)) = o.get("enum") {
        let symbols: Option<Vec<String>> = symbols.iter().map(|s| s.as_str().map(str::to_string)).collect();
        if let Some(symbols) = symbols {
            return ValueType::Enum(symbols.into());
        }
    }
    match o.get("format").and_then(Value::as_str) {
        Some("date-time") => ValueType::Timestamp { unit: TimeUnit::Micros, utc: true },
        Some("date") => ValueType::Date,
        Some("uuid") => ValueType::Uuid,
        _ => ValueType::String,
    }
}

#[cfg(test)]
mod tests;
