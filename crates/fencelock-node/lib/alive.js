'use strict'
// What keeps the process alive, as a timer does: a pending call of the addon (its Promise is
// settled through the thread's queue, which keeps nothing alive by itself: bridge.js) and a
// held lock (a guard, a multi-lock guard, a leadership), so that a program that only awaits its
// guard's `signal` sees the loss instead of exiting with the lock still held. One idle interval
// stands for them all: referenced while anything is pending or held, unreferenced otherwise
// (a flag, where arming and clearing a timer for each hold would cost a timer each). A hold
// counts until it ends (released, resigned, lost while its signal was watched), its client
// closes (scope.js), or the garbage collector drops it unreleased.

let count = 0
// Long, and a no-op: it only stands for the calls and the holds.
const timer = setInterval(() => {}, 0x7fffffff)
timer.unref()

/** One more pending call or hold. */
function up () {
  if (count++ === 0) timer.ref()
}

/** `n` fewer (one by default). */
function down (n = 1) {
  if (n <= 0) return
  count -= n
  if (count === 0) timer.unref()
}

const registry = new FinalizationRegistry((token) => token.end())

class Token {
  #ended = false
  #scope

  constructor (scope) {
    this.#scope = scope
  }

  end () {
    if (this.#ended) return
    this.#ended = true
    registry.unregister(this)
    // A closed client's holds stopped counting when it closed.
    if (this.#scope === null || this.#scope.letGo()) down()
  }
}

/** What a hold made after its client closed keeps alive: nothing. */
const NOTHING = Object.freeze({ end () {} })

/**
 * Counts `held` (of the client whose scope is `scope`, if any) as live until `end()` is called
 * on the answer, its client closes, or `held` is collected. A hold made once its client had
 * closed (a grant that raced the closing) is not counted: the closing has counted its client's
 * holds down already, and that hold is given back at once (scope.js, `adopt`).
 */
function keepAlive (held, scope = null) {
  if (scope !== null && !scope.hold()) return NOTHING
  up()
  const token = new Token(scope)
  registry.register(held, token, token)
  return token
}

module.exports = { keepAlive, up, down }
