'use strict'
// The lock family from Node: exclusion among async tasks, fences, waiting, aborting a wait,
// extending, releasing, `using` and `await using`, and the other kinds.

const test = require('node:test')
const assert = require('node:assert/strict')
const { PACKAGE, startServer, sleep, uniqueName, aborted, until } = require('./helpers')
const { Client, FencelockError } = require(PACKAGE)

let server
let client
test.before(async () => {
  server = await startServer()
  client = new Client(server.url)
})

test('async tasks take turns: never two holders, fences strictly growing', async () => {
  const name = uniqueName()
  let inside = 0
  let most = 0
  const fences = []
  await Promise.all(Array.from({ length: 8 }, async () => {
    for (let i = 0; i < 5; i++) {
      const guard = await client.lock(name, { ttl: 5000 }).acquire()
      inside += 1
      most = Math.max(most, inside)
      fences.push(guard.fence)
      await sleep(2)
      inside -= 1
      assert.equal(await guard.release(), true)
    }
  }))
  assert.equal(most, 1)
  assert.equal(fences.length, 40)
  for (let i = 1; i < fences.length; i++) assert.ok(fences[i] > fences[i - 1], 'fences grow')
  assert.equal(typeof fences[0], 'bigint')
})

test('a waiter is woken by the release, not by polling', async () => {
  const name = uniqueName()
  const held = await client.lock(name, { ttl: 30000 }).acquire()
  const waiting = client.lock(name).acquire()
  await sleep(300)
  const released = Date.now()
  await held.release()
  const guard = await waiting
  assert.ok(Date.now() - released < 1000, 'the waiter took over at the release')
  await guard.release()
})

test('busy, timed out, and tryAcquire', async () => {
  const name = uniqueName()
  const held = await client.lock(name, { ttl: 10000 }).acquire()
  await assert.rejects(client.lock(name, { wait: 0 }).acquire(), (e) => e instanceof FencelockError && e.code === 'busy' && e.lock === name && e.remaining > 0)
  await assert.rejects(client.lock(name, { wait: 100 }).acquire(), (e) => e.code === 'timed_out' && e.waited >= 100)
  assert.equal(await client.lock(name).tryAcquire(), null)
  await held.release()
  const got = await client.lock(name).tryAcquire()
  assert.ok(got)
  await got.release()
})

test('an aborted wait rejects with the signal reason, holds nothing and leaves its place', async () => {
  const name = uniqueName()
  const held = await client.lock(name, { ttl: 30000 }).acquire()
  const controller = new AbortController()
  const waiting = client.lock(name).acquire({ signal: controller.signal })
  await until(async () => (await client.inspect(name)).waiting === 1, 'the request is in line')
  const reason = new Error('given up')
  controller.abort(reason)
  await assert.rejects(waiting, (e) => e === reason)
  assert.equal((await client.inspect(name)).waiting, 0, 'the place in line is left when the abort rejects')
  await held.release()
  // Nothing was granted to the aborted request: the next one gets the lock at once.
  const next = await client.lock(name, { wait: 0 }).acquire()
  await next.release()
  // An aborted signal refuses at once.
  await assert.rejects(client.lock(name).acquire({ signal: AbortSignal.abort('no') }), (e) => e === 'no')
})

test('an aborted wait rejects only once its place is left, however long leaving takes', async () => {
  // Writes are paused as the wait is aborted, so leaving the line takes 600 ms: the Promise
  // rejects after that, not before (the call's future is dropped, and its give-back counted,
  // before the rejection waits for it).
  const paused = await startServer()
  const own = new Client(paused.url)
  const name = uniqueName()
  const held = await own.lock(name, { ttl: 30000 }).acquire()
  const controller = new AbortController()
  const waiting = own.lock(name).acquire({ signal: controller.signal })
  await until(async () => (await own.inspect(name)).waiting === 1, 'the request is in line')
  paused.raw('CLIENT', 'PAUSE', '600', 'WRITE')
  const reason = new Error('given up')
  controller.abort(reason)
  await assert.rejects(waiting, (e) => e === reason)
  // A read, which the pause lets through.
  assert.equal(paused.raw('ZCARD', `fencelock:{${name}}:waiters`), '0', 'the place in line is left when the abort rejects')
  assert.equal(await held.release(), true)
  await own.close()
  paused.stop()
})

test('an aborted wait waits for its own give-back, not for the thread\'s other releases', async () => {
  // Other holds released through a paused server take seconds; the aborted wait's own place
  // in line is left at once (it waited up to 2 s for all of the thread's work before).
  const slow = await startServer()
  const other = new Client(slow.url, { commandTimeout: 10000 })
  const name = uniqueName()
  const guards = []
  for (let i = 0; i < 8; i++) guards.push(await other.lock(`${name}/other/${i}`, { ttl: 30000 }).acquire())
  const held = await client.lock(name, { ttl: 30000 }).acquire()
  slow.raw('CLIENT', 'PAUSE', '4000', 'ALL')
  let settled = 0
  const releases = guards.map((g) => g.release().finally(() => { settled += 1 }))
  await sleep(200)
  const started = Date.now()
  await assert.rejects(client.lock(name).acquire({ signal: AbortSignal.timeout(300) }), (e) => e.name === 'TimeoutError')
  const took = Date.now() - started
  // 300 ms and its own give-back; the whole background work would take 2300 ms at least.
  assert.ok(took < 1700, `the aborted wait took ${took} ms`)
  assert.equal(settled, 0, 'the other releases were not held up')
  assert.equal((await client.inspect(name)).waiting, 0, 'its place in line is left')
  await held.release()
  assert.deepEqual(await Promise.all(releases), guards.map(() => true))
  slow.stop()
})

