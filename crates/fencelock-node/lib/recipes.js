'use strict'
// The recipes: several locks at once (all or none) and work done once across the fleet.

const { Held, LossSignal } = require('./held')
const { run, cancellable } = require('./run')
const { checkOptions, checkName, checkTick, TICK } = require('./options')
const { ClientClosedError } = require('./errors')

/** Several locks held together: `fences` maps each name to its fence (in the order given). */
class MultiGuard extends Held {
  get _label () {
    return this.names.join(', ')
  }

  /** The names, in the order given. */
  get names () {
    return this._native.fences().map(([name]) => name)
  }

  /** Each name's fence (a `bigint`). */
  get fences () {
    return new Map(this._native.fences())
  }

  /** Releases every name: `true` if every one was still held. */
  release () {
    return this._giveBack()
  }
}

/**
 * A request for several plain locks at once (`client.multiLock`): `ttl`, `wait`, and `label`
 * (every name's hold's, as a lock's).
 */
class MultiLockRequest {
  #client
  #ttl
  #wait
  #label
  #scope

  /** @internal */
  constructor (client, names, options, scope) {
    this.names = [...names]
    for (const name of this.names) checkName(name, 'each name')
    const { ttl, wait, label } = checkOptions(this.names[0], options, { ttl: 'ms', wait: 'ms', label: 'string' })
    scope.check(this.names[0])
    this.#client = client
    this.#ttl = ttl
    this.#wait = wait
    this.#label = label
    this.#scope = scope
  }

  /** Takes every name, or none (rejects as `LockRequest.acquire`). */
  async acquire (options = {}) {
    const { signal } = checkOptions(this.names[0], options, { signal: 'signal' })
    const scope = this.#scope
    return scope.during(signal, async (either) => scope.adopt(new MultiGuard(await cancellable(
      either,
      (cancel) => this.#client.multiAcquire(this.names, this.#ttl, this.#wait, this.#label, cancel),
      (guard) => guard.release()
    ), scope), this.names[0]))
  }

  /** Runs `fn(signal, guard)` holding every name, and releases them after. */
  async using (fn, options = {}) {
    const guard = await this.acquire(options)
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
}

/** A time from the addon (milliseconds since the epoch) as a `Date`; `null` for none. */
function date (ms) {
  return ms === undefined || ms === null ? null : new Date(ms)
}

/** Work to do once (`client.once`). */
class Once {
  #client
  #lock
  #ttl
  #wait
  #label
  #keep
  #tick
  #attempts
  #scope

  /** @internal */
  constructor (client, key, options, scope) {
    checkName(key, 'key')
    // Errors name the lock, as the addon's do (the key, unless `lock` names another).
    const named = typeof options?.lock === 'string' ? options.lock : key
    const { lock, ttl, wait, label, keep, tick, attempts } = checkOptions(named, options, {
      lock: 'string', ttl: 'ms', wait: 'ms', label: 'string', keep: 'ms', tick: TICK, attempts: 'count'
    })
    this.#tick = checkTick(named, tick)
    scope.check(key)
    this.#client = client
    this.key = key
    this.#lock = lock
    this.#ttl = ttl
    this.#wait = wait
    this.#label = label
    this.#keep = keep
    this.#attempts = attempts
    this.#scope = scope
  }

  /**
   * Calls `work(fence, tick, signal)` unless the work was done (also by a run this one waited
   * for), and records it if `work` resolves; records nothing if it throws, and counts the run
   * as failed (the error goes on, and the next run tries again, unless `attempts` runs have
   * failed). `signal` aborts, as a guard's does, if the run's lock is lost while the work runs
   * (its reason a `NotHeldError` whose `reason` says why); the lock is watched only once the
   * work uses the signal. Resolves `{ ran: true, value, fence, tick }` with what `work` gave;
   * `{ ran: false, tooLate: false, gaveUp: false, fence, at, tick }`, the record of the run that
   * did it; with a tick whose `late` this start is past,
   * `{ ran: false, tooLate: true, gaveUp: false, tick, late }`; or, once `attempts` runs failed
   * (3 by default with a tick), `{ ran: false, tooLate: false, gaveUp: true, failures, tick }`
   * (nothing ran in either). `tick` is the tick's beginning (a `Date`; `null` without a tick).
   * Rejects `fenced` if the work finished but this run had lost its lock to a newer one
   * meanwhile (nothing recorded).
   */
  async run (work, options = {}) {
    if (typeof work !== 'function') throw new TypeError('run takes a function')
    const { signal } = checkOptions(this.#lock ?? this.key, options, { signal: 'signal' })
    const scope = this.#scope
    const begun = await scope.during(signal, async (either) => {
      const made = await cancellable(
        either,
        (cancel) => this.#client.onceBegin(this.key, this.#lock, this.#ttl, this.#wait, this.#label, this.#keep, this.#tick, this.#attempts, cancel),
        (made) => (made.giveUp ? made.giveUp() : undefined)
      )
      if (scope.closed && typeof made.giveUp === 'function') {
        // Begun as the client closed: given up, and the work not run.
        await run(made.giveUp()).catch(() => {})
        throw new ClientClosedError(this.#lock ?? this.key)
      }
      return made
    })
    if (typeof begun.giveUp !== 'function') {
      if (begun.late !== undefined) return { ran: false, tooLate: true, gaveUp: false, tick: new Date(begun.tick), late: begun.late }
      if (begun.failures !== undefined) return { ran: false, tooLate: false, gaveUp: true, failures: begun.failures, tick: date(begun.tick) }
      return { ran: false, tooLate: false, gaveUp: false, fence: begun.fence, at: new Date(begun.at), tick: date(begun.tick) }
    }
    const tick = date(begun.tick)
    // Aborts if the run's lock is lost while the work runs (not for the release after it).
    const lost = new LossSignal(begun)
    let value
    try {
      value = await work(begun.fence, tick, lost.signal)
    } catch (error) {
      // A failed run is counted (`attempts`); one the client's closing stopped is not (the
      // closing gave its lock back, or does now).
      await run(scope.closed ? begun.giveUp() : begun.failed()).catch(() => {})
      lost.settle()
      throw error
    }
    try {
      await run(begun.done())
    } finally {
      lost.settle()
    }
    return { ran: true, value, fence: begun.fence, tick }
  }
}

module.exports = { MultiGuard, MultiLockRequest, Once }
