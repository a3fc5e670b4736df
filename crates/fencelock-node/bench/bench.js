'use strict'
// fencelock from Node.js, beside its peers on npm, on real redis-server processes.
//
// Workloads (each contender in turn, in rounds; the table gives the median of the rounds):
//   N1  one async loop, a new key each cycle: acquire + release, cycles/s and cycle p50/p99
//   N2  8 async loops on one key (each with its own client), each holding it 1 ms:
//       grants/s, wait p50/p99 (from calling acquire to getting the lock), and the server's
//       CPU per grant (INFO cpu before and after the window, over the grants)
//   N3  the same with 64 loops
//   N5  32 async loops on one client, each on its own new keys: acquire + release, cycles/s,
//       cycle p50/p99 and this process's CPU per cycle (process.cpuUsage: the JavaScript, the
//       addon and its runtime thread together)
//   N4  Redlock over 5 redis-server instances, one client, sequential cycles on new keys:
//       first with all 5 up, then with the first instance SIGSTOPped (SIGCONT after the row);
//       every cycle is bounded at 10 s, so that a contender that waits for the stopped
//       instance forever shows as "hangs" instead of hanging the bench
//
// Contenders use their defaults, as a user would (their retry policies are noted where they
// are made, below); leases are 10 s everywhere. Only fencelock gives a fence.
//
//   (cd crates/fencelock-node/bench && npm ci)
//   node crates/fencelock-node/bench/bench.js [--seconds 5] [--rounds 3] [--json FILE]
//       [--only N1,N2,N3,N4,N5] [--contenders fencelock,redlock,sesame,semaphore]
//
// FENCELOCK_NODE_PACKAGE: the fencelock package (default: the directory above this one);
// FENCELOCK_TEST_SERVER: the redis-server binary (default: redis-server on PATH).

const { spawn, spawnSync } = require('node:child_process')
const crypto = require('node:crypto')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { performance } = require('node:perf_hooks')
const { setTimeout: sleep } = require('node:timers/promises')

const Redis = require('ioredis')
const { default: RedlockV5, ResourceLockedError: V5Locked, ExecutionError: V5Execution } = require('redlock')
const Sesame = require('@sesamecare-oss/redlock')
const { Mutex, RedlockMutex, TimeoutError: SemaphoreTimeout } = require('redis-semaphore')

const FENCELOCK_PACKAGE = process.env.FENCELOCK_NODE_PACKAGE || path.resolve(__dirname, '..')
const fencelock = require(FENCELOCK_PACKAGE)

const TTL = 10000 // ms, every contender's lease
const WAIT = 60000 // ms, the longest a contended acquire may wait (fencelock, redis-semaphore)
const HOLD = 1 // ms, N2 and N3
const CYCLE_BOUND = 10000 // ms, N4: a cycle not done by then "hangs"
const SLOW = 5000 // ms, N4: a cycle that took longer did not really finish

// ---------------------------------------------------------------------------------------------
// Arguments

function parseArgs (argv) {
  const args = { seconds: 5, rounds: 3, json: null, only: ['N1', 'N5', 'N2', 'N3', 'N4'], contenders: null }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    const value = () => {
      if (i + 1 >= argv.length) usage(`${arg} needs a value`)
      return argv[++i]
    }
    switch (arg) {
      case '--seconds': args.seconds = Number(value()); break
      case '--rounds': args.rounds = Number(value()); break
      case '--json': args.json = value(); break
      case '--only': args.only = value().split(',').map((w) => w.trim().toUpperCase()).filter(Boolean); break
      case '--contenders': args.contenders = value().split(',').map((c) => c.trim()).filter(Boolean); break
      case '-h': case '--help': usage(); break
      default: usage(`unknown argument ${arg}`)
    }
  }
  if (!(args.seconds > 0)) usage('--seconds must be positive')
  if (!(Number.isInteger(args.rounds) && args.rounds > 0)) usage('--rounds must be a positive integer')
  for (const w of args.only) if (!['N1', 'N2', 'N3', 'N4', 'N5'].includes(w)) usage(`unknown workload ${w}`)
  return args
}

