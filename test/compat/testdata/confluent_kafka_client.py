"""Drive confluent-kafka-python (librdkafka) against a broker for compat tests.

Run with the Debian interpreter: /usr/bin/python3 confluent_kafka_client.py CMD ...

  produce BOOTSTRAP TOPIC CODEC   records (JSON list) on stdin; prints the
                                  delivery reports as a JSON list
  consume BOOTSTRAP TOPIC PARTITION COUNT
                                  prints COUNT records from offset 0 as JSON
  offsets-for-time BOOTSTRAP TOPIC PARTITION MILLIS
                                  prints {"offset": N} for the first record at
                                  or after MILLIS
  metadata BOOTSTRAP              prints {topic: partition count}

With SLUICE_TEST_SASL=MECHANISM:USER:PASSWORD in the environment every
client connects with SASL_PLAINTEXT and that mechanism; with
SLUICE_TEST_TLS_CA=FILE it speaks TLS trusting that CA (SSL, or SASL_SSL
with both).

Bytes are base64 in JSON; null stays null. Exit status 1 with a message on
stderr on any client error, so the Go test shows it.
"""
import base64
import json
import os
import sys

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient


def b64(b):
    return None if b is None else base64.b64encode(b).decode()


def unb64(s):
    return None if s is None else base64.b64decode(s)


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def conf(c):
    """c plus the SASL settings SLUICE_TEST_SASL asks for, pinned to the
    Kafka version SLUICE_TEST_OLD_VERSION names (e.g. 0.10.0), if set."""
    spec = os.environ.get("SLUICE_TEST_SASL")
    ca = os.environ.get("SLUICE_TEST_TLS_CA")
    if spec:
        mech, user, password = spec.split(":", 2)
        c.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
                  "sasl.username": user, "sasl.password": password})
    if ca:
        c.update({"security.protocol": "SASL_SSL" if spec else "SSL", "ssl.ca.location": ca})
    old = os.environ.get("SLUICE_TEST_OLD_VERSION")
    if old:
        # Pin librdkafka to an old broker's protocol (no ApiVersions).
        c.update({"api.version.request": False, "broker.version.fallback": old})
    return c


def log_cb(name):
    def cb(err):
        print("%s error: %s" % (name, err), file=sys.stderr)
    return cb


def produce(bootstrap, topic, codec):
    records = json.load(sys.stdin)
    p = Producer(conf({
        "bootstrap.servers": bootstrap,
        "compression.type": codec,
        "acks": "all",
        "linger.ms": 20,
        "message.timeout.ms": 60000,
        "error_cb": log_cb("producer"),
    }))
    reports = [None] * len(records)

    def on_delivery(i):
        def cb(err, msg):
            if err is not None:
                reports[i] = {"error": str(err)}
            else:
                reports[i] = {"partition": msg.partition(), "offset": msg.offset()}
        return cb

    for i, r in enumerate(records):
        headers = [(k, unb64(v)) for k, v in (r.get("headers") or [])]
        kwargs = {"partition": r.get("partition", 0), "on_delivery": on_delivery(i)}
        if headers:
            kwargs["headers"] = headers
        p.produce(topic, value=unb64(r["value"]), key=unb64(r["key"]), **kwargs)
        p.poll(0)
    left = p.flush(60)
    if left:
        fail("%d messages not delivered after 60s" % left)
    print(json.dumps(reports))


def consumer(bootstrap):
    return Consumer(conf({
        "bootstrap.servers": bootstrap,
        "group.id": "sluice-compat-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "error_cb": log_cb("consumer"),
    }))


def consume(bootstrap, topic, partition, count):
    c = consumer(bootstrap)
    c.assign([TopicPartition(topic, partition, 0)])
    out = []
    empty_polls = 0
    while len(out) < count:
        msg = c.poll(1.0)
        if msg is None:
            empty_polls += 1
            if empty_polls > 60:
                fail("timed out with %d of %d records" % (len(out), count))
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                continue
            fail("consume error: %s" % msg.error())
        out.append({
            "partition": msg.partition(),
            "offset": msg.offset(),
            "timestamp": msg.timestamp()[1],
            "key": b64(msg.key()),
            "value": b64(msg.value()),
            "headers": [[k, b64(v)] for k, v in (msg.headers() or [])],
        })
    c.close()
    print(json.dumps(out))


def offsets_for_time(bootstrap, topic, partition, millis):
    c = consumer(bootstrap)
    res = c.offsets_for_times([TopicPartition(topic, partition, millis)], timeout=30)
    c.close()
    if res[0].error:
        fail("offsets_for_times: %s" % res[0].error)
    print(json.dumps({"offset": res[0].offset}))


def metadata(bootstrap):
    a = AdminClient(conf({"bootstrap.servers": bootstrap}))
    md = a.list_topics(timeout=30)
    print(json.dumps({name: len(t.partitions) for name, t in md.topics.items()}))


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
