'use strict'
// A BullMQ worker in a process of its own, for test/bullmq.test.js (started with
// child_process.fork, told what to do in FENCELOCK_BULLMQ; not a test file itself: run without
// a parent, it does nothing). It says `ready` once its worker listens, and closes everything
// when told `stop`.
//   mode `once`:  oncePerRepetition(processor); the processor appends
//                 { id, tick, fence, pid } to `list`, every delivery { id, pid } to `deliveries`.
//   mode `limit`: limitConcurrency(processor, { name, permits }); the processor appends
//                 { id, start, end, inside } to `list` (`inside`: the counter `inside` after its
//                 INCR, decremented at its end).

const path = require('node:path')
const { createRequire } = require('node:module')

if (typeof process.send !== 'function' || !process.env.FENCELOCK_BULLMQ) process.exit(0)

// The package as helpers.js finds it (not loaded here: it hooks node:test).
const PACKAGE = process.env.FENCELOCK_NODE_PACKAGE || path.resolve(__dirname, '..')
const { Client } = require(PACKAGE)
// Through the package's `exports`, as a user's `require('fencelock/bullmq')`.
const { oncePerRepetition, limitConcurrency } = createRequire(path.join(PACKAGE, 'package.json'))('fencelock/bullmq')
const { Worker } = require('bullmq')
const IORedis = require('ioredis')

const spec = JSON.parse(process.env.FENCELOCK_BULLMQ)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function main () {
  const connection = { host: '127.0.0.1', port: spec.port, maxRetriesPerRequest: null }
  const redis = new IORedis(connection)
  const client = new Client(spec.url)
  let processor
  if (spec.mode === 'once') {
    const once = oncePerRepetition(client, async (job, { fence, tick }) => {
      await sleep(spec.hold)
      await redis.rpush(spec.list, JSON.stringify({ id: job.id, tick: tick.getTime(), fence: String(fence), pid: process.pid }))
      return 'ran'
    }, { keep: 60_000, ttl: 5_000 })
    processor = async (job, token, signal) => {
      await redis.rpush(spec.deliveries, JSON.stringify({ id: job.id, pid: process.pid }))
      return once(job, token, signal)
    }
  } else if (spec.mode === 'limit') {
    processor = limitConcurrency(client, async (job, { signal }) => {
      const start = Date.now()
      const inside = await redis.incr(spec.inside)
      await sleep(spec.hold)
      signal.throwIfAborted()
      await redis.decr(spec.inside)
      await redis.rpush(spec.list, JSON.stringify({ id: job.id, start, end: Date.now(), inside, pid: process.pid }))
    }, { name: spec.semaphore, permits: spec.permits, ttl: 5_000 })
  } else {
    throw new Error(`unknown mode ${spec.mode}`)
  }
  const worker = new Worker(spec.queue, processor, { connection, concurrency: spec.concurrency })
  worker.on('failed', (job, error) => process.send({ failed: job?.id, error: String(error?.stack ?? error) }))
  await worker.waitUntilReady()
  process.on('message', async (message) => {
    if (message !== 'stop') return
    await worker.close()
    await client.close()
    await redis.quit()
    process.send('stopped')
    process.disconnect()
  })
  process.send('ready')
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
