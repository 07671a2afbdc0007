'use strict'
// txn.js '{"broker", "topic", "in", "out", "group", "count"}'
//
// Part 1, on topic: a transactional producer commits c-0..c-4, aborts
// a-0..a-2, then commits c-5..c-9; a read_committed consumer then reads
// until it has the ten committed records, and a read_uncommitted one reads
// all thirteen.
//
// Part 2, the last stable offset, on topic "lso": with a transaction open
// over two records, fetchTopicOffsets (read committed) answers the offset
// before them, and a read_committed consumer starting at the latest offset
// starts there: once the transaction commits it reads both records, then
// one produced after.
//
// Part 3, consume-transform-produce: a consumer of group reads count
// records of topic "in" and, in one transaction, sends each value
// upper-cased to "out" and, with sendOffsets, commits the group's offset
// past them; then commits the transaction.
const { kafka, record, main, waiter } = require('./common')

async function readAll(client, topic, group, count, readUncommitted) {
  const consumer = client.consumer({ groupId: group, readUncommitted, heartbeatInterval: 500, allowAutoTopicCreation: false })
  const records = []
  const w = waiter()
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        records.push(record(topic, partition, message))
        w.notify()
      },
    })
    await w.until(() => records.length >= count)
  } finally {
    await consumer.disconnect()
  }
  return records
}

async function lastStable(client, producer, topic, group) {
  const out = {}
  const plain = client.producer({ allowAutoTopicCreation: false })
  await plain.connect()
  const admin = client.admin()
  await admin.connect()
  const consumer = client.consumer({ groupId: group, heartbeatInterval: 500, maxWaitTimeInMs: 200, allowAutoTopicCreation: false })
  try {
    await plain.send({ topic, acks: -1, messages: [{ value: 'before' }] })
    const tx = await producer.transaction()
    await tx.send({ topic, messages: [{ value: 'open-0' }, { value: 'open-1' }] })
    out.offsetsOpen = (await admin.fetchTopicOffsets(topic)).map((p) => ({ partition: p.partition, offset: Number(p.offset), high: Number(p.high), low: Number(p.low) }))
    const records = []
    const w = waiter()
    let fetched = false
    consumer.on(consumer.events.FETCH, () => {
      fetched = true
      w.notify()
    })
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning: false })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        records.push(record(topic, partition, message))
        w.notify()
      },
    })
    // The consumer has its starting offset once it has fetched.
    await w.until(() => fetched)
    await tx.commit()
    await plain.send({ topic, acks: -1, messages: [{ value: 'after' }] })
    await w.until(() => records.some((r) => r.value === 'after'))
    out.records = records
  } finally {
    await consumer.disconnect()
    await admin.disconnect()
    await plain.disconnect()
  }
  return out
}

main(async (a) => {
  const client = kafka(a, 'kafkajs-txn')
  const producer = client.producer({
    transactionalId: 'kafkajs-txn-' + a.topic,
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
  })
  await producer.connect()
  const out = {}
  try {
    const msgs = (prefix, from, to) => {
      const m = []
      for (let i = from; i < to; i++) m.push({ key: prefix + i, value: prefix + '-' + i })
      return m
    }
    let tx = await producer.transaction()
    await tx.send({ topic: a.topic, messages: msgs('c', 0, 5) })
    await tx.commit()
    tx = await producer.transaction()
    await tx.send({ topic: a.topic, messages: msgs('a', 0, 3) })
    await tx.abort()
    tx = await producer.transaction()
    await tx.send({ topic: a.topic, messages: msgs('c', 5, 10) })
    await tx.commit()
    out.committed = await readAll(client, a.topic, a.group + '-rc', 10, false)
    out.uncommitted = await readAll(client, a.topic, a.group + '-ru', 13, true)

    out.lso = await lastStable(client, producer, a.lso, a.group + '-lso')

    // Offsets sent in an aborted transaction are not committed.
    tx = await producer.transaction()
    await tx.sendOffsets({
      consumerGroupId: a.group,
      topics: [{ topic: a.in, partitions: [{ partition: 0, offset: '1' }, { partition: 1, offset: '1' }] }],
    })
    await tx.abort()
    const admin = client.admin()
    await admin.connect()
    try {
      const r = await admin.fetchOffsets({ groupId: a.group, topics: [a.in] })
      out.offsetsAfterAbort = r[0].partitions.map((p) => Number(p.offset))
    } finally {
      await admin.disconnect()
    }

    // Consume-transform-produce with sendOffsets.
    const consumer = client.consumer({ groupId: a.group, heartbeatInterval: 500, allowAutoTopicCreation: false })
    const seen = []
    const w = waiter()
    await consumer.connect()
    try {
      await consumer.subscribe({ topics: [a.in], fromBeginning: true })
      await consumer.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        eachBatch: async ({ batch }) => {
          for (const m of batch.messages) seen.push(record(batch.topic, batch.partition, m))
          w.notify()
        },
      })
      await w.until(() => seen.length >= a.count)
      consumer.pause([{ topic: a.in }])
      tx = await producer.transaction()
      await tx.send({
        topic: a.out,
        messages: seen.map((r) => ({ key: r.key, value: r.value.toUpperCase() })),
      })
      const next = {}
      for (const r of seen) next[r.partition] = Math.max(next[r.partition] || 0, r.offset + 1)
      await tx.sendOffsets({
        consumerGroupId: a.group,
        topics: [{ topic: a.in, partitions: Object.entries(next).map(([p, o]) => ({ partition: Number(p), offset: String(o) })) }],
      })
      await tx.commit()
      out.transformed = seen.length
    } finally {
      await consumer.disconnect()
    }
  } finally {
    await producer.disconnect()
  }
  return out
})
