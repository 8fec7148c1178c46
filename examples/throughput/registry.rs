//! The bench's typed values: the orders' schema registered in the test Schema Registry (Apicurio's
//! Confluent-compatible API) under the topic's value subject, and each record's value framed with its
//! ID, as Confluent's Avro or Protobuf serializer writes it.

use std::io::{Read, Write};

use kafka_s3_archiver::values::wire::SchemaId;

use crate::{avro_order, env, proto_order};

/// Which of the registry's formats the orders are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Typed {
    Avro,
    Protobuf,
}

impl Typed {
    /// As `--value-format` and `KSA_BENCH_VALUES` name it.
    pub fn name(self) -> &'static str {
        match self {
            Typed::Avro => "avro",
            Typed::Protobuf => "protobuf",
        }
    }

    /// Order `i` as its serializer writes it after the schema ID (a Protobuf one's message indexes
    /// first: a single 0, the file's first message).
    pub fn order(self, i: usize) -> Vec<u8> {
        match self {
            Typed::Avro => avro_order::order(i),
            Typed::Protobuf => [&[0u8][..], &proto_order::proto_order(i)].concat(),
        }
    }

    fn schema(self) -> serde_json::Value {
        match self {
            Typed::Avro => serde_json::json!({ "schema": avro_order::SCHEMA }),
            Typed::Protobuf => serde_json::json!({ "schemaType": "PROTOBUF", "schema": proto_order::PROTO }),
        }
    }
}

/// Registers the orders' schema in `typed` under `subject`: its ID.
pub fn register(typed: Typed, subject: &str) -> SchemaId {
    let url = env("KSA_TEST_SCHEMA_REGISTRY");
    let rest = url.strip_prefix("http://").expect("an http:// registry");
    let (addr, base) = rest.split_once('/').expect("a path after the address");
    let body = typed.schema().to_string();
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to the Schema Registry");
    write!(
        stream,
        "POST /{base}/subjects/{subject}/versions HTTP/1.0\r\nHost: {addr}\r\n\
         Content-Type: application/vnd.schemaregistry.v1+json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (_, answer) = response.split_once("\r\n\r\n").unwrap_or_else(|| panic!("registering: {response}"));
    let id = serde_json::from_str::<serde_json::Value>(answer).ok().and_then(|a| a["id"].as_u64());
    SchemaId(id.unwrap_or_else(|| panic!("registering the bench's schema: {response}")) as u32)
}
