//! Avro values in Confluent's wire format as typed columns (`--value-format avro`), a `ValueColumns`:
//! each value names its schema by ID; the file takes the schema of its first value (or the newest
//! version known to hold it, see [`Successors`]); values of other versions it holds are read by schema
//! resolution (`resolve`). A value of a newer version that holds the file's schema whole becomes the
//! file's schema, the rows taken so far widened into it (`widen`, `rewrite`); any other schema (an
//! incompatible change, or a version that would lose a field) starts the next file (a re-written file,
//! which cannot roll, keeps it raw). A value that is not framed, names a schema the registry does not
//! have, or does not decode by its schema is a misfit: a null `value`, its bytes in `value_raw`, the
//! reason in `value_error`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use arrow_array::cast::AsArray;
use arrow_array::ArrayRef;
use arrow_schema::{Field, Fields};

use super::binary::{append_record, check, struct_fields, DecodeError, Reader};
use super::reencode::encode_record;
use super::resolve::Resolution;
use super::widen::widen_record;
use super::{Avro, AvroRecord};
use crate::values::arrow::{placeholder_column, typed_value_field};
use crate::values::column::{Room, Struct};
use crate::values::columns::{kept_bytes, typed_fields, ColumnsError, FooterSchema, Rows, ValueStats};
use crate::values::wire::{frame, split, SchemaId};
use crate::values::{AvroValues, ValueColumns};

/// The schema a file's values are decoded by (the reader's, in schema resolution).
struct FileSchema {
    id: SchemaId,
    /// The top-level record.
    record: Avro,
    fields: AvroRecord,
    /// The schema's text, for the file's footer (without it, every value keeps its bytes).
    text: Option<Arc<str>>,
    /// The IDs seen in the file, and how each one's values are read.
    ids: BTreeMap<SchemaId, Fit>,
}

/// How values written with a schema are read by the file's.
enum Fit {
    /// The file's schema itself (registered again, or under another subject).
    Same,
    /// A compatible version the file's schema holds whole (see `resolve`).
    Resolved(Resolution),
    /// Not held: the reason.
    Other(String),
}

/// Which schema supersedes which: a version another holds whole (older versions, by schema resolution)
/// is read as the newest seen, so a file begun by a value of an older version takes the newest as its
/// schema at once (rather than widening to it when its first value comes). Learned from the values,
/// shared by the profile's files.
#[derive(Debug, Default)]
pub struct Successors(Mutex<HashMap<SchemaId, SchemaId>>);

impl Successors {
    fn note(&self, older: SchemaId, newer: SchemaId) {
        self.0.lock().expect("successors").insert(older, newer);
    }

    /// The versions after `id`, each known to hold the one before, oldest first.
    fn after(&self, id: SchemaId) -> Vec<SchemaId> {
        let map = self.0.lock().expect("successors");
        let mut chain = Vec::new();
        let mut newest = id;
        // Bounded: two schemas may each hold the other.
        for _ in 0..map.len() {
            match map.get(&newest) {
                Some(next) if *next != id && !chain.contains(next) => {
                    newest = *next;
                    chain.push(newest);
                }
                _ => break,
            }
        }
        chain
    }
}

pub struct AvroColumns {
    avro: Arc<AvroValues>,
    schema: Option<FileSchema>,
    /// The file's first batch held no value with a usable schema: its `value` column is a placeholder
    /// (all null), and a value with a schema starts the next file.
    placeholder: bool,
    /// The batch's payloads (header included).
    batch: Rows,
    /// The batch's `value` column, each value decoded into it as it is pushed (from the first value
    /// that fits; the rows before are null) — unless the file's schema widened during the batch
    /// (`redecode`): then its values are only checked, and decoded again from their bytes when the batch
    /// is taken.
    value: Option<Struct>,
    redecode: bool,
    /// The room the last batch's `value` column took, made in the next one's.
    room: Room,
    /// The schema of the batches taken so far (the file's, unless it widened since).
    taken: Option<(SchemaId, AvroRecord)>,
    stats: ValueStats,
}

/// What a value is to this file.
enum Judged {
    /// `keep`: its bytes are to be kept, as its columns would not give them back (another ID, another
    /// version, or an encoding other than Avro's canonical one).
    Fits {
        id: SchemaId,
        keep: bool,
    },
    Misfit(String),
    /// Written with a schema the file's does not hold (the reason).
    OtherSchema(SchemaId, String),
}

