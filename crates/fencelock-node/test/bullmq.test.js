'use strict'
// `fencelock/bullmq` with the real BullMQ (a dev dependency of the package) on a real server:
// three workers, each in a process of its own, process a repeatable job whose every repetition
// BullMQ delivers twice (two job schedulers plan the same job at the same times): each
// repetition runs once. Three workers with 4 slots each run 12 jobs, at most 2 at once. And the
// wrappers on their own (jobs as BullMQ gives them, without a queue).

const test = require('node:test')
const assert = require('node:assert/strict')
const { fork } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { createRequire } = require('node:module')
const { PACKAGE, startServer, uniqueName, sleep, until } = require('./helpers')
const { Client, InvalidArgumentError } = require(PACKAGE)
// Through the package's `exports`, as a user's `require('fencelock/bullmq')`.
const bullmq = createRequire(path.join(PACKAGE, 'package.json'))('fencelock/bullmq')
const { oncePerRepetition, limitConcurrency, plannedTime } = bullmq
const { Queue } = require('bullmq')
const IORedis = require('ioredis')

let server
let client
let redis
test.before(async () => {
  server = await startServer()
  client = new Client(server.url)
  redis = new IORedis({ host: '127.0.0.1', port: server.port })
})
test.after(async () => {
  await client?.close()
  redis?.disconnect()
})

/** The ticks (ms) of the run-once records of `job`: `fencelock:once:{JOB}:JOB@TICK`. */
function recordedTicks (job) {
  const prefix = `fencelock:once:{${job}}:${job}@`
  return server.raw('KEYS', `fencelock:once:{${job}}:*`).split('\n').filter(Boolean).map((key) => {
    assert.ok(key.startsWith(prefix), key)
    return Date.parse(key.slice(prefix.length))
  }).sort((a, b) => a - b)
}

/** The entries the workers appended to the list `key`. */
async function list (key) {
  return (await redis.lrange(key, 0, -1)).map((line) => JSON.parse(line))
}

