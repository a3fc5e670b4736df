'use strict'
// What a node-redlock user reaches for: closing a client, the library's warnings in the
// application's logger, an error class per code, options checked by the package, a held lock
// keeping the process alive, and the rule of a hold's signal (a loss aborts it, a release does
// not).

const test = require('node:test')
const assert = require('node:assert/strict')
const { PACKAGE, startServer, sleep, uniqueName, node, lines, ended, aborted, until } = require('./helpers')
const fencelock = require(PACKAGE)
const { Client, FencelockError, ClientClosedError, InvalidArgumentError, ConfigError } = fencelock

let server
let client
test.before(async () => {
  server = await startServer()
  client = new Client(server.url)
})

/** Whether Redis has the key of lock `name` (read by redis-cli, not by fencelock). */
function keyExists (name) {
  return server.raw('EXISTS', `fencelock:{${name}}`) === '1'
}

const pkg = JSON.stringify(PACKAGE)

test('close() releases the holds, ends the waits, and later calls throw ClientClosedError', async () => {
  const closing = new Client(server.url)
  const held = uniqueName('close-held')
  const guard = await closing.lock(held).acquire()
  const leadership = await closing.election(uniqueName('close-election')).campaign('me')
  assert.ok(keyExists(held))
  // A wait of this client's, for a lock another client holds.
  const contested = uniqueName('close-wait')
  const other = await client.lock(contested).acquire()
  const waiting = closing.lock(contested).acquire()
  await until(async () => (await client.inspect(contested)).waiting === 1, 'the wait is in line')
  const started = Date.now()
  const ends = assert.rejects(waiting, (e) => e instanceof ClientClosedError && e instanceof InvalidArgumentError &&
    e instanceof FencelockError && e.code === 'closed' && e.reason === 'closed' && /closed/.test(e.message))
  await closing.close()
  await ends
  assert.ok(Date.now() - started < 2000, 'the close took too long')
  assert.equal(keyExists(held), false, 'the lock is still in Redis after close()')
  assert.equal(guard.isHeld(), false)
  assert.equal(leadership.isHeld(), false)
  assert.equal(guard.signal.aborted, false, 'a release by close() is not a loss')
  await until(async () => (await client.inspect(contested)).waiting === 0, 'the closed wait left the line')
  await other.release()
  assert.equal(closing.closed, true)
  assert.throws(() => closing.lock(uniqueName()), (e) => e instanceof ClientClosedError && /closed/.test(e.message))
  await assert.rejects(closing.inspect(held), ClientClosedError)
  assert.throws(() => closing.election('x'), ClientClosedError)
  // A request made before the close fails too.
  const early = client.lock(uniqueName())
  await early.acquire().then((g) => g.release())
  await closing.close() // twice: harmless
})

test('close() closes the connections though the guard and a request made from the client still exist', async () => {
  const own = await startServer() // of its own: no other client's connections
  try {
    // Every client connection but redis-cli's own, which asks.
    const connections = () => own.raw('CLIENT', 'LIST').split('\n').filter((l) => l && !l.includes('cmd=client|list')).length
    const closing = new Client(own.url)
    const name = uniqueName('close-sockets')
    const request = closing.lock(name, { ttl: 30_000 })
    const guard = await request.acquire()
    const waiting = closing.lock(name, { wait: 60_000 }).acquire()
    const channel = `fencelock:{${name}}:released`
    await until(async () => own.raw('PUBSUB', 'NUMSUB', channel).split('\n')[1] === '1', 'the wait subscribed')
    assert.ok(connections() >= 2, 'the commands\' connection and the release messages\' one')
    // Its handler before the close: the wait may reject while close() is on its way, and a
    // rejection with no handler yet is an unhandled one.
    const waited = assert.rejects(waiting, (e) => e instanceof ClientClosedError && e.code === 'closed')
    await closing.close()
    await waited
    await until(async () => connections() === 0, 'no connection of the client is left', 3000)
    assert.equal(own.raw('PUBSUB', 'NUMSUB', channel).split('\n')[1], '0')
    assert.equal(await guard.release(), false)
    await assert.rejects(request.acquire(), (e) => e instanceof ClientClosedError && e instanceof InvalidArgumentError &&
      e.code === 'closed' && e.reason === 'closed')
    await sleep(200)
    assert.equal(connections(), 0, 'a call after the close connected again')
  } finally {
    own.stop()
  }
})

