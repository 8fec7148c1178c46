//! A JSON value decoded by its schema into the `value` column in one pass: each token is read once,
//! checked against the type the schema gives it there, and appended; a value found not to fit part way
//! is cut back out of the column (`Column::truncate`). The rules: integers must be integers in range;
//! timestamps, dates and decimals are read by arrow-cast's parsers (as arrow-json reads them); an
//! object's keys the schema does not declare are skipped, counted; a field given twice does not fit
//! (JSON leaves it to each reader which one counts); a missing field is null, if it may be.

use arrow_array::timezone::Tz;
use arrow_array::types::{Date32Type, Decimal128Type};
use arrow_cast::parse::{parse_decimal, string_to_datetime, Parser};

use super::scan::{Reader, Syntax};
use super::{Fit, Misfit, Step};
use crate::values::column::{Column, List, Primitive, Struct};
use crate::values::{is_uuid, FieldNode, Node, TimeUnit, ValueSchema, ValueType};

/// Why decoding stopped: the text is not JSON, or the value does not fit.
enum Fail {
    Syntax(Syntax),
    Misfit(Misfit),
}

impl From<Syntax> for Fail {
    fn from(s: Syntax) -> Self {
        Fail::Syntax(s)
    }
}

impl From<Misfit> for Fail {
    fn from(m: Misfit) -> Self {
        Fail::Misfit(m)
    }
}

impl Fail {
    fn under(self, step: impl FnOnce() -> Step) -> Self {
        match self {
            Fail::Misfit(m) => Fail::Misfit(m.under(step())),
            syntax => syntax,
        }
    }
}

/// Decodes `bytes` by `schema` into one more row of `value` (a struct column of `value_field(schema)`'s
/// type). A value that does not fit leaves `value` as it was.
pub fn decode(schema: &ValueSchema, bytes: &[u8], value: &mut Struct) -> Result<Fit, Misfit> {
    let rows = value.rows();
    let mut decoder = Decoder { bytes, r: Reader::new(bytes), scratch: Vec::new(), ignored: 0, depth: 0 };
    match decoder.top(schema, value) {
        Ok(()) => Ok(Fit { ignored_fields: decoder.ignored }),
        Err(fail) => {
            value.truncate(rows);
            // Text that is not JSON says so, wherever a misfit was met first.
            let fail = match fail {
                Fail::Misfit(m) => validate(bytes).map_or_else(Fail::Syntax, |()| Fail::Misfit(m)),
                syntax => syntax,
            };
            Err(match fail {
                Fail::Syntax(s) => Misfit::new(format!("not JSON ({s})")),
                Fail::Misfit(m) => m,
            })
        }
    }
}

/// Whether `bytes` is one JSON document.
pub(super) fn validate(bytes: &[u8]) -> Result<(), Syntax> {
    let mut r = Reader::new(bytes);
    r.skip(&mut Vec::new(), 0)?;
    r.end()
}

/// What the JSON value starting with `first` is, for messages.
fn kind(first: u8) -> &'static str {
    match first {
        b'{' => "an object",
        b'[' => "an array",
        b'"' => "a string",
        b't' | b'f' => "a boolean",
        b'n' => "null",
        _ => "a number",
    }
}

struct Decoder<'a> {
    bytes: &'a [u8],
    r: Reader<'a>,
    /// Strings with escapes, undone.
    scratch: Vec<u8>,
    /// Object keys the schema does not declare.
    ignored: u64,
    /// How many arrays and objects the value ahead is within.
    depth: usize,
}

