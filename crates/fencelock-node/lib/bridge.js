'use strict'
// The addon's Promises, made here and settled through one queue per thread (src/bridge.rs):
// `pending(id)` makes the Promise of call `id`, `settle(id, error, value)` settles it. While
// any is pending, a timer is kept referenced, so that the process stays alive for it as it
// would for napi's own Promises; the queue itself never keeps it alive.

const calls = new Map()
// An idle timer (it never fires in practice): referenced only while a call is pending.
const alive = setInterval(() => {}, 0x7fffffff)
alive.unref()

function pending (id) {
  return new Promise((resolve, reject) => {
    if (calls.size === 0) alive.ref()
    calls.set(id, { resolve, reject })
  })
}

function settle (id, error, value) {
  const call = calls.get(id)
  if (call === undefined) return
  calls.delete(id)
  if (calls.size === 0) alive.unref()
  if (error !== undefined && error !== null) call.reject(error)
  else call.resolve(value)
}

/** Installs the bridge on `addon` (once per thread, as the addon is loaded). */
function install (addon) {
  addon.installBridge([pending, settle], () => {})
}

module.exports = { install }
