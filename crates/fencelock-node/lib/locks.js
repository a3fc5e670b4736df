'use strict'
// The lock family: a request (`client.lock(name)`, `fairLock`, `semaphore`, a read-write
// lock's sides, a reentrant lock's handle) and the guard it gives.

const native = require('./native')
const { Held } = require('./held')
const { run, sync, cancellable } = require('./run')

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
  #spec

  /** @internal */
  constructor (acquirer, kind, name, options) {
    this.#acquirer = acquirer
    this.#spec = sync(() => new native.Spec(kind, name, specOptions(options)))
  }

  /** The lock's name. */
  get name () {
    return this.#spec.name
  }

  /**
   * Waits for the lock (as the request's `wait` says) and gives its guard. Rejects with
   * `timed_out` when the wait runs out, `busy` with `wait: 0`, another `FencelockError`, or
   * the signal's reason when `signal` aborts (nothing held, the place in line left).
   */
  async acquire ({ signal } = {}) {
    const made = await cancellable(
      signal,
      (cancel) => this.#acquirer.acquire(this.#spec, false, cancel),
      (guard) => guard.release()
    )
    return new Guard(made)
  }

  /** One try: the guard, or `null` if another owner holds the lock. */
  async tryAcquire () {
    const made = await run(this.#acquirer.acquire(this.#spec, true, null))
    return made === null ? null : new Guard(made)
  }

  /** Runs `fn(signal, guard)` holding the lock, and releases it after, whatever happens. */
  async using (fn, { signal } = {}) {
    return holding(await this.acquire({ signal }), fn)
  }
}

function specOptions (options = {}) {
  const { ttl, wait, maxHold, autoRenew, lockDelay, queueTimeout, permits, take } = options
  return { ttl, wait, maxHold, autoRenew, lockDelay, queueTimeout, permits, take }
}

/** A reentrant lock: the acquisitions made through one handle share one owner. */
class ReentrantLock {
  #native

  /** @internal */
  constructor (nativeHandle) {
    this.#native = nativeHandle
  }

  get name () {
    return this.#native.name
  }

  /** A request with the options of `client.lock`. */
  request (options = {}) {
    return new LockRequest(this.#native, 'reentrant', this.name, options)
  }

  /** Acquires the lock (again); see `LockRequest.acquire`. */
  acquire (options = {}) {
    const { signal, ...rest } = options
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
  /** @internal */
  constructor (client, name) {
    this.#client = client
    this.name = name
  }

  /** A request for the read side (the options of `client.lock`). */
  read (options = {}) {
    return new LockRequest(this.#client, 'read', this.name, options)
  }

  /** A request for the write side (the options of `client.lock`). */
  write (options = {}) {
    return new LockRequest(this.#client, 'write', this.name, options)
  }
}

module.exports = { Guard, LockRequest, ReentrantLock, ReadWriteLock, holding }
