'use strict'
// group.js '{"broker", "topic", "group", "partitions", "count", "produce"}'
// starts two consumers of one group and waits until the group is stable
// with both members holding disjoint assignments that cover every
// partition. With "produce" it then sends count records itself (round
// robin over the partitions, key k-<i>, value v-<i>). Both consumers read
// until count records are in, committing each record's next offset as they
// go, then leave. It prints what each member was assigned and read.
const { kafka, record, main, waiter } = require('./common')

main(async (a) => {
  const client = kafka(a, 'kafkajs-group')
  const w = waiter()
  const members = [0, 1].map((i) => ({
    name: 'c' + i,
    consumer: client.consumer({ groupId: a.group, heartbeatInterval: 500, allowAutoTopicCreation: false }),
    assigned: null,
    records: [],
  }))
  let total = 0
  for (const m of members) {
    m.consumer.on(m.consumer.events.GROUP_JOIN, (e) => {
      m.assigned = (e.payload.memberAssignment[a.topic] || []).slice().sort((x, y) => x - y)
      w.notify()
    })
    m.consumer.on(m.consumer.events.REBALANCING, () => {
      m.assigned = null
      w.notify()
    })
  }
  const stable = () => {
    if (members.some((m) => m.assigned === null || m.assigned.length === 0)) return false
    const all = members.flatMap((m) => m.assigned)
    return new Set(all).size === all.length && all.length === a.partitions
  }
  try {
    for (const m of members) {
      await m.consumer.connect()
      await m.consumer.subscribe({ topics: [a.topic], fromBeginning: true })
      await m.consumer.run({
        autoCommit: false,
        eachMessage: async ({ topic, partition, message }) => {
          m.records.push(record(topic, partition, message))
          total++
          await m.consumer.commitOffsets([
            { topic, partition, offset: String(Number(message.offset) + 1) },
          ])
          w.notify()
        },
      })
    }
    await w.until(stable)
    const assignments = members.map((m) => m.assigned)
    if (a.produce) {
      const producer = client.producer({ allowAutoTopicCreation: false })
      await producer.connect()
      const messages = []
      for (let i = 0; i < a.count; i++) {
        messages.push({ partition: i % a.partitions, key: 'k-' + i, value: 'v-' + i })
      }
      await producer.send({ topic: a.topic, acks: -1, messages })
      await producer.disconnect()
    }
    await w.until(() => total >= a.count)
    return members.map((m, i) => ({ member: m.name, assigned: assignments[i], records: m.records }))
  } finally {
    for (const m of members) await m.consumer.disconnect()
  }
})
