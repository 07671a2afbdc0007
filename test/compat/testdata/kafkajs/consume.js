'use strict'
// consume.js '{"broker", "topic", "group", "count", "mode": "message"|"batch",
// "seek": {partition, offset}, "readUncommitted", "sasl"}' reads count
// records as a member of group from the earliest offset (or from seek) and
// prints them; in batch mode it also prints each batch as eachBatch saw it.
const { kafka, record, main, waiter } = require('./common')

main(async (a) => {
  const consumer = kafka(a, 'kafkajs-consumer').consumer({
    groupId: a.group,
    readUncommitted: !!a.readUncommitted,
    heartbeatInterval: 500,
    allowAutoTopicCreation: false,
  })
  const records = []
  const batches = []
  const w = waiter()
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [a.topic], fromBeginning: true })
    const run = {
      autoCommit: false,
    }
    if (a.mode === 'batch') {
      run.eachBatchAutoResolve = false
      run.eachBatch = async ({ batch, resolveOffset, heartbeat }) => {
        if (batch.isEmpty()) return
        batches.push({
          partition: batch.partition,
          firstOffset: Number(batch.firstOffset()),
          lastOffset: Number(batch.lastOffset()),
          highWatermark: Number(batch.highWatermark),
          count: batch.messages.length,
        })
        for (const m of batch.messages) {
          records.push(record(batch.topic, batch.partition, m))
          resolveOffset(m.offset)
        }
        await heartbeat()
        w.notify()
      }
    } else {
      run.eachMessage = async ({ topic, partition, message }) => {
        records.push(record(topic, partition, message))
        w.notify()
      }
    }
    await consumer.run(run)
    if (a.seek) {
      consumer.seek({ topic: a.topic, partition: a.seek.partition, offset: String(a.seek.offset) })
    }
    await w.until(() => records.length >= a.count)
  } finally {
    await consumer.disconnect()
  }
  return { records, batches }
})
