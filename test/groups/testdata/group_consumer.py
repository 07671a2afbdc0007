"""Consume N records from a topic in a consumer group with one of the Debian
Python clients, commit synchronously, and print the values as a JSON list.

usage: group_consumer.py confluent|kafka-python BOOTSTRAP TOPIC GROUP N
"""
import json
import sys
import time

client, bootstrap, topic, group, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
values = []
deadline = time.time() + 120

if client == "confluent":
    from confluent_kafka import Consumer

    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 10000,
    })
    c.subscribe([topic])
    while len(values) < n and time.time() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            sys.stderr.write("error: %s\n" % m.error())
            continue
        values.append(m.value().decode())
        c.commit(message=m, asynchronous=False)
    c.close()
else:
    from kafka import KafkaConsumer

    c = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=10000,
        consumer_timeout_ms=120000,
    )
    for m in c:
        values.append(m.value.decode())
        if len(values) % 50 == 0 or len(values) >= n:
            c.commit()
        if len(values) >= n:
            break
    c.commit()
    c.close()

json.dump(values, sys.stdout)
