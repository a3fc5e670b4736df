'use strict'
// The test kit: real redis-server (or valkey-server: FENCELOCK_TEST_SERVER) processes on free
// ports, started by the tests and stopped by their PID (also when a test fails); raw commands
// through redis-cli; child processes of Node, Python, Rust and the `fencelock` command.

const { spawn, spawnSync, execFileSync } = require('node:child_process')
const { once } = require('node:events')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { after } = require('node:test')

const ROOT = path.resolve(__dirname, '..', '..', '..')

/** A program the tests need, or a loud failure naming it (a test never skips). */
function program (envName, fallback, what) {
  const chosen = process.env[envName] || fallback
  const found = spawnSync('sh', ['-c', `command -v "${chosen}"`], { encoding: 'utf8' })
  if (found.status !== 0 && !fs.existsSync(chosen)) {
    throw new Error(`${what} is missing: ${chosen} (set ${envName}, or run scripts/test)`)
  }
  return chosen
}

function serverBinary () {
  return program('FENCELOCK_TEST_SERVER', 'redis-server', 'the Redis server')
}

function cliBinary () {
  return program('FENCELOCK_TEST_CLI', 'redis-cli', 'redis-cli')
}

async function freePort () {
  const server = net.createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address()
  server.close()
  await once(server, 'close')
  return port
}

const started = new Set()

/** Stops every server a test file started, by PID, whatever happened. */
after(() => {
  for (const server of started) server.stop()
})

process.on('exit', () => {
  for (const server of started) server.stop()
})

class Server {
  constructor (child, port, dir, password) {
    this.child = child
    this.port = port
    this.dir = dir
    this.password = password
    this.url = password ? `redis://:${password}@127.0.0.1:${port}` : `redis://127.0.0.1:${port}`
  }

  /** Runs a raw command (redis-cli): its output, trimmed. */
  raw (...args) {
    const auth = this.password ? ['--no-auth-warning', '-a', this.password] : []
    return execFileSync(cliBinary(), ['-p', String(this.port), ...auth, ...args], { encoding: 'utf8' }).trim()
  }

  stop () {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      try {
        process.kill(this.child.pid, 'SIGKILL')
      } catch {}
    }
    started.delete(this)
    fs.rmSync(this.dir, { recursive: true, force: true })
  }
}

/** A throwaway server on a free port (`extra`: more arguments). */
async function startServer (extra = []) {
  const binary = serverBinary()
  for (let attempt = 0; ; attempt++) {
    const port = await freePort()
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fencelock-node-'))
    const child = spawn(binary, [
      '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--dir', dir, '--enable-debug-command', 'local', ...extra
    ], { stdio: ['ignore', 'ignore', 'pipe'] })
    const passwordAt = extra.indexOf('--requirepass')
    const server = new Server(child, port, dir, passwordAt >= 0 ? extra[passwordAt + 1] : null)
    started.add(server)
    const deadline = Date.now() + 10000
    while (Date.now() < deadline) {
      if (child.exitCode !== null) break
      try {
        if (server.raw('PING') === 'PONG') return server
      } catch {}
      await sleep(20)
    }
    server.stop()
    if (attempt >= 2) throw new Error(`${binary} did not start on port ${port}`)
  }
}

function sleep (ms) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

let counter = 0
/** A lock name of its own for each test. */
function uniqueName (label = 'lock') {
  counter += 1
  return `node/${label}/${process.pid}/${counter}`
}

/** Runs a Node script (`code`) in a child process with `FENCELOCK_URL` and the package. */
function node (code, env = {}) {
  return spawn(process.execPath, ['-e', code], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd: __dirname
  })
}

/** The lines a child writes, one at a time. */
function lines (child) {
  let buffer = ''
  const waiting = []
  const queued = []
  child.stdout.setEncoding('utf8')
  child.stdout.on('data', (chunk) => {
    buffer += chunk
    let at
    while ((at = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, at)
      buffer = buffer.slice(at + 1)
      if (waiting.length) waiting.shift()(line)
      else queued.push(line)
    }
  })
  let stderr = ''
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (chunk) => { stderr += chunk })
  return {
    next (timeout = 20000) {
      if (queued.length) return Promise.resolve(queued.shift())
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no line from the child in ${timeout} ms; stderr: ${stderr}`)), timeout)
        waiting.push((line) => { clearTimeout(timer); resolve(line) })
      })
    },
    stderr: () => stderr
  }
}

/** Waits for `child` to end: `{ code, signal }`. */
async function ended (child, timeout = 30000) {
  if (child.exitCode !== null || child.signalCode !== null) return { code: child.exitCode, signal: child.signalCode }
  const timer = setTimeout(() => child.kill('SIGKILL'), timeout)
  const [code, signal] = await once(child, 'exit')
  clearTimeout(timer)
  return { code, signal }
}

/** The reason `signal` aborts with: at once if it has, else when it does. */
function aborted (signal) {
  if (signal.aborted) return Promise.resolve(signal.reason)
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }))
}

/** Waits until `check()` (maybe async) is true, polling every 20 ms, at most `timeout` ms. */
async function until (check, what, timeout = 10000) {
  const end = Date.now() + timeout
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`not in ${timeout} ms: ${what}`)
    await sleep(20)
  }
}

/** What the package is for the tests: the installed one (scripts/test) or the source tree. */
const PACKAGE = process.env.FENCELOCK_NODE_PACKAGE || path.resolve(__dirname, '..')

module.exports = { ROOT, PACKAGE, program, startServer, sleep, uniqueName, node, lines, ended, aborted, until }
