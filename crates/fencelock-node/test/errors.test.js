'use strict'
// Each error code, raised by its own case, as a FencelockError with the lock's name and its
// fields; and every code of the core accounted for.

const test = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { PACKAGE, startServer, uniqueName, sleep } = require('./helpers')
const fencelock = require(PACKAGE)
const { Client, FencelockError, Writes, codes } = fencelock

const raised = new Set()
/** An error raised above, by code (the first of each). */
const examples = new Map()
/** Asserts `promise` rejects with `code` (and what `check` says); records the code. */
async function rejectsWith (promise, code, check = () => true) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof FencelockError, `not a FencelockError: ${e}`)
    assert.equal(e.code, code, e.message)
    assert.ok(check(e), `${code}: ${JSON.stringify(e, (k, v) => typeof v === 'bigint' ? String(v) : v)} ${e.message}`)
    if (!examples.has(code)) examples.set(code, e)
    return true
  })
  raised.add(code)
}

function throwsWith (fn, code, check = () => true) {
  assert.throws(fn, (e) => {
    if (!(e instanceof FencelockError && e.code === code && check(e))) return false
    if (!examples.has(code)) examples.set(code, e)
    return true
  })
  raised.add(code)
}

async function deadPort () {
  const s = await startServer()
  const port = s.port
  s.stop()
  return port
}

let server
test.before(async () => {
  server = await startServer()
})

test('busy and timed_out', async () => {
  const client = new Client(server.url)
  const name = uniqueName()
  const held = await client.lock(name, { ttl: 10000 }).acquire()
  await rejectsWith(client.lock(name, { wait: 0 }).acquire(), 'busy', (e) => e.lock === name && e.remaining > 0 && e.remaining <= 10000)
  await rejectsWith(client.lock(name, { wait: 200 }).acquire(), 'timed_out', (e) => e.lock === name && e.waited >= 200)
  await held.release()
})

test('invalid_argument, before anything is sent', async () => {
  const client = new Client(server.url)
  for (const options of [{ ttl: -1 }, { ttl: Number.NaN }, { wait: -0.5 }, { maxHold: Infinity }]) {
    throwsWith(() => client.lock('named', options), 'invalid_argument', (e) => e.lock === 'named')
  }
  await rejectsWith(client.lock('with{braces}').acquire(), 'invalid_argument', (e) => e.lock === 'with{braces}')
  assert.equal(server.raw('EXISTS', 'fencelock:{with{braces}}'), '0')
})

test('a request is checked whatever valid request came before it', () => {
  // The package skips the addon's check for options it found valid just before: each option
  // made invalid after a valid request with the others alike is still refused, by that name.
  const client = new Client(server.url)
  const valid = { ttl: 1000, wait: 5, queueTimeout: 100, maxHold: 60000, lockDelay: 10 }
  for (const [option, bad] of [['ttl', -1], ['wait', -5], ['queueTimeout', Number.NaN], ['maxHold', Infinity], ['lockDelay', -1]]) {
    client.lock('before', valid)
    throwsWith(() => client.lock(`after-${option}`, { ...valid, [option]: bad }), 'invalid_argument',
      (e) => e.lock === `after-${option}` && e.reason.includes(option))
    client.lock('again', valid)
  }
  for (const kind of ['fairLock', 'semaphore']) {
    const make = kind === 'semaphore' ? (name, options) => client.semaphore(name, 2, options) : (name, options) => client.fairLock(name, options)
    make('before', valid)
    throwsWith(() => make('after', { ...valid, ttl: -1 }), 'invalid_argument', (e) => e.lock === 'after')
  }
})

test('config, with no lock named', () => {
  throwsWith(() => new Client('http://127.0.0.1:1'), 'config', (e) => e.lock === null)
  throwsWith(() => new Client(server.url, { tls: { cert: 'x' } }), 'config', (e) => /tls.cert and tls.key/.test(e.reason))
  throwsWith(() => Client.sentinel([server.url], 'mymaster', { replicaTimeout: 100 }), 'config')
})

test('config: a key prefix ending with a colon, which fencelock adds itself', async () => {
  throwsWith(() => new Client(server.url, { keyPrefix: 'fencelock:' }), 'config', (e) => e.lock === null && /ends with ':'/.test(e.reason))
  const nested = new Client(server.url, { keyPrefix: 'app:locks' })
  const name = uniqueName()
  const guard = await nested.lock(name).acquire()
  assert.equal(server.raw('EXISTS', `app:locks:{${name}}`), '1')
  await guard.release()
})

test('unreachable names the server', async () => {
  const port = await deadPort()
  const client = new Client(`redis://127.0.0.1:${port}`, { commandTimeout: 500 })
  const name = uniqueName()
  await rejectsWith(client.lock(name, { wait: 0 }).acquire(), 'unreachable', (e) => e.lock === name && e.server === `127.0.0.1:${port}`)
})

