'use strict'
// The operator's calls from Node: inspect with the line, list, forceRelease, the releases
// followed, and a release asked for politely.

const test = require('node:test')
const assert = require('node:assert/strict')
const { PACKAGE, startServer, uniqueName, sleep, aborted, until } = require('./helpers')
const { Client } = require(PACKAGE)

let server
let client
test.before(async () => {
  server = await startServer()
  client = new Client(server.url)
})

test('inspect shows the holder and the line of waiters; list finds held locks', async () => {
  const name = uniqueName('fair')
  const guard = await client.fairLock(name, { ttl: 10000 }).acquire()
  const waiter = client.fairLock(name).acquire()
  await until(async () => (await client.inspect(name)).waiting === 1, 'the waiter is in line')
  const info = await client.inspect(name)
  assert.equal(info.kind, 'lock')
  assert.equal(info.holder.fence, guard.fence)
  assert.ok(info.holder.remaining > 0 && info.holder.remaining <= 10000)
  assert.equal(info.waiting, 1)
  assert.equal(info.waiters[0].place, 1)
  assert.equal(info.lastFence, guard.fence)
  const listing = await client.list(`${name.split('/').slice(0, 2).join('/')}/*`)
  assert.ok(listing.locks.some((l) => l.name === name))
  await guard.release()
  await (await waiter).release()
})

test('a label is what inspect shows of its holder; a bad one holds nothing', async () => {
  const name = uniqueName()
  const guard = await client.lock(name, { label: 'worker-3:4711' }).acquire()
  const info = await client.inspect(name)
  assert.equal(info.holder.fence, guard.fence)
  assert.equal(info.holder.label, 'worker-3:4711')
  await guard.release()
  const permits = await client.semaphore(`${name}-sem`, 2, { label: 'batch' }).acquire()
  assert.equal((await client.inspect(`${name}-sem`)).shared[0].label, 'batch')
  await permits.release()
  const plain = await client.lock(`${name}-plain`).acquire()
  assert.equal((await client.inspect(`${name}-plain`)).holder.label, null)
  await plain.release()
  assert.throws(() => client.lock(name, { label: 7 }), (e) => e.code === 'invalid_argument' && e.option === 'label')
  await assert.rejects(client.lock(name, { label: 'x'.repeat(129) }).acquire(),
    (e) => e.code === 'invalid_argument' && e.lock === name && /label/.test(e.message))
  assert.equal((await client.inspect(name)).holder, null)
})

test('client.using takes a label, as client.lock does', async () => {
  const name = uniqueName('using-label')
  const seen = await client.using(name, { label: 'worker-7:42', wait: 0 }, async () => (await client.inspect(name)).holder.label)
  assert.equal(seen, 'worker-7:42')
  assert.equal((await client.inspect(name)).holder, null)
  await assert.rejects(client.using(name, { label: 7 }, async () => {}), (e) => e.code === 'invalid_argument' && e.option === 'label')
})

test('forceRelease frees a lock and its holder learns it', async () => {
  const name = uniqueName()
  const guard = await client.lock(name, { ttl: 2000 }).acquire()
  assert.equal(await client.forceRelease(name), true)
  const reason = await aborted(guard.signal)
  assert.equal(reason.reason, 'not_owner')
  assert.equal(await client.forceRelease(name), false)
})

test('releases are followed', async () => {
  const name = uniqueName()
  const controller = new AbortController()
  const seen = []
  const following = (async () => {
    for await (const released of client.releases(name, { signal: controller.signal })) {
      seen.push(released)
      if (seen.length === 2) controller.abort()
    }
  })()
  // The stream says nothing when it is ready: release until it has seen two (or 10 s pass).
  const end = Date.now() + 10000
  while (seen.length < 2 && Date.now() < end) {
    await (await client.lock(name).acquire()).release()
    await sleep(50)
  }
  await following
  assert.deepEqual(seen, [name, name])
})

test('releaseRequested aborts when someone asks', async () => {
  const name = uniqueName()
  const guard = await client.lock(name).acquire()
  const asked = guard.releaseRequested
  assert.equal(asked.aborted, false)
  assert.equal(await client.requestRelease(name), true)
  await aborted(asked)
  await guard.release()
  assert.equal(await client.requestRelease(name), false)
})