test('waits leave no listeners behind: many at once, or one signal used again and again', async () => {
  const warnings = []
  const onWarning = (warning) => warnings.push(warning)
  process.on('warning', onWarning)
  try {
    const name = uniqueName('listeners')
    const held = await client.lock(name).acquire()
    const controllers = Array.from({ length: 20 }, () => new AbortController())
    const waits = controllers.map((c) => client.lock(name).acquire({ signal: c.signal }).catch((e) => e))
    await until(async () => (await client.inspect(name)).waiting === 20, 'twenty waits in line')
    for (const c of controllers) c.abort(new Error('enough'))
    for (const outcome of await Promise.all(waits)) assert.equal(outcome.message, 'enough')
    const one = new AbortController()
    for (let i = 0; i < 30; i++) {
      await assert.rejects(client.lock(name, { wait: 0 }).acquire({ signal: one.signal }), fencelock.BusyError)
    }
    await held.release()
    await sleep(20)
  } finally {
    process.off('warning', onWarning)
  }
  assert.deepEqual(warnings.map(String), [])
})

test('a request made before close() fails after it', async () => {
  const closing = new Client(server.url)
  const request = closing.lock(uniqueName('early'), { wait: 0 })
  await closing.close()
  await assert.rejects(request.acquire(), ClientClosedError)
  await assert.rejects(request.tryAcquire(), ClientClosedError)
})

test('a lost lock is a warning in the logger given, with its name', async () => {
  const calls = []
  const logger = {
    warn: (line) => calls.push(['warn', line]),
    info: (line) => calls.push(['info', line]),
    debug: (line) => calls.push(['debug', line])
  }
  const logging = new Client(server.url, { logger })
  const name = uniqueName('logged')
  const guard = await logging.lock(name, { ttl: 30000 }).acquire()
  server.raw('DEL', `fencelock:{${name}}`)
  // The renewal finds it gone: at the latest after a third of the lease; extend asks at once.
  await assert.rejects(guard.extend(30000), (e) => e.code === 'not_held')
  await until(() => calls.some(([level, line]) => level === 'warn' && line.includes(name) && /lock lost/.test(line)),
    `a warn call naming ${name}: ${JSON.stringify(calls)}`)
  await logging.close()
})

test('a logger without some methods: the missing ones fall back to a more severe one', async () => {
  const warned = []
  const logging = new Client(server.url, { logger: { warn: (line) => warned.push(line) } })
  const name = uniqueName('fallback')
  const guard = await logging.lock(name, { ttl: 300, autoRenew: false }).acquire()
  await aborted(guard.signal)
  await until(() => warned.some((line) => line.includes(name)), 'the warning')
  await logging.close()
})

test('a lost lock reaches the logger with its fields: (line, { lock, kind, fence, reason })', async () => {
  const calls = []
  const logging = new Client(server.url, { logger: { warn: (line, fields) => calls.push({ line, fields }) } })
  const name = uniqueName('fields')
  const guard = await logging.lock(name, { ttl: 300, autoRenew: false }).acquire()
  await aborted(guard.signal)
  // Every logger of the process gets every event: this lock's only.
  await until(() => calls.some(({ fields }) => fields?.lock === name), `a warn call with lock ${name}`)
  const { line, fields } = calls.find(({ fields }) => fields?.lock === name)
  assert.match(line, /lock lost/)
  assert.equal(fields.kind, 'lock')
  // A fence is a safe integer (microseconds of the server's clock): a number, equal to the guard's.
  assert.equal(typeof fields.fence, 'number')
  assert.equal(BigInt(fields.fence), guard.fence)
  assert.equal(typeof fields.reason, 'string')
  assert.ok(fields.reason.length > 0, 'an empty reason')
  assert.equal(fields.message, undefined, 'the message is the line, not a field')
  await logging.close()
})