function usage (error) {
  const text = 'usage: node bench.js [--seconds S] [--rounds R] [--json FILE] [--only N1,N2,N3,N4,N5] ' +
    '[--contenders fencelock,redlock,sesame,semaphore]\n'
  if (error) {
    process.stderr.write(`${error}\n${text}`)
    process.exit(2)
  }
  process.stdout.write(text)
  process.exit(0)
}

// ---------------------------------------------------------------------------------------------
// redis-server processes on free ports, stopped by their PID at the end (also on failure and on
// SIGINT)

function serverBinary () {
  const chosen = process.env.FENCELOCK_TEST_SERVER || 'redis-server'
  const found = spawnSync('sh', ['-c', 'command -v "$1"', 'sh', chosen], { encoding: 'utf8' })
  if (found.status !== 0 && !fs.existsSync(chosen)) {
    throw new Error(`the Redis server is missing: ${chosen} (set FENCELOCK_TEST_SERVER, or run scripts/ensure-redis)`)
  }
  return chosen
}

function serverVersion (binary) {
  const out = spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout || ''
  const match = /v=(\S+)/.exec(out)
  return match ? match[1] : out.trim()
}

async function freePort () {
  const server = net.createServer()
  await new Promise((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** One raw PING over TCP: true if the server answered +PONG within `ms`. */
function ping (port, ms = 200) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1')
    const done = (ok) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(ms, () => done(false))
    socket.once('error', () => done(false))
    socket.once('connect', () => socket.write('PING\r\n'))
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')))
  })
}

const servers = new Set()

class Server {
  static async start (binary) {
    const port = await freePort()
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fencelock-nodebench-'))
    const child = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
      { stdio: 'ignore' })
    const server = new Server(child, port, dir)
    servers.add(server)
    const deadline = Date.now() + 10000
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) break
      if (await ping(port)) return server
      await sleep(20)
    }
    server.kill()
    throw new Error(`redis-server on port ${port} did not start`)
  }

  constructor (child, port, dir) {
    this.child = child
    this.pid = child.pid
    this.port = port
    this.dir = dir
    this.url = `redis://127.0.0.1:${port}`
    this.exited = new Promise((resolve) => child.once('exit', resolve))
  }

  get alive () {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  pause () {
    process.kill(this.pid, 'SIGSTOP')
  }

  resume () {
    if (this.alive) process.kill(this.pid, 'SIGCONT')
  }

  /** SIGTERM (after SIGCONT, in case it was paused), then SIGKILL if it lingers. */
  async stop () {
    if (this.alive) {
      try {
        process.kill(this.pid, 'SIGCONT')
        process.kill(this.pid, 'SIGTERM')
      } catch {}
      const timer = sleep(5000, 'late')
      if ((await Promise.race([this.exited, timer])) === 'late') this.kill()
    }
    this.cleanup()
  }

  /** Synchronous, for the `exit` event and SIGINT. */
  kill () {
    if (this.alive) {
      try {
        process.kill(this.pid, 'SIGKILL')
      } catch {}
    }
    this.cleanup()
  }

  cleanup () {
    servers.delete(this)
    fs.rmSync(this.dir, { recursive: true, force: true })
  }
}

function killAllServers () {
  for (const server of [...servers]) server.kill()
}

process.on('exit', killAllServers)
for (const signal of ['SIGINT', 'SIGTERM']) {
  // Our listener makes fencelock's own step aside (lib/lifecycle.js); process.exit() below still
  // runs its `exit` hook.
  process.on(signal, () => {
    process.stderr.write(`\n${signal}: stopping the servers\n`)
    killAllServers()
    process.exit(signal === 'SIGINT' ? 130 : 143)
  })
}

// ---------------------------------------------------------------------------------------------
// Every ioredis client the bench makes, closed at the end of its run. ioredis's defaults are kept:
// no command timeout (a command to a SIGSTOPped server waits until it resumes, as the TCP
// connection stays up), an offline queue, 20 retries per request across reconnects.

function newRedis (url, opened) {
  const client = new Redis(url)
  client.on('error', () => {}) // reconnects are ioredis's business; results say what failed
  opened.push(client)
  return client
}

async function closeRedis (clients) {
  await Promise.all(clients.map(async (client) => {
    const bound = sleep(2000, 'late')
    const quit = client.quit().then(() => 'ok', () => 'failed')
    if ((await Promise.race([quit, bound])) !== 'ok') client.disconnect()
  }))
}

