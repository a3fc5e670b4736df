'use strict'
// `fencelock/prometheus` and `fencelock/otel` (with the real prom-client and OpenTelemetry SDK,
// dev dependencies of the package) on a real server: one scripted run (grants, a busy try, a
// wait that a release passes the lock to, a hold lost to a deleted key, a refused fenced write,
// a run-once that runs and then finds its work done, an election's term), then its series as
// prom-client renders them and as an OTel reader collects them, the spans of its acquisitions
// and holds, the names every export uses against docs/observability.md's table, and the `lock`
// label by pattern. The registry is the process's: this file is its only user in its process,
// and the values checked are what the run added.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { createRequire } = require('node:module')
const { ROOT, PACKAGE, startServer, sleep, uniqueName, aborted, until } = require('./helpers')
const { Client, Writes, InvalidArgumentError } = require(PACKAGE)
// Through the package's `exports`, as a user's `require('fencelock/prometheus')`.
const packageRequire = createRequire(path.join(PACKAGE, 'package.json'))
const prometheus = packageRequire('fencelock/prometheus')
const otel = packageRequire('fencelock/otel')
const native = require(path.join(PACKAGE, 'lib', 'native.js'))
const { Registry } = require('prom-client')
const { MeterProvider, PeriodicExportingMetricReader, InMemoryMetricExporter, AggregationTemporality } = require('@opentelemetry/sdk-metrics')
const { BasicTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } = require('@opentelemetry/sdk-trace-base')

/** The Prometheus text as `{ families: name -> { help, type }, samples: 'name{labels}' -> value }`. */
function parse (text) {
  const families = new Map()
  const samples = new Map()
  const family = (name) => families.get(name) ?? families.set(name, {}).get(name)
  for (const line of text.split('\n')) {
    let m
    if (line === '') continue
    if ((m = /^# HELP (\S+) (.*)$/.exec(line))) family(m[1]).help = m[2]
    else if ((m = /^# TYPE (\S+) (\S+)$/.exec(line))) family(m[1]).type = m[2]
    else {
      const at = line.lastIndexOf(' ')
      assert.ok(!samples.has(line.slice(0, at)), `one sample per series: ${line}`)
      samples.set(line.slice(0, at), Number(line.slice(at + 1)))
    }
  }
  return { families, samples }
}

/** `samples` minus `before` (a series absent before was 0), without the series that did not change. */
function delta (samples, before) {
  const changed = new Map()
  for (const [key, value] of samples) {
    const d = value - (before.get(key) ?? 0)
    if (d !== 0 || !before.has(key)) changed.set(key, d)
  }
  return changed
}

/** A series' key as the text writes it: `name{k="v",...}`. */
function key (name, labels) {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${v}"`)
  return pairs.length ? `${name}{${pairs.join(',')}}` : name
}

/**
 * The instruments of docs/observability.md's table (its section "The instruments"; the others
 * are the `fencelock` command's own): `[name, type, unit, labels]` in order.
 */
function table () {
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'observability.md'), 'utf8')
  const section = /^## The instruments\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(doc)
  assert.ok(section, 'docs/observability.md has a section "The instruments"')
  return [...section[1].matchAll(/^\| `(\w+)` \| (\w+) \| ([\w-]+) \| ([\w, ]+) \|/gm)]
    .map(([, name, type, unit, labels]) => [name, type, unit === '-' ? '' : unit, labels.split(',').map((l) => l.trim())])
}

let server
let client
let registry
let reader
let metricExporter
let meterProvider
let spanExporter
let tracerProvider
let instrumentation
let before
const run = {}

test.before(async () => {
  server = await startServer()
  client = new Client(server.url)
  registry = new Registry()
  prometheus.register(registry)
  metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
  reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 })
  meterProvider = new MeterProvider({ readers: [reader] })
  spanExporter = new InMemorySpanExporter()
  tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spanExporter)] })
  instrumentation = otel.instrument({ meterProvider, tracerProvider })
  before = parse(await registry.metrics()).samples
  await script()
})

test.after(async () => {
  instrumentation?.stop()
  await meterProvider?.shutdown()
  await tracerProvider?.shutdown()
  await client?.close()
})

