'use strict'
// How a native call becomes what the caller awaits, written once: its errors become
// `FencelockError`s, and a call that can wait takes the caller's `AbortSignal`. An abort gives
// the wait up (the waiter leaves its place in line) and rejects with the signal's reason; a
// result that raced the abort is undone by the addon, or here when it arrived first.

const native = require('./native')
const { convert } = require('./errors')

/** Awaits a native call's Promise; its error as a `FencelockError`. */
async function run (promise) {
  try {
    return await promise
  } catch (error) {
    throw convert(error)
  }
}

/** Rethrows `error` as a `FencelockError` (a Promise's rejection handler). */
function rethrow (error) {
  throw convert(error)
}

/**
 * `start()` (a native call that answers a Promise) and then `then(value)`, in one step: its
 * error, thrown at once or rejected, as a `FencelockError`, after `failed()` if given. (The
 * hot path: fewer Promises than `run` inside an async function.)
 */
function call (start, then, failed) {
  let promise
  try {
    promise = start()
  } catch (error) {
    if (failed) failed()
    return Promise.reject(convert(error))
  }
  if (!failed) return promise.then(then, rethrow)
  return promise.then(then, (error) => {
    failed()
    throw convert(error)
  })
}

/** Calls `fn()` (a synchronous native call); its error as a `FencelockError`. */
function sync (fn) {
  try {
    return fn()
  } catch (error) {
    throw convert(error)
  }
}

function checkSignal (signal) {
  if (signal !== undefined && signal !== null && !(signal instanceof AbortSignal)) {
    throw new TypeError('signal must be an AbortSignal')
  }
}

/**
 * Starts `start(cancel)` (a native call given a `Cancel`) and awaits it; `signal` aborting
 * cancels it, and it rejects with the signal's reason once its give-back is done (at most 2 s).
 * `undo(value)` gives back a value that arrived when the signal had aborted already.
 */
async function cancellable (signal, start, undo) {
  checkSignal(signal)
  if (!signal) return run(start(null))
  signal.throwIfAborted()
  const cancel = new native.Cancel()
  const onAbort = () => cancel.cancel()
  signal.addEventListener('abort', onAbort, { once: true })
  let value
  try {
    value = await start(cancel)
  } catch (error) {
    if (error && error.code === 'cancelled') {
      // A result that came back after the cancellation is given back by the addon: done first.
      await cancel.settled()
      throw signal.reason
    }
    throw convert(error)
  } finally {
    signal.removeEventListener('abort', onAbort)
  }
  if (signal.aborted) {
    if (undo && value) await undo(value)
    throw signal.reason
  }
  return value
}

module.exports = { run, call, rethrow, sync, cancellable }
