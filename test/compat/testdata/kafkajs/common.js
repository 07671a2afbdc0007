'use strict'
// Shared by the kafkajs scripts test/compat/kafkajs_test.go runs: the client
// set-up, and the one JSON answer each script prints on stdout. kafkajs's
// own log goes to stderr, which the Go test shows when a run fails.
// The default partitioner's notice would go to stderr on every run.
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const { Kafka, logLevel } = require('kafkajs')

// args is the JSON object the Go test passes as the script's only argument.
function args() {
  if (process.argv.length < 3) {
    throw new Error('usage: node ' + process.argv[1] + " '<json arguments>'")
  }
  return JSON.parse(process.argv[2])
}

const logCreator = () => ({ namespace, level, label, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
}

// kafka builds a client for a.broker; a.sasl ({mechanism, username,
// password}) turns SASL on.
function kafka(a, clientId) {
  return new Kafka({
    clientId: clientId || 'sluice-compat',
    brokers: [a.broker],
    sasl: a.sasl,
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: a.retries === undefined ? 5 : a.retries, initialRetryTime: 100 },
    logLevel: logLevel.WARN,
    logCreator,
  })
}

// record is a consumed message in the form the Go test reads: key, value
// and header values as strings (null stays null), offsets as numbers.
function record(topic, partition, m) {
  const headers = []
  for (const [k, v] of Object.entries(m.headers || {})) {
    headers.push([k, v === null || v === undefined ? null : v.toString()])
  }
  return {
    topic,
    partition,
    offset: Number(m.offset),
    timestamp: Number(m.timestamp),
    key: m.key === null ? null : m.key.toString(),
    value: m.value === null ? null : m.value.toString(),
    headers,
  }
}

// main runs fn and prints its result as JSON; an error is printed to
// stderr with a non-zero exit, so the Go test fails with it. With
// "expectError" in the arguments the error is the answer instead, printed
// as {"error": {name, type, message}}, and a success is {"error": null}.
function main(fn) {
  const a = args()
  let p = fn(a)
  if (a.expectError) {
    p = p.then(
      () => ({ error: null }),
      (e) => ({ error: { name: e.name, type: e.type || null, message: e.message } })
    )
  }
  let answered = false
  // A consumer that crashed leaves nothing to wait on: node would exit 0
  // with no answer.
  process.on('beforeExit', () => {
    if (!answered) {
      process.stderr.write('FAILED: the script ended without an answer (a consumer crashed?)\n')
      process.exit(2)
    }
  })
  p.then(
    (out) => {
      answered = true
      process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0))
    },
    (err) => {
      answered = true
      process.stderr.write(`FAILED: ${err && err.stack ? err.stack : err}\n`)
      if (err && err.cause) process.stderr.write(`cause: ${err.cause}\n`)
      process.exit(1)
    }
  )
}

// until resolves when cond() holds, checking after every event the caller
// reports with notify(); it never sleeps on a clock.
function waiter() {
  let waiting = []
  return {
    notify() {
      const still = []
      for (const w of waiting) {
        if (w.cond()) w.resolve()
        else still.push(w)
      }
      waiting = still
    },
    until(cond) {
      if (cond()) return Promise.resolve()
      return new Promise((resolve) => waiting.push({ cond, resolve }))
    },
  }
}

module.exports = { kafka, record, main, waiter }
