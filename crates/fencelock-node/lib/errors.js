'use strict'
// fencelock's errors: `FencelockError`, whose `code` is the library's (the Rust core's
// `Error::code`), with the lock's name as `lock` and the fields of its kind as properties; and
// one subclass per code (`BusyError`, `TimedOutError`, ...) for `instanceof`, named as the
// Python package's classes are. The codes are read from the native addon.

const native = require('./native')

const CODES = Object.freeze(native.codes('error'))
const KNOWN = new Set(CODES)

/** An error of fencelock's: `code` says which (see `FencelockError.CODES`). */
class FencelockError extends Error {
  constructor (message, fields = {}) {
    super(message, fields.cause === undefined ? undefined : { cause: fields.cause })
    this.name = new.target.name
    /** The library's code for the kind of failure: `busy`, `timed_out`, ... */
    this.code = fields.code ?? new.target.code ?? 'error'
    /** The lock (or the resource, or the election) the error is about; `null` if none. */
    this.lock = fields.lock ?? null
    for (const [key, value] of Object.entries(fields)) {
      if (key !== 'code' && key !== 'lock' && key !== 'cause') this[key] = value
    }
  }
}

/** Every code a `FencelockError` can have, from the core. */
FencelockError.CODES = CODES

/** Each code's class name: the Python package's class, with `Error` at the end. */
const NAMES = {
  invalid_argument: 'InvalidArgumentError',
  config: 'ConfigError',
  timed_out: 'TimedOutError',
  busy: 'BusyError',
  not_held: 'NotHeldError',
  not_leader: 'NotLeaderError',
  unreachable: 'UnreachableError',
  no_quorum: 'NoQuorumError',
  tls: 'TlsError',
  not_replicated: 'NotReplicatedError',
  auth_failed: 'AuthFailedError',
  permission_denied: 'PermissionDeniedError',
  redis: 'RedisError',
  wrong_type: 'WrongTypeError',
  fenced: 'FencedError',
  fenced_wrong_type: 'FencedWrongTypeError',
  sql: 'SqlError',
  conflict: 'ConflictError',
  random_source: 'RandomSourceError',
  unsupported: 'UnsupportedError',
  closed: 'ClientClosedError'
}

/** The subclass of each code, by code. */
const BY_CODE = new Map()
/** The subclasses, by class name (what the package exports). */
const classes = {}
for (const code of CODES) {
  if (code === 'closed') continue // ClientClosedError, below
  const name = NAMES[code] ?? code.replace(/(^|_)([a-z])/g, (_, __, c) => c.toUpperCase()) + 'Error'
  // The object literal names the class `name`.
  const cls = { [name]: class extends FencelockError {} }[name]
  cls.code = code
  BY_CODE.set(code, cls)
  classes[name] = cls
}

/**
 * A call on a client that was closed (`client.close()`), or on anything made from it, or a
 * wait that its closing ended: code `closed` (the library's `Error::Closed`), an
 * `InvalidArgumentError` (the client is no longer usable), `reason: "closed"`.
 */
class ClientClosedError extends BY_CODE.get('invalid_argument') {
  /** `new ClientClosedError(lock)`; or, from the native addon, `(message, fields)`. */
  constructor (lock = null, fields = undefined) {
    if (fields !== undefined) {
      super(lock, { ...fields, reason: 'closed' })
    } else {
      super(lock === null
        ? 'the fencelock client is closed'
        : `lock ${JSON.stringify(lock)}: the fencelock client is closed`, { lock, reason: 'closed' })
    }
  }
}
ClientClosedError.code = 'closed'
BY_CODE.set('closed', ClientClosedError)
classes.ClientClosedError = ClientClosedError

/** The error of `code` (its subclass), with `message` and `fields`. */
function fencelockError (message, fields = {}) {
  const cls = BY_CODE.get(fields.code) ?? FencelockError
  return new cls(message, fields) // eslint-disable-line new-cap
}

/** The `FencelockError` for an error the native addon threw (other errors go through). */
function convert (error) {
  if (error instanceof FencelockError || error === null || typeof error !== 'object') return error
  if (!KNOWN.has(error.code)) return error
  const fields = {}
  for (const [key, value] of Object.entries(error)) fields[key] = value
  return fencelockError(error.message, fields)
}

/** The `invalid_argument` error for option `option` of the call about `lock`. */
function invalidOption (lock, option, why) {
  const about = lock === null || lock === undefined ? '' : ` for lock ${JSON.stringify(lock)}`
  return fencelockError(`invalid argument${about}: ${option} ${why}`, {
    code: 'invalid_argument',
    lock: lock ?? null,
    option,
    reason: `${option} ${why}`
  })
}

module.exports = { FencelockError, ClientClosedError, classes, convert, fencelockError, invalidOption }
