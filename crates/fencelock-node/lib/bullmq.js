'use strict'
// `fencelock/bullmq`: BullMQ processors that run each repetition of a repeatable job once across
// workers (`oncePerRepetition`), and that hold one of a semaphore's permits while they run
// (`limitConcurrency`). BullMQ delivers at least once: a stalled job (a worker that froze or
// died) is processed again, and a repeatable job added by several producers under different
// scheduler ids runs each repetition once per id. Nothing here loads BullMQ: a processor is a
// function of the job, and the job's fields read here (`name`, `id`, `repeatJobKey`) are the
// same in BullMQ 5 and 6.

const { checkOptions, shown } = require('./options')
const { invalidOption } = require('./errors')

/** A week (ms): how long a run-once record is kept by default. */
const WEEK = 7 * 24 * 3_600_000

/**
 * The id BullMQ gives each repetition of a repeatable job: `repeat:<key>:<millis>`, where
 * `<key>` is the job scheduler's id (`queue.upsertJobScheduler`) or, for the legacy
 * `repeat` option of `queue.add` (BullMQ 5), a hash of the repeat key, and `<millis>` is the
 * time the repetition was planned for (ms since the epoch). The same planned time whichever
 * scheduler made it, however late a worker takes it, and on every retry or re-delivery.
 */
const REPETITION_ID = /^repeat:.+:(\d+)$/

/** Marks the context a wrapper of this module hands on, so that another one wrapped in it knows it. */
const CONTEXT = Symbol('fencelock/bullmq context')

/**
 * The time BullMQ planned the repetition `job` is for (ms since the epoch), or `undefined` for
 * a job that is not a repetition of a repeatable job.
 */
function plannedMs (job) {
  if (typeof job.repeatJobKey !== 'string' || job.repeatJobKey === '') return undefined
  const match = typeof job.id === 'string' ? REPETITION_ID.exec(job.id) : null
  if (match === null) {
    throw new TypeError(`fencelock/bullmq: the repeatable job ${JSON.stringify(job.name)} (${shown(job.id)}) has an id without its planned time (repeat:<key>:<millis>)`)
  }
  return Number(match[1])
}

/**
 * What the wrapper got after the job: BullMQ's `(token, signal)`, or the context of another
 * wrapper of this module that wraps this one.
 */
function incoming (tokenOrContext, signal) {
  if (tokenOrContext !== null && typeof tokenOrContext === 'object' && tokenOrContext[CONTEXT]) {
    return { ...tokenOrContext }
  }
  return { [CONTEXT]: true, token: tokenOrContext, signal }
}

/** A signal that aborts when `a` or `b` (if a signal) does, with its reason; `done()` unhooks it. */
function either (a, b) {
  if (!(b instanceof AbortSignal) || b === a) return { signal: a, done () {} }
  const controller = new AbortController()
  const fromA = () => controller.abort(a.reason)
  const fromB = () => controller.abort(b.reason)
  if (a.aborted) fromA()
  else if (b.aborted) fromB()
  else {
    a.addEventListener('abort', fromA, { once: true })
    b.addEventListener('abort', fromB, { once: true })
  }
  return {
    signal: controller.signal,
    done () {
      a.removeEventListener('abort', fromA)
      b.removeEventListener('abort', fromB)
    }
  }
}

function checkWrapped (client, processor, what) {
  if (client === null || typeof client !== 'object' || typeof client.once !== 'function' || typeof client.semaphore !== 'function') {
    throw new TypeError(`${what} takes a fencelock Client first, not ${shown(client)}`)
  }
  if (typeof processor !== 'function') throw new TypeError(`${what} takes the processor, a function of the job, not ${shown(processor)}`)
}

/**
 * Wraps a BullMQ processor so that each repetition of a repeatable job runs once across all
 * the workers: under `client.once(key, { tick: { planned } })`, where the tick is the time
 * BullMQ planned the repetition for (read from its id, `repeat:<key>:<millis>`) and the key is
 * `options.job` (default: the job's name). A job that is not a repetition runs once per job
 * id: `client.once(key + '/' + job.id)`.
 *
 * `processor(job, { fence, tick, token, signal })` gets the fence of the run and the tick (a
 * `Date`; `null` for a job that is not a repetition), with BullMQ's token and signal. The
 * wrapper resolves what the processor resolved when it ran, and `undefined` when the repetition
 * was done before (the job completes: nothing to retry). A processor that throws records
 * nothing: the error goes on to BullMQ (its retries run it again), and the failed run is counted;
 * once `attempts` runs of the repetition failed, the wrapper throws an `UnrecoverableError`
 * (BullMQ fails the job without retrying it).
 *
 * `options`: `job` (the key: a string, or a function of the job), `ttl` (the lock's lease
 * while the processor runs), `keep` (how long the record is kept: default 7 days), `attempts`
 * (default 3 for a repetition, any number for a plain job), `label`.
 */
