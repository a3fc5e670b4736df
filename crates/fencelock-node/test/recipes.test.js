'use strict'
// The recipes from Node: several locks at once, and work done once.

const test = require('node:test')
const assert = require('node:assert/strict')
const { PACKAGE, startServer, uniqueName, sleep, aborted } = require('./helpers')
const { Client, InvalidArgumentError, NotHeldError } = require(PACKAGE)

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

test('a multiLock label is what inspect shows of every name\'s holder; a bad one holds nothing', async () => {
  // Given out of their sorted order: the core tries (and checks) them sorted.
  const [a, b] = [uniqueName('labelled-b'), uniqueName('labelled-a')]
  const guard = await client.multiLock([a, b], { label: 'batch-3:4711' }).acquire()
  for (const name of [a, b]) {
    const info = await client.inspect(name)
    assert.equal(info.holder.fence, guard.fences.get(name))
    assert.equal(info.holder.label, 'batch-3:4711', name)
  }
  assert.equal(await guard.release(), true)
  const plain = await client.multiLock([a, b]).acquire()
  for (const name of [a, b]) assert.equal((await client.inspect(name)).holder.label, null, name)
  await plain.release()
  assert.throws(() => client.multiLock([a, b], { label: 7 }),
    (e) => e instanceof InvalidArgumentError && e.option === 'label' && e.lock === a)
  for (const bad of ['x'.repeat(129), 'line\nbreak']) {
    await assert.rejects(client.multiLock([a, b], { label: bad }).acquire(),
      (e) => e instanceof InvalidArgumentError && [a, b].includes(e.lock) && /label/.test(e.message))
    for (const name of [a, b]) assert.equal((await client.inspect(name)).holder, null, `${name} was left held`)
  }
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
  // The failed run is counted (without a tick or attempts, any number may fail).
  const failures = `fencelock:once-failed:{${key}}:${key}`
  assert.equal(server.raw('GET', failures), '1')
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
    assert.equal(r.gaveUp, false)
  }
  assert.equal(server.raw('EXISTS', failures), '0', 'the success cleared the count')
})

const HOUR = 3_600_000
/** The server's clock (`TIME`), in milliseconds since the epoch. */
function serverMs () {
  const [secs, micros] = server.raw('TIME').split('\n')
  return Number(secs) * 1000 + Math.floor(Number(micros) / 1000)
}
/** The hour's tick a start at `ms` (the server's clock) belongs to: 5 s early counts. */
function hourTick (ms) {
  return Math.floor((ms + 5000) / HOUR) * HOUR
}
/** The keys the server holds whose name has `text` in it. */
function keysWith (text) {
  return server.raw('KEYS', `*${text}*`).split('\n').filter(Boolean)
}

test('once with tick.every: six starts of one tick run it once, by the server\'s clock', async () => {
  const key = uniqueName('hourly')
  const before = serverMs()
  let runs = 0
  const given = []
  const results = await Promise.all(Array.from({ length: 6 }, () => client.once(key, { tick: { every: HOUR } }).run(async (fence, tick) => {
    runs += 1
    given.push(tick)
    await sleep(50)
    return fence
  })))
  const after = serverMs()
  assert.equal(runs, 1)
  const ran = results.filter((r) => r.ran)
  assert.equal(ran.length, 1)
  const tick = ran[0].tick
  assert.ok(tick instanceof Date, `the run's tick: ${tick}`)
  assert.ok([hourTick(before), hourTick(after)].includes(tick.getTime()), `tick ${tick.toISOString()}, server between ${before} and ${after}`)
  assert.equal(given[0].getTime(), tick.getTime(), 'work was given the tick')
  assert.equal(ran[0].value, ran[0].fence)
  const done = results.filter((r) => !r.ran)
  assert.equal(done.length, 5)
  for (const r of done) {
    assert.equal(r.tooLate, false)
    assert.equal(r.fence, ran[0].fence)
    assert.ok(r.at instanceof Date)
    assert.equal(r.tick.getTime(), tick.getTime())
  }
  // The record is KEY@TICK, kept 7 days by default.
  const record = `fencelock:once:{${key}}:${key}@${tick.toISOString()}`
  assert.ok(server.raw('GET', record).startsWith(`${ran[0].fence}:`), record)
  const pttl = Number(server.raw('PTTL', record))
  assert.ok(pttl > 0 && pttl <= 7 * 24 * HOUR, `PTTL ${pttl}`)
  assert.equal(server.raw('EXISTS', `fencelock:once:{${key}}:${key}`), '0', 'no record without the tick')
})

