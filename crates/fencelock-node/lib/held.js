'use strict'
// What a guard, a leadership and a multi-lock guard share: the native object, the `signal` that
// aborts when the hold ends (lost, or given back), and `await using`.

const { FencelockError } = require('./errors')
const { run } = require('./run')

const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')

/** The reason a hold's signal aborts with: a `not_held` error, its `reason` the loss's code. */
function lostError (what, name, code, message) {
  return new FencelockError(`${what} ${JSON.stringify(name)} is no longer held: ${message}`, {
    code: 'not_held',
    lock: name,
    reason: code
  })
}

class Held {
  #native
  #signal = null
  #abort = null

  constructor (native) {
    this.#native = native
  }

  /** @internal */
  get _native () {
    return this.#native
  }

  /** What the messages call it: `lock`, `leadership of`. */
  get _what () {
    return 'lock'
  }

  /** The name in messages. */
  get _label () {
    return this.#native.name
  }

  /** Whether it is still held, as far as this process can tell now. */
  isHeld () {
    return this.#native.isHeld()
  }

  /** `null` while held; then `not_owner`, `expired`, `max_hold_reached` or `released`. */
  get lostReason () {
    const now = this.#native.lostNow()
    return now === null ? null : now[now.length - 2]
  }

  /**
   * An `AbortSignal` that aborts when the hold ends: lost (its reason a `not_held`
   * `FencelockError` whose `reason` says why) or given back (`reason: "released"`).
   */
  get signal () {
    if (this.#signal === null) {
      const controller = new AbortController()
      this.#signal = controller.signal
      const abort = (code, message) => controller.abort(lostError(this._what, this._label, code, message))
      this.#abort = abort
      const now = this.#native.lostNow()
      if (now !== null) abort(now[now.length - 2], now[now.length - 1])
      else this.#native.onLost(abort)
    }
    return this.#signal
  }

  /**
   * Gives it back (a release, a resignation): `true` if it was still held. The signal has
   * aborted by the time it resolves (the native side's own notice comes a tick later, if at all).
   */
  _giveBack () {
    return this.#ending(this.#native.release ? this.#native.release() : this.#native.resign())
  }

  /**
   * @internal Gives it back at the end of a block whose work succeeded: rejects `not_held`
   * (with the reason the release found) if it was lost meanwhile, as the addon decides for
   * every package. The signal has aborted by the time it settles.
   */
  _endBlock () {
    return this.#ending(this.#native.endBlock())
  }

  /** Awaits a give-back, then aborts the signal (if made) with the hold's end. */
  async #ending (promise) {
    try {
      return await run(promise)
    } finally {
      const now = this.#native.lostNow()
      if (this.#abort !== null && now !== null) this.#abort(now[now.length - 2], now[now.length - 1])
    }
  }

  /** `await using`: gives it back at the end of the block. */
  async [asyncDispose] () {
    await this._giveBack()
  }
}

module.exports = { Held, asyncDispose, lostError }
