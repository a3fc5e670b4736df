'use strict'
// The process's edges: contention among processes, a holder paused past its lease (its write
// refused, its signal aborted), and every way a process or a worker ends while it holds or
// waits, which leaves nothing held or queued.

const test = require('node:test')
const assert = require('node:assert/strict')
const { PACKAGE, startServer, sleep, uniqueName, node, lines, ended, until } = require('./helpers')
const { Client, Writes } = require(PACKAGE)

let server
let client
test.before(async () => {
  server = await startServer()
  client = new Client(server.url)
})

const pkg = JSON.stringify(PACKAGE)

/** A child that takes `name` (printing `held FENCE`), then does `then` (JavaScript). */
function holder (name, then, { ttl = 30000 } = {}) {
  return node(`
    const { Client } = require(${pkg})
    ;(async () => {
      const client = new Client(process.env.URL)
      const guard = await client.lock(process.env.NAME, { ttl: ${ttl} }).acquire()
      globalThis.guard = guard
      console.log('held ' + guard.fence)
      ${then}
    })().catch((e) => { console.error(e); process.exit(9) })
  `, { URL: server.url, NAME: name })
}

async function free (name) {
  const info = await client.inspect(name)
  return info.holder === null && info.waiting === 0
}

test('processes take turns: a counter in Redis ends exact, never two inside', async () => {
  const name = uniqueName('procs')
  const counter = `${name}:counter`
  const code = `
    const { Client } = require(${pkg})
    const { execFileSync } = require('node:child_process')
    ;(async () => {
      const client = new Client(process.env.URL)
      for (let i = 0; i < 10; i++) {
        await client.using(process.env.NAME, { ttl: 10000 }, async () => {
          const inside = Number(execFileSync('redis-cli', ['-p', process.env.PORT, 'INCR', process.env.NAME + ':inside'], { encoding: 'utf8' }))
          if (inside !== 1) { console.log('overlap'); process.exit(3) }
          execFileSync('redis-cli', ['-p', process.env.PORT, 'INCR', process.env.COUNTER])
          execFileSync('redis-cli', ['-p', process.env.PORT, 'DECR', process.env.NAME + ':inside'])
        })
      }
      console.log('done')
    })().catch((e) => { console.error(e); process.exit(9) })
  `
  const children = Array.from({ length: 4 }, () => node(code, { URL: server.url, NAME: name, PORT: String(server.port), COUNTER: counter }))
  const outs = children.map(lines)
  for (const out of outs) assert.equal(await out.next(60000), 'done')
  for (const child of children) assert.deepEqual(await ended(child), { code: 0, signal: null })
  assert.equal(server.raw('GET', counter), '40')
})

test('a holder paused past its lease: its fenced write is refused and its signal aborted', async () => {
  const name = uniqueName('paused')
  const resource = `${name}:resource`
  const child = holder(name, `
    // Lost already (the pause came before this line): the signal is aborted when read.
    const signal = guard.signal
    if (signal.aborted) console.log('aborted ' + signal.reason.reason)
    else signal.addEventListener('abort', () => console.log('aborted ' + signal.reason.reason))
    process.stdin
    setTimeout(async () => {
      try {
        await client.fencedStore(process.env.NAME + ':resource').apply(guard.fence, new (require(${pkg}).Writes)().set(process.env.NAME + ':value', 'stale'))
        console.log('written')
      } catch (e) { console.log('refused ' + e.code) }
      process.exit(0)
    }, 1500)
  `, { ttl: 500 })
  const out = lines(child)
  const held = await out.next()
  assert.match(held, /^held \d+$/)
  process.kill(child.pid, 'SIGSTOP')
  try {
    // Its lease runs out; a new holder writes with a newer fence.
    const guard = await client.lock(name, { wait: 10000 }).acquire()
    await client.fencedStore(resource).apply(guard.fence, new Writes().set(`${name}:value`, 'fresh'))
    await guard.release()
  } finally {
    process.kill(child.pid, 'SIGCONT')
  }
  const seen = [await out.next(), await out.next()].sort()
  assert.deepEqual(seen, ['aborted expired', 'refused fenced'].sort())
  assert.equal(server.raw('GET', `${name}:value`), 'fresh')
  await ended(child)
})