test('a grant at debug level reaches the logger with the lock and its fence', async () => {
  const child = node(`
    const { Client } = require(${pkg})
    const calls = []
    const logger = {
      debug: (line, fields) => calls.push(['debug', line, fields]),
      info: (line, fields) => calls.push(['info', line, fields]),
      warn: (line, fields) => calls.push(['warn', line, fields])
    }
    const shown = (v) => JSON.stringify(v, (_, x) => typeof x === 'bigint' ? x + 'n' : x)
    ;(async () => {
      const client = new Client(process.env.URL, { logger })
      const guard = await client.lock(process.env.NAME).acquire()
      const started = Date.now()
      const granted = () => calls.find(([level, line, fields]) => level === 'debug' && fields?.lock === process.env.NAME && /granted/.test(line))
      while (granted() === undefined && Date.now() - started < 5000) await new Promise((resolve) => setTimeout(resolve, 20))
      const found = granted()
      console.log(shown({ found, fence: String(guard.fence), calls: found ? undefined : calls }))
      await client.close()
    })()
  `, { URL: server.url, NAME: uniqueName('granted'), FENCELOCK_LOG: 'debug' })
  const out = lines(child)
  const answer = JSON.parse(await out.next())
  assert.deepEqual(await ended(child), { code: 0, signal: null })
  assert.ok(answer.found, `no debug call for the grant: ${JSON.stringify(answer.calls)}`)
  const [, , fields] = answer.found
  assert.equal(typeof fields.fence, 'number', JSON.stringify(fields))
  assert.equal(String(fields.fence), answer.fence)
  assert.equal(fields.kind, 'lock')
})

test('a lost lock goes to standard error without a logger (the default)', async () => {
  const child = node(`
    const { Client } = require(${pkg})
    ;(async () => {
      const client = new Client(process.env.URL)
      const guard = await client.lock(process.env.NAME, { ttl: 200, autoRenew: false }).acquire()
      guard.signal.addEventListener('abort', () => setTimeout(() => process.exit(0), 200))
    })()
  `, { URL: server.url, NAME: uniqueName('stderr') })
  const out = lines(child)
  assert.deepEqual(await ended(child), { code: 0, signal: null })
  assert.match(out.stderr(), /lock lost/)
})

test('with a logger, the lost lock\'s line goes to it and not to standard error', async () => {
  const name = uniqueName('not-stderr')
  const child = node(`
    const { Client } = require(${pkg})
    ;(async () => {
      const client = new Client(process.env.URL, { logger: { warn: (line) => console.log('warn ' + line) } })
      const guard = await client.lock(process.env.NAME, { ttl: 200, autoRenew: false }).acquire()
      guard.signal.addEventListener('abort', () => setTimeout(() => process.exit(0), 200))
    })()
  `, { URL: server.url, NAME: name })
  const out = lines(child)
  const line = await out.next()
  assert.match(line, /^warn .*lock lost/)
  assert.ok(line.includes(name), line)
  assert.deepEqual(await ended(child), { code: 0, signal: null })
  assert.doesNotMatch(out.stderr(), /lock lost/)
})

test('an error class per code, each a FencelockError', async () => {
  for (const code of FencelockError.CODES) {
    const found = Object.values(fencelock).filter((c) => typeof c === 'function' && c.code === code)
    assert.equal(found.length, 1, `one class for ${code}`)
    const [cls] = found
    assert.ok(cls.prototype instanceof FencelockError, cls.name)
    assert.match(cls.name, /Error$/)
    const made = new cls('m', { lock: 'x' }) // eslint-disable-line new-cap
    assert.equal(made.code, code)
    assert.equal(made.name, cls.name)
  }
  const name = uniqueName('kinds')
  const guard = await client.lock(name).acquire()
  await assert.rejects(client.lock(name, { wait: 0 }).acquire(), (e) => e instanceof fencelock.BusyError && e instanceof FencelockError && e.code === 'busy' && e.lock === name)
  await assert.rejects(client.lock(name, { wait: 100 }).acquire(), (e) => e instanceof fencelock.TimedOutError && e.code === 'timed_out')
  await assert.rejects(client.semaphore(name, 2).acquire(), (e) => e instanceof fencelock.ConflictError && e.conflict === 'other_kind')
  await guard.release()
  await assert.rejects(guard.extend(1000), (e) => e instanceof fencelock.NotHeldError && e.reason === 'released')
  const dead = new Client('redis://127.0.0.1:1', { commandTimeout: 500 })
  await assert.rejects(dead.lock(name, { wait: 0 }).acquire(), (e) => e instanceof fencelock.UnreachableError)
  const fenced = client.fencedStore(name + '/r')
  await fenced.apply(5n, new fencelock.Writes().set(name + '/v', '1'))
  await assert.rejects(fenced.apply(4n, new fencelock.Writes().set(name + '/v', '2')), (e) => e instanceof fencelock.FencedError)
  assert.throws(() => new Client('nope://x'), (e) => e instanceof ConfigError)
})

