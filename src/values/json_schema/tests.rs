use super::*;
use crate::values::Fields;

const ORDER: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
  "properties": {
    "id": {"type": "integer"},
    "customer": {"type": "string"},
    "status": {"type": "string", "enum": ["NEW", "PAID"]},
    "placed": {"type": "string", "format": "date-time"},
    "day": {"type": "string", "format": "date"},
    "uid": {"type": ["string", "null"], "format": "uuid"},
    "total": {"$ref": "#/definitions/Money"},
    "lines": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}, "required": ["sku"]}},
    "tags": {"type": "object", "additionalProperties": {"type": "number"}},
    "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
    "ok": {"type": "boolean"}
  },
  "required": ["id", "customer", "status", "placed", "day", "uid", "total", "lines", "tags", "ok"],
  "definitions": {"Money": {"type": "object", "properties": {"units": {"type": "integer"}, "currency": {"type": "string"}}, "required": ["units", "currency"]}}
}"##;

fn node<'a>(fields: &'a Fields, name: &str) -> &'a Node {
    &fields.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("no field {name}")).node
}

#[test]
fn properties_formats_enums_refs_maps_and_nullable_unions_become_typed_fields() {
    let schema = parse(ORDER).unwrap();
    let fields = schema.fields();
    assert_eq!(node(fields, "id"), &Node { ty: ValueType::Long, nullable: false });
    assert_eq!(node(fields, "status").ty, ValueType::Enum(vec!["NEW".to_string(), "PAID".to_string()].into()));
    assert_eq!(node(fields, "placed").ty, ValueType::Timestamp { unit: TimeUnit::Micros, utc: true });
    assert_eq!(node(fields, "day").ty, ValueType::Date);
    assert_eq!(node(fields, "uid"), &Node { ty: ValueType::Uuid, nullable: true }, "a type list with null");
    assert_eq!(node(fields, "note"), &Node { ty: ValueType::String, nullable: true }, "oneOf null and a string");
    let ValueType::Record(total) = &node(fields, "total").ty else { panic!("a $ref to an object") };
    assert_eq!(node(total, "units").ty, ValueType::Long);
    let ValueType::Array(line) = &node(fields, "lines").ty else { panic!("an array") };
    let ValueType::Record(line) = &line.ty else { panic!("of objects") };
    assert!(!node(line, "sku").nullable && node(line, "qty").nullable, "required or not");
    assert_eq!(node(fields, "tags").ty, ValueType::Map(Box::new(Node { ty: ValueType::Double, nullable: false })));
    // A value the schema declares checks and decodes as --value-format json's do.
    let value = r#"{"id":1,"customer":"a","status":"PAID","placed":"2026-01-01T00:00:00Z","day":"2026-01-01",
        "uid":null,"total":{"units":5,"currency":"EUR"},"lines":[{"sku":"x"}],"tags":{"k":1.5},"ok":true}"#;
    assert_eq!(schema.check(value.as_bytes()).map(|fit| fit.ignored_fields), Ok(0));
}

