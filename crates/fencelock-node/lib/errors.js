'use strict'
// fencelock's errors: one class, `FencelockError`, whose `code` is the library's (the Rust
// core's `Error::code`), with the lock's name as `lock` and the fields of its kind as
// properties. There is no second naming scheme: the codes are read from the native addon.

const native = require('./native')

const CODES = Object.freeze(native.codes('error'))
const KNOWN = new Set(CODES)

/** An error of fencelock's: `code` says which (see `FencelockError.CODES`). */
class FencelockError extends Error {
  constructor (message, fields = {}) {
    super(message, fields.cause === undefined ? undefined : { cause: fields.cause })
    this.name = 'FencelockError'
    /** The library's code for the kind of failure: `busy`, `timed_out`, ... */
    this.code = fields.code ?? 'error'
    /** The lock (or the resource, or the election) the error is about; `null` if none. */
    this.lock = fields.lock ?? null
    for (const [key, value] of Object.entries(fields)) {
      if (key !== 'code' && key !== 'lock' && key !== 'cause') this[key] = value
    }
  }
}

/** Every code a `FencelockError` can have, from the core. */
FencelockError.CODES = CODES

/** The `FencelockError` for an error the native addon threw (other errors go through). */
function convert (error) {
  if (error instanceof FencelockError || error === null || typeof error !== 'object') return error
  if (!KNOWN.has(error.code)) return error
  const fields = {}
  for (const [key, value] of Object.entries(error)) fields[key] = value
  const converted = new FencelockError(error.message, fields)
  return converted
}

module.exports = { FencelockError, convert }
