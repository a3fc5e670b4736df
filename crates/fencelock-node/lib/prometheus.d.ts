// `fencelock/prometheus`: fencelock's series in a prom-client registry (prom-client 14 or
// later, an optional peer dependency). Nothing here imports prom-client's types: a registry is
// typed by the method `register` calls (a prom-client `Registry` has it).

/**
 * Whether, and how, the series name their locks as a `lock` label (off by default: one series
 * per lock name could be millions):
 * - `false`, `null` or left out: no `lock` label;
 * - `true`: every lock's name (only for a process with a few fixed names);
 * - `{ pattern: label }` or `[[pattern, label], ...]`: a label by pattern, the first that
 *   matches (`account:*` matches the names that start with `account:`, any other pattern the
 *   name itself); a name none matches is labelled `other`.
 *
 * For a fenced write the name is the resource's, for a run-once the job's key (without its
 * tick), for an election its name. It is the process's setting: the last `register` or
 * `instrument` call's applies to what is recorded after it.
 */
export type LockLabels = boolean | null | Record<string, string> | Array<[string, string]>

/** One fencelock instrument, as a prom-client metric (`registry.getSingleMetric(name)`). */
export interface FencelockMetric {
  /** The instrument's name (`fencelock_acquisitions_total`). */
  name: string
  /** Its `# HELP`. */
  help: string
  /** Its `# TYPE`. */
  type: 'counter' | 'gauge' | 'histogram'
  /** Its labels, besides `lock` (see `LockLabels`). */
  labelNames: string[]
  /** How prom-client's cluster aggregation merges the workers' series: they add up. */
  aggregator: 'sum'
  /** Its series now, as prom-client renders them (histograms: cumulative buckets, `_sum`, `_count`). */
  get (): {
    name: string
    help: string
    type: 'counter' | 'gauge' | 'histogram'
    values: Array<{ value: number, labels: Record<string, string | number>, metricName?: string }>
    aggregator: 'sum'
  }
  /** Does nothing: the counts are the process's, kept by fencelock's core. */
  reset (): void
}

/**
 * The part of a prom-client `Registry` that `register` uses: `registerMetric`, given a
 * `FencelockMetric` (typed `never` so that prom-client's own signature, of its own metric
 * classes, fits).
 */
export interface MetricRegistry {
  registerMetric (metric: never): void
}

/** Options of `register`. */
export interface RegisterOptions {
  /** The `lock` label (default: none). */
  lockLabels?: LockLabels
}

/**
 * Enables fencelock's metrics in this process (from now on the core records what its locks
 * do) and adds its instruments to `registry` (prom-client's default `register` if left out):
 * every instrument of docs/observability.md's table, under its name, help and type, read from
 * the core at each scrape (`await registry.metrics()`). A second call with the same registry
 * adds nothing (its `lockLabels` still applies). Throws an `InvalidArgumentError` for a bad
 * option, and an `Error` if another metrics recorder was installed in the process first (by a
 * native module of its own).
 *
 * ```js
 * const promClient = require('prom-client')
 * require('fencelock/prometheus').register(promClient.register, { lockLabels: { 'account:*': 'account' } })
 * // GET /metrics: res.end(await promClient.register.metrics())
 * ```
 */
export function register (registry?: MetricRegistry | null, options?: RegisterOptions): void
