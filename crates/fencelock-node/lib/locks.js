'use strict'
// The lock family: a request (`client.lock(name)`, `fairLock`, `semaphore`, a read-write
// lock's sides, a reentrant lock's handle) and the guard it gives.

const native = require('./native')
const { ClientClosedError, convert } = require('./errors')
const { Held } = require('./held')
const { checkOptions, checkName, LOCK } = require('./options')
const { run, sync, cancellable } = require('./run')

const SIGNAL = { signal: 'signal' }

/**
 * The tracing of acquisitions and their holds (`fencelock/otel`), or `null`: untraced, an
 * acquisition costs this one check, and nothing else.
 */
let traced = null

/**
 * @internal Traces every acquisition from now on with `hooks.acquire(kind, name, start)`, which
 * calls `start()` (the acquisition: a Promise of the guard, or `null`) and gives its Promise;
 * `null` stops.
 */
function traceAcquisitions (hooks) {
  traced = hooks
}

/**
 * The last options the addon found valid. Its check depends on the kind and the options alone
 * (the name is only in its error), so a request made with the same ones again, as a loop makes
 * them, skips a native call (1.5 % of an uncontended cycle's instructions). Any other
 * options, valid or not, are checked by the addon.
 */
let lastValid = null

function checkSpec (kind, name, ttl, wait, queueTimeout, maxHold, lockDelay, autoRenew, permits, take, label) {
  const v = lastValid
  if (v !== null && v[0] === kind && v[1] === ttl && v[2] === wait && v[3] === queueTimeout &&
      v[4] === maxHold && v[5] === lockDelay && v[6] === autoRenew && v[7] === permits &&
      v[8] === take && v[9] === label) return
  sync(() => native.checkSpec(kind, name, ttl, wait, queueTimeout, maxHold, lockDelay, autoRenew, permits, take, label))
  lastValid = [kind, ttl, wait, queueTimeout, maxHold, lockDelay, autoRenew, permits, take, label]
}

/** A held lock. */
class Guard extends Held {
  /** The lock's name. */
  get name () {
    return this._native.name
  }

  /** The fencing token (a `bigint`): strictly larger than every earlier fence of the name. */
  get fence () {
    return this._native.fence
  }

  /** Milliseconds until the lease's deadline as this process knows it (0 once over). */
  remaining () {
    return this._native.remaining()
  }

  /** Re-arms the lease to `ttl` milliseconds from now; rejects `not_held` if it was lost. */
  extend (ttl) {
    return run(this._native.extend(ttl))
  }

  /** Releases the lock: `true` if it was still held (`false`: lost, or released already). */
  release () {
    return this._giveBack()
  }

  /**
   * An `AbortSignal` that aborts when someone asks for this lock (`client.requestRelease`)
   * while it is held: the polite way to be asked to finish.
   */
  get releaseRequested () {
    if (this._requested === undefined) {
      const controller = new AbortController()
      this._requested = controller.signal
      this._native.onReleaseRequested(() => controller.abort(new Error(`release of lock ${JSON.stringify(this.name)} requested`)))
    }
    return this._requested
  }

  toString () {
    return `Guard(${JSON.stringify(this.name)}, fence ${this.fence})`
  }
}

/** Runs `fn(signal, guard)` holding `guard`, and releases it after, whatever happens. */
async function holding (guard, fn) {
  let value
  try {
    value = await fn(guard.signal, guard)
  } catch (error) {
    await guard.release().catch(() => {})
    throw error
  }
  await guard._endBlock()
  return value
}

/** A request for a lock: `acquire()` waits for it as its options say. */
class LockRequest {
  #acquirer
  #scope
  #kind
  #name
  #ttl
  #wait
  #queueTimeout
  #maxHold
  #lockDelay
  #autoRenew
  #permits
  #take
  #label

  /** @internal */
  constructor (acquirer, kind, name, options, scope) {
    checkName(name)
    scope.check(name)
    // Checked now (types here, values by the addon), and passed to the addon one by one at each
    // acquisition (a native object per request would cost more than the addon's own work for
    // an uncontended lock).
    const { ttl, wait, maxHold, autoRenew, lockDelay, queueTimeout, permits, take, label } = checkOptions(name, options, LOCK)
    checkSpec(kind, name, ttl, wait, queueTimeout, maxHold, lockDelay, autoRenew, permits, take, label)
    this.#acquirer = acquirer
    this.#scope = scope
    this.#kind = kind
    this.#name = name
    this.#ttl = ttl
    this.#wait = wait
    this.#queueTimeout = queueTimeout
    this.#maxHold = maxHold
    this.#lockDelay = lockDelay
    this.#autoRenew = autoRenew
    this.#permits = permits
    this.#take = take
    this.#label = label
  }

