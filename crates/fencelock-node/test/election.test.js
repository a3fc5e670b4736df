'use strict'
// Election from Node: terms, the leader, observers, resigning, a campaign given up.

const test = require('node:test')
const assert = require('node:assert/strict')
const { PACKAGE, startServer, uniqueName, sleep, until } = require('./helpers')
const { Client, InvalidArgumentError } = require(PACKAGE)

let server
let client
test.before(async () => {
  server = await startServer()
  client = new Client(server.url)
})

test('a campaign leads, the leader is read, a resignation hands over with a larger term', async () => {
  const election = client.election(uniqueName('election'))
  assert.equal(await election.leader(), null)
  const first = await election.campaign('10.0.0.1')
  const read = await election.leader()
  assert.equal(read.value, '10.0.0.1')
  assert.equal(read.term, first.term)
  assert.ok(read.since instanceof Date)
  await first.proclaim('10.0.0.2')
  assert.equal(first.value, '10.0.0.2')
  assert.equal((await election.leader()).value, '10.0.0.2')
  const second = election.campaign('10.0.0.3')
  await sleep(100)
  assert.equal(await first.resign(), true)
  assert.equal(first.value, '10.0.0.2', 'the value is kept after the resignation')
  assert.equal(first.signal.aborted, false, 'a resignation is not a loss')
  assert.equal(first.lostReason, 'released')
  const next = await second
  assert.ok(next.term > first.term)
  await assert.rejects(election.campaign('x', { wait: 0 }), (e) => e.code === 'busy')
  await next[Symbol.asyncDispose]()
  assert.equal(await election.leader(), null)
})

test('a campaign\'s label is what inspect shows of the leadership\'s holder; a bad one leads nothing', async () => {
  const name = uniqueName('labelled')
  const election = client.election(name)
  const leadership = await election.campaign('10.0.0.1', { label: 'host-a:42', wait: 0 })
  const info = await client.inspect(name)
  assert.equal(info.holder.fence, leadership.term)
  assert.equal(info.holder.label, 'host-a:42')
  assert.equal((await election.leader()).value, '10.0.0.1', 'the readers see the value, not the label')
  assert.equal(await leadership.resign(), true)
  const plain = await election.campaign('10.0.0.2')
  assert.equal((await client.inspect(name)).holder.label, null)
  await plain.resign()
  await assert.rejects(election.campaign('10.0.0.3', { label: 7 }),
    (e) => e instanceof InvalidArgumentError && e.option === 'label' && e.lock === name)
  for (const bad of ['x'.repeat(129), 'line\nbreak']) {
    await assert.rejects(election.campaign('10.0.0.3', { label: bad }),
      (e) => e instanceof InvalidArgumentError && e.lock === name && /label/.test(e.message))
    assert.equal((await client.inspect(name)).holder, null)
    assert.equal(await election.leader(), null)
  }
})

test('observers see each leader, then vacant', async () => {
  const election = client.election(uniqueName('observed'))
  const controller = new AbortController()
  const seen = []
  const watching = (async () => {
    for await (const observation of election.observe({ signal: controller.signal })) {
      seen.push(observation.code === 'leader' ? observation.value : observation.code)
      if (seen.length === 4) controller.abort()
    }
  })()
  await until(() => seen.length === 1, 'the observer saw the election vacant')
  const a = await election.campaign('a')
  await until(() => seen.length === 2, 'the observer saw a lead')
  await a.resign()
  await until(() => seen.length === 3, 'the observer saw a resign')
  const b = await election.campaign('b')
  await watching
  assert.deepEqual(seen, ['vacant', 'a', 'vacant', 'b'])
  await b.resign()
})

test('an aborted campaign leads nothing', async () => {
  const election = client.election(uniqueName('aborted'))
  const leader = await election.campaign('first')
  const controller = new AbortController()
  const waiting = election.campaign('second', { signal: controller.signal })
  await sleep(100)
  controller.abort()
  await assert.rejects(waiting, (e) => e.name === 'AbortError')
  await leader.resign()
  await until(async () => (await election.leader()) === null, 'nobody leads')
  await sleep(200)
  assert.equal(await election.leader(), null, 'the aborted campaign leads')
})
