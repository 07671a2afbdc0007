"""Delayed records in transactions with confluent-kafka-python (librdkafka).

Run with the Debian interpreter:
  /usr/bin/python3 confluent_txn_delay.py BOOTSTRAP TOPIC PARTITIONS WANT

Reads {"commit": [recs], "abort": [recs]} on stdin, each rec
{"partition": P, "value": "...", "headers": [[k, v], ...]}; produces the
"commit" records in a transaction that it commits and the "abort" records in
one that it aborts. Then reads TOPIC from the start with a read_committed
consumer until it has seen WANT records (or 60 s passed), and 2 s more, and
prints {"reserved": [{"partition", "offset", "value"} per produced record],
"seen": [{"partition", "offset", "value"} per consumed record]}. Exit status
1 on a client error.
"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def main():
    bootstrap, topic, partitions, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    spec = json.load(sys.stdin)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "py-txn-delay", "linger.ms": 20})
    p.init_transactions(30)
    reserved = []

    def cb(value):
        def done(err, msg):
            if err is not None:
                print("delivery of %s failed: %s" % (value, err), file=sys.stderr)
                sys.exit(1)
            reserved.append({"partition": msg.partition(), "offset": msg.offset(), "value": value})
        return done

    for kind in ("commit", "abort"):
        p.begin_transaction()
        for r in spec[kind]:
            hs = [(k, v.encode()) for k, v in r.get("headers", [])]
            p.produce(topic, value=r["value"].encode(), partition=r["partition"], headers=hs, on_delivery=cb(r["value"]))
            p.poll(0)
        p.flush(30)
        if kind == "commit":
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "py-txn-delay", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    seen = []
    deadline = time.time() + 60
    extra = None
    while time.time() < deadline and (extra is None or time.time() < extra):
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            print("consume: %s" % m.error(), file=sys.stderr)
            continue
        seen.append({"partition": m.partition(), "offset": m.offset(), "value": m.value().decode()})
        if len(seen) >= want and extra is None:
            extra = time.time() + 2
    c.close()
    json.dump({"reserved": reserved, "seen": seen}, sys.stdout)


if __name__ == "__main__":
    main()
