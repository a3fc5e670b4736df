'use strict'
// The addon's Promises, made here and settled in batches (src/bridge.rs): `pending(id)` makes
// the Promise of call `id` and sees that the calls made in this turn of the event loop are
// handed to the addon's runtime together, from one microtask (`sendCalls`); `settle(id, error,
// value)` settles one, called for every outcome of a batch in one wake of this thread. A
// pending call keeps the process alive (alive.js), as napi's own Promises do; the bridge itself
// never does.

const { up, down } = require('./alive')

const calls = new Map()
let send = null
let sending = false

function sendCalls () {
  sending = false
  send()
}

function pending (id) {
  if (!sending) {
    sending = true
    queueMicrotask(sendCalls)
  }
  return new Promise((resolve, reject) => {
    up()
    calls.set(id, { resolve, reject })
  })
}

function settle (id, error, value) {
  const call = calls.get(id)
  if (call === undefined) return
  calls.delete(id)
  down()
  if (error !== undefined && error !== null) call.reject(error)
  else call.resolve(value)
}

/** Installs the bridge on `addon` (once per thread, as the addon is loaded). */
function install (addon) {
  send = addon.sendCalls
  addon.installBridge([pending, settle], () => {})
}

module.exports = { install }
