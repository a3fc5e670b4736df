'use strict'
// The redis-server processes the bench runs (stopped by PID at the end, on failure and on
// SIGINT), and its ioredis clients.

const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { setTimeout: sleep } = require('node:timers/promises')

const Redis = require('ioredis')

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

module.exports = { serverBinary, serverVersion, Server, servers, killAllServers, newRedis, closeRedis }
