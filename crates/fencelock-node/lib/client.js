'use strict'
// The client: how it is made (a server, Redlock, Cluster, Sentinel), the lock family, the
// recipes, election, fenced writes, and the operator's calls.

const native = require('./native')
const { fencelockError, convert } = require('./errors')
const { Election } = require('./election')
const { FencedStore } = require('./fenced')
const { LockRequest, ReentrantLock, ReadWriteLock } = require('./locks')
const { MultiLockRequest, Once } = require('./recipes')
const { run, sync, cancellable } = require('./run')
const { Scope } = require('./scope')
const { asyncDispose } = require('./held')
const { checkOptions, checkName, SEMAPHORE } = require('./options')
const { addLogger, removeLogger } = require('./logger')
require('./lifecycle')

/** A client's options, and the check of each. */
const CLIENT = {
  keyPrefix: 'string',
  commandTimeout: 'ms',
  instanceTimeout: 'ms',
  tls: 'object',
  masterUsername: 'string',
  masterPassword: 'string',
  waitForReplicas: 'count',
  replicaTimeout: 'ms',
  replicaShortfall: 'shortfall',
  logger: 'logger'
}

function pem (value, what) {
  if (value === undefined || value === null) return undefined
  if (Buffer.isBuffer(value)) return value
  if (typeof value === 'string') return Buffer.from(value)
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength)
  throw new TypeError(`${what} must be the PEM, as a string or a Buffer`)
}

function nativeOptions (options = {}) {
  checkOptions(null, options, CLIENT, 'config')
  const tls = checkOptions(null, options.tls ?? undefined, { ca: 'pem', cert: 'pem', key: 'pem' }, 'config')
  return {
    keyPrefix: options.keyPrefix,
    commandTimeout: options.commandTimeout,
    instanceTimeout: options.instanceTimeout,
    tlsCa: pem(tls.ca, 'tls.ca'),
    tlsCert: pem(tls.cert, 'tls.cert'),
    tlsKey: pem(tls.key, 'tls.key'),
    masterUsername: options.masterUsername,
    masterPassword: options.masterPassword,
    waitForReplicas: options.waitForReplicas,
    replicaTimeout: options.replicaTimeout,
    replicaShortfall: options.replicaShortfall
  }
}

function urlList (urls) {
  return typeof urls === 'string' ? [urls] : [...urls]
}

function lockInfo (info) {
  return {
    name: info.name,
    kind: info.kind ?? null,
    permits: info.permits ?? null,
    holder: info.holder ? holder(info.holder) : null,
    shared: info.shared.map(holder),
    waiting: info.waiting,
    waiters: info.waiters.map((w) => ({
      place: w.place ?? null,
      waited: w.waited ?? null,
      tokenPrefix: w.tokenPrefix,
      side: w.side ?? null
    })),
    lastFence: info.lastFence ?? null
  }
}

function holder (h) {
  return {
    tokenPrefix: h.tokenPrefix,
    fence: h.fence ?? null,
    remaining: h.remaining ?? null,
    holds: h.holds ?? null,
    permits: h.permits ?? null,
    label: h.label ?? null
  }
}

/** The first argument of the constructor for a client made by a static method. */
const MADE = Symbol('made')

/** A fencelock client. It connects on first use; one client serves a whole process. */
class Client {
  #native
  #scope

  /**
   * A client for one Redis server (`redis://` or `rediss://` URL). Options: `keyPrefix`;
   * `commandTimeout` and `instanceTimeout` (milliseconds); `tls: { ca, cert, key }` (PEM, as
   * strings or Buffers); `waitForReplicas` with `replicaTimeout` (milliseconds) and
   * `replicaShortfall` (`"fail"` or `"warn"`); for Sentinel, `masterUsername` and
   * `masterPassword`.
   */
  constructor (url, options = {}) {
    if (url === MADE) {
      this.#native = options.native
      this.#scope = new Scope(this.#native)
      this.#setLogger(options.logger)
      return
    }
    this.#native = sync(() => new native.Client('server', urlList(url), null, nativeOptions(options)))
    this.#scope = new Scope(this.#native)
    this.#setLogger(options.logger)
  }