  /** The lock's name. */
  get name () {
    return this.#name
  }

  #start (tryOnly, cancel) {
    return this.#acquirer.acquire(this.#kind, this.#name, this.#ttl, this.#wait, this.#queueTimeout,
      this.#maxHold, this.#lockDelay, this.#autoRenew, this.#permits, this.#take, this.#label, tryOnly, cancel)
  }

  /**
   * `start(cancel)` with the client's own cancellation (its `close()`), in one Promise step:
   * the guard, or `null` (a try that found the lock held). A wait of the client's (scope.js)
   * until it settles: a grant that raced the closing is given back first.
   */
  #made (tryOnly) {
    const scope = this.#scope
    const name = this.#name
    let promise
    try {
      scope.check(name)
      promise = this.#start(tryOnly, scope.cancel)
    } catch (error) {
      return Promise.reject(convert(error))
    }
    scope.begin()
    return promise.then((made) => {
      if (made === null || !scope.closed) {
        scope.end()
        return made === null ? null : new Guard(made, scope)
      }
      // A guard granted as the client closed is given back (the closing may have missed it).
      const ended = () => scope.end()
      const adopted = scope.adopt(new Guard(made, scope), name)
      adopted.then(ended, ended)
      return adopted
    }, (error) => {
      if (scope.closed && error !== null && typeof error === 'object' && error.code === 'cancelled') {
        // Ended by the closing: a grant that came back after it is given back by the addon.
        const closed = () => {
          scope.end()
          throw new ClientClosedError(name)
        }
        return scope.cancel.settled().then(closed, closed)
      }
      scope.end()
      throw convert(error)
    })
  }

  /**
   * Waits for the lock (as the request's `wait` says) and gives its guard. Rejects with
   * `timed_out` when the wait runs out, `busy` with `wait: 0`, another `FencelockError`, the
   * signal's reason when `signal` aborts (nothing held, the place in line left), or
   * `ClientClosedError` when the client closes.
   */
  acquire (options) {
    if (traced !== null) return traced.acquire(this.#kind, this.#name, () => this.#acquire(options))
    return this.#acquire(options)
  }

  #acquire (options) {
    let signal
    if (options !== undefined) {
      try {
        signal = checkOptions(this.#name, options, SIGNAL).signal
      } catch (error) {
        return Promise.reject(error)
      }
    }
    if (signal === undefined || signal === null) return this.#made(false)
    const scope = this.#scope
    return scope.during(signal, async (either) => scope.adopt(new Guard(await cancellable(
      either,
      (cancel) => this.#start(false, cancel),
      (guard) => guard.release()
    ), scope), this.#name))
  }

  /** One try: the guard, or `null` if another owner holds the lock. */
  tryAcquire () {
    if (traced !== null) return traced.acquire(this.#kind, this.#name, () => this.#made(true))
    return this.#made(true)
  }

  /** Runs `fn(signal, guard)` holding the lock, and releases it after, whatever happens. */
  async using (fn, options = {}) {
    if (typeof fn !== 'function') throw new TypeError('using takes a function')
    return holding(await this.acquire(options), fn)
  }
}

/** A reentrant lock: the acquisitions made through one handle share one owner. */
class ReentrantLock {
  #native
  #scope

  /** @internal */
  constructor (nativeHandle, scope) {
    this.#native = nativeHandle
    this.#scope = scope
  }

  get name () {
    return this.#native.name
  }

  /** A request with the options of `client.lock`. */
  request (options = {}) {
    return new LockRequest(this.#native, 'reentrant', this.name, options, this.#scope)
  }

  /** Acquires the lock (again); see `LockRequest.acquire`. */
  acquire (options = {}) {
    const { signal, ...rest } = checkOptions(this.name, options, { ...LOCK, signal: 'signal' })
    return this.request(rest).acquire({ signal })
  }

  /** One try; `null` if another owner holds it. */
  tryAcquire (options = {}) {
    return this.request(options).tryAcquire()
  }
}

/** A read-write lock: many readers, or one writer. */
class ReadWriteLock {
  #client
  #scope
  /** @internal */
  constructor (client, name, scope) {
    this.#client = client
    this.#scope = scope
    this.name = name
  }

  /** A request for the read side (the options of `client.lock`). */
  read (options = {}) {
    return new LockRequest(this.#client, 'read', this.name, options, this.#scope)
  }

  /** A request for the write side (the options of `client.lock`). */
  write (options = {}) {
    return new LockRequest(this.#client, 'write', this.name, options, this.#scope)
  }
}

module.exports = { Guard, LockRequest, ReentrantLock, ReadWriteLock, holding, traceAcquisitions }
