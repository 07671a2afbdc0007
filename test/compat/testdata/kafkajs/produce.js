'use strict'
// produce.js '{"broker", "topic", "records": [{partition, key, value,
// headers, timestamp}], "compression": "gzip"|"none", "idempotent": bool,
// "sasl"}' sends the records in one sendBatch and prints kafkajs's record
// metadata (partition, baseOffset and logAppendTime per partition).
const { CompressionTypes } = require('kafkajs')
const { kafka, main } = require('./common')

main(async (a) => {
  const producer = kafka(a, 'kafkajs-producer').producer({
    idempotent: !!a.idempotent,
    maxInFlightRequests: a.idempotent ? 1 : undefined,
    allowAutoTopicCreation: false,
  })
  await producer.connect()
  try {
    const messages = a.records.map((r) => ({
      partition: r.partition,
      key: r.key,
      value: r.value,
      headers: r.headers || undefined,
      timestamp: r.timestamp ? String(r.timestamp) : undefined,
    }))
    const meta = await producer.sendBatch({
      acks: -1,
      compression: a.compression === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None,
      topicMessages: [{ topic: a.topic, messages }],
    })
    return meta.map((m) => ({
      partition: m.partition,
      errorCode: m.errorCode,
      baseOffset: Number(m.baseOffset),
      logAppendTime: Number(m.logAppendTime),
    }))
  } finally {
    await producer.disconnect()
  }
})
