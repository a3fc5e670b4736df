'use strict'
// The recipes: several locks at once (all or none) and work done once across the fleet.

const { Held } = require('./held')
const { run, cancellable } = require('./run')

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

/** A request for several plain locks at once (`client.multiLock`). */
class MultiLockRequest {
  #client
  #ttl
  #wait

  /** @internal */
  constructor (client, names, { ttl, wait } = {}) {
    this.#client = client
    this.names = [...names]
    this.#ttl = ttl
    this.#wait = wait
  }

  /** Takes every name, or none (rejects as `LockRequest.acquire`). */
  async acquire ({ signal } = {}) {
    const made = await cancellable(
      signal,
      (cancel) => this.#client.multiAcquire(this.names, this.#ttl, this.#wait, cancel),
      (guard) => guard.release()
    )
    return new MultiGuard(made)
  }

  /** Runs `fn(signal, guard)` holding every name, and releases them after. */
  async using (fn, { signal } = {}) {
    const guard = await this.acquire({ signal })
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

/** Work to do once (`client.once`). */
class Once {
  #client
  #lock
  #ttl
  #wait

  /** @internal */
  constructor (client, key, { lock, ttl, wait } = {}) {
    this.#client = client
    this.key = key
    this.#lock = lock
    this.#ttl = ttl
    this.#wait = wait
  }

  /**
   * Calls `work(fence)` unless the work was done (also by a run this one waited for), and
   * records it if `work` resolves; records nothing if it throws (the error goes on, and the
   * next run tries again). Resolves `{ ran: true, value }` with what `work` gave, or
   * `{ ran: false, fence, at }`, the record of the run that did it. Rejects `fenced` if the
   * work finished but this run had lost its lock to a newer one meanwhile (nothing recorded).
   */
  async run (work, { signal } = {}) {
    const begun = await cancellable(
      signal,
      (cancel) => this.#client.onceBegin(this.key, this.#lock, this.#ttl, this.#wait, cancel),
      (made) => (made.giveUp ? made.giveUp() : undefined)
    )
    if (typeof begun.giveUp !== 'function') {
      return { ran: false, fence: begun.fence, at: new Date(begun.at) }
    }
    let value
    try {
      value = await work(begun.fence)
    } catch (error) {
      await run(begun.giveUp()).catch(() => {})
      throw error
    }
    await run(begun.done())
    return { ran: true, value, fence: begun.fence }
  }
}

module.exports = { MultiGuard, MultiLockRequest, Once }