test('once with tick.planned: runs once per planned time, the record kept as long as keep says', async () => {
  const planned = 1795910400000 // 2026-11-29T00:00:00Z
  const keep = HOUR
  let runs = 0
  const first = await client.once('beat', { tick: { planned: new Date(planned) }, keep }).run(async (fence, tick) => {
    runs += 1
    return tick
  })
  assert.equal(first.ran, true)
  assert.equal(first.tick.getTime(), planned)
  assert.equal(first.value.getTime(), planned)
  const again = await client.once('beat', { tick: { planned }, keep }).run(async () => { runs += 1 })
  assert.equal(runs, 1)
  assert.deepEqual({ ...again, at: undefined }, { ran: false, tooLate: false, gaveUp: false, fence: first.fence, at: undefined, tick: new Date(planned) })
  const record = 'fencelock:once:{beat}:beat@2026-11-29T00:00:00.000Z'
  assert.equal(server.raw('EXISTS', record), '1')
  const pttl = Number(server.raw('PTTL', record))
  assert.ok(pttl > 0 && pttl <= keep, `PTTL ${pttl}`)
  // Another planned time is another tick.
  const next = await client.once('beat', { tick: { planned: planned + 60_000 }, keep }).run(async () => 'next')
  assert.equal(next.ran, true)
  assert.equal(next.tick.toISOString(), '2026-11-29T00:01:00.000Z')
})

test('once with tick.late: a start too late for its tick runs nothing and leaves no key', async () => {
  const key = uniqueName('late')
  // (A start within a millisecond of the hour would be on time.)
  if (serverMs() % HOUR < 100) await sleep(200)
  const before = serverMs()
  let called = false
  const result = await client.once(key, { tick: { every: HOUR, early: 1, late: 1 } }).run(async () => { called = true })
  const after = serverMs()
  assert.equal(called, false)
  assert.equal(result.ran, false)
  assert.equal(result.tooLate, true)
  assert.equal(result.gaveUp, false)
  assert.equal(result.fence, undefined)
  const tick = result.tick.getTime()
  assert.equal(tick, Math.floor(after / HOUR) * HOUR)
  assert.ok(result.late > 1 && result.late >= before - tick - 1 && result.late <= after - tick + 1, `late ${result.late}`)
  assert.deepEqual(keysWith(key), [])
})

test('once refuses a keep shorter than twice the tick\'s period, naming the lock, writing nothing', async () => {
  for (const lock of [undefined, uniqueName('keep-lock')]) {
    const key = uniqueName('keep')
    const named = lock ?? key
    let called = false
    await assert.rejects(client.once(key, { lock, tick: { every: HOUR }, keep: 2 * HOUR - 1 }).run(async () => { called = true }), (e) => {
      assert.ok(e instanceof InvalidArgumentError, String(e))
      assert.equal(e.code, 'invalid_argument')
      assert.equal(e.lock, named)
      assert.match(e.message, /kept/)
      return true
    })
    assert.equal(called, false)
    assert.deepEqual(keysWith(key), [])
    assert.deepEqual(keysWith(named), [])
    // Twice the period is enough.
    const ran = await client.once(key, { lock, tick: { every: HOUR }, keep: 2 * HOUR }).run(async () => 'ran')
    assert.equal(ran.ran, true)
    const pttl = Number(server.raw('PTTL', `fencelock:once:{${named}}:${key}@${ran.tick.toISOString()}`))
    assert.ok(pttl > 0 && pttl <= 2 * HOUR, `PTTL ${pttl}`)
  }
})