test('auth_failed never shows the password', async () => {
  const secured = await startServer(['--requirepass', 'right-secret'])
  const client = new Client(`redis://:wrong-secret@127.0.0.1:${secured.port}`)
  const name = uniqueName()
  await rejectsWith(client.lock(name, { wait: 0 }).acquire(), 'auth_failed', (e) => e.lock === name && !e.message.includes('wrong-secret'))
  assert.ok(!client.server.includes('wrong-secret'))
  secured.stop()
})

test('permission_denied names the rule', async () => {
  server.raw('ACL', 'SETUSER', 'noscripts', 'on', '>pw', '~*', '&*', '+@all', '-eval', '-evalsha', '-script')
  const client = new Client(`redis://noscripts:pw@127.0.0.1:${server.port}`)
  const name = uniqueName()
  await rejectsWith(client.lock(name, { wait: 0 }).acquire(), 'permission_denied', (e) => e.lock === name && e.rule && e.command)
})

test('conflict when a name is used as another kind', async () => {
  const client = new Client(server.url)
  const name = uniqueName()
  const permit = await client.semaphore(name, 3).acquire()
  await rejectsWith(client.lock(name, { wait: 0 }).acquire(), 'conflict', (e) => e.conflict === 'other_kind' && e.lock === name)
  assert.ok(codes.conflict.includes('other_kind'))
  await permit.release()
})

test('wrong_type leaves a foreign key alone', async () => {
  const client = new Client(server.url)
  const name = uniqueName()
  server.raw('RPUSH', `fencelock:{${name}}`, 'not a lock')
  await rejectsWith(client.lock(name, { wait: 0 }).acquire(), 'wrong_type', (e) => e.lock === name && e.found === 'a list')
  assert.equal(server.raw('LRANGE', `fencelock:{${name}}`, '0', '-1'), 'not a lock')
})

test('no_quorum over Redlock', async () => {
  const up = await startServer()
  const downs = [await deadPort(), await deadPort()].map((p) => `redis://127.0.0.1:${p}`)
  const client = Client.redlock([up.url, ...downs], { commandTimeout: 500 })
  const name = uniqueName()
  await rejectsWith(client.lock(name, { wait: 0 }).acquire(), 'no_quorum', (e) => e.agreed === 1 && e.needed === 2 && e.total === 3)
  assert.equal(up.raw('EXISTS', `fencelock:{${name}}`), '0', 'nothing stays held where it agreed')
  up.stop()
})

test('unsupported: a semaphore over Redlock', async () => {
  const servers = [await startServer(), await startServer(), await startServer()]
  const client = Client.redlock(servers.map((s) => s.url))
  const name = uniqueName()
  await rejectsWith(client.semaphore(name, 2).acquire(), 'unsupported', (e) => e.lock === name)
  for (const s of servers) {
    assert.equal(s.raw('DBSIZE'), '0')
    s.stop()
  }
})

test('fenced, fenced_wrong_type and not_held', async () => {
  const client = new Client(server.url)
  const name = uniqueName()
  const store = client.fencedStore(name)
  assert.equal(await store.apply(10n, new Writes().set(`${name}:k`, 'v')), 10n)
  await rejectsWith(store.apply(9n, new Writes().set(`${name}:k`, 'w')), 'fenced', (e) => e.fence === 9n && e.accepted === 10n && e.lock === name)
  assert.equal(server.raw('GET', `${name}:k`), 'v')
  server.raw('RPUSH', `${name}:h`, 'a list')
  await rejectsWith(store.apply(11n, new Writes().set(`${name}:s`, 'v').hset(`${name}:h`, 'f', 'v')), 'fenced_wrong_type', (e) => e.resource === name && e.key === `${name}:h`)
  assert.equal(server.raw('EXISTS', `${name}:s`), '0')
  const guard = await client.lock(name, { ttl: 5000 }).acquire()
  await guard.release()
  await rejectsWith(guard.extend(5000), 'not_held', (e) => e.lock === name && e.reason === 'released')
})

test('not_leader for a deposed leader', async () => {
  const client = new Client(server.url)
  const name = uniqueName('election')
  const leadership = await client.election(name).campaign('me', { ttl: 5000 })
  // An operator takes the leadership away; another process wins the next term.
  await client.forceRelease(name)
  const next = await client.election(name).campaign('next')
  await sleep(50)
  await rejectsWith(leadership.proclaim('still me?'), 'not_leader', (e) => e.election === name && e.term === leadership.term && e.current === next.term)
  await next.resign()
})

test('not_replicated when no replica acknowledges', async () => {
  const client = new Client(server.url, { waitForReplicas: 1, replicaTimeout: 100 })
  const name = uniqueName()
  await rejectsWith(client.lock(name, { wait: 0 }).acquire(), 'not_replicated', (e) => e.acknowledged === 0 && e.wanted === 1 && e.server === `127.0.0.1:${server.port}`)
  assert.equal(server.raw('EXISTS', `fencelock:{${name}}`), '0', 'the grant was given back')
  const warned = new Client(server.url, { waitForReplicas: 1, replicaTimeout: 100, replicaShortfall: 'warn' })
  const guard = await warned.lock(name, { wait: 0 }).acquire()
  await guard.release()
})

