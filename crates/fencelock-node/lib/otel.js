'use strict'
// `fencelock/otel`: fencelock's instruments in an OpenTelemetry meter, and spans of its
// acquisitions and holds in a tracer (`@opentelemetry/api` 1.3 or later, an optional peer
// dependency, loaded only for the global meter provider). The counters and gauges are
// observable instruments read, at each collection, from the series the Rust core keeps; the
// histograms are synchronous OTel histograms (with the core's buckets as advice) fed, at each
// collection, with every value the core recorded since the last one. Spans are made here, in
// JavaScript, around the package's acquisitions (lib/locks.js's hook, `null` when untraced).
// See lib/otel.d.ts.

const native = require('./native')
const { FencelockError } = require('./errors')
const { shown } = require('./options')
const { traceAcquisitions } = require('./locks')
const { INSTRUMENTS, BUCKETS, checkOptions, anyLockLabels, enable } = require('./metrics')

const WHERE = 'fencelock/otel instrument'
const SCOPE = 'fencelock'

/** A request's kind as the core's series and spans name it. */
const KINDS = {
  lock: 'lock',
  fair: 'fair lock',
  semaphore: 'semaphore',
  read: 'read lock',
  write: 'write lock',
  reentrant: 'reentrant lock'
}

/** The core's units in OpenTelemetry's (UCUM) spelling; a count has none. */
const UNITS = { seconds: 's' }

/** `SpanStatusCode.ERROR` of `@opentelemetry/api`. */
const ERROR = 2

/** `BigInt(Number.MAX_SAFE_INTEGER)`: a fence above it is an attribute as text. */
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER)

/** The tracing hooks installed last (lib/locks.js's), or `null`. */
let tracing = null

/** What `instrument()` set up: `stop()` undoes it. */
class Instrumentation {
  /** The instrumentations whose histograms get every value the core records. */
  static #active = new Set()

  /** Hands the values recorded since the last take to every instrumentation's histograms. */
  static #take () {
    const taken = native.metricsTakeObservations()
    if (taken.length === 0) return
    for (const instrumentation of Instrumentation.#active) {
      for (const { name, labels, value } of taken) instrumentation.#histograms.get(name)?.record(value, labels)
    }
  }

  #meter
  #observables = new Map()
  #histograms = new Map()
  #callback
  #hooks
  #stopped = false

  constructor (meter, hooks) {
    this.#meter = meter
    this.#hooks = hooks
    for (const instrument of INSTRUMENTS) {
      const options = { description: instrument.help }
      const unit = UNITS[instrument.unit] ?? instrument.unit
      if (unit) options.unit = unit
      if (instrument.kind === 'counter') {
        this.#observables.set(instrument.name, meter.createObservableCounter(instrument.name, options))
      } else if (instrument.kind === 'gauge') {
        this.#observables.set(instrument.name, meter.createObservableGauge(instrument.name, options))
      } else {
        options.advice = { explicitBucketBoundaries: [...BUCKETS] }
        this.#histograms.set(instrument.name, meter.createHistogram(instrument.name, options))
      }
    }
    this.#callback = (result) => {
      Instrumentation.#take()
      for (const series of native.metricsSnapshot()) {
        const observable = this.#observables.get(series.name)
        if (observable !== undefined) result.observe(observable, series.value, series.labels)
      }
    }
    meter.addBatchObservableCallback(this.#callback, [...this.#observables.values()])
    Instrumentation.#active.add(this)
    native.metricsKeepObservations(true)
    if (hooks !== null) {
      tracing = hooks
      traceAcquisitions(hooks)
    }
  }

  /**
   * Stops: the meter's instruments are no longer fed (they stay in the meter), and its
   * acquisitions are no longer traced.
   */
  stop () {
    if (this.#stopped) return
    this.#stopped = true
    this.#meter.removeBatchObservableCallback(this.#callback, [...this.#observables.values()])
    Instrumentation.#active.delete(this)
    if (Instrumentation.#active.size === 0) native.metricsKeepObservations(false)
    if (this.#hooks !== null && tracing === this.#hooks) {
      tracing = null
      traceAcquisitions(null)
    }
  }
}

/** A fence as a span attribute: a number while exact, else its decimal text. */
function fenceAttribute (fence) {
  return fence <= MAX_SAFE ? Number(fence) : String(fence)
}

/** An acquisition's `outcome` when it rejected with `error`. */
function outcomeOf (error) {
  if (error instanceof FencelockError) {
    return error.code === 'busy' || error.code === 'timed_out' ? error.code : 'failed'
  }
  // The reason of the caller's AbortSignal.
  return 'cancelled'
}

/** lib/locks.js's hooks: spans of the acquisitions and holds, made with `tracer`. */
function tracingHooks (tracer) {
  /** The hold of `guard`, from its grant to its release or loss (a "lock lost" event). */
  function hold (guard, kind, fence) {
    const span = tracer.startSpan('fencelock.hold', { attributes: { lock: guard.name, kind, fence } })
    guard._native.onLost((code) => {
      if (code !== 'released') span.addEvent('lock lost', { reason: code })
      span.end()
    })
  }

  return {
    acquire (requested, name, start) {
      const kind = KINDS[requested] ?? requested
      const span = tracer.startSpan('fencelock.acquire', { attributes: { lock: name, kind } })
      const granted = (guard) => {
        if (guard === null) {
          span.setAttribute('outcome', 'busy')
          span.end()
          return null
        }
        const fence = fenceAttribute(guard.fence)
        span.setAttributes({ outcome: 'granted', fence })
        span.end()
        hold(guard, kind, fence)
        return guard
      }
      const refused = (error) => {
        const outcome = outcomeOf(error)
        span.setAttribute('outcome', outcome)
        if (outcome === 'failed') {
          span.recordException(error)
          span.setStatus({ code: ERROR, message: error.message })
        }
        span.end()
        throw error
      }
      let acquisition
      try {
        acquisition = start()
      } catch (error) {
        refused(error)
      }
      return acquisition.then(granted, refused)
    }
  }
}

/** The global meter provider of `@opentelemetry/api` (loaded only for it). */
function globalMeterProvider () {
  let api
  try {
    api = require('@opentelemetry/api')
  } catch (error) {
    if (error.code !== 'MODULE_NOT_FOUND') throw error
    throw new Error(`${WHERE}: @opentelemetry/api is not installed (npm install @opentelemetry/api), and no meterProvider was given`)
  }
  return api.metrics.getMeterProvider()
}

/** The check of a provider option: an object with `method`. */
const provider = (method) => (value) => (typeof value === 'object' && value !== null && typeof value[method] === 'function') || `must be an OpenTelemetry provider (with ${method}), not ${shown(value)}`

/**
 * Enables fencelock's metrics in this process and reports them through an OpenTelemetry
 * meter, and, with a `tracerProvider`, traces the acquisitions; see lib/otel.d.ts.
 */
function instrument (options) {
  const { meterProvider, tracerProvider, lockLabels } = checkOptions(WHERE, options, {
    meterProvider: provider('getMeter'),
    tracerProvider: provider('getTracer'),
    lockLabels: anyLockLabels
  })
  enable(WHERE, lockLabels)
  const meter = (meterProvider ?? globalMeterProvider()).getMeter(SCOPE, native.VERSION)
  const hooks = tracerProvider === undefined ? null : tracingHooks(tracerProvider.getTracer(SCOPE, native.VERSION))
  return new Instrumentation(meter, hooks)
}

module.exports = { instrument }