function oncePerRepetition (client, processor, options = {}) {
  checkWrapped(client, processor, 'oncePerRepetition')
  const { job: key, ...rest } = options ?? {}
  if (key !== undefined && typeof key !== 'string' && typeof key !== 'function') {
    throw invalidOption(null, 'job', `must be a string or a function of the job (or left out), not ${shown(key)}`)
  }
  const { ttl, keep = WEEK, attempts, label } = checkOptions(null, rest, { ttl: 'ms', keep: 'ms', attempts: 'count', label: 'string' })

  return async function runOncePerRepetition (job, tokenOrContext, signal) {
    const context = incoming(tokenOrContext, signal)
    const named = typeof key === 'function' ? key(job) : (key ?? job.name)
    if (typeof named !== 'string' || named === '') {
      throw new TypeError(`fencelock/bullmq: the run-once key of job ${shown(job.id)} must be a non-empty string, not ${shown(named)}`)
    }
    const planned = plannedMs(job)
    if (planned === undefined && (job.id === undefined || job.id === null)) {
      throw new TypeError(`fencelock/bullmq: job ${JSON.stringify(job.name)} has no id`)
    }
    const once = planned === undefined
      ? client.once(`${named}/${job.id}`, { ttl, keep, attempts, label })
      : client.once(named, { tick: { planned }, ttl, keep, attempts, label })
    const result = await once.run(
      (fence, tick) => processor(job, { ...context, fence, tick }),
      context.signal instanceof AbortSignal ? { signal: context.signal } : {}
    )
    if (result.ran) return result.value
    if (result.gaveUp) {
      const at = result.tick ? `@${result.tick.toISOString()}` : ''
      const error = new Error(`fencelock/bullmq: ${result.failures} runs of ${once.key}${at} failed: it is not run again (attempts)`)
      // BullMQ fails a job that throws an error of this name without retrying it.
      error.name = 'UnrecoverableError'
      error.failures = result.failures
      error.tick = result.tick
      throw error
    }
    return undefined
  }
}

/**
 * Wraps a BullMQ processor so that at most `permits` jobs run at once across every worker that
 * uses the same `name`: each job holds one permit of the semaphore `name` while the processor
 * runs (`client.semaphore(name, permits).using(...)`), and gives it back when it ends, whatever
 * happens. A job waits for a permit (`wait`, as a lock's: as long as it takes by default; with
 * `wait: 0` it fails `busy` at once, for BullMQ's retries to try again).
 *
 * `processor(job, { guard, signal, token })`: `guard` is the permit's (its `fence`),
 * `signal` aborts when the permit is lost (or when BullMQ cancels the job). If the processor
 * resolves after the permit was lost, the wrapper rejects `not_held`, as `using` does.
 *
 * `options`: `name` and `permits` (required), `ttl`, `wait`, `label`.
 */
function limitConcurrency (client, processor, options) {
  checkWrapped(client, processor, 'limitConcurrency')
  const { name, permits, ...rest } = options ?? {}
  if (typeof name !== 'string') throw invalidOption(null, 'name', `must be the semaphore's name, a string, not ${shown(name)}`)
  if (permits === undefined) throw invalidOption(name, 'permits', 'must be given (how many jobs may run at once)')
  const { ttl, wait, label } = checkOptions(name, rest, { ttl: 'ms', wait: 'ms', label: 'string' })
  // Checked now (a wrong value throws as the worker is made), and acquired once per job.
  const request = client.semaphore(name, permits, { ttl, wait, label })

  return async function runWithPermit (job, tokenOrContext, signal) {
    const context = incoming(tokenOrContext, signal)
    const cancel = context.signal instanceof AbortSignal ? context.signal : undefined
    return request.using(async (lost, guard) => {
      const both = either(lost, cancel)
      try {
        return await processor(job, { ...context, signal: both.signal, guard })
      } finally {
        both.done()
      }
    }, cancel ? { signal: cancel } : {})
  }
}

/**
 * The time BullMQ planned the repetition `job` is for (a `Date`), or `null` for a job that is
 * not a repetition of a repeatable job: the tick `oncePerRepetition` runs it under.
 */
function plannedTime (job) {
  const planned = plannedMs(job)
  return planned === undefined ? null : new Date(planned)
}

module.exports = { oncePerRepetition, limitConcurrency, plannedTime }