test('aborts racing grants leave nothing held', async () => {
  const name = uniqueName()
  for (let i = 0; i < 30; i++) {
    const controller = new AbortController()
    const attempt = client.lock(name, { ttl: 10000 }).acquire({ signal: controller.signal })
    await sleep(i % 3)
    controller.abort()
    try {
      const guard = await attempt
      await guard.release()
    } catch (e) {
      assert.equal(e.name, 'AbortError')
    }
    await until(async () => (await client.inspect(name)).holder === null, `round ${i}: a grant raced by an abort was left held`, 5000)
  }
})

test('extend, remaining, release twice, and the signal', async () => {
  const name = uniqueName()
  const guard = await client.lock(name, { ttl: 2000, autoRenew: false }).acquire()
  assert.ok(guard.remaining() > 1000 && guard.remaining() <= 2000)
  await guard.extend(10000)
  assert.ok(guard.remaining() > 9000)
  assert.equal(guard.signal.aborted, false)
  assert.equal(guard.lostReason, null)
  assert.equal(await guard.release(), true)
  assert.equal(await guard.release(), false)
  assert.equal(guard.signal.aborted, false, 'a release is not a loss: the signal stays quiet')
  assert.equal(guard.lostReason, 'released')
  await assert.rejects(guard.extend(1000), (e) => e.code === 'not_held' && e.reason === 'released')
})

test('a lease that runs out aborts the signal with expired', async () => {
  const name = uniqueName()
  const guard = await client.lock(name, { ttl: 300, autoRenew: false }).acquire()
  const reason = await aborted(guard.signal)
  assert.equal(reason.code, 'not_held')
  assert.equal(reason.reason, 'expired')
  assert.equal(guard.isHeld(), false)
})

test('using holds for the function and releases after, also when it throws', async () => {
  const name = uniqueName()
  const value = await client.using(name, { ttl: 5000 }, async (signal, guard) => {
    assert.equal(signal.aborted, false)
    assert.equal((await client.inspect(name)).holder.fence, guard.fence)
    return 'done'
  })
  assert.equal(value, 'done')
  assert.equal((await client.inspect(name)).holder, null)
  await assert.rejects(client.using(name, async () => { throw new Error('boom') }), /boom/)
  assert.equal((await client.inspect(name)).holder, null)
  // The lock taken away under the function: `using` says so.
  await assert.rejects(client.using(name, async () => {
    await client.forceRelease(name)
    await sleep(50)
  }), (e) => e.code === 'not_held')
})

test('Symbol.asyncDispose releases', async () => {
  const name = uniqueName()
  const guard = await client.lock(name).acquire()
  await guard[Symbol.asyncDispose]()
  assert.equal(guard.isHeld(), false)
  assert.equal((await client.inspect(name)).holder, null)
})

test('a semaphore of 3 permits, with take', async () => {
  const name = uniqueName('sem')
  const two = await client.semaphore(name, 3, { take: 2 }).acquire()
  const one = await client.semaphore(name, 3).acquire()
  await assert.rejects(client.semaphore(name, 3, { wait: 0 }).acquire(), (e) => e.code === 'busy')
  await assert.rejects(client.semaphore(name, 4, { wait: 0 }).acquire(), (e) => e.code === 'conflict' && e.conflict === 'permits_mismatch')
  assert.notEqual(two.fence, one.fence)
  await two.release()
  const again = await client.semaphore(name, 3, { take: 2, wait: 0 }).acquire()
  await again.release()
  await one.release()
})

test('read-write, reentrant and fair locks', async () => {
  const name = uniqueName('rw')
  const rw = client.readWriteLock(name)
  const r1 = await rw.read().acquire()
  const r2 = await rw.read().acquire()
  assert.equal(await rw.write().tryAcquire(), null)
  await r1.release()
  await r2.release()
  const w = await rw.write({ wait: 0 }).acquire()
  await w.release()

  const reentrant = client.reentrantLock(uniqueName('re'), { maxReentry: 2 })
  const a = await reentrant.acquire()
  const b = await reentrant.acquire()
  await assert.rejects(reentrant.acquire(), (e) => e.code === 'conflict' && e.conflict === 'reentry_limit')
  assert.equal(await client.reentrantLock(reentrant.name).tryAcquire(), null)
  await b.release()
  await a.release()

  const fair = uniqueName('fair')
  const first = await client.fairLock(fair).acquire()
  const order = []
  const second = client.fairLock(fair).acquire().then((g) => { order.push(2); return g })
  await until(async () => (await client.inspect(fair)).waiting === 1, 'the second is in line')
  const third = client.fairLock(fair).acquire().then((g) => { order.push(3); return g })
  await until(async () => (await client.inspect(fair)).waiting === 2, 'the third is in line')
  await first.release()
  await (await second).release()
  await (await third).release()
  assert.deepEqual(order, [2, 3])
})

test('bad arguments are refused before anything is sent, naming the lock', async () => {
  assert.throws(() => client.lock('x', { ttl: -1 }), (e) => e instanceof FencelockError && e.code === 'invalid_argument' && e.lock === 'x' && /ttl/.test(e.reason))
  assert.throws(() => client.lock('x', { wait: Number.NaN }), (e) => e.code === 'invalid_argument')
  await assert.rejects(client.lock('').acquire(), (e) => e.code === 'invalid_argument')
  await assert.rejects(client.lock('bad\u0085name').acquire(), (e) => e.code === 'invalid_argument' && e.lock === 'bad\u0085name')
  // Permits of a lock that has none: the library's own check, when it is acquired.
  await assert.rejects(client.lock('x', { take: 2 }).acquire(), (e) => e.code === 'invalid_argument' && /semaphore/.test(e.reason))
})
