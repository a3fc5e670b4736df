'use strict'
// What a client keeps to close itself (`client.close()`): the waits it started (each given a
// signal that the closing aborts) and the holds it made (given back by the closing). The
// objects a client hands out (requests, elections, stores) share its scope.

const { setMaxListeners } = require('node:events')
const native = require('./native')
const { ClientClosedError } = require('./errors')

class Scope {
  #closing = new AbortController()
  #holds = new Set()
  #closed = null
  #cancel = null

  constructor () {
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

  /** `fn(either)` with `combine(signal)`'s signal, its listeners removed after. */
  async during (signal, fn) {
    const [either, dispose] = this.combine(signal)
    try {
      return await fn(either)
    } finally {
      dispose()
    }
  }

  /** Remembers `held` (weakly) until `forget`: the closing gives it back. */
  track (held) {
    const ref = new WeakRef(held)
    this.#holds.add(ref)
    return ref
  }

  forget (ref) {
    this.#holds.delete(ref)
  }

  /** Ends the waits (they reject with `ClientClosedError`) and gives back every hold. */
  close () {
    if (this.#closed === null) {
      this.#closing.abort(new ClientClosedError())
      if (this.#cancel !== null) this.#cancel.cancel()
      const holds = [...this.#holds].map((ref) => ref.deref()).filter((h) => h !== undefined)
      this.#holds.clear()
      this.#closed = Promise.allSettled(holds.map((h) => h._giveBack())).then(() => undefined)
    }
    return this.#closed
  }
}

module.exports = { Scope }
