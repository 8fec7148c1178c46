"""What the test producers share: a Schema Registry client that does not hang (every request times out
after 15 s and is tried again, three times in all: Apicurio Registry 3.3.3, in memory, was seen leaving
a request unanswered while other clients used it; confluent-kafka's client waits forever by default and
retries only on HTTP errors), and the end of a run (every record delivered, each printed)."""

import json
import sys
import time

from confluent_kafka import SerializingProducer
from confluent_kafka.serialization import MessageField, SerializationContext

from confluent_kafka.schema_registry import SchemaRegistryClient
# The HTTP library the client uses (httpx, or its fork httpx2), as confluent-kafka 2.16.1 imports it.
from confluent_kafka.schema_registry.common._httpx_compat import httpx

TIMEOUT_S = 15
ATTEMPTS = 3


class PatientClient(SchemaRegistryClient):
    def __init__(self, url):
        super().__init__({"url": url, "timeout": TIMEOUT_S})

    def _patiently(self, name, *args, **kwargs):
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return getattr(super(), name)(*args, **kwargs)
            except httpx.TimeoutException:
                print(f"the registry did not answer {name} within {TIMEOUT_S} s (attempt {attempt})",
                      file=sys.stderr, flush=True)
                if attempt == ATTEMPTS:
                    raise
                time.sleep(1)

    def register_schema(self, *args, **kwargs):
        return self._patiently("register_schema", *args, **kwargs)

    def register_schema_full_response(self, *args, **kwargs):
        return self._patiently("register_schema_full_response", *args, **kwargs)

    def set_compatibility(self, *args, **kwargs):
        return self._patiently("set_compatibility", *args, **kwargs)

    def lookup_schema(self, *args, **kwargs):
        return self._patiently("lookup_schema", *args, **kwargs)


def flush_and_print(producer, delivered):
    """Waits for every record to be delivered, then prints what was delivered, a JSON line each."""
    if producer.flush(30) != 0:
        raise SystemExit("not every record was delivered within 30 s")
    for line in delivered:
        print(json.dumps(line))


def produce_two_versions(serializer, value):
    """Produces COUNT records to TOPIC (from argv: BROKERS REGISTRY_URL TOPIC COUNT), the first half of
    version 1 and the second of version 2: `serializer(client, version)` makes a version's serializer,
    `value(i, version)` record i's value and the line printed for it. Prints each delivered record."""
    brokers, registry, topic, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    client = PatientClient(registry)
    producer = SerializingProducer({"bootstrap.servers": brokers})
    delivered = []

    def on_delivery(err, msg, line):
        if err is not None:
            raise SystemExit(f"delivery failed: {err}")
        delivered.append({"partition": msg.partition(), "offset": msg.offset(), **line})

    for version, numbers in ((1, range(count // 2)), (2, range(count // 2, count))):
        serialize = serializer(client, version)
        for i in numbers:
            o, line = value(i, version)
            framed = serialize(o, SerializationContext(topic, MessageField.VALUE))
            producer.produce(topic, value=framed, on_delivery=lambda e, m, line=line: on_delivery(e, m, line))
            producer.poll(0)
    flush_and_print(producer, delivered)