// ---------------------------------------------------------------------------------------------
// Contenders. `open(urls)` gives a handle on one client (or, for Redlock, one set of clients):
//   acquire(key, { wait })   the lock `key`, waiting if it is held; rejects as the library does
//   release(handle)          releases it; false if the library says it was no longer held
//   gaveUp(error)            whether `error` is the library giving up a wait (the bench asks again)
//   close()                  closes its connections
// `urls` has one URL (N1-N3) or five (N4, Redlock).

function peerVersion (name) {
  const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, 'node_modules', name, 'package.json'), 'utf8'))
  return String(pkg.version).replace(/^v/, '')
}

/** redlock v5 and @sesamecare-oss/redlock share an API (the latter is a fork of the former). */
function redlockFamily (RedlockClass, LockedError, ExecError) {
  return async (urls) => {
    const opened = []
    const redlock = new RedlockClass(urls.map((url) => newRedis(url, opened)))
    const handle = { otherErrors: 0, lastError: null }
    // Both emit an `error` event for every vote against (the lock being held counts), and an
    // EventEmitter with no `error` listener throws: without this listener the first contended
    // attempt ends in an unhandled rejection. The README shows this very listener.
    redlock.on('error', (error) => {
      if (error instanceof LockedError) return
      handle.otherErrors++
      handle.lastError = error
    })
    return Object.assign(handle, {
      acquire: (key) => redlock.acquire([key], TTL),
      release: async (lock) => {
        await lock.release()
        return true
      },
      gaveUp: (error) => error instanceof ExecError,
      close: () => closeRedis(opened) // what redlock.quit() does, but bounded
    })
  }
}

const CONTENDERS = [
  {
    key: 'fencelock',
    name: 'fencelock',
    version: fencelock.version,
    // Waiters are woken by the server (no polling); `wait` bounds the wait. Over Redlock each
    // call to an instance has its own limit (default: 5 % of the lease, here 500 ms).
    async open (urls) {
      const client = urls.length === 1 ? new fencelock.Client(urls[0]) : fencelock.Client.redlock(urls)
      return {
        acquire: (key, { wait } = {}) => client.lock(key, { ttl: TTL, wait }).acquire(),
        release: (guard) => guard.release(),
        gaveUp: (error) => error instanceof fencelock.FencelockError && error.code === 'timed_out',
        // The package has no close(): its connections go with the client (and the process).
        close: async () => {}
      }
    }
  },
  {
    key: 'redlock',
    name: 'redlock v5',
    version: peerVersion('redlock'),
    // Defaults: retryCount 10, retryDelay 200 ms, retryJitter 100 ms (each retry 100-300 ms
    // later), so an acquire gives up (ExecutionError) after ~2 s; the bench then asks again
    // and counts it as "gave up". Resolves at a quorum, without waiting for every instance.
    open: redlockFamily(RedlockV5, V5Locked, V5Execution)
  },
  {
    key: 'sesame',
    name: '@sesamecare-oss/redlock',
    version: peerVersion('@sesamecare-oss/redlock'),
    // The same defaults as redlock v5 (10 retries, 200 ms +/- 100 ms).
    open: redlockFamily(Sesame.Redlock, Sesame.ResourceLockedError, Sesame.ExecutionError)
  },
  {
    key: 'semaphore',
    name: 'redis-semaphore Mutex',
    redlockName: 'redis-semaphore RedlockMutex',
    version: peerVersion('redis-semaphore'),
    // Polls: SET NX every retryInterval (default 10 ms) until acquireTimeout (here 60 s; default
    // 10 s), then TimeoutError. RedlockMutex sends to every instance and waits for all the
    // answers (Promise.all) before counting the votes.
    async open (urls) {
      const opened = []
      const clients = urls.map((url) => newRedis(url, opened))
      const options = { lockTimeout: TTL, acquireTimeout: WAIT }
      return {
        acquire: async (key) => {
          const mutex = clients.length === 1 ? new Mutex(clients[0], key, options) : new RedlockMutex(clients, key, options)
          await mutex.acquire()
          return mutex
        },
        release: async (mutex) => {
          await mutex.release()
          return true
        },
        gaveUp: (error) => error instanceof SemaphoreTimeout,
        close: () => closeRedis(opened)
      }
    }
  }
]

// ---------------------------------------------------------------------------------------------
// Measures