test('redis: a replica refuses the write', async () => {
  const replica = await startServer(['--replicaof', '127.0.0.1', String(server.port)])
  const client = new Client(replica.url)
  const name = uniqueName()
  await rejectsWith(client.lock(name, { wait: 0 }).acquire(), 'redis', (e) => e.lock === name && e.server === `127.0.0.1:${replica.port}` && /read only replica/.test(e.message))
  replica.stop()
})

test('tls: an untrusted server, then the same server trusted', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fencelock-tls-'))
  const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' })
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=fencelock test CA', '-keyout', 'ca.key', '-out', 'ca.crt')
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', 'server.key', '-out', 'server.csr')
  fs.writeFileSync(path.join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n')
  openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1', '-extfile', 'san.ext', '-out', 'server.crt')
  const tlsPort = await deadPort()
  // Always redis-server: the Valkey binary of the second pass has no TLS.
  const previous = process.env.FENCELOCK_TEST_SERVER
  delete process.env.FENCELOCK_TEST_SERVER
  let tlsServer
  try {
    tlsServer = await startServer(['--tls-port', String(tlsPort), '--tls-cert-file', path.join(dir, 'server.crt'),
      '--tls-key-file', path.join(dir, 'server.key'), '--tls-ca-cert-file', path.join(dir, 'ca.crt'), '--tls-auth-clients', 'no'])
  } finally {
    if (previous !== undefined) process.env.FENCELOCK_TEST_SERVER = previous
  }
  const name = uniqueName()
  const untrusting = new Client(`rediss://127.0.0.1:${tlsPort}`, { commandTimeout: 2000 })
  await rejectsWith(untrusting.lock(name, { wait: 0 }).acquire(), 'tls', (e) => e.lock === name && e.server === `127.0.0.1:${tlsPort}`)
  const trusting = new Client(`rediss://127.0.0.1:${tlsPort}`, { tls: { ca: fs.readFileSync(path.join(dir, 'ca.crt')) } })
  const guard = await trusting.lock(name, { wait: 0 }).acquire()
  assert.equal(await guard.release(), true)
  tlsServer.stop()
  fs.rmSync(dir, { recursive: true, force: true })
})

test('closed: a call on a closed client, or on a request it made', async () => {
  const closing = new Client(server.url)
  const name = uniqueName('closed')
  const request = closing.lock(name)
  await (await request.acquire()).release()
  await closing.close()
  await rejectsWith(request.acquire(), 'closed', (e) => e.lock === name && e.reason === 'closed' &&
    e instanceof fencelock.ClientClosedError && e instanceof fencelock.InvalidArgumentError)
})

test('every code of the core is raised above, or cannot arise from Node', () => {
  // `sql` comes from the PostgreSQL fence check, which the Node package does not offer;
  // `random_source` from a failing operating-system random source, which no test can cause.
  const unreachable = new Set(['sql', 'random_source'])
  for (const code of FencelockError.CODES) {
    assert.ok(raised.has(code) || unreachable.has(code), `no case raised ${code}`)
  }
  assert.deepEqual([...codes.error], [...FencelockError.CODES])
})

test('the fields index.d.ts names for each code are those of the errors raised above', () => {
  const declarations = fs.readFileSync(path.join(PACKAGE, 'index.d.ts'), 'utf8')
  /** Each code's fields, as the declarations name them: code -> [[field, where]]. */
  const named = new Map()
  const name = (code, field, where) => named.set(code, [...(named.get(code) ?? []), [field, where]])
  // FencelockError's comment: "... for example `remaining` (ms) for `busy`, ..., `a` and `b` for `c`."
  const comment = declarations.match(/the other fields are those of the code, for example([\s\S]*?)\.\n/)
  assert.ok(comment, 'FencelockError\'s comment lists no fields')
  for (const part of comment[1].replace(/\n \*/g, ' ').split(/, (?=`)/)) {
    const [fields, code] = part.split(/ for (?=`)/)
    assert.ok(code, `not "fields for code": ${part}`)
    for (const [, field] of fields.matchAll(/`(\w+)`/g)) name(code.match(/`(\w+)`/)[1], field, 'FencelockError\'s comment')
  }
  // Each subclass's own fields (`readonly field:`; optional ones, `field?:`, left out).
  for (const [, cls, body] of declarations.matchAll(/^export class (\w+) extends FencelockError \{([^}]*)\}/gm)) {
    const code = body.match(/readonly code: '(\w+)'/)
    if (!code) continue
    for (const [, field] of body.matchAll(/readonly (\w+):/g)) {
      if (field !== 'code') name(code[1], field, cls)
    }
  }
  assert.ok(named.has('fenced'), 'no field named for fenced')
  for (const [code, fields] of named) {
    const example = examples.get(code)
    if (example === undefined) continue
    for (const [field, where] of fields) {
      assert.ok(field in example, `${where} names a field ${field} for ${code}, which its errors do not have (${Object.keys(example).join(', ')})`)
    }
  }
})
