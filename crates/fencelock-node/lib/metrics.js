'use strict'
// What `fencelock/prometheus` and `fencelock/otel` share: the process's metrics enabled (once;
// the `lockLabels` option decides the `lock` label), the core's list of instruments and its
// histograms' buckets, and the check of their options. Nothing here runs until one of them is
// loaded: a program that uses neither records nothing.

const native = require('./native')
const { fencelockError } = require('./errors')
const { shown } = require('./options')

/** Every instrument fencelock reports (the core's list): `{ name, kind, unit, labels, help }`. */
const INSTRUMENTS = Object.freeze(native.metricsInstruments().map((i) => Object.freeze({ ...i, labels: Object.freeze(i.labels) })))

/** The histograms' bucket bounds, in seconds (a last bucket, `+Inf`, takes the rest). */
const BUCKETS = Object.freeze(native.metricsBuckets())

/** An `invalid_argument` error about option `option` of `where` (`fencelock/otel`'s `instrument`). */
function invalid (where, option, why) {
  return fencelockError(`invalid argument: ${where}: ${option} ${why}`, {
    code: 'invalid_argument', lock: null, option, reason: `${option} ${why}`
  })
}

/**
 * Checks `options` of `where` against `allowed` (option: a check of a value that is not
 * `undefined`, `true` or the reason it is wrong): the options, `{}` if left out.
 */
function checkOptions (where, options, allowed) {
  if (options === undefined) return {}
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw invalid(where, 'options', `must be an object, not ${shown(options)}`)
  }
  for (const [option, value] of Object.entries(options)) {
    const check = allowed[option]
    if (check === undefined) {
      throw invalid(where, option, `is not an option here (the options: ${Object.keys(allowed).join(', ')})`)
    }
    const verdict = value === undefined ? true : check(value)
    if (verdict !== true) throw invalid(where, option, verdict)
  }
  return options
}

/** Any `lockLabels`: the addon checks it (`enable`). */
const anyLockLabels = () => true

/** Whether `enable` ran: a later call without `lockLabels` leaves the label as it is. */
let enabled = false

/**
 * Enables the process's metrics (the first call installs the registry the library records
 * into), with the `lock` label as `lockLabels` says; a later call changes the label of what is
 * recorded after it, unless it leaves `lockLabels` out (`false` turns the label off), so that a
 * second exporter does not undo the first one's setting.
 */
function enable (where, lockLabels) {
  if (lockLabels === undefined && enabled) return
  enabled = true
  try {
    native.metricsEnable(lockLabels)
  } catch (error) {
    if (error instanceof TypeError) throw invalid(where, 'lockLabels', error.message.replace(/^lockLabels /, ''))
    throw error
  }
}

module.exports = { INSTRUMENTS, BUCKETS, checkOptions, anyLockLabels, enable }
