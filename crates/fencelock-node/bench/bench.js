'use strict'
// fencelock from Node.js, beside its peers on npm, on real redis-server processes.
//
// Workloads (each contender in turn, in rounds; the table gives the median of the rounds):
//   N1  one async loop, a new key each cycle: acquire + release, cycles/s and cycle p50/p99
//   N2  8 async loops on one key (each with its own client), each holding it 1 ms:
//       grants/s, wait p50/p99 (from calling acquire to getting the lock), and the server's
//       CPU per grant (INFO cpu before and after the window, over the grants)
//   N3  the same with 64 loops
//   N5  32 async loops on one client, each on its own new keys: acquire + release, cycles/s,
//       cycle p50/p99 and this process's CPU per cycle (process.cpuUsage: the JavaScript, the
//       addon and its runtime thread together)
//   N4  Redlock over 5 redis-server instances, one client, sequential cycles on new keys:
//       first with all 5 up, then with the first instance SIGSTOPped (SIGCONT after the row);
//       every cycle is bounded at 10 s, so that a contender that waits for the stopped
//       instance forever shows as "hangs" instead of hanging the bench
//
// Contenders use their defaults, as a user would (their retry policies are noted where they
// are made, in contenders.js); leases are 10 s everywhere. Only fencelock gives a fence.
//
//   (cd crates/fencelock-node/bench && npm ci)
//   node crates/fencelock-node/bench/bench.js [--seconds 5] [--rounds 3] [--json FILE]
//       [--only N1,N2,N3,N4,N5] [--contenders fencelock,redlock,sesame,semaphore]
//
// FENCELOCK_NODE_PACKAGE: the fencelock package (default: the directory above this one);
// FENCELOCK_BASELINE_PACKAGE: another build of it (an earlier commit's checkout, its addon beside
//   its sources), measured as one more contender, "fencelock (baseline)", for a before and after
//   in one run (`--contenders` key: baseline);
// FENCELOCK_TEST_SERVER: the redis-server binary (default: redis-server on PATH).

const fs = require('node:fs')
const os = require('node:os')

const { parseArgs, usage } = require('./args')
const { CONTENDERS, peerVersion } = require('./contenders')
const { serverBinary, serverVersion, Server, servers, killAllServers, newRedis, closeRedis } = require('./servers')
const { median } = require('./measure')
const { uncontended, contended, n4 } = require('./workloads')

// ---------------------------------------------------------------------------------------------
// The tables

function fmtTime (ms) {
  if (typeof ms !== 'number' || Number.isNaN(ms)) return '—'
  if (ms < 1) return `${Math.round(ms * 1000)} µs`
  if (ms < 100) return `${ms.toFixed(2)} ms`
  return `${Math.round(ms).toLocaleString('en-US')} ms`
}

function fmtRate (x) {
  return typeof x === 'number' && !Number.isNaN(x) ? Math.round(x).toLocaleString('en-US') : '—'
}

function fmtUs (x) {
  return typeof x === 'number' && !Number.isNaN(x) ? `${x.toFixed(1)} µs` : ''
}

function fmtRatio (x) {
  return typeof x === 'number' && Number.isFinite(x) && x > 0 ? `×${x.toFixed(2)}` : '—'
}

/** The rows of the tables: { workload, label, contender, per_s, p50, p99, cpu, notes }. */
function rows (medians) {
  const out = []
  for (const [workload, byContender] of Object.entries(medians)) {
    for (const [name, m] of Object.entries(byContender)) {
      const notes = []
      if (m.errors) notes.push(`${m.errors} errors`)
      if (m.gave_up) notes.push(`gave up ${m.gave_up}× (asked again)`)
      if (m.loop_max !== undefined) notes.push(`grants per loop ${m.loop_min}–${m.loop_max}`)
      let label = workload
      if (workload === 'N1') label = 'N1 uncontended'
      if (workload === 'N5') label = 'N5 32 loops, own keys'
      if (workload === 'N2') label = 'N2 8 on one key'
      if (workload === 'N3') label = 'N3 64 on one key'
      if (workload === 'N4') label = 'N4 Redlock, 5 up'
      if (workload === 'N4-stopped') {
        label = 'N4 Redlock, 1 of 5 stopped'
        if (m.hung) notes.push('hangs (a cycle > 10 s)')
        else if (!m.slow && !m.errors) notes.push(`all ${m.ok} cycles finished`)
        if (m.slow) notes.push(`${m.slow} cycles > 5 s`)
      }
      const contendedRow = workload === 'N2' || workload === 'N3'
      out.push({
        workload,
        label,
        contender: name,
        per_s: m.per_s,
        p50: contendedRow ? m.wait_p50_ms : m.p50_ms,
        p99: contendedRow ? m.wait_p99_ms : m.p99_ms,
        cpu: contendedRow ? m.server_us_per_grant : NaN,
        client: contendedRow ? NaN : m.client_us_per_cycle,
        hung: !!m.hung,
        notes: notes.join('; ')
      })
    }
  }
  return out
}

