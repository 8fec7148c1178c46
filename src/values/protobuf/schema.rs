//! A registry's Protobuf schema compiled into [`ProtoMessage`] trees, one per message the file declares
//! (nested ones too), found by the message indexes a value carries. The schema is `.proto` text or a
//! base64 `FileDescriptorProto`; the files it imports are the references' (by import name) or the
//! well-known types protox carries (`google/protobuf/*.proto`).

use std::collections::HashMap;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use prost_reflect::{DescriptorPool, FieldDescriptor, Kind as ReflectKind, MessageDescriptor};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

use super::{Kind, Proto, ProtoEnum, ProtoField, ProtoMessage};
use crate::values::SchemaError;

/// The name the schema's own file is compiled under when its text does not name it.
const MAIN_FILE: &str = "registry-schema.proto";

/// A compiled schema: each message it declares, by its message indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtoFile {
    messages: Vec<(Vec<i32>, Result<ProtoMessage, String>)>,
    /// Every file compiled (the schema's, its references', the well-known types it imports) as a base64
    /// `FileDescriptorSet`: what a Parquet footer keeps so its values can be encoded back without the
    /// registry ([`footer_message`]).
    pub descriptors: Arc<str>,
}

impl ProtoFile {
    /// The message at `indexes` (the first top-level message is `[0]`), or why its values cannot be
    /// decoded.
    pub fn message(&self, indexes: &[i32]) -> Result<&ProtoMessage, String> {
        match self.messages.iter().find(|(path, _)| path == indexes) {
            Some((_, Ok(message))) => Ok(message),
            Some((_, Err(why))) => Err(why.clone()),
            None => Err(format!("the schema has no message at index {indexes:?}")),
        }
    }
}

/// The files a schema imports, by import name.
struct References(HashMap<String, File>);

impl FileResolver for References {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        self.0.get(name).cloned().ok_or_else(|| protox::Error::file_not_found(name))
    }
}

/// A schema's text as a file: base64 (no `;`, which every `.proto` text has) is a `FileDescriptorProto`.
fn file(name: &str, text: &str) -> Result<File, SchemaError> {
    let unsupported = |why: String| SchemaError::Unsupported { path: name.into(), why };
    if !text.contains(';') {
        if let Ok(bytes) = B64.decode(text.trim()) {
            let mut file = File::decode_file_descriptor_proto(bytes.as_slice())
                .map_err(|e| unsupported(format!("base64, but not a FileDescriptorProto: {e}")))?;
            if file.name().is_empty() {
                let mut proto = file.file_descriptor_proto().clone();
                proto.name = Some(name.into());
                file = File::from_file_descriptor_proto(proto);
            }
            return Ok(file);
        }
    }
    File::from_source(name, text).map_err(|e| unsupported(format!("{e}")))
}