/** The scripted run (what each test checks a side of). */
async function script () {
  // Two grants; a try while the first is held (busy); a wait the release passes the lock to.
  run.contended = uniqueName('contended')
  run.first = await client.lock(run.contended).acquire()
  assert.equal(await client.lock(run.contended).tryAcquire(), null)
  const waiting = client.lock(run.contended).acquire()
  await until(async () => (await client.inspect(run.contended)).waiting === 1, 'the waiter in line')
  await sleep(150)
  assert.equal(await run.first.release(), true)
  run.second = await waiting
  assert.equal(await run.second.release(), true)
  // A hold lost: its key deleted by someone else; its renewal finds it gone.
  run.lost = uniqueName('lost')
  const lost = await client.lock(run.lost, { ttl: 600 }).acquire()
  run.lostFence = lost.fence
  server.raw('DEL', `fencelock:{${run.lost}}`)
  assert.equal((await aborted(lost.signal)).reason, 'not_owner')
  assert.equal(await lost.release(), false)
  // A fenced write with the newer fence, then one with the older (refused).
  const store = client.fencedStore(uniqueName('resource'))
  await store.apply(run.second.fence, new Writes().set(uniqueName('key'), 'new'))
  await assert.rejects(store.apply(run.first.fence, new Writes().set(uniqueName('key'), 'old')), (e) => e.code === 'fenced')
  // A run-once: it runs, then its work is done.
  const job = client.once(uniqueName('job'))
  assert.equal((await job.run(() => 'ran')).ran, true)
  assert.equal((await job.run(() => 'again')).ran, false)
  // An election's term.
  const leadership = await client.election(uniqueName('election')).campaign('me')
  assert.equal(await leadership.resign(), true)
}

/** What the run added to each counter and gauge, and how many values each histogram got. */
const EXPECTED = {
  'fencelock_acquisitions_total{kind="lock",outcome="granted"}': 4, // 2 contended, the lost, the run-once's
  'fencelock_acquisitions_total{kind="lock",outcome="busy"}': 1,
  'fencelock_acquisitions_total{kind="election",outcome="granted"}': 1,
  'fencelock_wait_seconds_count{kind="lock"}': 5,
  'fencelock_wait_seconds_count{kind="election"}': 1,
  'fencelock_hold_seconds_count{kind="lock"}': 4,
  'fencelock_hold_seconds_count{kind="election"}': 1,
  'fencelock_held{kind="lock"}': 0,
  'fencelock_held{kind="election"}': 0,
  'fencelock_waiters{kind="lock"}': 0,
  'fencelock_losses_total{kind="lock",reason="not_owner"}': 1,
  'fencelock_renewals_total{outcome="failed"}': 1,
  'fencelock_passes_total{kind="lock",outcome="taken"}': 1,
  'fencelock_fenced_writes_total{outcome="accepted"}': 1,
  'fencelock_fenced_writes_total{outcome="refused"}': 1,
  'fencelock_once_total{outcome="ran"}': 1,
  'fencelock_once_total{outcome="already_done"}': 1,
  'fencelock_terms_total{event="won"}': 1
}

test('prom-client renders every series of the run, with the core\'s names, help, types and values', async () => {
  const text = await registry.metrics()
  const { families, samples } = parse(text)
  for (const instrument of native.metricsInstruments()) {
    assert.deepEqual(families.get(instrument.name), { help: instrument.help, type: instrument.kind }, instrument.name)
  }
  const added = delta(samples, before)
  const histograms = new Map()
  for (const [series, value] of added) {
    const m = /^(fencelock_\w+_seconds)_(bucket|sum|count)\{(.*?)(?:,?le="([^"]+)")?\}$/.exec(series)
    if (m === null || m[2] === 'count') {
      assert.equal(value, EXPECTED[series], `${series} (the run added ${value})`)
      continue
    }
    const labels = `${m[1]}{${m[3]}}`
    if (!histograms.has(labels)) histograms.set(labels, { buckets: [], sum: 0 })
    if (m[2] === 'sum') histograms.get(labels).sum = value
    else histograms.get(labels).buckets.push([m[4], value])
  }
  for (const series of Object.keys(EXPECTED)) assert.ok(added.has(series), `${series} is rendered`)
  // Each histogram: the buckets cumulative, up to +Inf, which is the count.
  const bounds = [...native.metricsBuckets().map(String), '+Inf']
  for (const [labels, { buckets, sum }] of histograms) {
    const count = EXPECTED[labels.replace('{', '_count{')]
    assert.deepEqual(buckets.map(([le]) => le), bounds, labels)
    for (let i = 1; i < buckets.length; i++) assert.ok(buckets[i][1] >= buckets[i - 1][1], `${labels}: cumulative buckets`)
    assert.equal(buckets.at(-1)[1], count, `${labels}: +Inf is the count`)
    assert.ok(sum > 0, `${labels}: a sum`)
  }
  // The contended wait (150 ms and more), and the first hold and the lost one, are above 0.1 s.
  const bucket = (name, le) => added.get(`${name}_bucket{kind="lock",le="${le}"}`)
  assert.ok(bucket('fencelock_wait_seconds', '0.1') <= 4, 'the contended wait is over 0.1 s')
  assert.ok(bucket('fencelock_hold_seconds', '0.1') <= 2, 'two holds are over 0.1 s')
  assert.ok(added.get('fencelock_wait_seconds_sum{kind="lock"}') >= 0.15)
  // The core's own rendering has the same samples.
  const own = parse(native.metricsRender())
  assert.deepEqual([...own.samples].sort(), [...samples].sort())
  for (const [name, family] of own.families) assert.deepEqual(families.get(name), family)
})

