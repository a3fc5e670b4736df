'use strict'
// The recipes from Node: several locks at once, and work done once.

const test = require('node:test')
const assert = require('node:assert/strict')
const { PACKAGE, startServer, uniqueName, sleep } = require('./helpers')
const { Client } = require(PACKAGE)

let server
let client
test.before(async () => {
  server = await startServer()
  client = new Client(server.url)
})

test('multiLock takes all or none, with a fence each', async () => {
  const [a, b, c] = [uniqueName('a'), uniqueName('b'), uniqueName('c')]
  const guard = await client.multiLock([a, b]).acquire()
  assert.deepEqual([...guard.fences.keys()], [a, b])
  for (const fence of guard.fences.values()) assert.equal(typeof fence, 'bigint')
  await assert.rejects(client.multiLock([c, b], { wait: 0 }).acquire(), (e) => e.code === 'busy' && e.lock === b)
  assert.equal((await client.inspect(c)).holder, null, 'none taken when one is held')
  assert.equal(await guard.release(), true)
  const value = await client.multiLock([b, c, a]).using(async (signal, held) => {
    assert.equal(signal.aborted, false)
    return held.fences.size
  })
  assert.equal(value, 3)
})

test('a multiLock block that lost a name says which, and why', async () => {
  const [a, b] = [uniqueName('a'), uniqueName('b')]
  await assert.rejects(client.multiLock([a, b]).using(async () => {
    await client.forceRelease(b)
  }), (e) => e.code === 'not_held' && e.lock === b && e.reason === 'not_owner')
  assert.equal((await client.inspect(a)).holder, null, 'a was left held')
})

test('reversed orders never deadlock', async () => {
  const [a, b] = [uniqueName('x'), uniqueName('y')]
  let inside = 0
  await Promise.all(Array.from({ length: 6 }, (_, i) => (async () => {
    for (let round = 0; round < 5; round++) {
      await client.multiLock(i % 2 ? [a, b] : [b, a], { ttl: 5000 }).using(async () => {
        inside += 1
        assert.equal(inside, 1)
        await sleep(1)
        inside -= 1
      })
    }
  })()))
})

test('once runs the work once, records nothing when it fails', async () => {
  const key = uniqueName('once')
  await assert.rejects(client.once(key).run(async () => { throw new Error('failed') }), /failed/)
  let runs = 0
  const results = await Promise.all(Array.from({ length: 8 }, () => client.once(key).run(async (fence) => {
    runs += 1
    await sleep(50)
    return typeof fence
  })))
  assert.equal(runs, 1)
  const ran = results.filter((r) => r.ran)
  assert.equal(ran.length, 1)
  assert.equal(ran[0].value, 'bigint')
  for (const r of results.filter((r) => !r.ran)) {
    assert.equal(r.fence, ran[0].fence)
    assert.ok(r.at instanceof Date)
  }
})