test('options of the wrong type are the package\'s invalid_argument, naming the option and the lock', () => {
  const name = uniqueName('options')
  const bad = [
    [() => client.lock(name, { wait: null }), 'wait'],
    [() => client.lock(name, { ttl: '10s' }), 'ttl'],
    [() => client.lock(name, { autoRenew: 'yes' }), 'autoRenew'],
    [() => client.lock(name, { maxHold: {} }), 'maxHold'],
    [() => client.lock(name, { timeout: 100 }), 'timeout'],
    [() => client.fairLock(name, { queueTimeout: '1s' }), 'queueTimeout'],
    [() => client.semaphore(name, '3'), 'permits'],
    [() => client.semaphore(name, 3, { take: 1.5 }), 'take'],
    [() => client.multiLock([name], { wait: false }), 'wait'],
    [() => client.once(name, { lock: 3 }), 'lock'],
    [() => client.reentrantLock(name, { maxReentry: -1 }), 'maxReentry'],
    [() => client.lock(name, 'fast'), 'options']
  ]
  for (const [call, option] of bad) {
    assert.throws(call, (e) => {
      assert.ok(e instanceof InvalidArgumentError, `${option}: ${e}`)
      assert.equal(e.code, 'invalid_argument')
      assert.equal(e.option, option)
      assert.equal(e.lock, name)
      assert.ok(e.message.includes(option) && e.message.includes(name), e.message)
      return true
    })
  }
  assert.throws(() => client.lock(42), (e) => e instanceof InvalidArgumentError && e.option === 'name')
  assert.throws(() => new Client(server.url, { commandTimeout: '1s' }), (e) => e instanceof ConfigError && e.option === 'commandTimeout')
  assert.throws(() => new Client(server.url, { logger: 'console' }), (e) => e instanceof ConfigError && e.option === 'logger')
})

test('waits and campaigns check their options too', async () => {
  const name = uniqueName('wait-options')
  await assert.rejects(client.lock(name).acquire({ signal: 'soon' }), (e) => e instanceof InvalidArgumentError && e.option === 'signal')
  await assert.rejects(client.election(name).campaign('v', { wait: '1s' }), (e) => e instanceof InvalidArgumentError && e.option === 'wait' && e.lock === name)
  await assert.rejects(client.using(name, { ttl: null }, async () => {}), (e) => e instanceof InvalidArgumentError && e.option === 'ttl')
})

test('the signal: a loss aborts it (its reason says why), a release does not', async () => {
  const name = uniqueName('signal')
  const released = await client.lock(name).acquire()
  const fired = []
  released.signal.addEventListener('abort', () => fired.push(released.signal.reason))
  assert.equal(await released.release(), true)
  await sleep(50)
  assert.deepEqual(fired, [])
  assert.equal(released.signal.aborted, false)
  assert.equal(released.lostReason, 'released')
  // `using` releases at the end of the block: the signal it gave stays quiet.
  let given
  await client.using(name, async (signal) => { given = signal })
  assert.equal(given.aborted, false)
  // A loss aborts it with a NotHeldError naming the lock and why.
  const lost = await client.lock(name, { ttl: 30000 }).acquire()
  server.raw('DEL', `fencelock:{${name}}`)
  await assert.rejects(lost.extend(30000))
  const reason = await aborted(lost.signal)
  assert.ok(reason instanceof fencelock.NotHeldError)
  assert.equal(reason.reason, 'not_owner')
  assert.equal(reason.lock, name)
  assert.equal(await lost.release(), false)
})

test('a program that only awaits its guard\'s signal stays alive until the loss, then its catch runs', async () => {
  const name = uniqueName('alive')
  const child = node(`
    const { Client } = require(${pkg})
    ;(async () => {
      const client = new Client(process.env.URL)
      const guard = await client.lock(process.env.NAME, { ttl: 1000 }).acquire()
      console.log('held')
      try {
        await new Promise((resolve, reject) => guard.signal.addEventListener('abort', () => reject(guard.signal.reason)))
        console.log('not reached')
      } catch (e) {
        console.log('lost ' + e.reason)
        process.exitCode = 7
      }
    })()
  `, { URL: server.url, NAME: name })
  const out = lines(child)
  assert.equal(await out.next(), 'held')
  await sleep(500)
  assert.equal(child.exitCode, null, `the holder exited while holding: ${out.stderr()}`)
  server.raw('DEL', `fencelock:{${name}}`)
  assert.equal(await out.next(), 'lost not_owner')
  assert.deepEqual(await ended(child, 10000), { code: 7, signal: null })
})

