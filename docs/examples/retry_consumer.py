"""A confluent-kafka-python consumer that follows sluice's retry convention.

docs/retries.md describes the convention; this is a small, single-threaded
follower of it, meant to be read and adapted. Run it with a Python that has
confluent-kafka (Debian: python3-confluent-kafka):

  /usr/bin/python3 retry_consumer.py --brokers HOST:PORT --topic orders --group g

It consumes TOPIC and TOPIC.retry (which must have the same partition count:
a key's retries go to the partition it came from), runs handle() on each
record, retries a failing record in place ATTEMPTS times, then writes it to
TOPIC.retry with a delay (a hold marker first, then the retry record), and
after the last round to TOPIC.dlq with the dead-letter headers. While a key
has a record in the retry topic, its later records are parked there behind it.
Offsets are committed only below the lowest record not finished; a hold marker
stays unfinished until its record is done. When it is assigned a partition it
first reads TOPIC.retry's partition from the group's committed offset to its
end, as docs/retries.md says: every record there counts as not yet read back
for its key, and every hold marker names a held key. So after a crash, a
restart or a rebalance, a held key's later records still wait.

What it leaves out, compared with pkg/consumer: records run one at a time
(a retry that is not due yet stalls the loop), and no exactly-once mode (it
writes no done markers, but honours those an exactly-once pkg/consumer wrote).

For the tests: --fail KEY:SEQ=N makes the record with that value fail its
first N runs (N=0: always), --exit-idle S exits after S seconds with nothing
to do (counted from the first record), and every success is printed as a JSON line.
"""
import argparse
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

H_DELAY_MS = "sluice-delay-ms"
H_DUE_AT = "sluice-retry-due-at"
H_ATTEMPTS = "sluice-retry-attempts"
H_KIND = "sluice-retry-kind"
H_DONE_OFFSET = "sluice-retry-done-offset"
H_TOPIC = "sluice-original-topic"
H_PARTITION = "sluice-original-partition"
H_OFFSET = "sluice-original-offset"
H_TIMESTAMP = "sluice-original-timestamp"
H_ERROR = "sluice-error"
H_GROUP = "sluice-group"
H_DEAD_AT = "sluice-dead-at"
OWN_PREFIXES = ("sluice-retry-", "sluice-original-")
OWN = {H_DELAY_MS, "sluice-deliver-at", H_ERROR, H_GROUP, H_DEAD_AT}


def now_ms():
    return int(time.time() * 1000)


class Failure(Exception):
    pass


