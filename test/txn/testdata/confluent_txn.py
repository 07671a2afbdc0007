"""Transactional producer with confluent-kafka (librdkafka): one committed
and one aborted transaction. Usage: confluent_txn.py BOOTSTRAP TOPIC TXN_ID.
Prints "ok" when both transactions ended as asked."""
import sys

from confluent_kafka import Producer

bootstrap, topic, txn_id = sys.argv[1:4]
p = Producer({
    "bootstrap.servers": bootstrap,
    "transactional.id": txn_id,
    "transaction.timeout.ms": 30000,
    "api.version.request": True,
})
p.init_transactions(30)
for name, commit in (("committed", True), ("aborted", False)):
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=("%s-%d" % (name, i)).encode())
    p.flush(30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)
print("ok")