function printTables (medians) {
  const all = rows(medians)
  console.log('| workload | contender | grants or cycles/s | p50 | p99 | server µs/grant | client CPU µs/cycle | notes |')
  console.log('|---|---|---:|---:|---:|---:|---:|---|')
  for (const r of all) {
    const wait = r.workload === 'N2' || r.workload === 'N3' ? 'wait ' : ''
    console.log(`| ${r.label} | ${r.contender} | ${fmtRate(r.per_s)} | ${wait}${fmtTime(r.p50)} | ${wait}${fmtTime(r.p99)} | ${fmtUs(r.cpu)} | ${fmtUs(r.client)} | ${r.notes} |`)
  }
  if (!all.some((r) => r.contender === 'fencelock') || !all.some((r) => r.contender !== 'fencelock')) return
  console.log('\nRatios of fencelock against the best peer per column (above 1: fencelock is better; ' +
    'rate: fencelock ÷ peer; times and CPU: peer ÷ fencelock). A peer that hangs is left out.\n')
  console.log('| workload | rate | p50 | p99 | server µs/grant | client CPU/cycle |')
  console.log('|---|---:|---:|---:|---:|---:|')
  const labels = [...new Set(all.map((r) => r.label))]
  for (const label of labels) {
    const inRow = all.filter((r) => r.label === label)
    const fl = inRow.find((r) => r.contender === 'fencelock')
    const peers = inRow.filter((r) => !r.contender.startsWith('fencelock') && !r.hung)
    if (!fl) continue
    const cell = (field, higherIsBetter) => {
      const valid = peers.filter((p) => typeof p[field] === 'number' && !Number.isNaN(p[field]))
      if (valid.length === 0 || Number.isNaN(fl[field])) return '—'
      const best = valid.reduce((a, b) => (higherIsBetter ? (b[field] > a[field] ? b : a) : (b[field] < a[field] ? b : a)))
      const ratio = higherIsBetter ? fl[field] / best[field] : best[field] / fl[field]
      return `${fmtRatio(ratio)} (${best.contender})`
    }
    const contendedRow = inRow[0].workload === 'N2' || inRow[0].workload === 'N3'
    console.log(`| ${label} | ${cell('per_s', true)} | ${cell('p50', false)} | ${cell('p99', false)} | ${contendedRow ? cell('cpu', false) : ''} | ${contendedRow ? '' : cell('client', false)} |`)
  }
  if (!all.some((r) => r.contender === BASELINE)) return
  console.log('\nfencelock against its baseline build (rate: fencelock ÷ baseline; client CPU: baseline ÷ fencelock).\n')
  console.log('| workload | rate | client CPU/cycle |')
  console.log('|---|---:|---:|')
  for (const label of labels) {
    const fl = all.find((r) => r.label === label && r.contender === 'fencelock')
    const base = all.find((r) => r.label === label && r.contender === BASELINE)
    if (!fl || !base) continue
    console.log(`| ${label} | ${fmtRatio(fl.per_s / base.per_s)} | ${fmtRatio(base.client / fl.client)} |`)
  }
}

const BASELINE = 'fencelock (baseline)'

// ---------------------------------------------------------------------------------------------

