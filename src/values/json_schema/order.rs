//! The order a JSON Schema's text declares its properties in: a `serde_json::Value` keeps an object's
//! keys sorted, so the text is read a second time for its keys alone ([`Keys`]), and each object of the
//! parsed value is paired with its keys in the text's order ([`KeyOrder`]). Columns then come out in
//! the order the schema declares them, as they do from Avro and Protobuf schemas.

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Every object's keys as the text has them, first occurrence first, by where the object is in the
/// parsed value.
pub(super) struct KeyOrder(HashMap<*const Map<String, Value>, Vec<String>>);

impl KeyOrder {
    /// The key order of `text`, whose parsed value is `root`.
    pub(super) fn new(text: &str, root: &Value) -> Result<Self, serde_json::Error> {
        let keys: Keys = serde_json::from_str(text)?;
        let mut order = Self(HashMap::new());
        order.note(root, &keys);
        Ok(order)
    }

    fn note(&mut self, value: &Value, keys: &Keys) {
        match (value, keys) {
            (Value::Object(o), Keys::Object(entries)) => {
                let mut seen = HashSet::with_capacity(entries.len());
                let names =
                    entries.iter().filter(|(name, _)| seen.insert(name)).map(|(name, _)| name.clone()).collect();
                // A key the text repeats has its last value in the parsed object.
                seen.clear();
                for (name, keys) in entries.iter().rev().filter(|(name, _)| seen.insert(name)) {
                    if let Some(child) = o.get(name) {
                        self.note(child, keys);
                    }
                }
                self.0.insert(o, names);
            }
            (Value::Array(items), Keys::Array(keys)) => items.iter().zip(keys).for_each(|(v, k)| self.note(v, k)),
            _ => {}
        }
    }

    /// `o`'s entries in the text's order; any the text's keys do not name (serde_json's own, say) after
    /// them, sorted.
    pub(super) fn entries<'a>(&self, o: &'a Map<String, Value>) -> Vec<(&'a String, &'a Value)> {
        let names = self.0.get(&(o as *const _)).map_or(&[][..], Vec::as_slice);
        let mut entries: Vec<_> = names.iter().filter_map(|name| o.get_key_value(name)).collect();
        if entries.len() < o.len() {
            let named: HashSet<&String> = entries.iter().map(|(name, _)| *name).collect();
            entries.extend(o.iter().filter(|(name, _)| !named.contains(name)));
        }
        entries
    }
}

/// A JSON text's objects and arrays, each object's keys in the order the text has them.
enum Keys {
    Object(Vec<(String, Keys)>),
    Array(Vec<Keys>),
    Scalar,
}

impl<'de> Deserialize<'de> for Keys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(KeysVisitor)
    }
}

struct KeysVisitor;

impl<'de> Visitor<'de> for KeysVisitor {
    type Value = Keys;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Keys, E> {
        Ok(Keys::Scalar)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Keys, E> {
        Ok(Keys::Scalar)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Keys, E> {
        Ok(Keys::Scalar)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Keys, E> {
        Ok(Keys::Scalar)
    }

    fn visit_str<E>(self, _: &str) -> Result<Keys, E> {
        Ok(Keys::Scalar)
    }

    fn visit_unit<E>(self) -> Result<Keys, E> {
        Ok(Keys::Scalar)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Keys, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Keys::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry::<String, Keys>()? {
            entries.push(entry);
        }
        Ok(Keys::Object(entries))
    }
}