/// Compiles a schema (`text`) and the schemas it refers to (`references`: import name and text).
pub fn compile(text: &str, references: &[(String, String)]) -> Result<ProtoFile, SchemaError> {
    let main = file(MAIN_FILE, text)?;
    let main_name = main.name().to_string();
    let mut files = HashMap::from([(main_name.clone(), main)]);
    for (name, text) in references {
        files.insert(name.clone(), file(name, text)?);
    }
    let mut resolver = ChainFileResolver::new();
    resolver.add(References(files));
    resolver.add(GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler
        .open_file(&main_name)
        .map_err(|e| SchemaError::Unsupported { path: main_name.clone(), why: format!("{e}") })?;
    let pool = compiler.descriptor_pool();
    // The footer's copy: every file compiled, without their comments and source positions.
    let descriptors =
        B64.encode(compiler.include_imports(true).include_source_info(false).encode_file_descriptor_set());
    Ok(ProtoFile { messages: messages(&pool, &main_name), descriptors: descriptors.into() })
}

/// The message named `name` (its full name) of `descriptors` (a [`ProtoFile::descriptors`]), as the
/// values were decoded by it.
pub fn footer_message(descriptors: &str, name: &str) -> Result<ProtoMessage, String> {
    let bytes = B64.decode(descriptors.trim()).map_err(|e| format!("not base64: {e}"))?;
    let pool = DescriptorPool::decode(bytes.as_slice()).map_err(|e| format!("not a FileDescriptorSet: {e}"))?;
    let descriptor = pool.get_message_by_name(name).ok_or_else(|| format!("no message {name}"))?;
    message(&descriptor, &mut Vec::new())
}

/// Every message of the file `name` in `pool`, with its indexes.
fn messages(pool: &DescriptorPool, name: &str) -> Vec<(Vec<i32>, Result<ProtoMessage, String>)> {
    let mut out = Vec::new();
    let mut todo: Vec<(Vec<i32>, MessageDescriptor)> = match pool.get_file_by_name(name) {
        Some(file) => file.messages().enumerate().map(|(i, m)| (vec![i as i32], m)).collect(),
        None => Vec::new(),
    };
    while let Some((path, descriptor)) = todo.pop() {
        for (i, child) in descriptor.child_messages().enumerate() {
            let mut child_path = path.clone();
            child_path.push(i as i32);
            todo.push((child_path, child));
        }
        out.push((path, message(&descriptor, &mut Vec::new())));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The tree of `descriptor`; `within`: the messages it is nested in (a message within itself is opaque).
fn message(descriptor: &MessageDescriptor, within: &mut Vec<String>) -> Result<ProtoMessage, String> {
    within.push(descriptor.full_name().to_string());
    let oneofs: Vec<String> = descriptor.oneofs().filter(|o| !o.is_synthetic()).map(|o| o.name().to_string()).collect();
    let fields: Result<Vec<ProtoField>, String> = descriptor.fields().map(|f| field(&f, &oneofs, within)).collect();
    within.pop();
    Ok(ProtoMessage::new(descriptor.full_name().to_string(), fields?))
}

fn field(f: &FieldDescriptor, oneofs: &[String], within: &mut Vec<String>) -> Result<ProtoField, String> {
    if f.is_group() {
        return Err(format!("{}: groups (proto2) are not supported", f.full_name()));
    }
    let (ty, kind) = if f.is_map() {
        let ReflectKind::Message(entry) = f.kind() else { unreachable!("a map field is of its entry message") };
        let key = of(&entry.map_entry_key_field().kind(), within)?;
        (of(&entry.map_entry_value_field().kind(), within)?, Kind::Map(key))
    } else if f.is_list() {
        (of(&f.kind(), within)?, Kind::Repeated)
    } else {
        let kind = if f.supports_presence() { Kind::Optional } else { Kind::Single };
        (of(&f.kind(), within)?, kind)
    };
    let oneof = f.containing_oneof().and_then(|o| oneofs.iter().position(|name| name == o.name()));
    // prost-reflect's `is_packed` misses a `[packed = false]` protox parsed from text: the option decides.
    let packed = f.field_descriptor_proto().options.as_ref().and_then(|o| o.packed).unwrap_or(f.is_packed());
    Ok(ProtoField { name: f.name().to_string(), number: f.number(), ty, kind, oneof, packed })
}

fn of(kind: &ReflectKind, within: &mut Vec<String>) -> Result<Proto, String> {
    Ok(match kind {
        ReflectKind::Double => Proto::Double,
        ReflectKind::Float => Proto::Float,
        ReflectKind::Int32 => Proto::Int32,
        ReflectKind::Int64 => Proto::Int64,
        ReflectKind::Uint32 => Proto::UInt32,
        ReflectKind::Uint64 => Proto::UInt64,
        ReflectKind::Sint32 => Proto::SInt32,
        ReflectKind::Sint64 => Proto::SInt64,
        ReflectKind::Fixed32 => Proto::Fixed32,
        ReflectKind::Fixed64 => Proto::Fixed64,
        ReflectKind::Sfixed32 => Proto::SFixed32,
        ReflectKind::Sfixed64 => Proto::SFixed64,
        ReflectKind::Bool => Proto::Bool,
        ReflectKind::String => Proto::String,
        ReflectKind::Bytes => Proto::Bytes,
        ReflectKind::Enum(e) => {
            let mut values: Vec<(i32, String)> = e.values().map(|v| (v.number(), v.name().to_string())).collect();
            values.sort_by_key(|(n, _)| *n);
            values.dedup_by_key(|(n, _)| *n);
            Proto::Enum(Arc::new(ProtoEnum { name: e.full_name().to_string(), values }))
        }
        ReflectKind::Message(m) => match well_known(m.full_name()) {
            Some(known) => known,
            None if within.iter().any(|w| w == m.full_name()) || m.fields().len() == 0 => Proto::Opaque,
            None => Proto::Message(message(m, within)?),
        },
    })
}

/// The well-known types that are a column of their own.
fn well_known(name: &str) -> Option<Proto> {
    let wrapped = |p| Some(Proto::Wrapper(Box::new(p)));
    match name {
        "google.protobuf.Timestamp" => Some(Proto::Timestamp),
        "google.protobuf.Duration" => Some(Proto::Duration),
        "google.protobuf.DoubleValue" => wrapped(Proto::Double),
        "google.protobuf.FloatValue" => wrapped(Proto::Float),
        "google.protobuf.Int64Value" => wrapped(Proto::Int64),
        "google.protobuf.UInt64Value" => wrapped(Proto::UInt64),
        "google.protobuf.Int32Value" => wrapped(Proto::Int32),
        "google.protobuf.UInt32Value" => wrapped(Proto::UInt32),
        "google.protobuf.BoolValue" => wrapped(Proto::Bool),
        "google.protobuf.StringValue" => wrapped(Proto::String),
        "google.protobuf.BytesValue" => wrapped(Proto::Bytes),
        _ => None,
    }
}
