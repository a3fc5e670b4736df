'use strict'
// `fencelock/prometheus`: fencelock's series in a prom-client registry (prom-client 14 or
// later, an optional peer dependency). Each instrument of the core's list is one metric
// object of prom-client's collector interface (`name`, `help`, `type`, `get()`), registered
// with `registry.registerMetric`: at each scrape it reads the series the Rust core keeps
// (one snapshot per scrape, shared by the instruments), so the text prom-client renders has
// the names, help, types, labels and values of docs/observability.md's table, with
// cumulative histogram buckets up to `+Inf`, `_sum` and `_count`. Nothing is counted in
// JavaScript, and nothing here loads prom-client unless the default registry is asked for.

const native = require('./native')
const { INSTRUMENTS, BUCKETS, checkOptions, anyLockLabels, enable } = require('./metrics')
const { shown } = require('./options')

const WHERE = 'fencelock/prometheus register'

/** The snapshot of the scrape under way: one per synchronous run (a scrape's `get()` calls). */
let current = null

function snapshot () {
  if (current === null) {
    current = native.metricsSnapshot()
    queueMicrotask(() => {
      current = null
    })
  }
  return current
}

/** One instrument as a prom-client metric: its series, read at each scrape. */
class Family {
  /** The instrument's name (prom-client's OpenMetrics output rewrites `name`, not this). */
  #instrument
  #histogram

  constructor (instrument) {
    this.#instrument = instrument.name
    this.#histogram = instrument.kind === 'histogram'
    this.name = instrument.name
    this.help = instrument.help
    this.type = instrument.kind
    this.labelNames = [...instrument.labels]
    // prom-client's cluster aggregation: the workers' series add up.
    this.aggregator = 'sum'
  }

  /** The metric as prom-client renders it: `{ name, help, type, values, aggregator }`. */
  get () {
    const values = []
    for (const series of snapshot()) {
      if (series.name !== this.#instrument) continue
      if (!this.#histogram) {
        values.push({ labels: series.labels, value: series.value })
        continue
      }
      let below = 0
      series.counts.forEach((count, at) => {
        below += count
        values.push({
          metricName: `${this.#instrument}_bucket`,
          labels: { ...series.labels, le: at < BUCKETS.length ? BUCKETS[at] : '+Inf' },
          value: below
        })
      })
      values.push({ metricName: `${this.#instrument}_sum`, labels: series.labels, value: series.sum })
      values.push({ metricName: `${this.#instrument}_count`, labels: series.labels, value: series.count })
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }

  /** `registry.resetMetrics()`: the process's counts are the core's, and are not reset. */
  reset () {}
}

/** The registries fencelock's metrics are in (a second `register` there adds nothing). */
const registered = new WeakSet()

/**
 * Enables fencelock's metrics in this process and adds its instruments to `registry`
 * (prom-client's default registry if left out); see lib/prometheus.d.ts.
 */
function register (registry, options) {
  const { lockLabels } = checkOptions(WHERE, options, { lockLabels: anyLockLabels })
  const target = registry ?? defaultRegistry()
  if (typeof target !== 'object' || target === null || typeof target.registerMetric !== 'function') {
    throw new TypeError(`${WHERE}: registry must be a prom-client Registry (with registerMetric), not ${shown(target)}`)
  }
  enable(WHERE, lockLabels)
  if (registered.has(target)) return
  const families = INSTRUMENTS.map((instrument) => new Family(instrument))
  for (const family of families) target.registerMetric(family)
  registered.add(target)
}

/** prom-client's default registry (prom-client is loaded only for it). */
function defaultRegistry () {
  let promClient
  try {
    promClient = require('prom-client')
  } catch (error) {
    if (error.code !== 'MODULE_NOT_FOUND') throw error
    throw new Error(`${WHERE}: prom-client is not installed (npm install prom-client), and no registry was given`)
  }
  return promClient.register
}

module.exports = { register }