async function main () {
  const args = parseArgs(process.argv.slice(2))
  const binary = serverBinary()
  const wanted = args.contenders
  // A key (fencelock, redlock, sesame, semaphore) names one contender; other words match names.
  const keys = CONTENDERS.map((c) => c.key)
  const contenders = CONTENDERS.filter((c) => !wanted || wanted.some((w) =>
    keys.includes(w) ? c.key === w : c.name.includes(w) || (c.redlockName || '').includes(w)))
  if (contenders.length === 0) usage('no contender matches --contenders')
  const loadBefore = os.loadavg()
  const ctx = { seconds: args.seconds, single: null, five: [], raw: null }
  const rawClients = []
  const rounds = {}
  const record = (workload, name, result) => {
    ((rounds[workload] ??= {})[name] ??= []).push(result)
    const shown = Object.fromEntries(Object.entries(result).map(([k, v]) => [k, typeof v === 'number' ? +v.toPrecision(4) : v]))
    process.stderr.write(`${workload} ${name}: ${JSON.stringify(shown)}\n`)
  }
  try {
    if (args.only.some((w) => w !== 'N4')) {
      ctx.single = await Server.start(binary)
      ctx.raw = newRedis(ctx.single.url, rawClients)
    }
    if (args.only.includes('N4')) {
      for (let i = 0; i < 5; i++) ctx.five.push(await Server.start(binary))
    }
    for (let round = 1; round <= args.rounds; round++) {
      process.stderr.write(`round ${round} of ${args.rounds}\n`)
      // The order turns each round, so that a machine that slows down weighs on each alike.
      const shift = (round - 1) % contenders.length
      const order = [...contenders.slice(shift), ...contenders.slice(0, shift)]
      for (const workload of args.only) {
        for (const contender of order) {
          if (workload === 'N1') record('N1', contender.name, await uncontended(contender, ctx, 1))
          if (workload === 'N5') record('N5', contender.name, await uncontended(contender, ctx, 32))
          if (workload === 'N2') record('N2', contender.name, await contended(contender, ctx, 8))
          if (workload === 'N3') record('N3', contender.name, await contended(contender, ctx, 64))
          if (workload === 'N4') {
            const name = contender.redlockName || contender.name
            const out = await n4(contender, ctx)
            record('N4', name, out.up)
            record('N4-stopped', name, out.stopped)
          }
        }
      }
    }
  } finally {
    await closeRedis(rawClients)
    await Promise.all([...servers].map((s) => s.stop()))
  }
  const loadAfter = os.loadavg()

  const medians = {}
  for (const [workload, byContender] of Object.entries(rounds)) {
    medians[workload] = {}
    for (const [name, runs] of Object.entries(byContender)) {
      const m = {}
      for (const k of Object.keys(runs[0])) {
        const values = runs.map((r) => r[k])
        if (typeof values[0] === 'number') m[k] = median(values)
        else if (typeof values[0] === 'boolean') m[k] = values.some(Boolean)
        else m[k] = values.find((v) => v) ?? null
      }
      medians[workload][name] = m
    }
  }

  const meta = {
    date: new Date().toISOString(),
    redis_server: serverVersion(binary),
    node: process.version,
    cpus: os.cpus().length,
    seconds: args.seconds,
    rounds: args.rounds,
    versions: Object.fromEntries([...CONTENDERS.map((c) => [c.name.replace(/ .*/, ''), c.version]), ['ioredis', peerVersion('ioredis')]]),
    loadavg_before: loadBefore,
    loadavg_after: loadAfter
  }
  const load = (l) => l.map((x) => x.toFixed(2)).join(' ')
  console.log(`${meta.date}; redis-server ${meta.redis_server}; Node ${meta.node}; ${meta.cpus} CPUs`)
  console.log(Object.entries(meta.versions).map(([n, v]) => `${n} ${v}`).join(', '))
  console.log(`load average ${load(loadBefore)} before, ${load(loadAfter)} after; ` +
    `${args.seconds} s per run, median of ${args.rounds} round${args.rounds > 1 ? 's' : ''}\n`)
  printTables(medians)
  if (args.json) {
    fs.writeFileSync(args.json, JSON.stringify({ meta, medians, rounds }, null, 1) + '\n')
  }
}

main().catch((error) => {
  setTimeout(() => process.exit(1), 5000).unref()
  process.stderr.write(`bench failed: ${error && error.stack ? error.stack : error}\n`)
  killAllServers()
  process.exitCode = 1
})