  static #make (deployment, urls, master, options = {}) {
    const made = sync(() => new native.Client(deployment, urlList(urls), master, nativeOptions(options)))
    return new Client(MADE, { native: made, logger: options.logger })
  }

  #setLogger (logger) {
    if (logger !== undefined && logger !== null) {
      this.#scope.logger = logger
      addLogger(logger)
    }
  }

  /**
   * Closes the client: the waits it started reject with `ClientClosedError`, everything it
   * holds is released (leaderships resigned), and every later call on it, or on what it made,
   * throws `ClientClosedError`. Resolves once the releases are done and the waits it ended have
   * given back what they had (at most 2 s) and its connections are closed (the core's
   * `Client::close`), though guards and requests made from it still exist. Closing twice is
   * harmless.
   */
  async close () {
    await this.#scope.close()
    if (this.#scope.logger !== null) removeLogger(this.#scope.logger)
  }

  /** Whether `close()` was called. */
  get closed () {
    return this.#scope.closed
  }

  /** `await using client = new Client(...)`: closes it at the end of the block. */
  async [asyncDispose] () {
    await this.close()
  }

  /** A client for Redlock over independent servers (a majority must agree). */
  static redlock (urls, options = {}) {
    return Client.#make('redlock', urls, null, options)
  }

  /** A client for a Redis Cluster, from one or more seed URLs. */
  static cluster (urls, options = {}) {
    return Client.#make('cluster', urls, null, options)
  }

  /** A client for the master that Sentinel names `master`. */
  static sentinel (sentinels, master, options = {}) {
    return Client.#make('sentinel', sentinels, master, options)
  }

  /** The server (or servers) this client talks to, without any password. */
  get server () {
    return this.#native.server
  }

  /**
   * A request for the exclusive lock `name`. Options: `ttl`, the lease in milliseconds
   * (default 30 000), renewed in the background while held unless `autoRenew: false`; `wait`,
   * milliseconds to wait (`undefined`: as long as it takes; `0`: not at all); `maxHold`, stop
   * renewing after this long; `lockDelay`, if the lease runs out without a release, the lock
   * is not granted again for this long.
   */
  lock (name, options = {}) {
    return new LockRequest(this.#native, 'lock', name, options, this.#scope)
  }

  /** A request for the fair lock `name`: granted in the order of asking (`queueTimeout`). */
  fairLock (name, options = {}) {
    return new LockRequest(this.#native, 'fair', name, options, this.#scope)
  }

  /**
   * A request for `take` (default 1) of the `permits` permits of the semaphore `name`, held
   * with one lease and one fence; first come, first served.
   */
  semaphore (name, permits, options = {}) {
    checkOptions(name, options, SEMAPHORE)
    checkOptions(name, { permits }, { permits: 'count' })
    return new LockRequest(this.#native, 'semaphore', name, { ...options, permits }, this.#scope)
  }

  /** The read-write lock `name`: `.read()` and `.write()` make requests. */
  readWriteLock (name) {
    checkName(name)
    this.#scope.check(name)
    return new ReadWriteLock(this.#native, name, this.#scope)
  }

  /** A handle on the reentrant lock `name` (`maxReentry`). */
  reentrantLock (name, options = {}) {
    checkName(name)
    const { maxReentry } = checkOptions(name, options, { maxReentry: 'count' })
    this.#scope.check(name)
    return new ReentrantLock(sync(() => this.#native.reentrant(name, maxReentry)), this.#scope)
  }

  /**
   * Holds the plain lock `name` while `fn(signal, guard)` runs, and releases it after,
   * whatever happens: `signal` aborts if the lock is lost meanwhile. Rejects `not_held` if
   * `fn` finished after the lock was lost. `options`: those of `lock` (`label` too), and
   * `signal` for the wait.
   */
  async using (name, options, fn) {
    if (typeof options === 'function') {
      fn = options
      options = {}
    }
    const { signal, ...rest } = checkOptions(name, options ?? {}, {
      ttl: 'ms', wait: 'ms', maxHold: 'ms', lockDelay: 'ms', queueTimeout: 'ms', autoRenew: 'bool', label: 'string', signal: 'signal'
    })
    return this.lock(name, rest).using(fn, { signal })
  }

  /**
   * A request for the plain locks `names`, all or none (deadlock-free whatever the order):
   * `ttl`, `wait`, and `label` (every name's hold's).
   */
  multiLock (names, options = {}) {
    return new MultiLockRequest(this.#native, names, options, this.#scope)
  }

  /**
   * Work to do once across the fleet, recorded under `key` when it succeeds; runs take turns
   * on the lock `lock` (the key by default). See `Once.run`.
   */
  once (key, options = {}) {
    return new Once(this.#native, key, options, this.#scope)
  }

  /** Fenced writes to `resource`. */
  fencedStore (resource) {
    checkName(resource, 'resource')
    this.#scope.check(resource)
    return new FencedStore(this.#native, resource, this.#scope)
  }

  /** The election `name` (its leadership is the plain lock `name`). */
  election (name) {
    return new Election(this.#native, name, this.#scope)
  }

  /** Asks the holders of lock `name` to release it; takes nothing. `true` if it was held. */
  requestRelease (name) {
    this.#scope.check(name)
    return run(this.#native.requestRelease(name))
  }

  /** The state of lock `name` as Redis has it: its holders and its line. Reads only. */
  async inspect (name) {
    this.#scope.check(name)
    return lockInfo(await run(this.#native.inspect(name)))
  }

  /**
   * The held locks whose name matches `pattern` (a Redis glob), found with `SCAN`:
   * `{ locks, skipped, unanswered }`. Reads only.
   */
  async list (pattern = '*') {
    this.#scope.check()
    const found = await run(this.#native.list(pattern))
    return {
      locks: found.locks.map(lockInfo),
      skipped: found.skipped.map((e) => fencelockError(e.message, { code: e.code, lock: e.lock })),
      unanswered: found.unanswered
    }
  }

  /**
   * Deletes lock `name`, whoever holds it, and wakes its waiters: an operator's tool for a
   * holder that is gone. `true` if it was held.
   */
  forceRelease (name) {
    this.#scope.check(name)
    return run(this.#native.forceRelease(name))
  }

  /** Each release of lock `name` as it happens (yields the name), until `signal` aborts. */
  async * releases (name, options = {}) {
    const { signal } = checkOptions(name, options, { signal: 'signal' })
    this.#scope.check(name)
    const watch = await run(this.#native.releases(name))
    const [either, dispose] = this.#scope.combine(signal)
    try {
      while (true) {
        let next
        try {
          next = await cancellable(either, (cancel) => watch.next(undefined, cancel))
        } catch (error) {
          if (signal && signal.aborted && error === signal.reason) return
          throw convert(error)
        }
        if (next === null) return
        yield name
      }
    } finally {
      dispose()
    }
  }

  toString () {
    return `Client(${this.server})`
  }
}

module.exports = { Client }
