//! A JSON object's shape for inferring a file's schema (`infer`'s `Shape`), read by the same reader
//! that decodes (so what inference takes, the decoder takes as JSON), with nothing of its strings kept.

use super::scan::{Reader, Syntax};
use crate::values::infer::Shape;

/// The fields of a value that is a JSON object; else why not (as a misfit's reason).
pub(crate) fn shape(bytes: &[u8]) -> Result<Vec<(String, Shape)>, String> {
    let mut r = Reader::new(bytes);
    let mut scratch = Vec::new();
    let read = match r.peek() {
        Ok(b'{') => value(&mut r, &mut scratch, 0).and_then(|shape| r.end().map(|()| Some(shape))),
        Ok(_) => super::decode::validate(bytes).map(|()| None),
        Err(syntax) => Err(syntax),
    };
    match read {
        Ok(Some(Shape::Object(fields))) => Ok(fields),
        Ok(_) => Err("value: not a JSON object".into()),
        Err(syntax) => Err(format!("value: not JSON ({syntax})")),
    }
}

fn value(r: &mut Reader, scratch: &mut Vec<u8>, depth: usize) -> Result<Shape, Syntax> {
    Ok(match r.peek()? {
        b'{' => {
            r.within(depth)?;
            r.expect(b'{', "expected an object")?;
            let (mut fields, mut started) = (Vec::new(), false);
            while r.another(b'}', &mut started)? {
                let key = r.string(scratch)?.to_string();
                r.expect(b':', "expected :")?;
                fields.push((key, value(r, scratch, depth + 1)?));
            }
            Shape::Object(sorted(fields))
        }
        b'[' => {
            r.within(depth)?;
            r.expect(b'[', "expected an array")?;
            let (mut items, mut started) = (Vec::new(), false);
            while r.another(b']', &mut started)? {
                items.push(value(r, scratch, depth + 1)?);
            }
            Shape::Array(items)
        }
        b'"' => {
            r.string(scratch)?;
            Shape::String
        }
        b't' => r.literal(b"true").map(|()| Shape::Boolean)?,
        b'f' => r.literal(b"false").map(|()| Shape::Boolean)?,
        b'n' => r.literal(b"null").map(|()| Shape::Null)?,
        _ => {
            let n = r.number()?;
            match n.integer && n.text.parse::<i64>().is_ok() {
                true => Shape::Integer,
                false => Shape::Fraction,
            }
        }
    })
}

/// An object's fields by key, each key once with the last value given for it (as a JSON map holds
/// them, in which order inferred fields have always come).
fn sorted(mut fields: Vec<(String, Shape)>) -> Vec<(String, Shape)> {
    // Stable: of fields with one key, the last given stays last.
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    let mut kept: Vec<(String, Shape)> = Vec::with_capacity(fields.len());
    for field in fields {
        match kept.last_mut() {
            Some(last) if last.0 == field.0 => *last = field,
            _ => kept.push(field),
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_keep_kinds_and_keys_not_contents() {
        let fields = shape(br#" {"b":[1,2.5,"x",null],"a":{"z":true,"y":9223372036854775808},"b":-3} "#).unwrap();
        let expected = vec![
            ("a".to_string(), Shape::Object(vec![("y".into(), Shape::Fraction), ("z".into(), Shape::Boolean)])),
            ("b".to_string(), Shape::Integer),
        ];
        assert_eq!(fields, expected, "sorted by key, a key given twice has its last value");
        assert_eq!(shape(b"[1]").unwrap_err(), "value: not a JSON object");
        assert!(shape(b"[1").unwrap_err().starts_with("value: not JSON ("));
        assert!(shape(br#"{"a":1} x"#).unwrap_err().starts_with("value: not JSON ("));
        assert!(shape(&[b'{', 0xff]).unwrap_err().starts_with("value: not JSON ("));
        assert!(shape(&[b"{\"a\":".repeat(200), b"1".to_vec()].concat()).unwrap_err().contains("nested too deeply"));
    }
}