test('once checks its tick, keep, label and attempts: the wrong type when made, a bad value when run', async () => {
  const key = uniqueName('tick-options')
  const lock = uniqueName('tick-options-lock')
  const made = [
    [{ tick: 'hourly' }, 'tick'],
    [{ tick: { every: '1h' } }, 'tick.every'],
    [{ tick: { every: HOUR, late: null } }, 'tick.late'],
    [{ tick: { planned: '2026-11-29' } }, 'tick.planned'],
    [{ tick: { cron: '0 * * * *' } }, 'tick.cron'],
    [{ tick: {} }, 'tick'],
    [{ tick: { every: HOUR, planned: 0 } }, 'tick'],
    [{ tick: { planned: 0, late: 10 } }, 'tick'],
    [{ keep: '7d' }, 'keep'],
    [{ label: 42 }, 'label'],
    [{ attempts: 'x' }, 'attempts'],
    [{ attempts: 1.5 }, 'attempts'],
    [{ attempts: -1 }, 'attempts']
  ]
  for (const [options, option] of made) {
    for (const named of [undefined, lock]) {
      assert.throws(() => client.once(key, { ...options, lock: named }), (e) => {
        assert.ok(e instanceof InvalidArgumentError, `${option}: ${e}`)
        assert.equal(e.option, option)
        assert.equal(e.lock, named ?? key)
        assert.ok(e.message.includes(option), e.message)
        return true
      })
    }
  }
  const run = [
    [{ keep: -1 }, /keep/],
    [{ keep: 0 }, /no time/],
    [{ tick: { every: 0 } }, /period/],
    [{ tick: { every: -HOUR } }, /tick\.every/],
    [{ tick: { every: 10_000, early: 5_000 } }, /early/],
    [{ tick: { every: HOUR, late: Number.NaN } }, /tick\.late/],
    [{ tick: { planned: new Date('not a date') } }, /tick\.planned/],
    [{ tick: { planned: -1 } }, /tick\.planned/],
    [{ tick: { planned: Date.UTC(10000, 0, 1) } }, /year 10000/],
    [{ attempts: 0 }, /attempts 0/],
    [{ attempts: 0, tick: { planned: 0 } }, /attempts 0/]
  ]
  for (const [options, reason] of run) {
    await assert.rejects(client.once(key, { ...options, lock }).run(async () => assert.fail('ran')), (e) => {
      assert.ok(e instanceof InvalidArgumentError, `${JSON.stringify(options)}: ${e}`)
      assert.equal(e.lock, lock)
      assert.match(e.message, reason)
      return true
    })
  }
  assert.deepEqual(keysWith(key), [])
  assert.deepEqual(keysWith(lock), [])
  // The label shows while the work runs.
  const label = await client.once(key, { lock, label: 'host-a/1234' }).run(async () => (await client.inspect(lock)).holder.label)
  assert.equal(label.value, 'host-a/1234')
  assert.equal(label.tick, null)
})

test('once counts a tick\'s failed runs: the fourth start gives up, attempts allows more, a success clears the count', async () => {
  const planned = Date.UTC(2026, 10, 29) // 2026-11-29T00:00:00Z
  const failures = 'fencelock:once-failed:{flaky}:flaky@2026-11-29T00:00:00.000Z'
  const record = 'fencelock:once:{flaky}:flaky@2026-11-29T00:00:00.000Z'
  for (const n of [1, 2, 3]) {
    const boom = new Error(`run ${n} failed`)
    await assert.rejects(client.once('flaky', { tick: { planned } }).run(async () => { throw boom }), (e) => e === boom)
    assert.equal(server.raw('GET', failures), String(n), `after ${n} failed runs`)
    assert.equal((await client.inspect('flaky')).holder, null, 'the failed run released its lock')
  }
  // Kept as long as the record would be (7 days with a tick).
  const pttl = Number(server.raw('PTTL', failures))
  assert.ok(pttl > 0 && pttl <= 7 * 24 * HOUR, `PTTL ${pttl}`)
  let called = false
  const gaveUp = await client.once('flaky', { tick: { planned } }).run(async () => { called = true })
  assert.equal(called, false, 'the work did not run')
  assert.deepEqual(gaveUp, { ran: false, tooLate: false, gaveUp: true, failures: 3, tick: new Date(planned) })
  assert.equal(server.raw('GET', failures), '3', 'giving up counts nothing')
  assert.equal(server.raw('EXISTS', record), '0')
  // A fourth attempt allowed: it runs, and its success clears the count.
  const ran = await client.once('flaky', { tick: { planned }, attempts: 4 }).run(async (fence, tick) => tick)
  assert.equal(ran.ran, true)
  assert.equal(ran.value.getTime(), planned)
  assert.equal(server.raw('EXISTS', failures), '0')
  assert.ok(server.raw('GET', record).startsWith(`${ran.fence}:`), record)
  const again = await client.once('flaky', { tick: { planned } }).run(async () => assert.fail('ran'))
  assert.deepEqual({ ...again, at: undefined }, { ran: false, tooLate: false, gaveUp: false, fence: ran.fence, at: undefined, tick: new Date(planned) })
})

