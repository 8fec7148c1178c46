"""The bench's records as a user's application writes them: Python confluent-kafka with its default
batching (no settings beyond the brokers), keys, 0-3 small binary headers (a trace ID, a schema name,
a route), a few null keys and null values.

Usage: produce.py BROKERS TOPIC RECORDS VALUE_BYTES compressible|random|mixed
(mixed: compressible values of a twentieth to twice VALUE_BYTES, and one record in 991 a random 512 KiB value.)
Prints one JSON line: the last offset of each partition, the key and value bytes written, the seconds taken.
"""

import json
import os
import sys
import time

from confluent_kafka import Producer


def value(i, size, kind):
    if i % 211 == 0:
        return None
    if kind == "random":
        return os.urandom(size)
    if kind == "mixed":
        if i % 991 == 0:
            return os.urandom(512 << 10)
        size = size // 20 + (i * 7919) % (2 * size - size // 20 + 1)
    text = b'{"order":%d,"amount":%d,"note":"' % (i, (i * 17) % 1000)
    return text + b"x" * max(0, size - len(text) - 2) + b'"}'


def headers(i):
    # 0-3 headers, as tracing, schema and routing add them.
    all_three = [
        ("traceparent", os.urandom(16)),
        ("schema", b"orders.v3"),
        ("route", b"eu-west-%d" % (i % 3)),
    ]
    return all_three[: i % 4]


def main():
    brokers, topic, records, size, kind = sys.argv[1:6]
    records, size = int(records), int(size)
    last, payload = {}, 0
    failed = []

    def delivered(err, msg):
        if err is not None:
            failed.append(str(err))
        else:
            p = msg.partition()
            last[p] = max(last.get(p, -1), msg.offset())

    producer = Producer({"bootstrap.servers": brokers})
    started = time.monotonic()
    for i in range(records):
        key = None if i % 101 == 0 else b"customer-%d" % (i % 997)
        v = value(i, size, kind)
        payload += len(key or b"") + len(v or b"")
        while True:
            try:
                producer.produce(topic, v, key, headers=headers(i), on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(120) != 0 or failed:
        sys.exit(f"produce.py: not every record was delivered: {failed[:3]}")
    print(json.dumps({"last": last, "payload_bytes": payload, "seconds": time.monotonic() - started}))


if __name__ == "__main__":
    main()
