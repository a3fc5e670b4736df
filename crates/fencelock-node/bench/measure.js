'use strict'
// Measures: percentiles and medians, error text, the server's CPU, run ids.

const crypto = require('node:crypto')

// ---------------------------------------------------------------------------------------------
// Measures

function percentile (values, p) {
  if (values.length === 0) return NaN
  const ordered = Float64Array.from(values).sort()
  return ordered[Math.min(ordered.length - 1, Math.floor(p * ordered.length))]
}

function median (values) {
  const v = values.filter((x) => typeof x === 'number' && !Number.isNaN(x)).sort((a, b) => a - b)
  if (v.length === 0) return NaN
  const mid = Math.floor(v.length / 2)
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2
}

function errorText (error) {
  return String(error && error.message ? error.message : error).slice(0, 200)
}

/** used_cpu_sys + used_cpu_user of the server, in seconds. */
async function serverCpu (raw) {
  const info = await raw.info('cpu')
  const field = (name) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)[1])
  return field('used_cpu_sys') + field('used_cpu_user')
}

function runId () {
  return crypto.randomBytes(6).toString('hex')
}

module.exports = { percentile, median, errorText, serverCpu, runId }
