"""Produces records whose keys are Avro, framed by confluent-kafka's AvroSerializer for keys (it registers
the key schema under TOPIC-key), and whose values are Avro of produce_avro.py's schema (under
TOPIC-value). Every tenth record has no key. Prints, per delivered record, one JSON line of its
partition, offset, key fields and value id.

Usage: produce_keys.py BROKERS REGISTRY_URL TOPIC COUNT
"""

import json
import sys

from confluent_kafka import SerializingProducer
from confluent_kafka.schema_registry.avro import AvroSerializer

from common import PatientClient, flush_and_print
from produce_avro import SCHEMA, reading

KEY_SCHEMA = json.dumps({
    "type": "record", "name": "OrderKey", "namespace": "ksa.test", "fields": [
        {"name": "customer", "type": "string"},
        {"name": "region", "type": {"type": "enum", "name": "Region", "symbols": ["EU", "US", "APAC"]}},
        {"name": "shard", "type": "int"},
    ]})


def main():
    brokers, registry, topic, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    client = PatientClient(registry)
    producer = SerializingProducer({
        "bootstrap.servers": brokers,
        "key.serializer": AvroSerializer(client, KEY_SCHEMA),
        "value.serializer": AvroSerializer(client, SCHEMA),
    })
    delivered = []

    def on_delivery(err, msg, line):
        if err is not None:
            raise SystemExit(f"delivery failed: {err}")
        delivered.append({"partition": msg.partition(), "offset": msg.offset(), **line})

    for i in range(count):
        key = None if i % 10 == 0 else {"customer": f"c-{i % 17}", "region": ["EU", "US", "APAC"][i % 3], "shard": i % 5}
        line = {"id": i, "shard": None if key is None else key["shard"], "region": None if key is None else key["region"]}
        producer.produce(topic, key=key, value=reading(i), on_delivery=lambda e, m, line=line: on_delivery(e, m, line))
        producer.poll(0)
    flush_and_print(producer, delivered)


if __name__ == "__main__":
    main()