function percentile (values, p) {
  if (values.length === 0) return NaN
  const ordered = Float64Array.from(values).sort()
  return ordered[Math.min(ordered.length - 1, Math.floor(p * ordered.length))]
}

function median (values) {
  const v = values.filter((x) => typeof x === 'number' && !Number.isNaN(x)).sort((a, b) => a - b)
  if (v.length === 0) return NaN
  const mid = Math.floor(v.length / 2)
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2
}

function errorText (error) {
  return String(error && error.message ? error.message : error).slice(0, 200)
}

/** used_cpu_sys + used_cpu_user of the server, in seconds. */
async function serverCpu (raw) {
  const info = await raw.info('cpu')
  const field = (name) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)[1])
  return field('used_cpu_sys') + field('used_cpu_user')
}

function runId () {
  return crypto.randomBytes(6).toString('hex')
}

// N1: one loop, a new key each cycle. N5: 32 loops on one client, each its own new keys.
async function uncontended (contender, ctx, loops) {
  const env = await contender.open([ctx.single.url])
  try {
    const prefix = `bench/n1/${runId()}/`
    await env.release(await env.acquire(`${prefix}warm`)) // connects, loads scripts
    const times = []
    let errors = 0
    let lastError = null
    const start = performance.now()
    const end = start + ctx.seconds * 1000
    const cpu = process.cpuUsage()
    await Promise.all(Array.from({ length: loops }, async (_, loop) => {
      for (let i = 0; performance.now() < end; i++) {
        const t0 = performance.now()
        try {
          const handle = await env.acquire(`${prefix}${loop}/${i}`)
          if (!(await env.release(handle))) errors++
          times.push(performance.now() - t0)
        } catch (error) {
          errors++
          lastError = errorText(error)
        }
      }
    }))
    const elapsed = (performance.now() - start) / 1000
    const used = process.cpuUsage(cpu)
    return {
      per_s: times.length / elapsed,
      p50_ms: percentile(times, 0.5),
      p99_ms: percentile(times, 0.99),
      client_us_per_cycle: (used.user + used.system) / Math.max(1, times.length),
      errors,
      last_error: lastError
    }
  } finally {
    await env.close()
  }
}

// N2 / N3: `loops` async loops on one key, each with its own client, each holding the lock 1 ms.
// Grants and waits count if the lock was granted within the window; after it, each loop finishes
// the cycle it is in (a redlock loop that gives up after the window stops there).
async function contended (contender, ctx, loops) {
  const envs = []
  try {
    for (let i = 0; i < loops; i++) envs.push(await contender.open([ctx.single.url]))
    const warm = `bench/contend/${runId()}/warm/`
    await Promise.all(envs.map(async (env, i) => env.release(await env.acquire(`${warm}${i}`))))
    const key = `bench/contend/${runId()}`
    const waits = []
    const state = { gaveUp: 0, errors: 0, lastError: null, end: Infinity }
    let go
    const started = new Promise((resolve) => { go = resolve })
    const perLoop = envs.map(() => 0)
    const loop = async (env, index) => {
      await started
      while (performance.now() < state.end) {
        const t0 = performance.now()
        let handle = null
        while (handle === null) {
          try {
            handle = await env.acquire(key, { wait: WAIT })
          } catch (error) {
            if (env.gaveUp(error)) state.gaveUp++
            else {
              state.errors++
              state.lastError = errorText(error)
            }
            if (performance.now() >= state.end) return
          }
        }
        const granted = performance.now()
        if (granted <= state.end) {
          waits.push(granted - t0)
          perLoop[index]++
        }
        await sleep(HOLD)
        try {
          if (!(await env.release(handle))) state.errors++
        } catch (error) {
          state.errors++
          state.lastError = errorText(error)
        }
      }
    }
    const running = envs.map(loop)
    const cpu0 = await serverCpu(ctx.raw)
    const start = performance.now()
    state.end = start + ctx.seconds * 1000
    go()
    await sleep(ctx.seconds * 1000)
    const cpu1 = await serverCpu(ctx.raw)
    const grants = waits.length
    const drainStart = performance.now()
    await Promise.all(running)
    const drain = performance.now() - drainStart
    for (const env of envs) {
      if (env.otherErrors) {
        state.errors += env.otherErrors
        state.lastError = state.lastError || errorText(env.lastError)
      }
    }
    return {
      per_s: grants / ctx.seconds,
      wait_p50_ms: percentile(waits, 0.5),
      wait_p99_ms: percentile(waits, 0.99),
      server_us_per_grant: grants ? ((cpu1 - cpu0) * 1e6) / grants : NaN,
      gave_up: state.gaveUp,
      errors: state.errors,
      // Fairness: the fewest and the most grants one loop got in the window.
      loop_min: Math.min(...perLoop),
      loop_max: Math.max(...perLoop),
      drain_ms: drain,
      last_error: state.lastError
    }
  } finally {
    await Promise.all(envs.map((env) => env.close()))
  }
}

