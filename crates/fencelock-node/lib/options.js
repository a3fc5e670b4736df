'use strict'
// The options of every call, checked here before the native addon sees them: a wrong type, or
// a name the call does not know, is a `FencelockError` naming the option (and the lock), not a
// conversion error of the addon's. The addon checks the values (a negative wait, zero permits).

const { fencelockError } = require('./errors')

const CHECKS = {
  /** Milliseconds: a number, or `undefined` for the default. */
  ms: (v) => typeof v === 'number' || `must be a number of milliseconds (or left out), not ${shown(v)}`,
  bool: (v) => typeof v === 'boolean' || `must be true or false (or left out), not ${shown(v)}`,
  count: (v) => (Number.isInteger(v) && v >= 0 && v <= 0xffffffff) || `must be a whole number (or left out), not ${shown(v)}`,
  string: (v) => typeof v === 'string' || `must be a string (or left out), not ${shown(v)}`,
  /** A time: a `Date`, or milliseconds since the epoch. */
  time: (v) => (typeof v === 'number' || v instanceof Date) || `must be a Date or a number of milliseconds since the epoch (or left out), not ${shown(v)}`,
  signal: (v) => v instanceof AbortSignal || `must be an AbortSignal (or left out), not ${shown(v)}`,
  pem: (v) => (typeof v === 'string' || v instanceof Uint8Array) || `must be the PEM, as a string or a Buffer (or left out), not ${shown(v)}`,
  object: (v) => (typeof v === 'object' && v !== null) || `must be an object (or left out), not ${shown(v)}`,
  shortfall: (v) => v === 'fail' || v === 'warn' || `must be "fail" or "warn" (or left out), not ${shown(v)}`,
  logger: (v) => ((typeof v === 'object' || typeof v === 'function') && v !== null) || `must be an object with warn, info and debug methods (or left out), not ${shown(v)}`
}

/** A value as the messages show it. */
function shown (v) {
  if (v === null) return 'null'
  if (typeof v === 'string') return JSON.stringify(v)
  if (typeof v === 'bigint') return `${v}n`
  if (typeof v === 'function') return 'a function'
  if (typeof v === 'object') return Array.isArray(v) ? 'an array' : 'an object'
  return `${typeof v} ${String(v)}`
}

/** The options of a lock request. */
const LOCK = {
  ttl: 'ms', wait: 'ms', maxHold: 'ms', lockDelay: 'ms', queueTimeout: 'ms', autoRenew: 'bool', permits: 'count', take: 'count', label: 'string'
}

/**
 * Checks `options` of the call about `lock` against `allowed` (name: check, or the `allowed` of
 * an object option, checked the same way: `tick.every`): the options, or an `invalid_argument`
 * error (`config` with `code: 'config'`, for a client's options) naming the first bad one.
 * `undefined` options are left out.
 */
function checkOptions (lock, options, allowed, code = 'invalid_argument', within = '') {
  if (options === undefined) return {}
  const about = lock === null || lock === undefined ? '' : ` for lock ${JSON.stringify(lock)}`
  const fail = (option, why) => fencelockError(
    code === 'config' ? `invalid fencelock configuration: ${option} ${why}` : `invalid argument${about}: ${option} ${why}`,
    { code, lock: lock ?? null, option, reason: `${option} ${why}` }
  )
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw fail(within ? within.slice(0, -1) : 'options', `must be an object, not ${shown(options)}`)
  }
  for (const [option, value] of Object.entries(options)) {
    const check = allowed[option]
    if (check === undefined) {
      throw fail(within + option, `is not an option here (the options: ${Object.keys(allowed).map((o) => within + o).join(', ')})`)
    }
    if (value === undefined) continue
    if (typeof check === 'object') {
      checkOptions(lock, value, check, code, `${within}${option}.`)
      continue
    }
    const verdict = CHECKS[check](value)
    if (verdict !== true) throw fail(within + option, verdict)
  }
  return options
}

/** A run-once's tick (`client.once(key, { tick })`): every so often, or planned. */
const TICK = { every: 'ms', early: 'ms', late: 'ms', planned: 'time' }

/**
 * Checks a run-once's `tick` (of the lock `lock`): `{ every, early?, late? }` or `{ planned }`.
 * The tick as the addon takes it (`planned` in milliseconds since the epoch), or `undefined`.
 */
function checkTick (lock, tick) {
  if (tick === undefined) return undefined
  checkOptions(lock, tick, TICK, 'invalid_argument', 'tick.')
  const { every, early, late, planned } = tick
  const fail = (why) => fencelockError(`invalid argument for lock ${JSON.stringify(lock)}: tick ${why}`, {
    code: 'invalid_argument', lock, option: 'tick', reason: `tick ${why}`
  })
  if ((every === undefined) === (planned === undefined)) {
    throw fail(`must be { every } (with early and late) or { planned }, not ${every === undefined ? 'neither' : 'both'}`)
  }
  if (planned !== undefined && (early !== undefined || late !== undefined)) {
    throw fail('early and late go with every, not planned')
  }
  return { every, early, late, planned: planned instanceof Date ? planned.getTime() : planned }
}

/** The options of a semaphore request: a lock's, its permits given apart. */
const { permits: _permits, ...SEMAPHORE } = LOCK

module.exports = { checkOptions, checkTick, LOCK, SEMAPHORE, TICK }

/** Checks that a lock's (an election's, a key's) name is a string. */
function checkName (name, what = 'name') {
  if (typeof name !== 'string') {
    throw fencelockError(`invalid argument: ${what} must be a string, not ${shown(name)}`, {
      code: 'invalid_argument', lock: null, option: what, reason: `${what} must be a string, not ${shown(name)}`
    })
  }
  return name
}

module.exports.checkName = checkName
module.exports.shown = shown
