//! The bench's Avro values: their schema registered in the test Schema Registry (Apicurio's
//! Confluent-compatible API) under the topic's value subject, and each record's value framed with its
//! ID, as Confluent's Avro serializer writes it.

use std::io::{Read, Write};

use kafka_s3_archiver::values::wire::SchemaId;

use crate::avro_order::SCHEMA;
use crate::env;

/// Registers the orders' schema under `subject`: its ID.
pub fn register(subject: &str) -> SchemaId {
    let url = env("KSA_TEST_SCHEMA_REGISTRY");
    let rest = url.strip_prefix("http://").expect("an http:// registry");
    let (addr, base) = rest.split_once('/').expect("a path after the address");
    let body = serde_json::json!({ "schema": SCHEMA }).to_string();
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