test('a program that released everything exits promptly', async () => {
  const started = Date.now()
  const child = node(`
    const { Client } = require(${pkg})
    ;(async () => {
      const client = new Client(process.env.URL)
      const guard = await client.lock(process.env.NAME).acquire()
      const multi = await client.multiLock([process.env.NAME + '/a', process.env.NAME + '/b']).acquire()
      const leadership = await client.election(process.env.NAME + '/e').campaign('me')
      await client.using(process.env.NAME + '/u', async () => {})
      await guard.release()
      await multi.release()
      await leadership.resign()
      console.log('released')
    })()
  `, { URL: server.url, NAME: uniqueName('prompt') })
  const out = lines(child)
  assert.equal(await out.next(), 'released')
  assert.deepEqual(await ended(child, 10000), { code: 0, signal: null })
  assert.ok(Date.now() - started < 8000, 'it did not exit promptly')
})

test('a program whose client is closed exits promptly, its holds released', async () => {
  const name = uniqueName('closed-exit')
  const child = node(`
    const { Client } = require(${pkg})
    ;(async () => {
      const client = new Client(process.env.URL)
      await client.lock(process.env.NAME).acquire()
      await client.close()
      console.log('closed')
    })()
  `, { URL: server.url, NAME: name })
  const out = lines(child)
  assert.equal(await out.next(), 'closed')
  assert.deepEqual(await ended(child, 10000), { code: 0, signal: null })
  assert.equal(keyExists(name), false)
})

test('a hold granted as its client closed is given back and keeps nothing alive: the program exits by itself', async () => {
  const name = uniqueName('closed-race')
  // The addon's answers are delayed by a few microtasks, and the client closed in that gap: the
  // hold (a guard, with or without a signal of the caller's, a multi-lock guard, a leadership)
  // is made by the package after the close.
  const child = node(`
    const path = require('node:path')
    const { Client, ClientClosedError } = require(${pkg})
    const native = require(path.join(${pkg}, 'lib', 'native'))
    let onAnswer = null
    for (const method of ['acquire', 'multiAcquire', 'campaign']) {
      const original = native.Client.prototype[method]
      native.Client.prototype[method] = function (...args) {
        return original.apply(this, args).then((made) => {
          const then = onAnswer
          onAnswer = null
          if (then !== null) then()
          return made
        })
      }
    }
    const after = (ticks, fn) => (ticks === 0 ? fn() : queueMicrotask(() => after(ticks - 1, fn)))
    const takes = {
      lock: (client, name) => client.lock(name).acquire(),
      signal: (client, name) => client.lock(name).acquire({ signal: new AbortController().signal }),
      multi: (client, name) => client.multiLock([name + '/a', name + '/b']).acquire(),
      campaign: (client, name) => client.election(name).campaign('me')
    }
    ;(async () => {
      const seen = {}
      for (const [what, take] of Object.entries(takes)) {
        for (let ticks = 0; ticks < 12; ticks++) {
          const client = new Client(process.env.URL)
          const closing = new Promise((resolve) => {
            onAnswer = () => after(ticks, () => resolve(client.close()))
          })
          let outcome
          try {
            const held = await take(client, process.env.NAME + '/' + what + '/' + ticks)
            await closing
            outcome = held.isHeld() ? 'held after close' : 'released by close'
          } catch (error) {
            if (!(error instanceof ClientClosedError)) throw error
            await closing
            outcome = 'closed'
          }
          seen[what + ' ' + outcome] = (seen[what + ' ' + outcome] ?? 0) + 1
        }
      }
      console.log(JSON.stringify(seen))
    })()
  `, { URL: server.url, NAME: name })
  const out = lines(child)
  const seen = JSON.parse(await out.next())
  for (const key of Object.keys(seen)) assert.doesNotMatch(key, /held after close/, JSON.stringify(seen))
  for (const what of ['lock', 'signal', 'multi', 'campaign']) {
    assert.ok(seen[`${what} closed`] > 0, `no ${what} hold raced the close: ${JSON.stringify(seen)}`)
  }
  assert.deepEqual(await ended(child, 10000), { code: 0, signal: null }, `the program did not exit by itself: ${out.stderr()}`)
  // (A name's fence key stays: it never expires.)
  const left = server.raw('KEYS', `fencelock:{${name}*`).split('\n').filter((key) => key !== '' && !key.endsWith(':fence'))
  assert.deepEqual(left, [], 'a lock raced the close and is still held')
})