impl Decoder<'_> {
    fn top(&mut self, schema: &ValueSchema, value: &mut Struct) -> Result<(), Fail> {
        match &**schema.fields() {
            [field] if schema.wrapped() => {
                self.node(&field.node, value.child(0))?;
                value.close(true);
            }
            fields => match self.r.peek()? {
                b'{' => self.record(fields, value)?,
                first => return Err(Misfit::new(format!("not a JSON object (got {})", kind(first))).into()),
            },
        }
        self.r.end()?;
        // The strings were appended unchecked: checked now, all at once (`validate` then says where).
        value.validate().map_err(|_| Misfit::new("a string that is not UTF-8".into()))?;
        Ok(())
    }

    /// An object read as a record's fields into `s`, whose row it closes.
    fn record(&mut self, fields: &[FieldNode], s: &mut Struct) -> Result<(), Fail> {
        self.open(b'{')?;
        let mut seen = Seen::new(fields.len());
        let (mut next, mut started) = (0, false);
        while self.r.another(b'}', &mut started)? {
            let key_at = self.r.position();
            let field = find(fields, self.r.raw_string(&mut self.scratch)?, next);
            if field.is_none() {
                // A key no field has: read again to check it is UTF-8 (a field's name is).
                self.r.rewind(key_at);
                self.r.string(&mut self.scratch)?;
            }
            self.r.expect(b':', "expected :")?;
            match field {
                Some(i) => {
                    let field = &fields[i];
                    if seen.insert(i) {
                        return Err(Misfit::new("given twice".into()).under(Step::Field(field.name.clone())).into());
                    }
                    self.node(&field.node, s.child(i)).map_err(|f| f.under(|| Step::Field(field.name.clone())))?;
                    next = i + 1;
                }
                None => {
                    self.r.skip(&mut self.scratch, self.depth)?;
                    self.ignored += 1;
                }
            }
        }
        for (i, field) in fields.iter().enumerate().filter(|(i, _)| !seen.has(*i)) {
            if !field.node.nullable {
                return Err(Misfit::new("required, but null or missing".into())
                    .under(Step::Field(field.name.clone()))
                    .into());
            }
            s.child(i).push_null();
        }
        if fields.is_empty() {
            // The placeholder field of a record without fields.
            s.child(0).push_null();
        }
        s.close(true);
        self.depth -= 1;
        Ok(())
    }

    /// Takes the `[` or `{` that must come next, one level deeper.
    fn open(&mut self, bracket: u8) -> Result<(), Syntax> {
        self.r.within(self.depth)?;
        self.r.expect(bracket, if bracket == b'[' { "expected an array" } else { "expected an object" })?;
        self.depth += 1;
        Ok(())
    }

    /// Appends the value ahead, of `n`'s type, to `column`.
    fn node(&mut self, n: &Node, column: &mut Column) -> Result<(), Fail> {
        let first = self.r.peek()?;
        if first == b'n' {
            self.r.literal(b"null")?;
            if !n.nullable {
                return Err(Misfit::new("required, but null or missing".into()).into());
            }
            column.push_null();
            return Ok(());
        }
        let start = self.r.position();
        if self.value(&n.ty, first, column)? {
            return Ok(());
        }
        self.r.rewind(start);
        self.r.skip(&mut self.scratch, self.depth)?;
        Err(Misfit::new(format!("expected {}, got {}", n.ty, shown(self.r.text_since(start)))).into())
    }

    /// Appends the value ahead (not null; `first` its first byte) if it is of type `ty`: whether it was.
    #[inline]
    fn value(&mut self, ty: &ValueType, first: u8, column: &mut Column) -> Result<bool, Fail> {
        let number = first == b'-' || first.is_ascii_digit();
        let text = first == b'"';
        Ok(match (ty, column) {
            (ValueType::String, Column::Utf8(c)) if text => {
                c.push_unchecked(self.r.raw_string(&mut self.scratch)?);
                true
            }
            (ValueType::Long, Column::Int64(c)) if number => push(c, self.integer()?),
            (ValueType::Int, Column::Int32(c)) if number => {
                push(c, self.integer()?.and_then(|i| i32::try_from(i).ok()))
            }
            (ValueType::Double, Column::Float64(c)) if number => push(c, self.float()?),
            (ValueType::Float, Column::Float32(c)) if number => push(c, self.float()?),
            (ValueType::Boolean, Column::Boolean(c)) if first == b't' || first == b'f' => {
                let value = first == b't';
                self.r.literal(if value { b"true" } else { b"false" })?;
                c.push(value);
                true
            }
            (ValueType::Timestamp { unit, .. }, Column::Int64(c)) if number || text => {
                let at = match number {
                    true => self.integer()?,
                    false => self.timestamp(*unit)?,
                };
                push(c, at)
            }
            (ValueType::Date, Column::Int32(c)) if number => {
                push(c, self.integer()?.and_then(|i| i32::try_from(i).ok()))
            }
            (ValueType::Date, Column::Int32(c)) if text => {
                push(c, Date32Type::parse(self.r.string(&mut self.scratch)?))
            }
            (ValueType::Decimal { precision, scale }, Column::Decimal128(c)) if number || text => {
                let digits = match number {
                    true => self.r.number()?.text,
                    false => self.r.string(&mut self.scratch)?,
                };
                push(c, parse_decimal::<Decimal128Type>(digits, *precision, *scale).ok())
            }
            (ValueType::Uuid, Column::Utf8(c)) if text => {
                let s = self.r.raw_string(&mut self.scratch)?;
                is_uuid(s) && {
                    c.push_unchecked(s);
                    true
                }
            }
            (ValueType::Enum(symbols), Column::Utf8(c)) if text => {
                let s = self.r.raw_string(&mut self.scratch)?;
                symbols.iter().any(|sym| sym.as_bytes() == s) && {
                    c.push_unchecked(s);
                    true
                }
            }
            (ValueType::Array(item), Column::List(list)) if first == b'[' => {
                self.array(item, list)?;
                true
            }
            (ValueType::Map(values), Column::Map(map)) if first == b'{' => {
                self.map(values, map)?;
                true
            }
            (ValueType::Record(fields), Column::Struct(s)) if first == b'{' => {
                self.record(fields, s)?;
                true
            }
            _ => false,
        })
    }

    /// The integer ahead, if the number ahead is one that fits 64 bits.
    fn integer(&mut self) -> Result<Option<i64>, Syntax> {
        let n = self.r.number()?;
        Ok(n.integer.then(|| n.text.parse().ok()).flatten())
    }

    /// The number ahead as a float (within a double's range: see `Reader::number`).
    fn float<F: std::str::FromStr>(&mut self) -> Result<Option<F>, Syntax> {
        Ok(self.r.number()?.text.parse().ok())
    }

    /// The timestamp string ahead, in `unit`s since the epoch, if it is one.
    fn timestamp(&mut self, unit: TimeUnit) -> Result<Option<i64>, Syntax> {
        let text = self.r.string(&mut self.scratch)?;
        let utc: Tz = "+00:00".parse().expect("UTC is a time zone");
        Ok(string_to_datetime(&utc, text).ok().map(|at| match unit {
            TimeUnit::Millis => at.timestamp_millis(),
            TimeUnit::Micros => at.timestamp_micros(),
        }))
    }

    fn array(&mut self, item: &Node, list: &mut List) -> Result<(), Fail> {
        self.open(b'[')?;
        let (mut i, mut started) = (0, false);
        while self.r.another(b']', &mut started)? {
            self.node(item, list.items()).map_err(|f| f.under(|| Step::Index(i)))?;
            i += 1;
        }
        list.close(true);
        self.depth -= 1;
        Ok(())
    }

    /// An object read as a map's entries (every key kept, in order).
    fn map(&mut self, values: &Node, map: &mut List) -> Result<(), Fail> {
        self.open(b'{')?;
        let Column::Struct(entries) = map.items() else { unreachable!("a map's entries are structs") };
        let mut started = false;
        while self.r.another(b'}', &mut started)? {
            let key_at = self.r.position();
            let key = self.r.raw_string(&mut self.scratch)?;
            let Column::Utf8(keys) = entries.child(0) else { unreachable!("a map's keys are strings") };
            keys.push_unchecked(key);
            self.r.expect(b':', "expected :")?;
            self.node(values, entries.child(1)).map_err(|f| f.under(|| Step::Field(self.key(key_at))))?;
            entries.close(true);
        }
        map.close(true);
        self.depth -= 1;
        Ok(())
    }

    /// The object key at `at`, read again (for a message).
    fn key(&self, at: usize) -> String {
        let mut r = Reader::new(self.bytes);
        r.rewind(at);
        r.string(&mut Vec::new()).map(str::to_string).unwrap_or_default()
    }
}

