//! Protobuf values (`--value-format protobuf`): a registry's schema (a `.proto` file as text, or as a
//! base64 `FileDescriptorProto`, which is how confluent-kafka's Python serializer registers it) compiled
//! by protox into prost-reflect descriptors (`schema`), each message then as a [`ProtoMessage`] tree that
//! says exactly how a value is encoded and which Arrow column each field becomes. The wire format's
//! message indexes pick the message a value is (`indexes`); its bytes are decoded straight into Arrow
//! builders (`decode`), and a file holds the values of the versions its message holds (`fit`, `widen`).

pub mod arrow;
pub(crate) mod columns;
pub mod decode;
pub mod fit;
pub mod indexes;
pub mod reencode;
pub mod schema;
pub mod widen;

use std::sync::Arc;

/// A message's fields, in the order they are declared (the order of its struct's columns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtoMessage {
    /// The message's full name (`package.Outer.Inner`).
    pub name: String,
    pub fields: Arc<[ProtoField]>,
    /// How many oneofs (not counting proto3's `optional`, a oneof of one) the fields belong to.
    pub oneofs: usize,
    /// `(number, index in fields)`, by number: how a field on the wire finds its column.
    by_number: Arc<[(u32, usize)]>,
    /// Whether reading a value tells whether its bytes are what `reencode` writes of its row
    /// (`decode::Scratch::canonical`): its fields are declared in the order of their numbers (the order
    /// encoders write them in), and every enum field without presence has a number 0 (what it reads
    /// as when absent, which encoders leave out; proto3 requires one).
    pub reads_canonical: bool,
    /// Each field's tag as encoders write it and how a value with that tag is read
    /// (`decode::Step`), in the order of `fields`.
    pub(crate) steps: Arc<[decode::Step]>,
}

impl ProtoMessage {
    pub fn new(name: String, fields: Vec<ProtoField>) -> Self {
        let mut by_number: Vec<(u32, usize)> = fields.iter().enumerate().map(|(i, f)| (f.number, i)).collect();
        by_number.sort_unstable();
        let oneofs = fields.iter().filter_map(|f| f.oneof).max().map_or(0, |last| last + 1);
        let zero = |f: &ProtoField| match (&f.kind, &f.ty) {
            (Kind::Single, Proto::Enum(e)) => e.symbol(0).is_some(),
            _ => true,
        };
        let reads_canonical = fields.windows(2).all(|pair| pair[0].number < pair[1].number) && fields.iter().all(zero);
        let steps = fields.iter().map(decode::Step::new).collect();
        Self { name, fields: fields.into(), oneofs, by_number: by_number.into(), reads_canonical, steps }
    }

    /// The index of the field numbered `number`, if the message has one.
    #[inline]
    pub fn index(&self, number: u32) -> Option<usize> {
        self.by_number.binary_search_by_key(&number, |(n, _)| *n).ok().map(|i| self.by_number[i].1)
    }

    /// The field numbered `number`.
    pub fn field(&self, number: u32) -> Option<&ProtoField> {
        self.index(number).map(|i| &self.fields[i])
    }

    /// The fields' indexes by number: the order encoders write them in.
    pub fn by_number(&self) -> impl Iterator<Item = usize> + '_ {
        self.by_number.iter().map(|(_, i)| *i)
    }
}

/// A field of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtoField {
    pub name: String,
    pub number: u32,
    pub ty: Proto,
    pub kind: Kind,
    /// The oneof it is a member of (its index in the message's), if any.
    pub oneof: Option<usize>,
    /// A repeated scalar written packed (one length-delimited run), as proto3 writes them unless told
    /// otherwise; readers take either form.
    pub packed: bool,
}

impl ProtoField {
    /// Whether its items are written in one packed run (a repeated scalar's, unless told otherwise).
    pub fn packs(&self) -> bool {
        self.packed && self.kind == Kind::Repeated && decode::wire_type(&self.ty) != decode::LEN
    }
}

/// How many values a field holds, and what its absence means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// One value; absent means the type's default (proto3's implicit presence).
    Single,
    /// One value or none (a message, a oneof's member, `optional`, proto2): absent is null.
    Optional,
    /// Any number of values, packed or not: a list.
    Repeated,
    /// `map<key, ty>`: a map of this key type.
    Map(Proto),
}

/// A field's type, as the wire encodes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proto {
    Double,
    Float,
    Int32,
    Int64,
    UInt32,
    UInt64,
    SInt32,
    SInt64,
    Fixed32,
    Fixed64,
    SFixed32,
    SFixed64,
    Bool,
    String,
    Bytes,
    /// The symbols by number (sorted by number): the column holds the symbol.
    Enum(Arc<ProtoEnum>),
    Message(ProtoMessage),
    /// `google.protobuf.Timestamp`: a timestamp in microseconds (its nanoseconds truncated).
    Timestamp,
    /// `google.protobuf.Duration`: a duration in microseconds.
    Duration,
    /// `google.protobuf.Int32Value` and the other wrappers: the wrapped value, null when absent.
    Wrapper(Box<Proto>),
    /// A message that contains itself (Arrow has no recursive type) or has no fields (Parquet has no
    /// empty struct): its encoded bytes.
    Opaque,
}

/// An enum's symbols.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtoEnum {
    pub name: String,
    /// `(number, symbol)`, by number (a number given two symbols keeps the first).
    pub values: Vec<(i32, String)>,
}

impl ProtoEnum {
    /// The symbol of `number`, if the enum has one.
    #[inline]
    pub fn symbol(&self, number: i32) -> Option<&str> {
        self.values.binary_search_by_key(&number, |(n, _)| *n).ok().map(|i| self.values[i].1.as_str())
    }

    /// The symbol of an absent value: number 0's (proto3's first), else the lowest number's.
    pub fn default_symbol(&self) -> &str {
        self.symbol(0).unwrap_or_else(|| self.values.first().map_or("", |(_, s)| s.as_str()))
    }
}

#[cfg(test)]
pub(crate) mod tests;