/** The last collection of the OTel reader, as `{ samples, descriptors }` in the text's keys. */
async function collected () {
  await reader.forceFlush()
  const samples = new Map()
  const descriptors = new Map()
  for (const scope of metricExporter.getMetrics().at(-1).scopeMetrics) {
    assert.equal(scope.scope.name, 'fencelock')
    for (const { descriptor, dataPoints } of scope.metrics) {
      descriptors.set(descriptor.name, descriptor)
      for (const { attributes, value } of dataPoints) {
        if (typeof value === 'number') {
          samples.set(key(descriptor.name, attributes), value)
          continue
        }
        let below = 0
        value.buckets.counts.forEach((count, at) => {
          below += count
          const le = at < value.buckets.boundaries.length ? String(value.buckets.boundaries[at]) : '+Inf'
          samples.set(key(`${descriptor.name}_bucket`, { ...attributes, le }), below)
        })
        samples.set(key(`${descriptor.name}_sum`, attributes), value.sum)
        samples.set(key(`${descriptor.name}_count`, attributes), value.count)
      }
    }
  }
  return { samples, descriptors }
}

test('an OpenTelemetry reader collects the same values', async () => {
  const { samples, descriptors } = await collected()
  const rendered = parse(await registry.metrics()).samples
  assert.deepEqual([...samples.keys()].sort(), [...rendered.keys()].sort())
  for (const [series, value] of rendered) {
    if (series.includes('_sum{')) assert.ok(Math.abs(samples.get(series) - value) < 1e-9, series)
    else assert.equal(samples.get(series), value, series)
  }
  const types = { counter: 'OBSERVABLE_COUNTER', gauge: 'OBSERVABLE_GAUGE', histogram: 'HISTOGRAM' }
  for (const instrument of native.metricsInstruments()) {
    const descriptor = descriptors.get(instrument.name)
    assert.equal(descriptor.type, types[instrument.kind], instrument.name)
    assert.equal(descriptor.description, instrument.help)
    assert.equal(descriptor.unit, instrument.unit === 'seconds' ? 's' : '')
  }
  // A second collection adds nothing: each histogram value is handed over once.
  const again = (await collected()).samples
  assert.deepEqual(again, samples)
})

test('spans: the acquisitions with their outcome and fence, the holds until their release or loss', async () => {
  const fence = (guard) => Number(guard.fence)
  const spans = () => spanExporter.getFinishedSpans()
  const find = (name, attributes) => spans().filter((s) => s.name === name && Object.entries(attributes).every(([k, v]) => s.attributes[k] === v))
  const ms = (span) => span.duration[0] * 1000 + span.duration[1] / 1e6
  const [waited] = find('fencelock.acquire', { lock: run.contended, fence: fence(run.second) })
  assert.deepEqual(waited.attributes, { lock: run.contended, kind: 'lock', outcome: 'granted', fence: fence(run.second) })
  assert.ok(ms(waited) >= 150, `the acquisition waited (${ms(waited)} ms)`)
  const busy = find('fencelock.acquire', { lock: run.contended, outcome: 'busy' })
  assert.equal(busy.length, 1)
  assert.equal(busy[0].attributes.fence, undefined)
  const [held] = find('fencelock.hold', { lock: run.contended, fence: fence(run.first) })
  assert.deepEqual(held.attributes, { lock: run.contended, kind: 'lock', fence: fence(run.first) })
  assert.deepEqual(held.events, [])
  assert.ok(ms(held) >= 150, `held while the other waited (${ms(held)} ms)`)
  await until(() => find('fencelock.hold', { lock: run.lost }).length === 1, 'the lost hold\'s span ends')
  const [lost] = find('fencelock.hold', { lock: run.lost })
  assert.equal(lost.attributes.fence, Number(run.lostFence))
  assert.deepEqual(lost.events.map((e) => [e.name, e.attributes]), [['lock lost', { reason: 'not_owner' }]])
  // Only the lock requests are traced (a run-once's lock and an election's are not requests).
  assert.equal(find('fencelock.acquire', {}).length, 4)
})

