"""Produces through librdkafka (confluent-kafka-python) into topics of
sluice that check schema ids under each subject name strategy. Subjects are
named by confluent-kafka-python's own strategy functions and registered
with its SchemaRegistryClient; values are framed as its serializers frame
them (magic byte 0, the id, the JSON document). Prints one JSON line: per
topic and case, the delivery error code (0: taken)."""
import json
import struct
import sys

from confluent_kafka import Producer
from confluent_kafka.schema_registry import (Schema, SchemaRegistryClient, record_subject_name_strategy,
                                             topic_record_subject_name_strategy, topic_subject_name_strategy)
from confluent_kafka.serialization import MessageField, SerializationContext

registry, brokers = sys.argv[1:3]
c = SchemaRegistryClient({"url": registry})
order = json.dumps({"title": "shop.Order", "type": "object", "properties": {"id": {"type": "integer"}},
                    "required": ["id"]})
strategies = {"py-topic": topic_subject_name_strategy, "py-record": record_subject_name_strategy,
              "py-topicrecord": topic_record_subject_name_strategy}
ids = {}
for topic, strategy in strategies.items():
    subject = strategy(SerializationContext(topic, MessageField.VALUE), "shop.Order")
    ids[topic] = c.register_schema(subject, Schema(order, "JSON"))
# The same schema under any subject has one id; one registered nowhere
# near these topics has another.
stray = c.register_schema("py-elsewhere-value", Schema(json.dumps({"title": "shop.Stray", "type": "object"}), "JSON"))

p = Producer({"bootstrap.servers": brokers, "message.send.max.retries": 0, "linger.ms": 0})
out = {}


def frame(schema_id, doc):
    return struct.pack(">bI", 0, schema_id) + json.dumps(doc).encode()


for topic in strategies:
    for case, value in {"good": frame(ids[topic], {"id": 1}), "stray": frame(stray, {"id": 1}),
                        "bad json": frame(ids[topic], {"id": "one"}), "plain": b"hello"}.items():
        res = {}

        def done(err, msg, res=res):
            res["code"] = err.code() if err else 0
        p.produce(topic, value=value, on_delivery=done)
        p.flush(30)
        out[topic + " " + case] = res.get("code", -1)
print(json.dumps(out))
