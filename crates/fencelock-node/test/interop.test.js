'use strict'
// One lock, four front ends: Node, Python, a plain Rust program and the `fencelock` command
// exclude each other, fences grow across them, a release on one side wakes a waiter on the
// other (the leases are long: only the release message can wake them this soon), a Node
// fenced write refuses a paused job's fence, and `fencelock run --once` and `client.once` keep
// one record.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { once } = require('node:events')
const { ROOT, PACKAGE, program, startServer, uniqueName, sleep, lines, ended } = require('./helpers')
const { Client, Writes } = require(PACKAGE)

const cli = program('FENCELOCK_BIN', path.join(ROOT, 'target/debug/fencelock'), 'the fencelock command')
const rustHolder = program('FENCELOCK_HOLD_EXAMPLE', path.join(ROOT, 'target/debug/examples/hold'), "the Rust holder (cargo build -p fencelock --example hold)")
const python = program('FENCELOCK_PYTHON', path.join(ROOT, 'target/py-venv/bin/python'), 'a Python with the fencelock package (scripts/ensure-python)')

let server
let client
test.before(async () => {
  server = await startServer()
  client = new Client(server.url)
})

function run (...args) {
  return spawn(cli, args, { env: { ...process.env, FENCELOCK_URL: server.url }, stdio: ['ignore', 'pipe', 'pipe'] })
}

function rust (name, seconds) {
  return spawn(rustHolder, [server.url, name, String(seconds)], { stdio: ['ignore', 'pipe', 'pipe'] })
}

/** Python holding `name` for `seconds` (`wait`: its own wait), printing `fence N` and `released`. */
function pythonHolder (name, seconds, wait = 'None') {
  const code = `
import sys, time, fencelock
client = fencelock.Client(sys.argv[1])
guard = client.lock(sys.argv[2], ttl=30.0, wait=${wait}).acquire()
print("fence", guard.fence, flush=True)
time.sleep(float(sys.argv[3]))
print("released", guard.release(), flush=True)
`
  return spawn(python, ['-c', code, server.url, name, String(seconds)], { stdio: ['ignore', 'pipe', 'pipe'] })
}

async function heldByOther (name) {
  return (await client.lock(name).tryAcquire()) === null
}

test('Node excludes Rust, Python and fencelock run, and each of them excludes Node', async () => {
  const name = uniqueName('interop')
  const guard = await client.lock(name, { ttl: 30000 }).acquire()
  const refused = run('run', '--no-wait', name, '--', 'true')
  assert.equal((await ended(refused)).code, 73, 'fencelock run got a lock Node holds')
  const py = spawn(python, ['-c', 'import sys, fencelock\ntry:\n  fencelock.Client(sys.argv[1]).lock(sys.argv[2], wait=0).acquire(); print("got")\nexcept fencelock.Busy: print("busy")', server.url, name], { stdio: ['ignore', 'pipe', 'pipe'] })
  assert.equal(await lines(py).next(), 'busy', 'Python got a lock Node holds')
  await ended(py)
  const rs = rust(name, 0)
  await sleep(500)
  assert.equal(rs.exitCode, null, 'the Rust program got a lock Node holds')
  await guard.release()
  assert.match(await lines(rs).next(), /^fence /)
  await ended(rs)

  // One at a time: each holds while Node tries.
  for (const [who, start] of [['fencelock run', () => run('run', '--ttl', '30s', name, '--', 'sh', '-c', 'echo go; exec sleep 2')],
    ['Rust', () => rust(name, 2)], ['Python', () => pythonHolder(name, 2)]]) {
    const child = start()
    const out = lines(child)
    await out.next()
    assert.ok(await heldByOther(name), `Node got a lock ${who} holds`)
    assert.equal((await ended(child)).code, 0, out.stderr())
  }
})

test('fences grow strictly across grants from all four', async () => {
  const name = uniqueName('fences')
  const fences = []
  for (let round = 0; round < 2; round++) {
    const guard = await client.lock(name).acquire()
    fences.push(guard.fence)
    await guard.release()
    const job = run('run', '--ttl', '30s', name, '--', 'sh', '-c', 'echo $FENCELOCK_FENCE')
    fences.push(BigInt(await lines(job).next()))
    await ended(job)
    const rs = rust(name, 0)
    fences.push(BigInt((await lines(rs).next()).split(' ')[1]))
    await ended(rs)
    const py = pythonHolder(name, 0)
    fences.push(BigInt((await lines(py).next()).split(' ')[1]))
    await ended(py)
  }
  for (let i = 1; i < fences.length; i++) assert.ok(fences[i] > fences[i - 1], `fences: ${fences.join(', ')}`)
})

for (const [who, start] of [['Python', (name) => pythonHolder(name, 1)], ['Rust', (name) => rust(name, 1)]]) {
  test(`a Node waiter is woken by a ${who} release, without polling`, async () => {
    const name = uniqueName(`woken-by-${who}`)
    const child = start(name)
    const out = lines(child)
    assert.match(await out.next(), /^fence /)
    // The holder's lease is 30 s: only its release can hand the lock over this soon.
    const guard = await client.lock(name, { ttl: 30000, wait: 20000 }).acquire()
    const woken = Date.now()
    assert.match(await out.next(), /^released/)
    const released = Date.now()
    assert.equal((await ended(child)).code, 0)
    await guard.release()
    assert.ok(woken - released < 1000, `woken ${woken - released} ms after the release`)
  })
}