test('close() resolves once the waits it ended have left their places in line, and within 2 s', async () => {
  // A server of its own: it is paused.
  const paused = await startServer()
  const holder = new Client(paused.url)
  const name = uniqueName('close-waits')
  const held = await holder.lock(name).acquire()
  const waiters = () => paused.raw('ZCARD', `fencelock:{${name}}:waiters`)
  for (const pause of [500, 3000]) {
    const closing = new Client(paused.url)
    // A wait without a signal, one with a signal, and a multi-lock wait.
    const waits = [
      closing.lock(name).acquire(),
      closing.lock(name).acquire({ signal: new AbortController().signal }),
      closing.multiLock([name]).acquire()
    ]
    const settled = waits.map(() => false)
    waits.forEach((wait, i) => wait.then(() => { settled[i] = 'granted' }, (error) => { settled[i] = error instanceof ClientClosedError }))
    await until(async () => (await holder.inspect(name)).waiting === 3, 'three waits in line')
    // The server answers nobody for `pause` ms: the waits' give-backs wait for it.
    paused.raw('CLIENT', 'PAUSE', String(pause), 'ALL')
    const started = Date.now()
    await closing.close()
    const took = Date.now() - started
    assert.deepEqual(settled, [true, true, true], `close() resolved after ${took} ms, before the waits it ended had settled`)
    if (pause < 2000) {
      assert.ok(took >= pause - 100, `close() took ${took} ms, less than the pause (${pause} ms)`)
      assert.equal(waiters(), '0', 'a closed wait is still in line')
    } else {
      assert.ok(took < 2800, `close() took ${took} ms with the server paused: not bounded by 2 s`)
      await until(() => waiters() === '0', 'the closed waits left the line once the server answered')
    }
  }
  await held.release()
  await holder.close()
})

test('each thread has its own logger: a worker\'s neither replaces the main thread\'s nor silences it', async () => {
  const { Worker } = require('node:worker_threads')
  const { once } = require('node:events')
  const logged = []
  const logging = new Client(server.url, { logger: { warn: (line) => logged.push(line) } })
  /** Takes lock `name` with a short lease, not renewed, and waits for its loss. */
  const lose = async (name) => {
    const guard = await logging.lock(name, { ttl: 200, autoRenew: false }).acquire()
    await aborted(guard.signal)
  }
  const worker = new Worker(`
    const { parentPort, workerData } = require('node:worker_threads')
    const { Client } = require(workerData.pkg)
    const client = new Client(workerData.url, { logger: { warn: (line) => parentPort.postMessage(['warn', line]) } })
    parentPort.on('message', async (what) => {
      if (what === 'close') {
        await client.close()
        parentPort.postMessage(['closed'])
        parentPort.close()
        return
      }
      const guard = await client.lock(what, { ttl: 200, autoRenew: false }).acquire()
      guard.signal.addEventListener('abort', () => parentPort.postMessage(['lost', what]))
    })
    parentPort.postMessage(['ready'])
  `, { eval: true, workerData: { pkg: PACKAGE, url: server.url } })
  const fromWorker = []
  worker.on('message', (message) => fromWorker.push(message))
  try {
    await until(() => fromWorker.some(([what]) => what === 'ready'), 'the worker and its logger')
    // The worker's logger is set: the main thread's still gets the main thread's events.
    const first = uniqueName('main-beside-worker')
    await lose(first)
    await until(() => logged.some((line) => line.includes(first) && /lock lost/.test(line)),
      `the main thread's logger was not told of ${first}, with a worker's logger set: ${JSON.stringify(logged)}`)
    // The worker's logger gets the worker's events, with the main thread's set.
    const theirs = uniqueName('worker-beside-main')
    worker.postMessage(theirs)
    await until(() => fromWorker.some(([what, line]) => what === 'warn' && line.includes(theirs) && /lock lost/.test(line)),
      `the worker's logger was not told of ${theirs}: ${JSON.stringify(fromWorker)}`)
    // The worker's client closes (its logger removed) and the worker ends: the main thread's
    // logger is not silenced.
    worker.postMessage('close')
    await once(worker, 'exit')
    const after = uniqueName('main-after-worker')
    await lose(after)
    await until(() => logged.some((line) => line.includes(after) && /lock lost/.test(line)),
      `the main thread's logger was silenced by the worker's close: ${JSON.stringify(logged)}`)
  } finally {
    await worker.terminate()
    await logging.close()
  }
})