/** A worker in a process of its own (test/bullmq-worker.js), once it says it is ready. */
async function startWorker (spec) {
  const env = { ...process.env, FENCELOCK_BULLMQ: JSON.stringify({ port: server.port, url: server.url, ...spec }) }
  delete env.NODE_TEST_CONTEXT
  const child = fork(path.join(__dirname, 'bullmq-worker.js'), [], { env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const failures = []
  let ready
  const readyNow = new Promise((resolve, reject) => {
    ready = resolve
    child.once('exit', (code, signal) => reject(new Error(`the worker exited (${code ?? signal}) before it was ready`)))
  })
  child.on('message', (message) => {
    if (message === 'ready') ready()
    else if (message && message.failed !== undefined) failures.push(message)
  })
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000)
  await readyNow
  return {
    failures,
    async stop () {
      const exited = new Promise((resolve) => child.once('exit', resolve))
      if (child.connected) child.send('stop')
      const killer = setTimeout(() => child.kill('SIGKILL'), 5_000)
      await exited
      clearTimeout(killer)
      clearTimeout(timer)
    }
  }
}

const connection = () => ({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: null })

test('the subpath export: its functions are the ones bullmq.d.ts declares', () => {
  const declarations = fs.readFileSync(path.join(PACKAGE, 'lib', 'bullmq.d.ts'), 'utf8')
  const declared = [...declarations.matchAll(/^export function (\w+)/gm)].map((m) => m[1]).sort()
  assert.deepEqual(declared, ['limitConcurrency', 'oncePerRepetition', 'plannedTime'])
  assert.deepEqual(Object.keys(bullmq).sort(), declared)
  const manifest = JSON.parse(fs.readFileSync(path.join(PACKAGE, 'package.json'), 'utf8'))
  assert.equal(manifest.exports['./bullmq'].types, './lib/bullmq.d.ts')
  assert.equal(manifest.peerDependenciesMeta.bullmq.optional, true)
  assert.match(manifest.peerDependencies.bullmq, /^>=5/)
})

test('a repetition runs once whichever scheduler planned it; a plain job once per id', async () => {
  const name = uniqueName('rollup')
  const planned = Date.UTC(2026, 10, 29, 0, 5)
  // Two job schedulers that plan the same job at the same time: two jobs, one repetition.
  const a = { name, id: `repeat:every-5-min:${planned}`, repeatJobKey: 'every-5-min' }
  const b = { name, id: `repeat:host-2:rollup:${planned}`, repeatJobKey: 'host-2:rollup' }
  assert.equal(plannedTime(a).getTime(), planned)
  assert.equal(plannedTime({ name, id: '12' }), null)
  const seen = []
  const processor = oncePerRepetition(client, async (job, context) => {
    seen.push({ id: job.id, fence: typeof context.fence, tick: context.tick, token: context.token })
    return `${job.id} ran`
  }, { keep: 60_000 })
  const results = await Promise.all([processor(a, 'token-a'), processor(b, 'token-b'), processor(a, 'token-c')])
  assert.equal(seen.length, 1, 'one run of the repetition')
  assert.equal(seen[0].fence, 'bigint')
  assert.equal(seen[0].tick.getTime(), planned)
  assert.equal(results.filter((r) => r !== undefined).length, 1, 'the others resolve undefined')
  assert.equal(results.find((r) => r !== undefined), `${seen[0].id} ran`)
  assert.deepEqual(recordedTicks(name), [planned])
  assert.ok(Number(server.raw('PTTL', `fencelock:once:{${name}}:${name}@${new Date(planned).toISOString()}`)) <= 60_000, 'kept as keep says')
  // The next repetition runs.
  assert.equal(await processor({ ...a, id: `repeat:every-5-min:${planned + 300_000}` }), `repeat:every-5-min:${planned + 300_000} ran`)

  // A job that is not a repetition: once per id (KEY/ID), kept a week by default.
  const plain = { name, id: '41' }
  assert.equal(await processor(plain), '41 ran')
  assert.equal(await processor(plain), undefined)
  assert.equal(await processor({ name, id: '42' }), '42 ran')
  assert.equal(seen.length, 4)
  assert.equal(seen[2].tick, null)
  const record = `fencelock:once:{${name}/41}:${name}/41`
  assert.equal(server.raw('EXISTS', record), '1')
  assert.ok(Number(server.raw('PTTL', record)) <= 60_000)
  // Kept a week by default (a repetition's record too).
  const kept = oncePerRepetition(client, () => 'ran')
  assert.equal(await kept({ name, id: '43' }), 'ran')
  assert.equal(await kept({ ...a, id: `repeat:every-5-min:${planned + 600_000}` }), 'ran')
  for (const key of [`fencelock:once:{${name}/43}:${name}/43`, `fencelock:once:{${name}}:${name}@${new Date(planned + 600_000).toISOString()}`]) {
    const ttl = Number(server.raw('PTTL', key))
    assert.ok(ttl > 7 * 86_400_000 - 60_000 && ttl <= 7 * 86_400_000, `${key}: ${ttl}`)
  }

  // The key: `job`, a string or a function of the job.
  const key = uniqueName('key')
  let runs = 0
  const byData = oncePerRepetition(client, () => { runs += 1 }, { job: (job) => `${key}/${job.data.table}` })
  await byData({ ...a, data: { table: 'events' } })
  await byData({ ...b, data: { table: 'events' } })
  await byData({ ...b, data: { table: 'users' } })
  assert.equal(runs, 2)
  assert.deepEqual(recordedTicks(`${key}/events`), [planned])
})

test('a processor that throws: the error goes on; after `attempts` failed runs, UnrecoverableError', async () => {
  const name = uniqueName('failing')
  const job = { name, id: 'repeat:s:1800000000000', repeatJobKey: 's' }
  let runs = 0
  const processor = oncePerRepetition(client, async () => {
    runs += 1
    throw new Error(`failed ${runs}`)
  }, { attempts: 2 })
  await assert.rejects(processor(job), /failed 1/)
  await assert.rejects(processor(job), /failed 2/)
  await assert.rejects(processor(job), (e) => e.name === 'UnrecoverableError' && e.failures === 2 && /2 runs of .*@2027-01-15T08:00:00.000Z failed/.test(e.message))
  assert.equal(runs, 2)
})

test('the wrappers refuse what they cannot use', () => {
  const fn = async () => {}
  assert.throws(() => oncePerRepetition(null, fn), TypeError)
  assert.throws(() => oncePerRepetition(client, 'fn'), TypeError)
  assert.throws(() => oncePerRepetition(client, fn, { ttl: '10s' }), (e) => e instanceof InvalidArgumentError && e.option === 'ttl')
  assert.throws(() => oncePerRepetition(client, fn, { tick: { every: 1000 } }), (e) => e instanceof InvalidArgumentError && e.option === 'tick')
  assert.throws(() => oncePerRepetition(client, fn, { job: 3 }), (e) => e instanceof InvalidArgumentError && e.option === 'job')
  assert.throws(() => limitConcurrency(client, fn), (e) => e instanceof InvalidArgumentError && e.option === 'name')
  assert.throws(() => limitConcurrency(client, fn, { name: 'x' }), (e) => e instanceof InvalidArgumentError && e.option === 'permits')
  assert.throws(() => limitConcurrency(client, fn, { name: 'x', permits: 2, take: 2 }), (e) => e instanceof InvalidArgumentError && e.option === 'take')
  // A repeatable job whose id does not say when it was planned.
  return assert.rejects(oncePerRepetition(client, fn)({ name: 'x', id: 'custom', repeatJobKey: 'k' }), /planned time/)
})

test('limitConcurrency: the permit\'s lost signal, as using; nested with oncePerRepetition', async () => {
  const name = uniqueName('permits')
  const warnings = []
  const own = new Client(server.url, { logger: { warn: (line) => warnings.push(line) } })
  let signalled
  const processor = limitConcurrency(own, async (job, { signal, guard, token }) => {
    assert.equal(token, 'tok')
    assert.equal(typeof guard.fence, 'bigint')
    await client.forceRelease(name)
    signalled = await Promise.race([
      new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true })),
      sleep(5_000).then(() => null)
    ])
    return 'finished'
  }, { name, permits: 2, ttl: 1_500 })
  await assert.rejects(processor({ name: 'job', id: '1' }, 'tok'), (e) => e.code === 'not_held')
  assert.equal(signalled?.code, 'not_held', 'the signal aborted when the permit was lost')
  assert.ok(warnings.some((line) => line.includes(name)), 'the loss was logged')
  await own.close()

  // BullMQ's cancellation reaches the processor through the same signal.
  const cancel = new AbortController()
  const cancelled = limitConcurrency(client, async (job, { signal }) => {
    cancel.abort(new Error('cancelled by BullMQ'))
    return signal.aborted && signal.reason.message
  }, { name: uniqueName('permits'), permits: 1 })
  assert.equal(await cancelled({ name: 'job', id: '2' }, 'tok', cancel.signal), 'cancelled by BullMQ')

  // Both: a permit held while the repetition runs once; the processor gets both contexts. (The
  // semaphore and the run-once lock need names of their own: a name is one kind of lock.)
  const both = uniqueName('both')
  const contexts = []
  const nested = limitConcurrency(client, oncePerRepetition(client, async (job, context) => {
    contexts.push(context)
    return 'ran'
  }), { name: `${both}/permits`, permits: 1 })
  const job = { name: both, id: 'repeat:x:1800000000000', repeatJobKey: 'x' }
  const results = await Promise.all([nested(job, 'tok'), nested({ ...job, id: 'repeat:y:1800000000000' }, 'tok')])
  assert.deepEqual(results.sort(), ['ran', undefined])
  assert.equal(contexts.length, 1)
  const [context] = contexts
  assert.equal(context.token, 'tok')
  assert.equal(context.tick.getTime(), 1800000000000)
  assert.equal(typeof context.fence, 'bigint')
  assert.equal(typeof context.guard.fence, 'bigint')
  assert.ok(context.signal instanceof AbortSignal)
})

