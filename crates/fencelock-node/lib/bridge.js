'use strict'
// The addon's Promises, made here and settled through one queue per thread (src/bridge.rs):
// `pending(id)` makes the Promise of call `id`, `settle(id, error, value)` settles it. A pending
// call keeps the process alive (alive.js), as napi's own Promises do; the queue itself never
// does.

const { up, down } = require('./alive')

const calls = new Map()

function pending (id) {
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
  addon.installBridge([pending, settle], () => {})
}

module.exports = { install }