/** `promise` within `ms`: 'done', 'failed' (with the error) or 'late'. */
async function bounded (promise, ms) {
  let timer
  const late = new Promise((resolve) => { timer = setTimeout(resolve, ms, { how: 'late' }) })
  try {
    return await Promise.race([promise.then(() => ({ how: 'done' }), (error) => ({ how: 'failed', error })), late])
  } finally {
    clearTimeout(timer)
  }
}

// N4: Redlock over five instances; sequential cycles, a new key each, every cycle bounded.
async function redlockPhase (env, prefix, seconds) {
  const times = []
  let errors = 0
  let slow = 0
  let hung = null
  let lastError = null
  const start = performance.now()
  const end = start + seconds * 1000
  for (let i = 0; performance.now() < end; i++) {
    const t0 = performance.now()
    const cycle = env.acquire(`${prefix}${i}`).then(async (handle) => {
      if (!(await env.release(handle))) throw new Error('release: the lock was no longer held')
    })
    const result = await bounded(cycle, CYCLE_BOUND)
    const took = performance.now() - t0
    if (result.how === 'late') {
      hung = cycle.catch(() => {}) // it goes on in the background; awaited after SIGCONT
      lastError = `a cycle did not finish within ${CYCLE_BOUND / 1000} s`
      break
    }
    if (result.how === 'failed') {
      errors++
      lastError = errorText(result.error)
    } else if (took > SLOW) {
      slow++
    } else {
      times.push(took)
    }
  }
  const elapsed = (performance.now() - start) / 1000
  return {
    result: {
      per_s: times.length / elapsed,
      p50_ms: percentile(times, 0.5),
      p99_ms: percentile(times, 0.99),
      ok: times.length,
      slow,
      errors,
      hung: hung !== null,
      last_error: lastError
    },
    hung
  }
}

async function n4 (contender, ctx) {
  const env = await contender.open(ctx.five.map((s) => s.url))
  const stopped = ctx.five[0]
  const out = {}
  try {
    const prefix = `bench/n4/${runId()}/`
    await env.release(await env.acquire(`${prefix}warm`))
    out.up = (await redlockPhase(env, `${prefix}up/`, ctx.seconds)).result
    stopped.pause()
    let phase
    try {
      phase = await redlockPhase(env, `${prefix}stopped/`, ctx.seconds)
    } finally {
      stopped.resume()
    }
    out.stopped = phase.result
    if (phase.hung) {
      const after = await bounded(phase.hung, CYCLE_BOUND)
      out.stopped.hung_cycle_after_sigcont = after.how === 'late' ? 'still pending' : 'finished'
    }
    if (env.otherErrors) out.stopped.instance_errors = env.otherErrors
    return out
  } finally {
    stopped.resume()
    await env.close()
  }
}

// ---------------------------------------------------------------------------------------------
// The tables

function fmtTime (ms) {
  if (typeof ms !== 'number' || Number.isNaN(ms)) return '—'
  if (ms < 1) return `${Math.round(ms * 1000)} µs`
  if (ms < 100) return `${ms.toFixed(2)} ms`
  return `${Math.round(ms).toLocaleString('en-US')} ms`
}

function fmtRate (x) {
  return typeof x === 'number' && !Number.isNaN(x) ? Math.round(x).toLocaleString('en-US') : '—'
}

function fmtUs (x) {
  return typeof x === 'number' && !Number.isNaN(x) ? `${x.toFixed(1)} µs` : ''
}

function fmtRatio (x) {
  return typeof x === 'number' && Number.isFinite(x) && x > 0 ? `×${x.toFixed(2)}` : '—'
}

