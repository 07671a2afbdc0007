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
out["deleted"] = c.delete_subject("py-value")
try:
    c.get_latest_version("py-value")
    raise AssertionError("a deleted subject was found")
except SchemaRegistryError as e:
    out["deleted_subject"] = [e.http_status_code, e.error_code]
print(json.dumps(out))
