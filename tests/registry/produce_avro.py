"""Produces Avro records the way most Kafka producers do: confluent-kafka's AvroSerializer, which registers
the schema with the Schema Registry and frames each value (magic byte 0, the schema's 4-byte ID, the Avro
binary). Prints, per delivered record, one JSON line of its partition, offset and the values it holds,
for the test to compare with what the archiver's decoder reads.

Usage: produce_avro.py BROKERS REGISTRY_URL TOPIC COUNT
"""

import datetime
import decimal
import json
import sys
import uuid

from confluent_kafka import SerializingProducer
from confluent_kafka.schema_registry.avro import AvroSerializer

from common import PatientClient, flush_and_print

SCHEMA = json.dumps({
    "type": "record", "name": "Reading", "namespace": "ksa.test", "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "level", "type": {"type": "enum", "name": "Level", "symbols": ["LOW", "MID", "HIGH"]}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "double"}},
        {"name": "sensor", "type": {"type": "record", "name": "Sensor", "fields": [
            {"name": "model", "type": "string"}, {"name": "rev", "type": ["null", "int"], "default": None}]}},
        {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
        {"name": "ratio", "type": "float"},
        {"name": "ok", "type": "boolean"},
    ]})

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def reading(i):
    cents = (i * 7919) % 10_000_000 - 5_000_000  # negative ones too
    at = EPOCH + datetime.timedelta(milliseconds=1_767_261_600_000 + i * 1_000)
    return {
        "id": i,
        "name": f"reading-{i}" + "é" * (i % 3),
        "level": ["LOW", "MID", "HIGH"][i % 3],
        "note": None if i % 4 == 0 else f"note {i}",
        "amount": decimal.Decimal(cents).scaleb(-2),
        "at": at,
        "day": (at - datetime.timedelta(days=i)).date(),
        "uid": uuid.UUID(int=i * 0x9E3779B97F4A7C15 % (1 << 128)),
        "tags": [f"t{k}" for k in range(i % 5)],
        "attrs": {f"k{k}": k * 0.5 + i for k in range(i % 3)},
        "sensor": {"model": f"m-{i % 7}", "rev": None if i % 5 == 0 else i % 11},
        "digest": (i * 2654435761 % (1 << 32)).to_bytes(4, "big"),
        "ratio": i / 8,
        "ok": i % 2 == 0,
    }


def expected(r):
    return {
        "id": r["id"], "name": r["name"], "level": r["level"], "note": r["note"],
        "amount_unscaled": int(r["amount"].scaleb(2)),
        "at_ms": (r["at"] - EPOCH) // datetime.timedelta(milliseconds=1),
        "day": (r["day"] - EPOCH.date()).days, "uid": str(r["uid"]), "tags": r["tags"], "attrs": r["attrs"],
        "model": r["sensor"]["model"], "rev": r["sensor"]["rev"], "digest": r["digest"].hex(),
        "ratio": r["ratio"], "ok": r["ok"],
    }


def main():
    brokers, registry, topic, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    serializer = AvroSerializer(PatientClient(registry), SCHEMA)
    producer = SerializingProducer({"bootstrap.servers": brokers, "value.serializer": serializer})
    delivered = []

    def on_delivery(err, msg, record):
        if err is not None:
            raise SystemExit(f"delivery failed: {err}")
        delivered.append({"partition": msg.partition(), "offset": msg.offset(), **expected(record)})

    for i in range(count):
        record = reading(i)
        producer.produce(topic, value=record, on_delivery=lambda e, m, r=record: on_delivery(e, m, r))
        producer.poll(0)
    flush_and_print(producer, delivered)


if __name__ == "__main__":
    main()
