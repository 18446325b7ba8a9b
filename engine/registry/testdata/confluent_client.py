"""Drives a logbook schema registry with Confluent's own Python client.

Usage: confluent_client.py BASE_URL ADMIN_TOKEN VIEWER_TOKEN

The tokens go where Confluent users put credentials, basic.auth.user.info
("user:password"; logbook reads the password). Exits non-zero, with the
failing step, if anything differs from what a Confluent registry does.
"""
import sys

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

url, admin_token, viewer_token = sys.argv[1:4]
admin = SchemaRegistryClient({"url": url, "basic.auth.user.info": "ci:" + admin_token})
viewer = SchemaRegistryClient({"url": url, "basic.auth.user.info": "reader:" + viewer_token})

V1 = """{"type": "record", "name": "Payment", "namespace": "shop",
 "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "int"}]}"""
# Compatible both ways: amount promoted int -> long would not be forward
# compatible, so v2 only adds a field with a default.
V2 = """{"type": "record", "name": "Payment", "namespace": "shop",
 "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "int"},
            {"name": "currency", "type": "string", "default": "EUR"}]}"""
# Promotes amount: new readers read old data, old readers not new data.
V3_PROMOTED = """{"type": "record", "name": "Payment", "namespace": "shop",
 "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "long"},
            {"name": "currency", "type": "string", "default": "EUR"}]}"""
# Drops id without a default anywhere: forward only.
V3_DROPPED = """{"type": "record", "name": "Payment", "namespace": "shop",
 "fields": [{"name": "amount", "type": "int"},
            {"name": "currency", "type": "string", "default": "EUR"}]}"""


def expect_error(fn, status, code, step):
    try:
        fn()
    except SchemaRegistryError as e:
        if e.http_status_code != status or e.error_code != code:
            sys.exit(f"{step}: got {e}, want HTTP {status} code {code}")
        return
    sys.exit(f"{step}: no error, want HTTP {status} code {code}")


def check(cond, step):
    if not cond:
        sys.exit(step)


topic = "payments"
subject = topic + "-value"
ctx = SerializationContext(topic, MessageField.VALUE)

# A producer with a v1 serializer registers v1 on first use.
ser1 = AvroSerializer(admin, V1)
msg1 = ser1({"id": "p-1", "amount": 250}, ctx)
check(msg1[0] == 0, f"magic byte {msg1[0]}")
id1 = int.from_bytes(msg1[1:5], "big")
check(admin.get_latest_version(subject).schema_id == id1, "latest is not v1")

# A consumer with only a viewer token decodes it with the writer's schema.
check(AvroDeserializer(viewer)(msg1, ctx) == {"id": "p-1", "amount": 250}, "decode v1")

# Evolve under the default level (BACKWARD) and under FULL.
check(viewer.get_compatibility() == "BACKWARD", "default level")
admin.set_compatibility(subject, "FULL")
check(viewer.get_compatibility(subject) == "FULL", "subject level FULL")
msg2 = AvroSerializer(admin, V2)({"id": "p-2", "amount": 7, "currency": "CHF"}, ctx)
id2 = int.from_bytes(msg2[1:5], "big")
check(id2 != id1, "v2 got v1's id")
check(viewer.get_versions(subject) == [1, 2], "versions after v2")

# A v2 reader reads v1 data by schema resolution: the default fills in.
reader2 = AvroDeserializer(viewer, V2)
check(reader2(msg1, ctx) == {"id": "p-1", "amount": 250, "currency": "EUR"}, "resolve v1 as v2")

# Each level refuses what it must and accepts what it may.
for level, schema, ok in [
    ("FULL", V3_PROMOTED, False),
    ("FORWARD", V3_PROMOTED, False),
    ("BACKWARD", V3_DROPPED, True),  # new reader ignores nothing it needs
    ("FULL_TRANSITIVE", V3_DROPPED, False),
    ("FORWARD_TRANSITIVE", V3_DROPPED, False),
    ("NONE", V3_PROMOTED, True),
]:
    subj = f"levels-{level}"
    admin.set_compatibility(subj, level)
    admin.register_schema(subj, Schema(V1, "AVRO"))
    admin.register_schema(subj, Schema(V2, "AVRO"))
    check(admin.test_compatibility(subj, Schema(schema, "AVRO")) == ok, f"{level}: test_compatibility")
    if ok:
        admin.register_schema(subj, Schema(schema, "AVRO"))
    else:
        expect_error(lambda: admin.register_schema(subj, Schema(schema, "AVRO")), 409, 409, f"{level}: register")

# Errors, as Confluent's.
expect_error(lambda: viewer.register_schema(subject, Schema(V3_PROMOTED, "AVRO")), 403, 403, "viewer registers")
expect_error(lambda: viewer.get_schema(987654), 404, 40403, "unknown id")
expect_error(lambda: viewer.get_versions("no-such-subject"), 404, 40401, "unknown subject")
expect_error(lambda: admin.register_schema(subject, Schema('{"type": "record"}', "AVRO")), 422, 42201, "invalid schema")
expect_error(lambda: admin.set_compatibility(subject, "SIDEWAYS"), 422, 42203, "invalid level")

# Lookup, subjects, deletes.
found = viewer.lookup_schema(subject, Schema(V1, "AVRO"))
check(found.schema_id == id1 and found.version == 1, f"lookup {found}")
check(subject in viewer.get_subjects(), "subjects")
check(admin.delete_version(subject, 1) == 1, "soft delete v1")
expect_error(lambda: admin.delete_version(subject, 1), 404, 40406, "soft delete twice")
check(viewer.get_versions(subject) == [2], "versions after soft delete")
check(admin.delete_subject(subject) == [2], "soft delete subject")
check(admin.delete_subject(subject, permanent=True) == [1, 2], "hard delete subject")
expect_error(lambda: viewer.get_versions(subject), 404, 40401, "versions of a deleted subject")
print("confluent-kafka client: all steps passed")