impl AvroColumns {
    pub fn new(avro: Arc<AvroValues>) -> Self {
        Self {
            avro,
            schema: None,
            placeholder: false,
            batch: Rows::default(),
            value: None,
            redecode: false,
            room: Room::default(),
            taken: None,
            stats: ValueStats::default(),
        }
    }

    fn judge(&mut self, payload: &[u8]) -> Judged {
        let (id, body) = match split(payload) {
            Ok(framed) => framed,
            Err(e) => return Judged::Misfit(format!("value: {e}")),
        };
        // A value of the file's own schema, the commonest, once one was seen: its schema is not looked up.
        if !self.schema.as_ref().is_some_and(|file| file.id == id && file.ids.contains_key(&id)) {
            if let Err(judged) = self.admit(id) {
                return judged;
            }
        }
        let file = self.schema.as_ref().expect("the file's schema, chosen above");
        // A record without fields has only the placeholder column, which gives nothing back.
        let exact = id == file.id && file.text.is_some() && !file.fields.is_empty();
        let value = match self.redecode {
            true => None,
            false => Some(self.value.get_or_insert_with(|| {
                let mut value = Struct::new(struct_fields(&file.fields), &self.room);
                (0..self.batch.len()).for_each(|_| value.push_null());
                value
            })),
        };
        match read(file, id, body, value) {
            Ok(canonical) => Judged::Fits { id, keep: !(exact && canonical) },
            Err(why) => Judged::Misfit(why),
        }
    }

    /// Makes the file hold values of schema `id`: its schema looked up, the file's chosen by the first,
    /// a newer version that holds the file's whole made the file's; or how this value is judged instead.
    fn admit(&mut self, id: SchemaId) -> Result<(), Judged> {
        let fields = match self.avro.schemas.avro(id) {
            None => return Err(Judged::Misfit(format!("value: schema {id} was not fetched from the registry"))),
            Some(Err(why)) => return Err(Judged::Misfit(format!("value: schema {id}: {why}"))),
            Some(Ok(fields)) => fields,
        };
        if self.placeholder {
            return Err(Judged::OtherSchema(id, "this file has no schema".into()));
        }
        let file = match &mut self.schema {
            Some(file) => file,
            None => self.schema.insert(first_schema(&self.avro, id, &fields)),
        };
        if let Fit::Other(why) = file.ids.entry(id).or_insert_with(|| fit(&fields, &file.fields)) {
            let why = why.clone();
            if !Resolution::new(&file.fields, &fields).is_ok_and(|r| r.skips.is_empty()) {
                return Err(Judged::OtherSchema(id, why));
            }
            // A newer version that holds the file's schema whole: it becomes the file's schema.
            self.avro.successors.note(file.id, id);
            if !self.widen_to(id, &fields) {
                return Err(Judged::OtherSchema(id, why));
            }
        }
        Ok(())
    }

    /// Makes schema `id` (`fields`, which holds the file's schema whole) the file's schema, if every
    /// schema whose values the file holds fits it too; the rows taken so far are then widened into it
    /// (`rewrite`). Whether it did.
    fn widen_to(&mut self, id: SchemaId, fields: &AvroRecord) -> bool {
        let Some(file) = &self.schema else { return false };
        // The rows taken so far are of `taken`'s schema: they are widened from it.
        if self.taken.as_ref().is_some_and(|(_, taken)| matches!(fit(taken, fields), Fit::Other(_))) {
            return false;
        }
        let mut ids = BTreeMap::new();
        for (seen, held) in &file.ids {
            let now = match self.avro.schemas.avro(*seen) {
                Some(Ok(writer)) => fit(&writer, fields),
                _ => Fit::Other(format!("schema {seen} is no longer at hand")),
            };
            if !matches!(held, Fit::Other(_)) && matches!(now, Fit::Other(_)) {
                return false;
            }
            ids.insert(*seen, now);
        }
        let text = self.avro.schemas.text(id);
        // The batch's rows are decoded as the newer version, which would not give their bytes back.
        self.batch.keep_all();
        self.redecode = true;
        self.value = None;
        self.schema = Some(FileSchema { id, record: Avro::Record(fields.clone()), fields: fields.clone(), text, ids });
        true
    }

