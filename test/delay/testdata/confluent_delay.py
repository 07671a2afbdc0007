"""Produce delayed records with confluent-kafka-python (librdkafka).

Run with the Debian interpreter: /usr/bin/python3 confluent_delay.py BOOTSTRAP TOPIC

Reads a JSON list of {"partition": P, "value": "...", "headers": [[k, v], ...]}
on stdin (strings, not base64), produces them with acks=all and idempotence
on, and prints the delivery reports as a JSON list of
{"partition": P, "offset": O} or {"error": "..."}. Exit status 1 on a client
error.
"""
import json
import sys

from confluent_kafka import Producer


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    recs = json.load(sys.stdin)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 20, "message.timeout.ms": 60000})
    reports = [None] * len(recs)

    def cb(i):
        def done(err, msg):
            if err is not None:
                reports[i] = {"error": str(err)}
            else:
                reports[i] = {"partition": msg.partition(), "offset": msg.offset()}
        return done

    for i, r in enumerate(recs):
        hs = [(k, v.encode()) for k, v in r.get("headers", [])]
        p.produce(topic, value=r["value"].encode(), partition=r["partition"], headers=hs, on_delivery=cb(i))
        p.poll(0)
    left = p.flush(60)
    if left:
        print("%d records not delivered" % left, file=sys.stderr)
        sys.exit(1)
    json.dump(reports, sys.stdout)


if __name__ == "__main__":
    main()