test('a Python waiter is woken by a Node release, without polling', async () => {
  const name = uniqueName('python-waits')
  const guard = await client.lock(name, { ttl: 30000 }).acquire()
  const waiter = pythonHolder(name, 0, '20.0')
  const out = lines(waiter)
  await sleep(1000)
  assert.equal(waiter.exitCode, null, 'Python did not wait')
  const released = Date.now()
  assert.equal(await guard.release(), true)
  assert.match(await out.next(), /^fence /)
  assert.ok(Date.now() - released < 2000, `Python took ${Date.now() - released} ms`)
  await ended(waiter)
})

test("a Node fenced store refuses a paused job's stale fence", async () => {
  const name = uniqueName('paused-job')
  const job = run('run', '--ttl', '1s', name, '--', 'sh', '-c', 'echo $FENCELOCK_FENCE; exec sleep 60')
  try {
    const jobFence = BigInt(await lines(job).next())
    process.kill(job.pid, 'SIGSTOP') // fencelock run itself: it can no longer renew
    const guard = await client.lock(name, { ttl: 30000, wait: 10000 }).acquire()
    assert.ok(guard.fence > jobFence)
    const store = client.fencedStore(name)
    await store.apply(guard.fence, new Writes().set(`${name}:report`, 'new'))
    await assert.rejects(store.apply(jobFence, new Writes().set(`${name}:report`, 'stale')),
      (e) => e.code === 'fenced' && e.fence === jobFence && e.accepted === guard.fence)
    assert.equal(server.raw('GET', `${name}:report`), 'new')
    await guard.release()
  } finally {
    process.kill(job.pid, 'SIGCONT')
    job.kill('SIGKILL')
    await ended(job)
  }
})

/** What a child wrote, and its status, once it has ended (killed after 30 s). */
async function output (child) {
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk) => { stdout += chunk })
  child.stderr.setEncoding('utf8').on('data', (chunk) => { stderr += chunk })
  const timer = setTimeout(() => child.kill('SIGKILL'), 30000)
  const [code] = await once(child, 'close')
  clearTimeout(timer)
  return { code, stdout, stderr }
}

for (const named of [false, true]) {
  test(`fencelock run --once and Node's once keep one record (${named ? 'a lock named' : 'the lock named as the key'})`, async () => {
    const lockOf = (key) => (named ? `${key}/lock` : undefined)
    const runOnce = (key, ...command) => run('run', '--once', key, ...(named ? [lockOf(key)] : []), '--', ...command)

    // The command first: Node finds the work done and does not call it.
    const first = uniqueName('once-cli-first')
    const made = await output(runOnce(first, 'sh', '-c', 'echo "$FENCELOCK_NAME"'))
    assert.equal(made.code, 0, made.stderr)
    assert.equal(made.stdout.trim(), lockOf(first) ?? first)
    let called = false
    const found = await client.once(first, { lock: lockOf(first) }).run(async () => { called = true })
    assert.equal(found.ran, false, `Node did ${first} again after the command`)
    assert.equal(called, false)

    // Node first: the command finds the record and runs nothing.
    const second = uniqueName('once-node-first')
    assert.equal((await client.once(second, { lock: lockOf(second) }).run(async (fence) => fence)).ran, true)
    const later = await output(runOnce(second, 'echo', 'ran'))
    assert.equal(later.code, 0, later.stderr)
    assert.equal(later.stdout, '', later.stderr)
    assert.match(later.stderr, /was done before/)
  })
}

test('fencelock run --once with a tick and Node\'s once with the same tick keep one record', async () => {
  // --every: the command first, by the server's clock; Node finds that tick done.
  const hourly = uniqueName('once-every')
  const made = await output(run('run', '--once', hourly, '--every', '1h', '--', 'sh', '-c', 'echo "$FENCELOCK_TICK"'))
  assert.equal(made.code, 0, made.stderr)
  let called = false
  const found = await client.once(hourly, { tick: { every: 3_600_000 } }).run(async () => { called = true })
  assert.equal(called, false, `Node did ${hourly}'s tick again after the command`)
  assert.equal(found.ran, false)
  assert.equal(found.tooLate, false)
  assert.equal(found.tick.toISOString(), made.stdout.trim())

  // A planned tick: Node first, the command finds it done.
  const planned = uniqueName('once-planned')
  const ran = await client.once(planned, { tick: { planned: Date.UTC(2026, 10, 29) } }).run(async (fence) => fence)
  assert.equal(ran.ran, true)
  const later = await output(run('run', '--once', planned, '--tick', '2026-11-29T00:00:00Z', '--', 'echo', 'ran'))
  assert.equal(later.code, 0, later.stderr)
  assert.equal(later.stdout, '', later.stderr)
  assert.match(later.stderr, /was done before/)
})