    /// The batch's `value` column decoded from its bytes: each value that fits decoded, a null row for
    /// every other.
    fn decode(&self, schema: &FileSchema) -> Result<Struct, ColumnsError> {
        let mut value = Struct::new(struct_fields(&schema.fields), &Room::rows(self.batch.len()));
        for i in 0..self.batch.len() {
            match self.batch.fitting(i) {
                Some(payload) => {
                    let (id, body) = split(payload).map_err(|e| ColumnsError::Decode(e.to_string()))?;
                    read(schema, id, body, Some(&mut value)).map_err(ColumnsError::Decode)?;
                }
                None => value.push_null(),
            }
        }
        Ok(value)
    }

    /// The file's `value` field: a nullable struct of its schema's fields, or the placeholder's.
    fn value_field(&self) -> Option<Field> {
        match (&self.schema, self.placeholder) {
            (Some(schema), _) => Some(typed_value_field(struct_fields(&schema.fields))),
            (None, true) => Some(typed_value_field(Fields::empty())),
            (None, false) => None,
        }
    }
}

impl ValueColumns for AvroColumns {
    fn push(&mut self, offset: i64, value: Option<&[u8]>, may_roll: bool) -> bool {
        let Some(value) = value else {
            if let Some(value) = self.value.as_mut() {
                value.push_null();
            }
            self.batch.push(None, None, false);
            return true;
        };
        let mut keep = false;
        let misfit = match self.judge(value) {
            Judged::Fits { id, keep: kept } => {
                self.stats.schema_ids.insert(id.0);
                keep = kept;
                None
            }
            // Never the first value of a file: the file's schema is one that holds it (see `first_schema`).
            Judged::OtherSchema(..) if may_roll => return false,
            Judged::OtherSchema(id, why) => Some(format!(
                "value: written with schema {id}, which this file's does not hold ({why}; a re-written file is one \
                 file)"
            )),
            Judged::Misfit(why) => Some(why),
        };
        if let Some(why) = &misfit {
            self.stats.misfit(offset, why);
            if let Some(value) = self.value.as_mut() {
                value.push_null();
            }
        }
        self.batch.push(Some(value), misfit, keep);
        true
    }

    fn refuses(&self, value: Option<&[u8]>) -> bool {
        let usable = || matches!(self.avro.schemas.avro(split(value?).ok()?.0), Some(Ok(_))).then_some(());
        self.placeholder && usable().is_some()
    }

    fn fields(&self) -> Option<[Field; 3]> {
        self.value_field().map(typed_fields)
    }

    fn take(&mut self, _offsets: &[i64]) -> Result<[ArrayRef; 3], ColumnsError> {
        self.placeholder |= self.schema.is_none();
        let rows = self.batch.len();
        let decoded = self.value.take().filter(|_| !self.redecode);
        self.redecode = false;
        let value = match &self.schema {
            Some(schema) if !schema.fields.is_empty() => {
                let value = match decoded {
                    Some(value) => value,
                    None => self.decode(schema)?,
                };
                if value.rows() != rows {
                    return Err(ColumnsError::RowCount { decoded: value.rows(), records: rows });
                }
                self.room = value.room();
                Arc::new(value.finish()?)
            }
            _ => placeholder_column(rows),
        };
        let [raw, error] = self.batch.take_raw_and_error(self.avro.keep_raw);
        self.taken = self.schema.as_ref().map(|s| (s.id, s.fields.clone()));
        self.stats.value_schema =
            self.schema.as_ref().and_then(|s| Some(FooterSchema::Avro { id: s.id.0, text: s.text.clone()? }));
        Ok([value, raw, error])
    }

    /// The batches taken were of another schema than the file's now.
    fn widened(&self) -> bool {
        matches!((&self.taken, &self.schema), (Some((taken, _)), Some(now)) if *taken != now.id)
    }

