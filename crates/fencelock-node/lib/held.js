'use strict'
// What a guard, a leadership and a multi-lock guard share: the native object, the `signal` that
// aborts when the hold is lost, `await using`, and its place among what keeps the process alive
// (`alive.js`) and what its client's `close()` gives back (`scope.js`).

const { fencelockError } = require('./errors')
const { keepAlive } = require('./alive')
const { call } = require('./run')

const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')

/** The reason a hold's signal aborts with: a `not_held` error, its `reason` the loss's code. */
function lostError (what, name, code, message) {
  return fencelockError(`${what} ${JSON.stringify(name)} is no longer held: ${message}`, {
    code: 'not_held',
    lock: name,
    reason: code
  })
}

class Held {
  #native
  #controller = null
  #alive
  #ended = false
  #watched = false

  constructor (native, scope = null) {
    this.#native = native
    this.#alive = keepAlive(this, scope)
  }

  /** It no longer keeps the process alive. */
  #over () {
    if (!this.#ended) {
      this.#ended = true
      this.#alive.end()
    }
  }

  /**
   * Watches for the end of the hold, once, from the first look at its `signal`: a native
   * callback (weak toward the process) per hold would cost more than an uncontended cycle's
   * own work, so holds nobody watches end their keep-alive when given back (or collected).
   */
  #watch () {
    if (this.#watched) return
    this.#watched = true
    const now = this.#native.lostNow()
    if (now !== null) this.#end(now)
    else this.#native.onLost((code, message) => this.#end([code, message]))
  }

  /** The hold ended (`[..., code, message]`): it no longer keeps the process alive. */
  #end (now) {
    const code = now[now.length - 2]
    const message = now[now.length - 1]
    this.#over()
    // A release is not a loss: the signal aborts for a loss only.
    if (code !== 'released' && this.#controller !== null && !this.#controller.signal.aborted) {
      this.#controller.abort(lostError(this._what, this._label, code, message))
    }
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
   * An `AbortSignal` that aborts when the hold is lost, its reason a `NotHeldError` whose
   * `reason` says why (`not_owner`, `expired`, `max_hold_reached`). A release (a resignation,
   * the end of `using`, the client's `close()`) does not abort it.
   */
  get signal () {
    if (this.#controller === null) {
      this.#controller = new AbortController()
      this.#watch()
    }
    return this.#controller.signal
  }

  /**
   * Gives it back (a release, a resignation): `true` if it was still held. If it had been lost,
   * the signal has aborted by the time it resolves.
   */
  _giveBack () {
    const native = this.#native
    return this.#ending(() => native.release ? native.release() : native.resign())
  }

  /**
   * @internal Gives it back at the end of a block whose work succeeded: rejects `not_held`
   * (with the reason the release found) if it was lost meanwhile, as the addon decides for
   * every package. The signal has aborted by the time it settles.
   */
  _endBlock () {
    const native = this.#native
    return this.#ending(() => native.endBlock())
  }

  /**
   * `start()` (a give-back), in one Promise step: then nothing is kept alive, and a signal (if
   * one was made) aborted first if the hold had been lost.
   */
  #ending (start) {
    const ended = () => {
      if (this.#controller !== null) {
        const now = this.#native.lostNow()
        if (now !== null) this.#end(now)
      }
      this.#over()
    }
    return call(
      start,
      (value) => {
        ended()
        return value
      },
      ended
    )
  }

  /** `await using`: gives it back at the end of the block. */
  async [asyncDispose] () {
    await this._giveBack()
  }
}

/**
 * The signal of a hold that is not a `Held` (a run-once's lock while its work runs: the work
 * keeps the process alive, and its client's `close()` gives it back through the addon, as
 * before): it aborts as `Held.signal` does, with a `not_held` error whose `reason` says why,
 * and never for a release. The hold is watched from the start (one native callback per run: a
 * run-once is no hot path); `settle()` after the hold's ending aborts it then if the hold had
 * been lost.
 */
class LossSignal {
  #native
  #controller = new AbortController()

  /** `native`: the hold (`name`, `lostNow()`, `onLost(callback)`). */
  constructor (native) {
    this.#native = native
    const now = native.lostNow()
    if (now !== null) this.#end(now)
    else native.onLost((code, message) => this.#end([code, message]))
  }

  get signal () {
    return this.#controller.signal
  }

  /** The hold ended (`[code, message]`): the signal aborts for a loss only. */
  #end ([code, message]) {
    const signal = this.#controller.signal
    if (code !== 'released' && !signal.aborted) {
      this.#controller.abort(lostError('lock', this.#native.name, code, message))
    }
  }

  /** After the hold's ending: aborts the signal now if the hold had been lost. */
  settle () {
    const now = this.#native.lostNow()
    if (now !== null) this.#end(now)
  }
}

module.exports = { Held, LossSignal, asyncDispose, lostError }
