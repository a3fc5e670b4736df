'use strict'
// What a client keeps to close itself (`client.close()`): the waits it started (each given a
// signal, or the client's native `Cancel`, that the closing aborts, and counted until they
// settle, which is after their own give-back: the closing waits for that, at most 2 s) and the
// count of its holds that keep the process alive (the addon gives the holds back: it keeps them
// for the exit). A hold that a wait makes after the closing (a grant that raced it) is given
// back at once and keeps nothing alive (`adopt`). The objects a client hands out (requests,
// elections, stores) share its scope.

const { setMaxListeners } = require('node:events')
const native = require('./native')
const { down } = require('./alive')
const { ClientClosedError } = require('./errors')

/**
 * How long the closing waits for the waits it ended to settle (their give-back: a waiter
 * leaving its place in line, a grant that raced the closing released). The addon bounds each
 * cancelled call's give-back by 2 s (`fencelock_bind::keeper::FLUSH`), as Python's close does:
 * this is only a backstop, a little later, for a wait that would not settle.
 */
const FLUSH = 2000 + 250

function nothing () {}

class Scope {
  #closing = new AbortController()
  #closed = null
  #cancel = null
  #live = 0
  /** The client's waits in progress (`begin`, `end`). */
  #waits = 0
  /** While the closing waits for them: what it is told by once they have all settled. */
  #settled = null
  #native

  /** `nativeClient`: the addon's client, whose holds the closing gives back. */
  constructor (nativeClient) {
    this.#native = nativeClient
    // Each wait of the client listens to it: as many as there are waits.
    setMaxListeners(0, this.#closing.signal)
  }

  /** The application's logger (`{ warn, info, debug }`), or `null`. */
  logger = null

  /** Whether `close()` was called. */
  get closed () {
    return this.#closing.signal.aborted
  }

  /**
   * The native cancellation the client's `close()` fires: what a wait without a signal of
   * its own is given (one for the client, where a signal per wait would cost listeners).
   */
  get cancel () {
    if (this.#cancel === null) this.#cancel = new native.Cancel()
    return this.#cancel
  }

  /** Throws the closed client's error if it is closed (`lock`: the name in it). */
  check (lock = null) {
    if (this.closed) throw new ClientClosedError(lock)
  }

  /**
   * `[either, dispose]`: a signal that aborts when `signal` does or the client closes (its
   * reason says which), and what removes its listeners once the call is over.
   */
  combine (signal) {
    const closing = this.#closing.signal
    if (signal === undefined || signal === null) return [closing, () => {}]
    if (!(signal instanceof AbortSignal)) throw new TypeError('signal must be an AbortSignal')
    if (signal.aborted) return [signal, () => {}]
    if (closing.aborted) return [closing, () => {}]
    const both = new AbortController()
    const fromCaller = () => both.abort(signal.reason)
    const fromClient = () => both.abort(closing.reason)
    signal.addEventListener('abort', fromCaller, { once: true })
    closing.addEventListener('abort', fromClient, { once: true })
    return [both.signal, () => {
      signal.removeEventListener('abort', fromCaller)
      closing.removeEventListener('abort', fromClient)
    }]
  }

  /**
   * `fn(either)` with `combine(signal)`'s signal, its listeners removed after: a wait of the
   * client's, which its closing waits for (`begin`, `end`).
   */
  async during (signal, fn) {
    const [either, dispose] = this.combine(signal)
    this.begin()
    try {
      return await fn(either)
    } finally {
      this.end()
      dispose()
    }
  }

  /** A wait of the client's begins: the closing waits until it has settled (`end`). */
  begin () {
    this.#waits += 1
  }

  /** A wait of the client's has settled (its give-back done, if the closing ended it). */
  end () {
    this.#waits -= 1
    if (this.#waits === 0 && this.#settled !== null) {
      this.#settled()
      this.#settled = null
    }
  }

  /**
   * `held` (a guard, a leadership, a multi-lock guard) that a call of the client's made: `held`
   * itself while the client is open; once it has closed (the grant raced the closing, which may
   * have given it back already), a rejection with `ClientClosedError` after it is given back.
   * (Such a hold never counted among what keeps the process alive: alive.js.)
   */
  adopt (held, lock = null) {
    if (!this.closed) return held
    const closed = () => { throw new ClientClosedError(lock) }
    return held._giveBack().then(closed, closed)
  }

  /**
   * One more hold of the client's keeps the process alive (alive.js): `false`, and nothing
   * counted, once the client has closed.
   */
  hold () {
    if (this.closed) return false
    this.#live += 1
    return true
  }

  /** One hold let go of: whether it still counted (not once the client closed). */
  letGo () {
    if (this.#closed !== null) return false
    this.#live -= 1
    return true
  }

  /**
   * Ends the waits (they reject with `ClientClosedError`) and gives back every hold: the addon
   * gives back what it keeps for this client (`closeHolds`), and the client's holds stop
   * keeping the process alive. Resolves once the holds are given back and the waits it ended
   * have settled, their own give-backs done (a place in line left, a grant that raced the
   * closing released): for those, at most 2 s.
   */
  close () {
    if (this.#closed === null) {
      this.#closing.abort(new ClientClosedError())
      if (this.#cancel !== null) this.#cancel.cancel()
      down(this.#live)
      this.#live = 0
      const holds = this.#native.closeHolds().then(nothing, nothing)
      this.#closed = this.#waits === 0 ? holds : Promise.all([holds, this.#waitsSettled()]).then(nothing)
    }
    return this.#closed
  }

  /** Resolves once the waits in progress have settled (or, at the latest, after `FLUSH`). */
  #waitsSettled () {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#settled = null
        resolve()
      }, FLUSH)
      this.#settled = () => {
        clearTimeout(timer)
        resolve()
      }
    })
  }
}

module.exports = { Scope }