test('every export names the instruments of docs/observability.md\'s table', async () => {
  const documented = table()
  assert.ok(documented.length >= 11, `the table has ${documented.length} instruments`)
  const names = documented.map(([name]) => name)
  // The core's list, with the table's types, units and labels.
  const instruments = native.metricsInstruments()
  assert.deepEqual(instruments.map((i) => [i.name, i.kind, i.unit, i.labels]), documented)
  // prom-client's families, in a fresh registry.
  const fresh = new Registry()
  prometheus.register(fresh)
  const { families } = parse(await fresh.metrics())
  assert.deepEqual([...families.keys()], names)
  assert.deepEqual([...families.values()].map((f) => f.type), documented.map(([, type]) => type))
  // The instruments OTel is given, and those an SDK reader collects (every one has series).
  const made = []
  const meter = {
    createObservableCounter: (name) => { made.push([name, 'counter']); return {} },
    createObservableGauge: (name) => { made.push([name, 'gauge']); return {} },
    createHistogram: (name, options) => {
      made.push([name, 'histogram'])
      assert.deepEqual(options.advice.explicitBucketBoundaries, native.metricsBuckets())
      return { record () {} }
    },
    addBatchObservableCallback () {},
    removeBatchObservableCallback () {}
  }
  otel.instrument({ meterProvider: { getMeter: () => meter } }).stop()
  assert.deepEqual(made, documented.map(([name, type]) => [name, type]))
  assert.deepEqual([...(await collected()).descriptors.keys()].sort(), [...names].sort())
})

test('options: a bad lockLabels or option is an InvalidArgumentError, and changes nothing', async () => {
  for (const lockLabels of ['account', 3, [['a*']], [['a*', 1]], { 'a*': 1 }]) {
    assert.throws(() => prometheus.register(registry, { lockLabels }), (e) => e instanceof InvalidArgumentError && e.option === 'lockLabels' && /must be false/.test(e.message))
    assert.throws(() => native.metricsEnable(lockLabels), (e) => e instanceof TypeError && e.code === 'invalid_argument')
  }
  assert.throws(() => otel.instrument({ meter: {} }), (e) => e instanceof InvalidArgumentError && e.option === 'meter')
  assert.throws(() => otel.instrument({ tracerProvider: {} }), (e) => e instanceof InvalidArgumentError && e.option === 'tracerProvider')
  assert.throws(() => prometheus.register({}), TypeError)
  // Still no `lock` label.
  const name = uniqueName('unlabelled')
  await (await client.lock(name).acquire()).release()
  assert.ok(!(await registry.metrics()).includes('lock="'))
})

test('lockLabels by pattern: account:* as "account", any other name as "other"', async () => {
  prometheus.register(registry, { lockLabels: { 'account:*': 'account' } })
  try {
    const before = parse(await registry.metrics()).samples
    await (await client.lock(`account:${uniqueName()}`).acquire()).release()
    await (await client.lock(uniqueName('reports')).acquire()).release()
    const added = delta(parse(await registry.metrics()).samples, before)
    for (const lock of ['account', 'other']) {
      assert.equal(added.get(`fencelock_acquisitions_total{kind="lock",outcome="granted",lock="${lock}"}`), 1, lock)
      assert.equal(added.get(`fencelock_hold_seconds_count{kind="lock",lock="${lock}"}`), 1, lock)
      assert.equal(added.get(`fencelock_held{kind="lock",lock="${lock}"}`), 0, lock)
    }
    const otelSamples = (await collected()).samples
    assert.equal(otelSamples.get('fencelock_acquisitions_total{kind="lock",outcome="granted",lock="account"}'), 1)
    assert.equal(otelSamples.get('fencelock_hold_seconds_count{kind="lock",lock="other"}'), 1)
  } finally {
    prometheus.register(registry)
  }
})

test('spans of a wait that times out or is aborted; after stop(), nothing is traced', async () => {
  const name = uniqueName('outcomes')
  const held = await client.lock(name).acquire()
  await assert.rejects(client.lock(name, { wait: 50 }).acquire(), (e) => e.code === 'timed_out')
  const controller = new AbortController()
  const waiting = client.lock(name).acquire({ signal: controller.signal })
  controller.abort(new Error('gave up'))
  await assert.rejects(waiting, /gave up/)
  await held.release()
  const spans = (span) => spanExporter.getFinishedSpans().filter((s) => s.name === span && s.attributes.lock === name)
  await until(() => spans('fencelock.hold').length === 1, 'the hold\'s span ends')
  assert.deepEqual(spans('fencelock.acquire').map((s) => s.attributes.outcome).sort(), ['cancelled', 'granted', 'timed_out'])
  instrumentation.stop()
  const before = spanExporter.getFinishedSpans().length
  await (await client.lock(uniqueName('untraced')).acquire()).release()
  assert.equal(await client.lock(name).tryAcquire().then((guard) => guard.release()), true)
  await sleep(50)
  assert.equal(spanExporter.getFinishedSpans().length, before)
})
