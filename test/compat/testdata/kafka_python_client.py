"""Drive kafka-python (pure Python) against a broker for compat tests.

Run with the Debian interpreter: /usr/bin/python3 kafka_python_client.py CMD ...
Commands and JSON shapes are those of confluent_kafka_client.py, and so is
SLUICE_TEST_SASL=MECHANISM:USER:PASSWORD and SLUICE_TEST_TLS_CA=FILE.
"""
import base64
import json
import os
import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def b64(b):
    return None if b is None else base64.b64encode(b).decode()


def unb64(s):
    return None if s is None else base64.b64decode(s)


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def sasl():
    """Keyword arguments for SLUICE_TEST_SASL and SLUICE_TEST_TLS_CA."""
    spec = os.environ.get("SLUICE_TEST_SASL")
    ca = os.environ.get("SLUICE_TEST_TLS_CA")
    out = {}
    if spec:
        mech, user, password = spec.split(":", 2)
        out = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mech,
               "sasl_plain_username": user, "sasl_plain_password": password}
    if ca:
        out.update({"security_protocol": "SASL_SSL" if spec else "SSL", "ssl_cafile": ca,
                    "ssl_check_hostname": True})
    return out


def produce(bootstrap, topic, codec):
    records = json.load(sys.stdin)
    p = KafkaProducer(
        **sasl(),
        **pinned(),
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        acks="all",
        linger_ms=20,
        request_timeout_ms=30000,
        max_block_ms=30000,
    )
    futures = []
    for r in records:
        headers = [(k, unb64(v)) for k, v in (r.get("headers") or [])]
        futures.append(p.send(topic, value=unb64(r["value"]), key=unb64(r["key"]),
                              headers=headers, partition=r.get("partition", 0)))
    p.flush(60)
    reports = []
    for f in futures:
        try:
            md = f.get(timeout=60)
            reports.append({"partition": md.partition, "offset": md.offset})
        except Exception as e:  # reported to the Go test, which fails
            reports.append({"error": repr(e)})
    p.close(10)
    print(json.dumps(reports))


def pinned():
    """api_version for SLUICE_TEST_OLD_VERSION (e.g. 0.10.0), if set."""
    old = os.environ.get("SLUICE_TEST_OLD_VERSION")
    return {"api_version": tuple(int(x) for x in old.split("."))} if old else {}


def consumer(bootstrap):
    return KafkaConsumer(
        **sasl(),
        **pinned(),
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        consumer_timeout_ms=60000,
        request_timeout_ms=30000,
    )


def consume(bootstrap, topic, partition, count):
    c = consumer(bootstrap)
    tp = TopicPartition(topic, partition)
    c.assign([tp])
    c.seek(tp, 0)
    out = []
    for msg in c:
        out.append({
            "partition": msg.partition,
            "offset": msg.offset,
            "timestamp": msg.timestamp,
            "key": b64(msg.key),
            "value": b64(msg.value),
            "headers": [[k, b64(v)] for k, v in (msg.headers or [])],
        })
        if len(out) >= count:
            break
    c.close()
    if len(out) < count:
        fail("timed out with %d of %d records" % (len(out), count))
    print(json.dumps(out))


def offsets_for_time(bootstrap, topic, partition, millis):
    c = consumer(bootstrap)
    tp = TopicPartition(topic, partition)
    res = c.offsets_for_times({tp: millis})
    c.close()
    found = res.get(tp)
    print(json.dumps({"offset": -1 if found is None else found.offset}))


def metadata(bootstrap):
    c = consumer(bootstrap)
    out = {}
    for t in c.topics():
        out[t] = len(c.partitions_for_topic(t) or [])
    c.close()
    print(json.dumps(out))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "produce":
        produce(args[0], args[1], args[2])
    elif cmd == "consume":
        consume(args[0], args[1], int(args[2]), int(args[3]))
    elif cmd == "offsets-for-time":
        offsets_for_time(args[0], args[1], int(args[2]), int(args[3]))
    elif cmd == "metadata":
        metadata(args[0])
    else:
        fail("unknown command " + cmd)


if __name__ == "__main__":
    main()
