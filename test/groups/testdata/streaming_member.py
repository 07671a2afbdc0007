"""A long-running confluent-kafka group member for kill tests: prints each
record's value (flushed) and only then commits its offset synchronously, so
whatever it committed it has printed: at-least-once as an application sees
it. Runs until killed.

usage: streaming_member.py BOOTSTRAP TOPIC GROUP
"""
import sys

from confluent_kafka import Consumer

bootstrap, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
})
c.subscribe([topic])
while True:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        sys.stderr.write("error: %s\n" % m.error())
        continue
    sys.stdout.write(m.value().decode() + "\n")
    sys.stdout.flush()
    try:
        c.commit(message=m, asynchronous=False)
    except Exception as e:  # a commit refused during a rebalance is retried by the next record
        sys.stderr.write("commit: %s\n" % e)
