'use strict'
// The workloads: N1 and N5 (uncontended), N2 and N3 (contended), N4 (Redlock, one instance
// stopped).

const { performance } = require('node:perf_hooks')
const { setTimeout: sleep } = require('node:timers/promises')

const { WAIT } = require('./contenders')
const { percentile, errorText, serverCpu, runId } = require('./measure')

const HOLD = 1 // ms, N2 and N3
const CYCLE_BOUND = 10000 // ms, N4: a cycle not done by then "hangs"
const SLOW = 5000 // ms, N4: a cycle that took longer did not really finish

// N1: one loop, a new key each cycle. N5: 32 loops on one client, each its own new keys.
async function uncontended (contender, ctx, loops) {
  const env = await contender.open([ctx.single.url])
  try {
    const prefix = `bench/n1/${runId()}/`
    await env.release(await env.acquire(`${prefix}warm`)) // connects, loads scripts
    const times = []
    let errors = 0
    let lastError = null
    const start = performance.now()
    const end = start + ctx.seconds * 1000
    const cpu = process.cpuUsage()
    await Promise.all(Array.from({ length: loops }, async (_, loop) => {
      for (let i = 0; performance.now() < end; i++) {
        const t0 = performance.now()
        try {
          const handle = await env.acquire(`${prefix}${loop}/${i}`)
          if (!(await env.release(handle))) errors++
          times.push(performance.now() - t0)
        } catch (error) {
          errors++
          lastError = errorText(error)
        }
      }
    }))
    const elapsed = (performance.now() - start) / 1000
    const used = process.cpuUsage(cpu)
    return {
      per_s: times.length / elapsed,
      p50_ms: percentile(times, 0.5),
      p99_ms: percentile(times, 0.99),
      client_us_per_cycle: (used.user + used.system) / Math.max(1, times.length),
      errors,
      last_error: lastError
    }
  } finally {
    await env.close()
  }
}

// N2 / N3: `loops` async loops on one key, each with its own client, each holding the lock 1 ms.
// Grants and waits count if the lock was granted within the window; after it, each loop finishes
// the cycle it is in (a redlock loop that gives up after the window stops there).
async function contended (contender, ctx, loops) {
  const envs = []
  try {
    for (let i = 0; i < loops; i++) envs.push(await contender.open([ctx.single.url]))
    const warm = `bench/contend/${runId()}/warm/`
    await Promise.all(envs.map(async (env, i) => env.release(await env.acquire(`${warm}${i}`))))
    const key = `bench/contend/${runId()}`
    const waits = []
    const state = { gaveUp: 0, errors: 0, lastError: null, end: Infinity }
    let go
    const started = new Promise((resolve) => { go = resolve })
    const perLoop = envs.map(() => 0)
    const loop = async (env, index) => {
      await started
      while (performance.now() < state.end) {
        const t0 = performance.now()
        let handle = null
        while (handle === null) {
          try {
            handle = await env.acquire(key, { wait: WAIT })
          } catch (error) {
            if (env.gaveUp(error)) state.gaveUp++
            else {
              state.errors++
              state.lastError = errorText(error)
            }
            if (performance.now() >= state.end) return
          }
        }
        const granted = performance.now()
        if (granted <= state.end) {
          waits.push(granted - t0)
          perLoop[index]++
        }
        await sleep(HOLD)
        try {
          if (!(await env.release(handle))) state.errors++
        } catch (error) {
          state.errors++
          state.lastError = errorText(error)
        }
      }
    }
    const running = envs.map(loop)
    const cpu0 = await serverCpu(ctx.raw)
    const start = performance.now()
    state.end = start + ctx.seconds * 1000
    go()
    await sleep(ctx.seconds * 1000)
    const cpu1 = await serverCpu(ctx.raw)
    const grants = waits.length
    const drainStart = performance.now()
    await Promise.all(running)
    const drain = performance.now() - drainStart
    for (const env of envs) {
      if (env.otherErrors) {
        state.errors += env.otherErrors
        state.lastError = state.lastError || errorText(env.lastError)
      }
    }
    return {
      per_s: grants / ctx.seconds,
      wait_p50_ms: percentile(waits, 0.5),
      wait_p99_ms: percentile(waits, 0.99),
      server_us_per_grant: grants ? ((cpu1 - cpu0) * 1e6) / grants : NaN,
      gave_up: state.gaveUp,
      errors: state.errors,
      // Fairness: the fewest and the most grants one loop got in the window.
      loop_min: Math.min(...perLoop),
      loop_max: Math.max(...perLoop),
      drain_ms: drain,
      last_error: state.lastError
    }
  } finally {
    await Promise.all(envs.map((env) => env.close()))
  }
}

/** `promise` within `ms`: 'done', 'failed' (with the error) or 'late'. */
async function bounded (promise, ms) {
  let timer
  const late = new Promise((resolve) => { timer = setTimeout(resolve, ms, { how: 'late' }) })
  try {
    return await Promise.race([promise.then(() => ({ how: 'done' }), (error) => ({ how: 'failed', error })), late])
  } finally {
    clearTimeout(timer)
  }
}

// N4: Redlock over five instances; sequential cycles, a new key each, every cycle bounded.
async function redlockPhase (env, prefix, seconds) {
  const times = []
  let errors = 0
  let slow = 0
  let hung = null
  let lastError = null
  const start = performance.now()
  const end = start + seconds * 1000
  for (let i = 0; performance.now() < end; i++) {
    const t0 = performance.now()
    const cycle = env.acquire(`${prefix}${i}`).then(async (handle) => {
      if (!(await env.release(handle))) throw new Error('release: the lock was no longer held')
    })
    const result = await bounded(cycle, CYCLE_BOUND)
    const took = performance.now() - t0
    if (result.how === 'late') {
      hung = cycle.catch(() => {}) // it goes on in the background; awaited after SIGCONT
      lastError = `a cycle did not finish within ${CYCLE_BOUND / 1000} s`
      break
    }
    if (result.how === 'failed') {
      errors++
      lastError = errorText(result.error)
    } else if (took > SLOW) {
      slow++
    } else {
      times.push(took)
    }
  }
  const elapsed = (performance.now() - start) / 1000
  return {
    result: {
      per_s: times.length / elapsed,
      p50_ms: percentile(times, 0.5),
      p99_ms: percentile(times, 0.99),
      ok: times.length,
      slow,
      errors,
      hung: hung !== null,
      last_error: lastError
    },
    hung
  }
}

async function n4 (contender, ctx) {
  const env = await contender.open(ctx.five.map((s) => s.url))
  const stopped = ctx.five[0]
  const out = {}
  try {
    const prefix = `bench/n4/${runId()}/`
    await env.release(await env.acquire(`${prefix}warm`))
    out.up = (await redlockPhase(env, `${prefix}up/`, ctx.seconds)).result
    stopped.pause()
    let phase
    try {
      phase = await redlockPhase(env, `${prefix}stopped/`, ctx.seconds)
    } finally {
      stopped.resume()
    }
    out.stopped = phase.result
    if (phase.hung) {
      const after = await bounded(phase.hung, CYCLE_BOUND)
      out.stopped.hung_cycle_after_sigcont = after.how === 'late' ? 'still pending' : 'finished'
    }
    if (env.otherErrors) out.stopped.instance_errors = env.otherErrors
    return out
  } finally {
    stopped.resume()
    await env.close()
  }
}

module.exports = { uncontended, contended, n4 }