    /// Rows taken under an older version are widened into the file's; those whose bytes were to be
    /// given back from their columns keep them now (encoded under the older version, which gives them
    /// back exactly), as the newer version's columns would not.
    fn rewrite(&self, [value, raw, error]: [ArrayRef; 3]) -> Result<[ArrayRef; 3], ColumnsError> {
        let (Some((id, taken)), Some(now)) = (&self.taken, &self.schema) else { return Ok([value, raw, error]) };
        if *id == now.id {
            return Ok([value, raw, error]);
        }
        let typed = value.as_struct();
        let header = frame(*id, &[]);
        let raw = kept_bytes(typed, raw.as_binary::<i32>(), |i, out| {
            out.extend_from_slice(&header);
            encode_record(taken, typed, i, out)
        })
        .map_err(ColumnsError::Decode)?;
        let widened = widen_record(typed, taken, &now.fields).map_err(ColumnsError::Decode)?;
        Ok([Arc::new(widened), raw, error])
    }

    fn stats(&self) -> &ValueStats {
        &self.stats
    }

    fn allocated(&self) -> usize {
        self.value.as_ref().map_or(0, Struct::allocated)
    }
}

/// Reads a value of schema `id` (which `file` holds) to its last byte into `value` (none: it is only
/// checked); whether its bytes are in the canonical encoding, or why it does not decode (then `value`
/// has no row of it).
fn read(file: &FileSchema, id: SchemaId, body: &[u8], mut value: Option<&mut Struct>) -> Result<bool, String> {
    let rows = value.as_ref().map(|v| v.rows());
    let mut read = decode(file, id, body, value.as_deref_mut(), true);
    if let (Ok(_), Some(v), Some(rows)) = (&read, value.as_deref_mut(), rows) {
        if v.validate().is_err() {
            // A string that is not UTF-8: read again, each string checked as it comes, to say which.
            v.truncate(rows);
            read = decode(file, id, body, Some(v), false)
                .and(Err(format!("value: does not decode by schema {id}: a string that is not UTF-8")));
        }
    }
    if let (Err(_), Some(value), Some(rows)) = (&read, value, rows) {
        value.truncate(rows);
    }
    read
}

/// Reads a value by the file's schema (appending it to `value` if given; its strings `unchecked`, see
/// `Reader::unchecked`): whether its bytes are in Avro's canonical encoding, or why it does not decode.
fn decode(
    file: &FileSchema,
    id: SchemaId,
    body: &[u8],
    value: Option<&mut Struct>,
    unchecked: bool,
) -> Result<bool, String> {
    let reader = |body| if unchecked { Reader::unchecked(body) } else { Reader::new(body) };
    let mut r = reader(body);
    let read: Result<(), DecodeError> = match (&file.ids[&id], value) {
        (Fit::Same, Some(value)) => append_record(&file.fields, &mut r, value),
        (Fit::Same, None) => check(&file.record, &mut r),
        (Fit::Resolved(resolution), value) => resolution.check(&mut r).and_then(|()| match value {
            Some(value) => resolution.append(&mut reader(body), value),
            None => Ok(()),
        }),
        (Fit::Other(_), _) => unreachable!("a schema the file does not hold is not read"),
    };
    match read {
        Ok(()) if r.at_end() => Ok(r.canonical()),
        Ok(()) => Err(format!("value: bytes left after the record of schema {id}")),
        Err(why) => Err(format!("value: does not decode by schema {id}: {why}")),
    }
}

/// The schema of a file whose first value names `id`: the newest version known to hold it (versions
/// chain by each holding the one before, which does not make the last hold the first).
fn first_schema(avro: &AvroValues, id: SchemaId, fields: &AvroRecord) -> FileSchema {
    let newest = avro.successors.after(id).into_iter().rev().find_map(|newer| match avro.schemas.avro(newer) {
        Some(Ok(schema)) if !matches!(fit(fields, &schema), Fit::Other(_)) => Some((newer, schema)),
        _ => None,
    });
    let (id, fields) = newest.unwrap_or_else(|| (id, fields.clone()));
    let text = avro.schemas.text(id);
    FileSchema { id, record: Avro::Record(fields.clone()), fields, text, ids: BTreeMap::new() }
}

/// How the file's schema (`reader`) holds values written with `writer`.
fn fit(writer: &AvroRecord, reader: &AvroRecord) -> Fit {
    if writer == reader {
        return Fit::Same;
    }
    match Resolution::new(writer, reader) {
        Ok(resolution) if resolution.skips.is_empty() => Fit::Resolved(resolution),
        Ok(resolution) => Fit::Other(format!("it has fields the file's lacks: {}", resolution.skips.join(", "))),
        Err(why) => Fit::Other(why),
    }
}

#[cfg(test)]
mod tests;
