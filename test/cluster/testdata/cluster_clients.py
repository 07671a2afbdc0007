"""Drive a Python Kafka client against a sluice cluster across a broker kill.

Run with the Debian interpreter (it has the Debian client packages):

  /usr/bin/python3 cluster_clients.py CLIENT produce BOOTSTRAP TOPIC N
      CLIENT is confluent (confluent-kafka, librdkafka) or kafka-python.
      Produces records 0..N/2-1 (key "k<i>", value "<CLIENT>-<i>", acks=all,
      idempotent where the client can be), waits until every one is
      acknowledged and prints one line "half" to stdout. Then it waits for a
      line on stdin (the test kills a broker meanwhile), produces records
      N/2..N-1, waits for them, and prints a JSON object:
        {"acked": [[seq, partition, offset], ...], "errors": ["...", ...]}

  /usr/bin/python3 cluster_clients.py CLIENT consume BOOTSTRAP TOPIC N GROUP
      Reads the topic from the start as member of consumer group GROUP until
      N records have arrived, or until 60 s pass without a new one, and
      prints them as a JSON list of [partition, offset, value].

BOOTSTRAP is a comma-separated list. Client errors and logs go to stderr so
the Go test can show them; the exit status is 1 on a failure it detects.
"""
import json
import sys
import time

PATIENCE = 60  # seconds without progress before giving up


def fail(msg):
    print(msg, file=sys.stderr)
    sys.stderr.flush()
    sys.exit(1)


def value(client, i):
    return ("%s-%d" % (client, i)).encode()


def wait_go():
    print("half")
    sys.stdout.flush()
    if not sys.stdin.readline():
        fail("stdin closed before the second half")


def produce_confluent(bootstrap, topic, n):
    from confluent_kafka import Producer

    p = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "message.timeout.ms": 60000,
        "retry.backoff.ms": 200,
        "error_cb": lambda err: print("producer error: %s" % err, file=sys.stderr),
    })
    acked, errors = [], []

    def on_delivery(i):
        def cb(err, msg):
            if err is not None:
                errors.append("record %d: %s" % (i, err))
            else:
                acked.append([i, msg.partition(), msg.offset()])
        return cb

    def send(lo, hi):
        for i in range(lo, hi):
            while True:
                try:
                    p.produce(topic, key=b"k%d" % i, value=value("confluent", i), on_delivery=on_delivery(i))
                    break
                except BufferError:  # local queue full: serve callbacks
                    p.poll(0.1)
            p.poll(0)
        left = p.flush(2 * PATIENCE)
        if left:
            fail("%d records still undelivered after %ds; errors so far: %s" % (left, 2 * PATIENCE, errors[:10]))

    send(0, n // 2)
    wait_go()
    send(n // 2, n)
    print(json.dumps({"acked": acked, "errors": errors}))


def produce_kafka_python(bootstrap, topic, n):
    from kafka import KafkaProducer

    # kafka-python 2.0 has no idempotent producer: acks=all with retries
    # and one request in flight per connection keeps each partition in
    # order. A batch waits for a leader up to request_timeout_ms.
    p = KafkaProducer(
        bootstrap_servers=bootstrap.split(","),
        acks="all",
        retries=1000,
        retry_backoff_ms=200,
        max_in_flight_requests_per_connection=1,
        linger_ms=5,
        request_timeout_ms=60000,
        max_block_ms=60000,
        metadata_max_age_ms=5000,
    )
    acked, errors = [], []

    def send(lo, hi):
        futures = [(i, p.send(topic, key=b"k%d" % i, value=value("kafka-python", i))) for i in range(lo, hi)]
        p.flush(2 * PATIENCE)
        for i, f in futures:
            try:
                md = f.get(timeout=2 * PATIENCE)
                acked.append([i, md.partition, md.offset])
            except Exception as e:  # reported to the Go test, which fails
                errors.append("record %d: %r" % (i, e))

    send(0, n // 2)
    wait_go()
    send(n // 2, n)
    p.close(10)
    print(json.dumps({"acked": acked, "errors": errors}))


def consume_confluent(bootstrap, topic, n, group):
    from confluent_kafka import Consumer

    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 10000,
        "error_cb": lambda err: print("consumer error: %s" % err, file=sys.stderr),
    })
    c.subscribe([topic])
    out = []
    last = time.time()
    while len(out) < n:
        msg = c.poll(1.0)
        if msg is None:
            if time.time() - last > PATIENCE:
                fail("no record for %ds with %d of %d read" % (PATIENCE, len(out), n))
            continue
        if msg.error():
            print("consume error: %s" % msg.error(), file=sys.stderr)
            continue
        last = time.time()
        out.append([msg.partition(), msg.offset(), msg.value().decode()])
    c.close()
    print(json.dumps(out))


def consume_kafka_python(bootstrap, topic, n, group):
    from kafka import KafkaConsumer

    c = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap.split(","),
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=PATIENCE * 1000,
        request_timeout_ms=30000,
        session_timeout_ms=10000,
        heartbeat_interval_ms=1000,
    )
    out = []
    for msg in c:  # stops after consumer_timeout_ms without a record
        out.append([msg.partition, msg.offset, msg.value.decode()])
        if len(out) >= n:
            break
    c.close()
    if len(out) < n:
        fail("no record for %ds with %d of %d read" % (PATIENCE, len(out), n))
    print(json.dumps(out))


def main():
    client, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    ops = {
        ("confluent", "produce"): produce_confluent,
        ("kafka-python", "produce"): produce_kafka_python,
        ("confluent", "consume"): consume_confluent,
        ("kafka-python", "consume"): consume_kafka_python,
    }
    op = ops.get((client, cmd))
    if op is None:
        fail("unknown client/command %s %s" % (client, cmd))
    if cmd == "produce":
        op(args[0], args[1], int(args[2]))
    else:
        op(args[0], args[1], int(args[2]), args[3])


if __name__ == "__main__":
    main()