/// Appends `value` if there is one: whether there was.
#[inline]
fn push<T: arrow_buffer::ArrowNativeType>(column: &mut Primitive<T>, value: Option<T>) -> bool {
    value.map(|v| column.push(v)).is_some()
}

/// The field named `key`: looked for at `next` first (keys mostly come in the schema's order).
#[inline]
fn find(fields: &[FieldNode], key: &[u8], next: usize) -> Option<usize> {
    match fields.get(next) {
        Some(f) if f.name.as_bytes() == key => Some(next),
        _ => fields.iter().position(|f| f.name.as_bytes() == key),
    }
}

/// The fields of an object read so far.
enum Seen {
    Few(u64),
    Many(Vec<bool>),
}

impl Seen {
    fn new(fields: usize) -> Self {
        match fields <= 64 {
            true => Seen::Few(0),
            false => Seen::Many(vec![false; fields]),
        }
    }

    /// Marks field `i` read: whether it was already.
    #[inline]
    fn insert(&mut self, i: usize) -> bool {
        match self {
            Seen::Few(bits) => {
                let was = *bits & (1 << i) != 0;
                *bits |= 1 << i;
                was
            }
            Seen::Many(seen) => std::mem::replace(&mut seen[i], true),
        }
    }

    fn has(&self, i: usize) -> bool {
        match self {
            Seen::Few(bits) => *bits & (1 << i) != 0,
            Seen::Many(seen) => seen[i],
        }
    }
}

/// A value's text in a message, cut short.
fn shown(text: String) -> String {
    const MAX: usize = 40;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}