test('once without a tick gives up only with attempts; a run the client\'s closing stops is not counted', async () => {
  const key = uniqueName('attempts')
  const failures = `fencelock:once-failed:{${key}}:${key}`
  const boom = new Error('failed')
  await assert.rejects(client.once(key, { attempts: 1 }).run(async () => { throw boom }), (e) => e === boom)
  assert.equal(server.raw('GET', failures), '1')
  assert.equal(server.raw('PTTL', failures), '-1', 'kept as long as the record: for ever')
  const gaveUp = await client.once(key, { attempts: 1 }).run(async () => assert.fail('ran'))
  assert.deepEqual(gaveUp, { ran: false, tooLate: false, gaveUp: true, failures: 1, tick: null })
  // Without attempts, any number may fail: it runs.
  await assert.rejects(client.once(key).run(async () => { throw boom }), (e) => e === boom)
  assert.equal(server.raw('GET', failures), '2')
  // The client closing while the work runs is not a failure of the work: also when the work
  // throws before the closing has given the lock back.
  for (const wait of [true, false]) {
    const other = new Client(server.url)
    let closing
    await assert.rejects(other.once(key).run(async () => {
      closing = other.close()
      if (wait) await closing
      throw new Error('stopped')
    }), /stopped/)
    await closing
    assert.equal(server.raw('GET', failures), '2', `a stopped run is not counted (closing awaited: ${wait})`)
  }
  assert.equal((await client.inspect(key)).holder, null)
})

test('once gives its work a signal that aborts when the run\'s lock is lost, within a renewal', async () => {
  const [key, lock] = [uniqueName('once-lost'), uniqueName('once-lost-lock')]
  // Renewed every third of the lease: the loss is heard within 500 ms, well before it expires.
  const ttl = 1500
  const renewal = ttl / 3
  let seen
  let after
  await assert.rejects(client.once(key, { lock, ttl }).run(async (fence, tick, signal) => {
    assert.ok(signal instanceof AbortSignal)
    assert.equal(signal.aborted, false)
    const deleted = Date.now()
    server.raw('DEL', `fencelock:{${lock}}`)
    const reason = await Promise.race([aborted(signal), sleep(renewal + 400).then(() => null)])
    assert.notEqual(reason, null, `the signal did not abort within ${renewal + 400} ms of the loss`)
    seen = { reason, ms: Date.now() - deleted }
    // A newer run takes the lock and records the work: this one's record is refused.
    after = await client.once(key, { lock }).run(async () => 'newer')
    return 'late'
  }), (e) => e.code === 'fenced')
  assert.ok(seen.reason instanceof NotHeldError)
  assert.equal(seen.reason.code, 'not_held')
  assert.equal(seen.reason.reason, 'not_owner')
  assert.equal(seen.reason.lock, lock)
  assert.ok(seen.ms <= renewal + 400, `${seen.ms} ms`)
  assert.equal(after.ran, true)
  assert.equal(after.value, 'newer')

  // A signal the work only keeps, looked at after the loss, has aborted already.
  const other = uniqueName('once-kept')
  let kept
  const done = await client.once(other, { ttl }).run(async (fence, tick, signal) => {
    kept = signal
    assert.equal(await client.forceRelease(other), true)
    return 'kept'
  })
  assert.equal(done.ran, true)
  assert.equal(kept.aborted, true)
  assert.equal(kept.reason.code, 'not_held')
  assert.equal(kept.reason.reason, 'not_owner')
})

test('a run that ends without a loss never sees its signal abort: done, failed, or stopped by close', async () => {
  const key = uniqueName('once-quiet')
  const signals = []
  const watch = (signal) => {
    const entry = { signal, fired: false }
    signal.addEventListener('abort', () => { entry.fired = true })
    signals.push(entry)
  }
  // Done, across renewals (a third of 300 ms).
  const ran = await client.once(key, { ttl: 300 }).run(async (fence, tick, signal) => {
    watch(signal)
    await sleep(450)
    return signal.aborted
  })
  assert.deepEqual([ran.ran, ran.value], [true, false])
  // Failed.
  await assert.rejects(client.once(uniqueName('once-quiet')).run(async (fence, tick, signal) => {
    watch(signal)
    throw new Error('failed')
  }), /failed/)
  // Stopped by its client's closing (a release, not a loss).
  const closing = new Client(server.url)
  await assert.rejects(closing.once(uniqueName('once-quiet')).run(async (fence, tick, signal) => {
    watch(signal)
    await closing.close()
    throw new Error('stopped')
  }), /stopped/)
  // The releases are told (and ignored) after the runs: give them time to arrive.
  await sleep(200)
  for (const [i, { signal, fired }] of signals.entries()) {
    assert.equal(signal.aborted, false, `run ${i}: ${signal.reason?.message}`)
    assert.equal(fired, false, `run ${i}`)
  }
})