/** The rows of the tables: { workload, label, contender, per_s, p50, p99, cpu, notes }. */
function rows (medians) {
  const out = []
  for (const [workload, byContender] of Object.entries(medians)) {
    for (const [name, m] of Object.entries(byContender)) {
      const notes = []
      if (m.errors) notes.push(`${m.errors} errors`)
      if (m.gave_up) notes.push(`gave up ${m.gave_up}× (asked again)`)
      if (m.loop_max !== undefined) notes.push(`grants per loop ${m.loop_min}–${m.loop_max}`)
      let label = workload
      if (workload === 'N1') label = 'N1 uncontended'
      if (workload === 'N5') label = 'N5 32 loops, own keys'
      if (workload === 'N2') label = 'N2 8 on one key'
      if (workload === 'N3') label = 'N3 64 on one key'
      if (workload === 'N4') label = 'N4 Redlock, 5 up'
      if (workload === 'N4-stopped') {
        label = 'N4 Redlock, 1 of 5 stopped'
        if (m.hung) notes.push('hangs (a cycle > 10 s)')
        else if (!m.slow && !m.errors) notes.push(`all ${m.ok} cycles finished`)
        if (m.slow) notes.push(`${m.slow} cycles > 5 s`)
      }
      const contendedRow = workload === 'N2' || workload === 'N3'
      out.push({
        workload,
        label,
        contender: name,
        per_s: m.per_s,
        p50: contendedRow ? m.wait_p50_ms : m.p50_ms,
        p99: contendedRow ? m.wait_p99_ms : m.p99_ms,
        cpu: contendedRow ? m.server_us_per_grant : NaN,
        client: contendedRow ? NaN : m.client_us_per_cycle,
        hung: !!m.hung,
        notes: notes.join('; ')
      })
    }
  }
  return out
}

function printTables (medians) {
  const all = rows(medians)
  console.log('| workload | contender | grants or cycles/s | p50 | p99 | server µs/grant | client CPU µs/cycle | notes |')
  console.log('|---|---|---:|---:|---:|---:|---:|---|')
  for (const r of all) {
    const wait = r.workload === 'N2' || r.workload === 'N3' ? 'wait ' : ''
    console.log(`| ${r.label} | ${r.contender} | ${fmtRate(r.per_s)} | ${wait}${fmtTime(r.p50)} | ${wait}${fmtTime(r.p99)} | ${fmtUs(r.cpu)} | ${fmtUs(r.client)} | ${r.notes} |`)
  }
  if (!all.some((r) => r.contender === 'fencelock') || !all.some((r) => r.contender !== 'fencelock')) return
  console.log('\nRatios of fencelock against the best peer per column (above 1: fencelock is better; ' +
    'rate: fencelock ÷ peer; times and CPU: peer ÷ fencelock). A peer that hangs is left out.\n')
  console.log('| workload | rate | p50 | p99 | server µs/grant | client CPU/cycle |')
  console.log('|---|---:|---:|---:|---:|---:|')
  const labels = [...new Set(all.map((r) => r.label))]
  for (const label of labels) {
    const inRow = all.filter((r) => r.label === label)
    const fl = inRow.find((r) => r.contender === 'fencelock')
    const peers = inRow.filter((r) => r.contender !== 'fencelock' && !r.hung)
    if (!fl) continue
    const cell = (field, higherIsBetter) => {
      const valid = peers.filter((p) => typeof p[field] === 'number' && !Number.isNaN(p[field]))
      if (valid.length === 0 || Number.isNaN(fl[field])) return '—'
      const best = valid.reduce((a, b) => (higherIsBetter ? (b[field] > a[field] ? b : a) : (b[field] < a[field] ? b : a)))
      const ratio = higherIsBetter ? fl[field] / best[field] : best[field] / fl[field]
      return `${fmtRatio(ratio)} (${best.contender})`
    }
    const contendedRow = inRow[0].workload === 'N2' || inRow[0].workload === 'N3'
    console.log(`| ${label} | ${cell('per_s', true)} | ${cell('p50', false)} | ${cell('p99', false)} | ${contendedRow ? cell('cpu', false) : ''} | ${contendedRow ? '' : cell('client', false)} |`)
  }
}

// ---------------------------------------------------------------------------------------------