test('three workers (processes) run each repetition of a repeatable job once, twice delivered', async () => {
  const queue = uniqueName('repeat').replaceAll('/', '-')
  const name = uniqueName('tick')
  const spec = { mode: 'once', queue, list: `${queue}:runs`, deliveries: `${queue}:deliveries`, hold: 100, concurrency: 2 }
  const workers = await Promise.all([1, 2, 3].map(() => startWorker(spec)))
  const producers = [new Queue(queue, { connection: connection() }), new Queue(queue, { connection: connection() })]
  try {
    // Two producers add the same repeatable job under different scheduler ids: BullMQ plans
    // each repetition twice (jobs repeat:a:T and repeat:b:T), 500 ms apart, 10 times.
    const every = 500
    const repetitions = 10
    const startDate = Math.ceil((Date.now() + 700) / every) * every
    await Promise.all(producers.map((producer, i) => producer.upsertJobScheduler(`${queue}-scheduler-${i}`,
      { every, startDate, limit: repetitions }, { name, data: {} })))
    await until(async () => (await list(spec.deliveries)).length >= 2 * repetitions, 'every repetition delivered twice', 15_000)
    await until(async () => {
      const counts = await producers[0].getJobCounts('active', 'wait', 'delayed', 'prioritized')
      return Object.values(counts).every((n) => n === 0)
    }, 'the queue drained', 5_000)

    const runs = await list(spec.list)
    const deliveries = await list(spec.deliveries)
    const ticks = runs.map((run) => run.tick).sort((a, b) => a - b)
    // Once each: never two runs of a tick.
    assert.equal(new Set(ticks).size, ticks.length, `a tick ran twice: ${ticks}`)
    // Every delivery is of a repetition (repeat:<scheduler>:<planned ms>), each delivered twice.
    const delivered = new Map()
    for (const { id } of deliveries) {
      const match = /^repeat:.+:(\d+)$/.exec(id)
      assert.ok(match, id)
      delivered.set(Number(match[1]), (delivered.get(Number(match[1])) ?? 0) + 1)
    }
    assert.deepEqual([...delivered.keys()].sort((a, b) => a - b), ticks, 'the ticks run are those delivered')
    assert.ok([...delivered.values()].every((n) => n >= 2), `each repetition delivered at least twice: ${[...delivered.values()]}`)
    // Delivered to several processes at once: the duplicates of a tick met in two workers.
    const workersOf = new Map()
    for (const { id, pid } of deliveries) {
      const tick = id.replace(/^repeat:.+:/, '')
      workersOf.set(tick, (workersOf.get(tick) ?? new Set()).add(pid))
    }
    assert.ok([...workersOf.values()].some((pids) => pids.size >= 2), 'no tick was delivered to two workers')
    // As many runs as records, one per tick.
    assert.deepEqual(recordedTicks(name), ticks, 'a record for each run')
    assert.equal(ticks.length, repetitions)
    // The ticks are the times BullMQ planned: consecutive multiples of 500 ms from startDate.
    assert.deepEqual(ticks, Array.from({ length: repetitions }, (_, i) => startDate + i * every))
    // Run by the workers in turn, with fences that grow.
    const fences = runs.sort((a, b) => a.tick - b.tick).map((run) => BigInt(run.fence))
    assert.ok(fences.every((fence, i) => i === 0 || fence > fences[i - 1]))
    for (const worker of workers) assert.deepEqual(worker.failures, [])
  } finally {
    await Promise.all(producers.map((producer) => producer.close()))
    await Promise.all(workers.map((worker) => worker.stop()))
  }
})

