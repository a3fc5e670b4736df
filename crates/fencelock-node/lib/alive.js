'use strict'
// A held lock keeps the process alive, as a timer does: while anything is held (a guard, a
// multi-lock guard, a leadership), one ref'd interval stays armed, so a program that only awaits
// its guard's `signal` sees the loss instead of exiting with the lock still held. The interval is
// cleared when the last hold ends (released, resigned, lost), or when the garbage collector drops
// a hold that was never given back. Waits keep the process alive by themselves (their Promise's
// native work is pending).

let live = 0
let timer = null

const registry = new FinalizationRegistry((token) => token.end())

function arm () {
  // Long, and a no-op: it only stands for the holds.
  if (timer === null) timer = setInterval(() => {}, 1 << 30)
}

function disarm () {
  if (timer !== null) {
    clearInterval(timer)
    timer = null
  }
}

/** Counts `held` as live until `end()` is called on the answer (or `held` is collected). */
function keepAlive (held) {
  live += 1
  arm()
  let ended = false
  const token = {
    end () {
      if (ended) return
      ended = true
      registry.unregister(token)
      live -= 1
      if (live === 0) disarm()
    }
  }
  registry.register(held, token, token)
  return token
}

/** How many holds keep the process alive now. */
function liveHolds () {
  return live
}

module.exports = { keepAlive, liveHolds }
