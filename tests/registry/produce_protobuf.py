"""Produces Protobuf records the way confluent-kafka's ProtobufSerializer does: it registers the message's
file (a base64 FileDescriptorProto) and, as references, the files it imports that are not Google's
well-known types, then frames each value (magic byte 0, the schema's 4-byte ID, the message indexes,
the Protobuf binary). The first half of the records are of version 1 of ksa/orders.proto, the second
half of version 2, which adds a field (a new ID under the same subject). The message is nested
(Order.Line), imports another file (ksa/money.proto, a reference) and the well-known Timestamp and
StringValue, and has an enum, a map, a oneof and a proto3 optional field. Without protoc, the files are
written as FileDescriptorProtos in protobuf's text format. Prints, per delivered record, one JSON line of
its partition, offset and what it holds.

Usage: produce_protobuf.py BROKERS REGISTRY_URL TOPIC COUNT
"""


from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from google.protobuf import descriptor_pb2, descriptor_pool, text_format, timestamp_pb2, wrappers_pb2
from google.protobuf.message_factory import GetMessageClass

from common import produce_two_versions

MONEY = """
name: "ksa/money.proto" package: "ksa.money" syntax: "proto3"
message_type {
  name: "Money"
  field { name: "currency" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "units" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 }
}
"""

ORDERS = """
name: "ksa/orders.proto" package: "ksa.test" syntax: "proto3"
dependency: "ksa/money.proto"
dependency: "google/protobuf/timestamp.proto"
dependency: "google/protobuf/wrappers.proto"
message_type {
  name: "Order"
  field { name: "id" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "customer" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "status" number: 3 label: LABEL_OPTIONAL type: TYPE_ENUM type_name: ".ksa.test.Order.Status" }
  field { name: "lines" number: 4 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".ksa.test.Order.Line" }
  field { name: "tags" number: 5 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".ksa.test.Order.TagsEntry" }
  field { name: "placed" number: 6 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".google.protobuf.Timestamp" }
  field { name: "note" number: 7 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".google.protobuf.StringValue" }
  field { name: "total" number: 8 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".ksa.money.Money" }
  field { name: "card" number: 9 label: LABEL_OPTIONAL type: TYPE_STRING oneof_index: 0 }
  field { name: "voucher" number: 10 label: LABEL_OPTIONAL type: TYPE_BYTES oneof_index: 0 }
  field { name: "priority" number: 11 label: LABEL_OPTIONAL type: TYPE_SINT32 oneof_index: 1 proto3_optional: true }
  %(added)s
  nested_type {
    name: "Line"
    field { name: "sku" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "quantity" number: 2 label: LABEL_OPTIONAL type: TYPE_INT32 }
  }
  nested_type {
    name: "TagsEntry"
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 }
    options { map_entry: true }
  }
  enum_type {
    name: "Status"
    value { name: "NEW" number: 0 } value { name: "PAID" number: 1 } value { name: "SHIPPED" number: 2 }
  }
  oneof_decl { name: "payment" }
  oneof_decl { name: "_priority" }
}
"""

ADDED = 'field { name: "channel" number: 12 label: LABEL_OPTIONAL type: TYPE_STRING }'


def order_class(version):
    """The Order message class of `version` (1 or 2), in a pool of its own (the two share file names)."""
    pool = descriptor_pool.DescriptorPool()
    for known in (timestamp_pb2, wrappers_pb2):
        pool.AddSerializedFile(known.DESCRIPTOR.serialized_pb)
    pool.Add(text_format.Parse(MONEY, descriptor_pb2.FileDescriptorProto()))
    orders = ORDERS % {"added": ADDED if version == 2 else ""}
    pool.Add(text_format.Parse(orders, descriptor_pb2.FileDescriptorProto()))
    return GetMessageClass(pool.FindMessageTypeByName("ksa.test.Order"))


def order(cls, i, version):
    o = cls(id=i, customer=f"customer-{i % 13}", status=i % 3)
    for k in range(i % 4):
        o.lines.add(sku=f"sku-{k}", quantity=k - 1)
    for k in range(i % 3):
        o.tags[f"t{k}"] = i * k
    o.placed.seconds, o.placed.nanos = 1_767_261_600 + i, (i % 1000) * 1_000
    if i % 5:
        o.note.value = f"note {i}"
    o.total.currency, o.total.units = "EUR", i * 3 - 100
    if i % 2:
        o.card = f"card-{i}"
    else:
        o.voucher = bytes([i % 256])
    if i % 7:
        o.priority = -(i % 7)
    if version == 2:
        o.channel = f"web-{i % 4}"
    return o


def expected(o, version):
    return {
        "id": o.id, "lines": len(o.lines), "units": o.total.units, "status": o.status, "version": version,
        "has_note": o.HasField("note"), "card": o.card or None, "priority": o.priority if o.HasField("priority") else None,
    }


def main():
    classes = {version: order_class(version) for version in (1, 2)}

    def value(i, version):
        o = order(classes[version], i, version)
        return o, expected(o, version)

    produce_two_versions(
        lambda client, version: ProtobufSerializer(classes[version], client, {"use.deprecated.format": False}), value)


if __name__ == "__main__":
    main()
