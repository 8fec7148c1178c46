"""Produces JSON Schema records the way confluent-kafka's JSONSerializer does: it registers the schema with
the Schema Registry, validates each value against it, and frames it (magic byte 0, the schema's 4-byte
ID, the JSON). The first half of the records are of version 1, the second half of version 2, which adds
an optional property (a new ID under the same subject). The schema has a nested object by $ref, an
array of objects, a map (additionalProperties), an enum, date-time and date formats and a nullable
property. Prints, per delivered record, one JSON line of its partition, offset and what it holds.

Usage: produce_json_schema.py BROKERS REGISTRY_URL TOPIC COUNT
"""

import json

from confluent_kafka.schema_registry.json_schema import JSONSerializer

from common import produce_two_versions


def schema(version):
    properties = {
        "id": {"type": "integer"},
        "customer": {"type": "string"},
        "status": {"type": "string", "enum": ["NEW", "PAID", "SHIPPED"]},
        "placed": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "total": {"$ref": "#/definitions/Money"},
        "lines": {"type": "array", "items": {
            "type": "object", "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer"}},
            "required": ["sku", "quantity"]}},
        "tags": {"type": "object", "additionalProperties": {"type": "integer"}},
        "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
    }
    if version == 2:
        properties["channel"] = {"type": "string"}
    return json.dumps({
        "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
        "properties": properties,
        "required": ["id", "customer", "status", "placed", "day", "total", "lines", "tags"],
        "definitions": {"Money": {"type": "object", "properties": {
            "currency": {"type": "string"}, "units": {"type": "integer"}}, "required": ["currency", "units"]}},
    })


def order(i, version):
    o = {
        "id": i, "customer": f"customer-{i % 13}", "status": ["NEW", "PAID", "SHIPPED"][i % 3],
        "placed": f"2026-01-{1 + i % 28:02d}T{i % 24:02d}:00:00.{i % 1000:03d}Z", "day": f"2026-02-{1 + i % 28:02d}",
        "total": {"currency": "EUR", "units": i * 3 - 100},
        "lines": [{"sku": f"sku-{k}", "quantity": k - 1} for k in range(i % 4)],
        "tags": {f"t{k}": i * k for k in range(i % 3)},
    }
    if i % 5:
        o["note"] = f"note {i}"
    elif i % 2:
        o["note"] = None
    if version == 2:
        o["channel"] = f"web-{i % 4}"
    return o


def main():
    def value(i, version):
        o = order(i, version)
        line = {"id": i, "lines": len(o["lines"]), "units": o["total"]["units"], "status": o["status"],
                "has_note": o.get("note") is not None, "version": version}
        return o, line

    produce_two_versions(lambda client, version: JSONSerializer(schema(version), client), value)


if __name__ == "__main__":
    main()
