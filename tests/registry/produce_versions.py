"""Produces a topic whose value schema evolves the way a subject's does in production: confluent-kafka's
AvroSerializer registers each version under the topic's subject (`<topic>-value`) as it is first used.
The subject is BACKWARD compatible (Confluent's default; the registry checks it): v1; v2 adds a field with
a default; v3 widens a field from int to long and adds another with a default. Then an incompatible v4
(a field's type changed), which the registry refuses until the subject's compatibility is set to NONE.
PER_VERSION records of each. Prints, per delivered record, one JSON line of its offset, version and
values.

Usage: produce_versions.py BROKERS REGISTRY_URL TOPIC PER_VERSION
"""

import json
import sys
import time

from confluent_kafka import SerializingProducer
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from common import PatientClient, flush_and_print


def schema(*fields):
    return json.dumps({"type": "record", "name": "Reading", "namespace": "ksa.test", "fields": list(fields)})


ID = {"name": "id", "type": "long"}
NAME = {"name": "name", "type": "string"}
SCORE = {"name": "score", "type": "double", "default": 0.0}
UNIT = {"name": "unit", "type": "string", "default": "m"}
VERSIONS = {
    1: schema(ID, NAME, {"name": "count", "type": "int"}),
    2: schema(ID, NAME, {"name": "count", "type": "int"}, SCORE),
    3: schema(ID, NAME, {"name": "count", "type": "long"}, SCORE, UNIT),
    4: schema({"name": "id", "type": "string"}, NAME),
}


def value(version, i):
    v = {"id": i if version < 4 else f"id-{i}", "name": f"r{i}"}
    if version < 4:
        v["count"] = i % 97 if version < 3 else (1 << 33) + i
    if version >= 2 and version < 4:
        v["score"] = i / 4
    if version == 3:
        v["unit"] = "kg"
    return v


def main():
    brokers, registry, topic, per_version = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    client = PatientClient(registry)
    subject = f"{topic}-value"
    started = time.monotonic()

    def step(what):  # on stderr: where a producer that does not finish got to
        print(f"{time.monotonic() - started:.1f}s: {what}", file=sys.stderr, flush=True)

    step("setting the subject's compatibility to BACKWARD")
    client.set_compatibility(subject_name=subject, level="BACKWARD")
    producer = SerializingProducer({"bootstrap.servers": brokers})
    delivered = []

    def on_delivery(err, msg, line):
        if err is not None:
            raise SystemExit(f"delivery failed: {err}")
        delivered.append({"offset": msg.offset(), **line})

    for version, text in VERSIONS.items():
        step(f"version {version}")
        if version == 4:
            try:
                client.register_schema(subject, Schema(text, "AVRO"))
            except SchemaRegistryError as e:
                assert e.http_status_code == 409, e
            else:
                raise SystemExit("the registry took an incompatible v4 under BACKWARD")
            client.set_compatibility(subject_name=subject, level="NONE")
        serializer = AvroSerializer(client, text)
        context = SerializationContext(topic, MessageField.VALUE)
        for i in range(per_version * (version - 1), per_version * version):
            v = value(version, i)
            producer.produce(topic, value=serializer(v, context),
                             on_delivery=lambda e, m, line={"version": version, **v}: on_delivery(e, m, line))
            producer.poll(0)
    step("flushing")
    flush_and_print(producer, delivered)


if __name__ == "__main__":
    main()