test('three workers with 4 slots each run at most 2 jobs at once (limitConcurrency, 2 permits)', async () => {
  const queue = uniqueName('limit').replaceAll('/', '-')
  const spec = {
    mode: 'limit', queue, list: `${queue}:runs`, inside: `${queue}:inside`, semaphore: uniqueName('exports'), permits: 2, hold: 150, concurrency: 4
  }
  const workers = await Promise.all([1, 2, 3].map(() => startWorker(spec)))
  const producer = new Queue(queue, { connection: connection() })
  try {
    await producer.addBulk(Array.from({ length: 12 }, (_, i) => ({ name: 'export', data: { i } })))
    await until(async () => (await list(spec.list)).length >= 12, 'the 12 jobs done', 15_000)
    const runs = await list(spec.list)
    assert.equal(runs.length, 12)
    // At no moment more than 2 between a start and its end (starts and ends from the processes'
    // clocks, one machine's), and the counter never above 2.
    const events = runs.flatMap((run) => [[run.start, 1], [run.end, -1]]).sort((a, b) => a[0] - b[0] || a[1] - b[1])
    let inside = 0
    let most = 0
    for (const [, step] of events) {
      inside += step
      most = Math.max(most, inside)
    }
    assert.ok(most <= 2, `${most} jobs overlapped`)
    assert.ok(Math.max(...runs.map((run) => run.inside)) <= 2)
    assert.equal(most, 2, 'the 2 permits were used')
    assert.ok(new Set(runs.map((run) => run.pid)).size >= 2, 'several workers ran jobs')
    for (const worker of workers) assert.deepEqual(worker.failures, [])
  } finally {
    await producer.close()
    await Promise.all(workers.map((worker) => worker.stop()))
  }
})