async function main () {
  const args = parseArgs(process.argv.slice(2))
  const binary = serverBinary()
  const wanted = args.contenders
  // A key (fencelock, redlock, sesame, semaphore) names one contender; other words match names.
  const keys = CONTENDERS.map((c) => c.key)
  const contenders = CONTENDERS.filter((c) => !wanted || wanted.some((w) =>
    keys.includes(w) ? c.key === w : c.name.includes(w) || (c.redlockName || '').includes(w)))
  if (contenders.length === 0) usage('no contender matches --contenders')
  const loadBefore = os.loadavg()
  const ctx = { seconds: args.seconds, single: null, five: [], raw: null }
  const rawClients = []
  const rounds = {}
  const record = (workload, name, result) => {
    ((rounds[workload] ??= {})[name] ??= []).push(result)
    const shown = Object.fromEntries(Object.entries(result).map(([k, v]) => [k, typeof v === 'number' ? +v.toPrecision(4) : v]))
    process.stderr.write(`${workload} ${name}: ${JSON.stringify(shown)}\n`)
  }
  try {
    if (args.only.some((w) => w !== 'N4')) {
      ctx.single = await Server.start(binary)
      ctx.raw = newRedis(ctx.single.url, rawClients)
    }
    if (args.only.includes('N4')) {
      for (let i = 0; i < 5; i++) ctx.five.push(await Server.start(binary))
    }
    for (let round = 1; round <= args.rounds; round++) {
      process.stderr.write(`round ${round} of ${args.rounds}\n`)
      for (const workload of args.only) {
        for (const contender of contenders) {
          if (workload === 'N1') record('N1', contender.name, await uncontended(contender, ctx, 1))
          if (workload === 'N5') record('N5', contender.name, await uncontended(contender, ctx, 32))
          if (workload === 'N2') record('N2', contender.name, await contended(contender, ctx, 8))
          if (workload === 'N3') record('N3', contender.name, await contended(contender, ctx, 64))
          if (workload === 'N4') {
            const name = contender.redlockName || contender.name
            const out = await n4(contender, ctx)
            record('N4', name, out.up)
            record('N4-stopped', name, out.stopped)
          }
        }
      }
    }
  } finally {
    await closeRedis(rawClients)
    await Promise.all([...servers].map((s) => s.stop()))
  }
  const loadAfter = os.loadavg()

  const medians = {}
  for (const [workload, byContender] of Object.entries(rounds)) {
    medians[workload] = {}
    for (const [name, runs] of Object.entries(byContender)) {
      const m = {}
      for (const k of Object.keys(runs[0])) {
        const values = runs.map((r) => r[k])
        if (typeof values[0] === 'number') m[k] = median(values)
        else if (typeof values[0] === 'boolean') m[k] = values.some(Boolean)
        else m[k] = values.find((v) => v) ?? null
      }
      medians[workload][name] = m
    }
  }

  const meta = {
    date: new Date().toISOString(),
    redis_server: serverVersion(binary),
    node: process.version,
    cpus: os.cpus().length,
    seconds: args.seconds,
    rounds: args.rounds,
    versions: Object.fromEntries([...CONTENDERS.map((c) => [c.name.replace(/ .*/, ''), c.version]), ['ioredis', peerVersion('ioredis')]]),
    loadavg_before: loadBefore,
    loadavg_after: loadAfter
  }
  const load = (l) => l.map((x) => x.toFixed(2)).join(' ')
  console.log(`${meta.date}; redis-server ${meta.redis_server}; Node ${meta.node}; ${meta.cpus} CPUs`)
  console.log(Object.entries(meta.versions).map(([n, v]) => `${n} ${v}`).join(', '))
  console.log(`load average ${load(loadBefore)} before, ${load(loadAfter)} after; ` +
    `${args.seconds} s per run, median of ${args.rounds} round${args.rounds > 1 ? 's' : ''}\n`)
  printTables(medians)
  if (args.json) {
    fs.writeFileSync(args.json, JSON.stringify({ meta, medians, rounds }, null, 1) + '\n')
  }
}

main().catch((error) => {
  setTimeout(() => process.exit(1), 5000).unref()
  process.stderr.write(`bench failed: ${error && error.stack ? error.stack : error}\n`)
  killAllServers()
  process.exitCode = 1
})