const endings = {
  'process.exit()': 'process.exit(0)',
  // A held lock keeps the program running (client.test.js): the end of the program while
  // holding is a release first.
  'an uncaught exception': "setTimeout(() => { throw new Error('crash') }, 10)",
  'SIGINT (nobody listening)': "process.kill(process.pid, 'SIGINT'); setInterval(() => {}, 1000)",
  'SIGTERM (nobody listening)': "process.kill(process.pid, 'SIGTERM'); setInterval(() => {}, 1000)"
}

for (const [how, then] of Object.entries(endings)) {
  test(`${how} while holding releases the lock at once`, async () => {
    const name = uniqueName('exit')
    const child = holder(name, then)
    const out = lines(child)
    assert.match(await out.next(), /^held/)
    const { code, signal } = await ended(child)
    if (how.startsWith('SIGINT')) assert.equal(signal, 'SIGINT', 'the process still dies of the signal')
    if (how.startsWith('SIGTERM')) assert.equal(signal, 'SIGTERM')
    if (how === 'process.exit()') assert.equal(code, 0, out.stderr())
    assert.ok(await free(name), `the lock is still held after ${how}`)
  })
}

test('process.exit() with an extend in flight releases the lock once the extend ends', async () => {
  const name = uniqueName('extending')
  // The server pauses for 500 ms: the extend is on its way when the process exits.
  const child = holder(name, `
    const port = new URL(process.env.URL).port
    require('node:child_process').execFileSync('redis-cli', ['-p', port, 'CLIENT', 'PAUSE', '500', 'ALL'])
    guard.extend(30000).catch(() => {})
    setTimeout(() => process.exit(0), 100)
  `)
  const out = lines(child)
  assert.match(await out.next(), /^held/)
  assert.deepEqual(await ended(child), { code: 0, signal: null }, out.stderr())
  assert.ok(await free(name), 'the lock is still held: the exit skipped it')
})

test('a program that handles SIGINT itself keeps its lock through it', async () => {
  const name = uniqueName('handled')
  const child = holder(name, `
    process.on('SIGINT', async () => { console.log('handled ' + guard.isHeld()); await guard.release(); process.exit(0) })
    process.kill(process.pid, 'SIGINT')
    setInterval(() => {}, 1000)
  `)
  const out = lines(child)
  assert.match(await out.next(), /^held/)
  assert.equal(await out.next(), 'handled true')
  assert.deepEqual(await ended(child), { code: 0, signal: null })
  assert.ok(await free(name))
})

test('an exit while waiting leaves the line at once', async () => {
  const name = uniqueName('waiter')
  const held = await client.lock(name, { ttl: 30000 }).acquire()
  const child = node(`
    const { Client } = require(${pkg})
    const client = new Client(process.env.URL)
    client.lock(process.env.NAME).acquire().then(() => console.log('granted?'))
    setTimeout(() => { console.log('leaving'); process.exit(0) }, 500)
  `, { URL: server.url, NAME: name })
  const out = lines(child)
  assert.equal(await out.next(), 'leaving')
  await ended(child)
  assert.equal((await client.inspect(name)).waiting, 0, 'the exited waiter is still in line')
  await held.release()
  const next = await client.lock(name, { wait: 1000 }).acquire()
  await next.release()
})

test('process.exit() with grants whose settles are still queued leaves nothing held', async () => {
  // The child asks for plain locks, several locks at once, a leadership and a run-once's lock,
  // then keeps its JavaScript thread busy while the grants land: their settles wait in the
  // thread's queue, which process.exit() never runs. The exit gives them back all the same.
  const name = uniqueName('queued')
  const child = node(`
    const { Client } = require(${pkg})
    const client = new Client(process.env.URL)
    const name = process.env.NAME
    const ignore = () => {}
    ;(async () => {
      await client.inspect(name) // connected
      for (let i = 0; i < 8; i++) client.lock(name + '/' + i, { ttl: 30000 }).acquire().then(ignore, ignore)
      client.multiLock([name + '/m1', name + '/m2'], { ttl: 30000 }).acquire().then(ignore, ignore)
      client.election(name + '/e').campaign('me', { ttl: 30000 }).then(ignore, ignore)
      client.once(name + '/once').run(() => 'ran').then(ignore, ignore)
      const until = Date.now() + 500
      while (Date.now() < until) {} // the grants land meanwhile; nothing settles
      console.log('exiting')
      process.exit(0)
    })().catch((e) => { console.error(e); process.exit(9) })
  `, { URL: server.url, NAME: name })
  const out = lines(child)
  assert.equal(await out.next(), 'exiting')
  assert.deepEqual(await ended(child), { code: 0, signal: null }, out.stderr())
  const names = [...Array(8).keys()].map((i) => `${name}/${i}`).concat([`${name}/m1`, `${name}/m2`, `${name}/e`, `${name}/once`])
  const held = []
  for (const n of names) if (!(await free(n))) held.push(n)
  assert.deepEqual(held, [], 'held after the exit, left to their leases')
  assert.equal(await client.election(`${name}/e`).leader(), null, 'the leadership outlived the exit')
})

