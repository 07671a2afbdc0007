"""Drives sluice's schema registry with confluent-kafka-python's
SchemaRegistryClient. Prints one JSON line of results for the Go test to
check; a failed expectation here raises (non-zero exit)."""
import json
import sys

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

url, v1, v2, bad = sys.argv[1:5]
c = SchemaRegistryClient({"url": url})
out = {}

id1 = c.register_schema("py-value", Schema(v1, "AVRO"))
id1again = c.register_schema("py-value", Schema(v1, "AVRO"))
assert id1 == id1again, (id1, id1again)
id2 = c.register_schema("py-value", Schema(v2, "AVRO"))
out["ids"] = [id1, id2]

try:
    c.register_schema("py-value", Schema(bad, "AVRO"))
    raise AssertionError("an incompatible schema was registered")
except SchemaRegistryError as e:
    out["incompatible"] = [e.http_status_code, e.error_code]

got = c.get_schema(id1)
assert got.schema_str == v1, got.schema_str
assert got.schema_type == "AVRO", got.schema_type

latest = c.get_latest_version("py-value")
out["latest"] = [latest.schema_id, latest.version, latest.subject]
found = c.lookup_schema("py-value", Schema(v1, "AVRO"))
out["lookup"] = [found.schema_id, found.version]
out["versions"] = c.get_versions("py-value")
out["compatible"] = [c.test_compatibility("py-value", Schema(v2, "AVRO")),
                     c.test_compatibility("py-value", Schema(bad, "AVRO"))]
c.set_compatibility("py-value", "FULL")
out["level"] = c.get_compatibility("py-value")
out["subjects"] = c.get_subjects()
try:
    c.get_version("py-value", 9)
    raise AssertionError("version 9 was found")
except SchemaRegistryError as e:
    out["missing_version"] = [e.http_status_code, e.error_code]

# A second subject: fetch one version, test against it, delete it, then
# the whole subject for good (soft and permanent).
c.register_schema("py2-value", Schema(v1, "AVRO"))
c.register_schema("py2-value", Schema(v2, "AVRO"))
got = c.get_version("py2-value", 1)
assert got.schema.schema_str == v1, got.schema.schema_str
out["py2_version1"] = [got.schema_id, got.version, got.subject]
out["py2_compatible_v1"] = [c.test_compatibility("py2-value", Schema(v2, "AVRO"), version=1),
                            c.test_compatibility("py2-value", Schema(bad, "AVRO"), version=1)]
out["py2_deleted_version"] = c.delete_version("py2-value", 1)
out["py2_versions"] = c.get_versions("py2-value")
try:
    c.lookup_schema("py2-value", Schema(v1, "AVRO"))
    raise AssertionError("a deleted version was looked up")
except SchemaRegistryError as e:
    out["py2_lookup_deleted"] = [e.http_status_code, e.error_code]
out["py2_permanent"] = c.delete_subject("py2-value", permanent=True)
try:
    c.get_versions("py2-value")
    raise AssertionError("a permanently deleted subject was found")
except SchemaRegistryError as e:
    out["py2_gone"] = [e.http_status_code, e.error_code]
try:
    c.delete_subject("py2-value")
    raise AssertionError("a permanently deleted subject was deleted again")
except SchemaRegistryError as e:
    out["py2_delete_again"] = [e.http_status_code, e.error_code]

# The registry-wide level.
c.set_compatibility(level="none")
out["global_level"] = c.get_compatibility()
c.set_compatibility(level="BACKWARD")
try:
    c.set_compatibility(level="SOMETIMES")
    raise AssertionError("an invalid level was set")
except SchemaRegistryError as e:
    out["bad_level"] = [e.http_status_code, e.error_code]

out["deleted"] = c.delete_subject("py-value")
try:
    c.get_latest_version("py-value")
    raise AssertionError("a deleted subject was found")
except SchemaRegistryError as e:
    out["deleted_subject"] = [e.http_status_code, e.error_code]
print(json.dumps(out))