class Follower:
    def __init__(self, args):
        self.args = args
        self.topic = args.topic
        self.retry_topic = args.topic + ".retry"
        self.dlq_topic = args.topic + ".dlq"
        self.fail = {}
        for spec in args.fail:
            value, n = spec.rsplit("=", 1)
            self.fail[value] = int(n)
        self.consumer = Consumer({
            "bootstrap.servers": args.brokers,
            "group.id": args.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # Range keeps partition p of TOPIC and TOPIC.retry on one member.
            "partition.assignment.strategy": "range",
            "session.timeout.ms": args.session_timeout_ms,
        })
        self.producer = Producer({"bootstrap.servers": args.brokers, "acks": "all",
                                  "enable.idempotence": True})
        self.keys = {}        # (partition, key) -> {"heads": [id], "held": [msg], "pending": int}
        self.unfinished = {}  # (topic, partition) -> set of offsets
        self.last = {}        # (topic, partition) -> last offset handed out
        self.markers = {}     # origin id -> hold marker message
        self.read_back = set()  # retry records counted off their key's pending
        self.done = set()       # (partition, offset) of retry records a done marker names

    # ---- the application's handler ----
    def handle(self, msg, attempt):
        value = (msg.value() or b"").decode()
        n = self.fail.get(value)
        if n is not None and (n == 0 or attempt <= n):
            raise Failure("injected failure: %s attempt %d" % (value, attempt))
        print(json.dumps({"key": (msg.key() or b"").decode(), "value": value, "attempt": attempt}), flush=True)

    # ---- the convention ----
    @staticmethod
    def headers(msg):
        return {k: (v or b"").decode() for k, v in (msg.headers() or [])}

    def origin(self, msg, h):
        if H_TOPIC in h:
            return (h[H_TOPIC], int(h[H_PARTITION]), int(h[H_OFFSET]), int(h.get(H_TIMESTAMP, "0")))
        return (msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1])

    @staticmethod
    def origin_id(o):
        return "%s/%d/%d" % (o[0], o[1], o[2])

    @staticmethod
    def origin_headers(o):
        return [(H_TOPIC, o[0]), (H_PARTITION, str(o[1])), (H_OFFSET, str(o[2])), (H_TIMESTAMP, str(o[3]))]

    @staticmethod
    def user_headers(msg):
        return [(k, v) for k, v in (msg.headers() or [])
                if not k.startswith(OWN_PREFIXES) and k not in OWN]

    def send(self, topic, partition, key, value, headers):
        self.producer.produce(topic, key=key, value=value, headers=headers, partition=partition)
        if self.producer.flush(30) != 0:
            raise RuntimeError("produce to %s timed out" % topic)

    def state(self, partition, key):
        # A key's records of TOPIC partition p and their copies in
        # TOPIC.retry partition p: one lane.
        return self.keys.setdefault((partition, key), {"heads": [], "held": [], "pending": 0})

    # ---- rebuilding held keys when partitions are assigned ----
    def on_assign(self, consumer, partitions):
        for tp in partitions:
            if tp.topic == self.retry_topic:
                self.rebuild(tp.partition)

    def on_revoke(self, consumer, partitions):
        # What was not finished is read again by the next owner (maybe us):
        # forget it, and the park state of the partitions, rebuilt on assign.
        gone = {tp.partition for tp in partitions}
        for tp in partitions:
            self.unfinished.pop((tp.topic, tp.partition), None)
            self.last.pop((tp.topic, tp.partition), None)
        self.keys = {k: st for k, st in self.keys.items() if k[0] not in gone}
        self.markers = {oid: m for oid, m in self.markers.items() if m.partition() not in gone}

    def rebuild(self, partition):
        """Reads TOPIC.retry partition from the group's committed offset to
        its end: each record will be read again (pending for its key), and
        each hold marker there names a held key."""
        tp = TopicPartition(self.retry_topic, partition)
        committed = self.consumer.committed([tp], timeout=30)[0].offset
        low, high = self.consumer.get_watermark_offsets(tp, timeout=30)
        start = committed if committed >= 0 else low
        self.keys = {k: st for k, st in self.keys.items() if k[0] != partition}
        if start >= high:
            return
        reader = Consumer({"bootstrap.servers": self.args.brokers, "group.id": self.args.group + ".rebuild",
                           "enable.auto.commit": False})
        reader.assign([TopicPartition(self.retry_topic, partition, start)])
        holds = 0
        read = []
        try:
            deadline = time.time() + 60
            pos = start
            while pos < high:
                if time.time() > deadline:
                    raise RuntimeError("rebuilding held keys of %s/%d: stuck at %d of %d" % (self.retry_topic, partition, pos, high))
                msg = reader.poll(1.0)
                if msg is None or msg.error():
                    continue
                pos = msg.offset() + 1
                if msg.offset() >= high:
                    break
                read.append(msg)
        finally:
            reader.close()
        # A done marker (written by an exactly-once consumer) names a record
        # already finished: skip it when read, and a finished hold holds nothing.
        self.done = {d for d in self.done if d[0] != partition}
        for msg in read:
            h = self.headers(msg)
            if h.get(H_KIND) == "done":
                self.done.add((partition, int(h[H_DONE_OFFSET])))
        for msg in read:
            h = self.headers(msg)
            kind = h.get(H_KIND)
            if kind == "done":
                continue  # read back uncounted
            st = self.state(partition, msg.key())
            st["pending"] += 1
            if kind == "hold" and (partition, msg.offset()) not in self.done:
                oid = self.origin_id(self.origin(msg, h))
                if oid not in st["heads"]:
                    st["heads"].append(oid)
                    holds += 1
        print("rebuilt %s/%d from offset %d to %d: %d held" % (self.retry_topic, partition, start, high, holds),
              file=sys.stderr, flush=True)

    def finish(self, msg):
        self.unfinished[(msg.topic(), msg.partition())].discard(msg.offset())
        self.read_back.discard((msg.topic(), msg.partition(), msg.offset()))

    def process(self, msg):
        key = msg.key()
        st = self.state(msg.partition(), key)
        h = self.headers(msg)
        o = self.origin(msg, h)
        oid = self.origin_id(o)
        if msg.topic() == self.topic:
            if st["heads"] or st["held"] or st["pending"]:
                # Park behind the key's record in the retry topic.
                hs = self.user_headers(msg) + self.origin_headers(o) + [(H_KIND, "park"), (H_ATTEMPTS, "0")]
                self.send(self.retry_topic, o[1], key, msg.value(), hs)
                st["pending"] += 1
                self.finish(msg)
                return []
            return self.run(msg, st, o, 0, 0)
        kind = h.get(H_KIND)
        if kind == "done":
            self.finish(msg)
            return []
        if (msg.topic(), msg.partition(), msg.offset()) not in self.read_back:
            # Once per record: a held record comes through here again when
            # its key is released.
            self.read_back.add((msg.topic(), msg.partition(), msg.offset()))
            st["pending"] = max(0, st["pending"] - 1)
        if (msg.partition(), msg.offset()) in self.done:
            self.done.discard((msg.partition(), msg.offset()))
            self.finish(msg)  # finished before a restart
            return []
        if kind == "hold":
            if oid in st["heads"]:
                self.markers[oid] = msg  # finished when its record is done
            else:
                self.finish(msg)
            return []
        if st["heads"] and st["heads"][0] != oid:
            st["held"].append(msg)
            return []
        return self.run(msg, st, o, int(h.get(H_ATTEMPTS, "0")), int(h.get(H_DUE_AT, "0")))

    def run(self, msg, st, o, attempts, due):
        wait = due - now_ms()
        if wait > 0:
            time.sleep(wait / 1000.0)  # a broker that ignores sluice-delay-ms delivers early
        err = None
        for i in range(self.args.attempts):
            if i > 0:
                time.sleep(min(0.05 * 2 ** (i - 1), 1.0))
            attempts += 1
            try:
                self.handle(msg, attempts)
                err = None
                break
            except Failure as e:
                err = e
        oid = self.origin_id(o)
        if err is None:
            self.finish(msg)
            return self.resolve(st, oid)
        rounds = -(-attempts // self.args.attempts)  # deliveries so far
        if rounds <= len(self.args.delays_ms):
            delay = self.args.delays_ms[rounds - 1]
            if not st["heads"] or st["heads"][0] != oid:
                hold = self.origin_headers(o) + [(H_KIND, "hold"), (H_DUE_AT, str(now_ms() + delay))]
                self.send(self.retry_topic, o[1], msg.key(), None, hold)
                st["heads"].insert(0, oid)
                st["pending"] += 1
            hs = self.user_headers(msg) + self.origin_headers(o) + [
                (H_KIND, "retry"), (H_ATTEMPTS, str(attempts)),
                (H_DUE_AT, str(now_ms() + delay)), (H_DELAY_MS, str(delay))]
            self.send(self.retry_topic, o[1], msg.key(), msg.value(), hs)
            st["pending"] += 1
            self.finish(msg)
            return []
        hs = self.user_headers(msg) + self.origin_headers(o) + [
            (H_ERROR, str(err)), (H_ATTEMPTS, str(attempts)), (H_GROUP, self.args.group), (H_DEAD_AT, str(now_ms()))]
        self.send(self.dlq_topic, o[1], msg.key(), msg.value(), hs)
        self.finish(msg)
        return self.resolve(st, oid)

    def resolve(self, st, oid):
        if not st["heads"] or st["heads"][0] != oid:
            return []
        st["heads"].pop(0)
        marker = self.markers.pop(oid, None)
        if marker is not None:
            self.finish(marker)
        held, st["held"] = st["held"], []
        return held

    def commit(self):
        offsets = []
        for tp, offs in self.unfinished.items():
            mark = min(offs) if offs else self.last[tp] + 1
            offsets.append(TopicPartition(tp[0], tp[1], mark))
        if offsets:
            self.consumer.commit(offsets=offsets, asynchronous=False)

    def loop(self):
        self.consumer.subscribe([self.topic, self.retry_topic], on_assign=self.on_assign, on_revoke=self.on_revoke)
        idle_since = None  # the idle clock starts with the first record
        while True:
            msg = self.consumer.poll(0.2)
            if msg is None:
                busy = any(st["heads"] or st["held"] or st["pending"] for st in self.keys.values())
                if not busy and idle_since and time.time() - idle_since > self.args.exit_idle:
                    break
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    print("consume error: %s" % msg.error(), file=sys.stderr)
                continue
            idle_since = time.time()
            tp = (msg.topic(), msg.partition())
            self.unfinished.setdefault(tp, set()).add(msg.offset())
            self.last[tp] = msg.offset()
            work = [msg]
            while work:
                work = self.process(work[0]) + work[1:]
            self.commit()
        self.commit()
        self.consumer.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--attempts", type=int, default=2, help="runs in a row before the retry topic")
    ap.add_argument("--delays-ms", type=lambda s: [int(x) for x in s.split(",") if x], default=[200, 200],
                    help="retry rounds' delays, comma-separated")
    ap.add_argument("--fail", action="append", default=[])
    ap.add_argument("--exit-idle", type=float, default=1e9)
    ap.add_argument("--session-timeout-ms", type=int, default=45000)
    Follower(ap.parse_args()).loop()


if __name__ == "__main__":
    main()