test('a worker thread that exits, or is terminated, while holding leaves nothing held', async () => {
  const { Worker } = require('node:worker_threads')
  // A held lock keeps the worker running (as it does a process): it ends by process.exit().
  for (const how of ['exits', 'terminated']) {
    const name = uniqueName(`worker-${how}`)
    const worker = new Worker(`
      const { parentPort } = require('node:worker_threads')
      const { Client } = require(${pkg})
      ;(async () => {
        const client = new Client(${JSON.stringify(server.url)})
        const guard = await client.lock(${JSON.stringify(name)}, { ttl: 30000 }).acquire()
        globalThis.keep = guard
        parentPort.postMessage('held')
        ${how === 'exits' ? 'setTimeout(() => process.exit(0), 50)' : 'setInterval(() => {}, 1000)'}
      })()
    `, { eval: true })
    const [message] = await new Promise((resolve, reject) => {
      worker.once('message', (m) => resolve([m]))
      worker.once('error', reject)
    })
    assert.equal(message, 'held')
    if (how === 'terminated') await worker.terminate()
    else await new Promise((resolve) => worker.once('exit', resolve))
    assert.ok(await free(name), `the lock is still held after a worker ${how}`)
  }
})

test('a pending call keeps the process alive, and nothing else does once it settles', async () => {
  const name = uniqueName('alive')
  const guard = await client.lock(name).acquire()
  try {
    // The child's only pending work is its wait: without it the process would exit at once,
    // with nothing printed. It waits 400 ms, gives up, and then exits on its own.
    const started = Date.now()
    const child = node(`
      const { Client } = require(${pkg})
      const client = new Client(process.env.URL)
      client.lock(process.env.NAME, { wait: 400 }).acquire()
        .then(() => console.log('held'), (e) => console.log(e.code))
    `, { URL: server.url, NAME: name })
    const out = lines(child)
    assert.equal(await out.next(30000), 'timed_out')
    assert.deepEqual(await ended(child, 30000), { code: 0, signal: null })
    assert.ok(Date.now() - started >= 400)
  } finally {
    await guard.release()
  }
})

test('a waiter SIGKILLed while its call is pending in the addon costs the next waiter one claim at most', async () => {
  const name = uniqueName('killed-waiter')
  const held = await client.lock(name, { ttl: 30000 }).acquire()
  // A child waits in line (its acquire pending on the runtime, its Promise in the bridge's queue).
  const child = node(`
    const { Client } = require(${pkg})
    const client = new Client(process.env.URL)
    console.log('waiting')
    client.lock(process.env.NAME, { ttl: 30000 }).acquire().then(() => console.log('held'))
  `, { URL: server.url, NAME: name })
  assert.equal(await lines(child).next(), 'waiting')
  await until(async () => (await client.inspect(name)).waiting === 1, 'the child in line')
  const later = client.lock(name, { ttl: 30000 }).acquire()
  await until(async () => (await client.inspect(name)).waiting === 2, 'both in line')
  process.kill(child.pid, 'SIGKILL')
  assert.deepEqual(await ended(child), { code: null, signal: 'SIGKILL' })
  // The release passes the lock to the dead waiter first in line: its claim (1 s) runs out and
  // the next live waiter takes it, well within the 30 s leases.
  const released = Date.now()
  assert.equal(await held.release(), true)
  const guard = await later
  assert.ok(Date.now() - released < 10000, `${Date.now() - released} ms`)
  assert.equal(await guard.release(), true)
  assert.ok(await free(name))
})