#[test]
fn what_has_no_one_type_is_refused_saying_where() {
    let refused = |text: &str| parse(text).unwrap_err().to_string();
    let object = |property: &str| format!(r#"{{"type":"object","properties":{{"p":{property}}}}}"#);
    assert!(
        refused(&object(r#"{"oneOf":[{"type":"string"},{"type":"integer"}]}"#)).contains("schema.p: oneOf and anyOf")
    );
    assert!(refused(&object(r#"{"allOf":[]}"#)).contains("allOf"));
    assert!(refused(&object(r#"{"$ref":"other.json"}"#)).contains("outside this schema"));
    assert!(refused(&object(r##"{"$ref":"#/definitions/Nope"}"##)).contains("not in the schema"));
    assert!(refused(&object(r#"{"type":"object"}"#)).contains("needs properties"));
    let cycle = r##"{"type":"object","properties":{"p":{"$ref":"#"}}}"##;
    assert!(refused(cycle).contains("$ref \"#\" contains itself"), "a schema that contains itself");
    // Many uses of one definition are not a cycle.
    let many: Vec<String> = (0..100).map(|i| format!(r##""p{i}":{{"$ref":"#/definitions/M"}}"##)).collect();
    let many = format!(
        r#"{{"type":"object","properties":{{{}}},"definitions":{{"M":{{"type":"object","properties":{{"n":{{"type":"integer"}}}}}}}}}}"#,
        many.join(",")
    );
    assert_eq!(parse(&many).unwrap().fields().len(), 100);
    assert!(refused("{").contains("not JSON"));
}

#[test]
fn a_version_is_held_when_its_properties_are_the_files_and_what_it_lacks_is_nullable() {
    let v1 = parse(r#"{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}"#).unwrap();
    let v2 =
        parse(r#"{"type":"object","properties":{"id":{"type":"integer"},"n":{"type":"string"}},"required":["id"]}"#)
            .unwrap();
    let required = parse(
        r#"{"type":"object","properties":{"id":{"type":"integer"},"n":{"type":"string"}},"required":["id","n"]}"#,
    )
    .unwrap();
    let changed = parse(r#"{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}"#).unwrap();
    assert_eq!(fit::holds(&v2, &v1), Ok(()), "v1 lacks n, which v2 allows to be absent");
    assert!(fit::holds(&v1, &v2).unwrap_err().contains("n is not in the file's"));
    assert!(fit::holds(&required, &v1).unwrap_err().contains("n is required"));
    assert!(fit::holds(&v1, &changed).unwrap_err().contains("id: the type changed"));
    // An object of one property named as a wrapped value's field is still another shape of value.
    let string = parse(r#"{"type":"string"}"#).unwrap();
    let object = parse(r#"{"type":"object","properties":{"value":{"type":"string"}},"required":["value"]}"#).unwrap();
    assert_eq!(string.fields(), object.fields());
    assert!(fit::holds(&string, &object).unwrap_err().contains("it is of objects"));
    assert!(fit::holds(&object, &string).unwrap_err().contains("it is not of objects"));
}

#[test]
fn fields_are_in_the_order_the_schema_writes_its_properties() {
    fn names(fields: &Fields) -> Vec<&str> {
        fields.iter().map(|f| f.name.as_str()).collect()
    }
    let schema = parse(ORDER).unwrap();
    let fields = schema.fields();
    let written = ["id", "customer", "status", "placed", "day", "uid", "total", "lines", "tags", "note", "ok"];
    assert_eq!(names(fields), written);
    let ValueType::Record(total) = &node(fields, "total").ty else { panic!("a $ref to an object") };
    assert_eq!(names(total), ["units", "currency"], "through a $ref");
    let ValueType::Array(line) = &node(fields, "lines").ty else { panic!("an array") };
    let ValueType::Record(line) = &line.ty else { panic!("of objects") };
    assert_eq!(names(line), ["sku", "qty"], "in an array's items");
    // A property written twice is where it was first written, typed as it was last (as serde_json keeps it).
    let twice = r#"{"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"},
        "b": {"type": "object", "properties": {"z": {"type": "integer"}, "y": {"type": "string"}}}}}"#;
    let schema = parse(twice).unwrap();
    assert_eq!(names(schema.fields()), ["b", "a"]);
    let ValueType::Record(b) = &node(schema.fields(), "b").ty else { panic!("the last b, an object") };
    assert_eq!(names(b), ["z", "y"]);
}

#[test]
fn a_schema_whose_refs_expand_exponentially_is_refused_and_keys_the_text_lacks_are_kept() {
    // d0 refers to d1 twice, d1 to d2 twice, …: 2^40 types once expanded, in a few KB of text.
    let definitions: Vec<String> = (0..40)
        .map(|i| format!(r##""d{i}":{{"type":"object","properties":{{"a":{{"$ref":"#/definitions/d{n}"}},"b":{{"$ref":"#/definitions/d{n}"}}}}}}"##, n = i + 1))
        .collect();
    let text = format!(
        r##"{{"type":"object","properties":{{"p":{{"$ref":"#/definitions/d0"}}}},"definitions":{{{},"d40":{{"type":"integer"}}}}}}"##,
        definitions.join(",")
    );
    assert!(parse(&text).unwrap_err().to_string().contains("more than 100000 types"));
    // serde_json reads an object of its raw-value key as the JSON inside: keys the text does not show.
    let raw = r#"{"type":"object","properties":{"$serde_json::private::RawValue":"{\"b\":{\"type\":\"string\"},\"a\":{\"type\":\"integer\"}}"}}"#;
    let fields = parse(raw).unwrap();
    assert_eq!(fields.fields().iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
}
