// `fencelock/otel`: fencelock's instruments in an OpenTelemetry meter, and spans of its
// acquisitions and holds (`@opentelemetry/api` 1.3 or later, an optional peer dependency).

import type { MeterProvider, TracerProvider } from '@opentelemetry/api'
import type { LockLabels } from './prometheus.js'

export type { LockLabels }

/** Options of `instrument`. */
export interface InstrumentOptions {
  /** Where the instruments go (default: `@opentelemetry/api`'s global meter provider). */
  meterProvider?: MeterProvider
  /**
   * Where the spans go: without one, nothing is traced (and an acquisition costs nothing
   * more). `trace.getTracerProvider()` of `@opentelemetry/api` is the global one.
   */
  tracerProvider?: TracerProvider
  /** The `lock` label of the series (default: none). */
  lockLabels?: LockLabels
}

/** What `instrument` set up. */
export interface Instrumentation {
  /**
   * Stops feeding its instruments (they stay in the meter) and, if it traces, stops tracing
   * (unless a later `instrument` call traces instead). Stopping twice is harmless.
   */
  stop (): void
}

/**
 * Enables fencelock's metrics in this process and reports them through the meter `fencelock`
 * of `meterProvider`: every instrument of docs/observability.md's table under its name, with
 * its help as description (unit `s` for the histograms), the table's labels as attributes.
 * Counters and gauges are observable instruments read from the core at each collection; the
 * histograms (`fencelock_wait_seconds`, `fencelock_hold_seconds`) are synchronous ones with
 * the core's buckets as advice, fed at each collection with every value recorded since the
 * last (at most 65 536 between two collections; the Prometheus export counts them all).
 *
 * With a `tracerProvider`, the package's acquisitions (`lock`, `fairLock`, `semaphore`, the
 * sides of a read-write lock, a reentrant lock's: `acquire`, `tryAcquire`, `using`) are
 * traced by the tracer `fencelock`:
 * - `fencelock.acquire`, from the request to its outcome, with the attributes `lock` (the
 *   name), `kind` (as the series' label: `lock`, `fair lock`, ...), `outcome` (`granted`,
 *   `busy`, `timed_out`, `failed`, or `cancelled` when the caller's signal aborted it) and
 *   `fence` once granted (a number; its decimal text beyond 2^53);
 * - `fencelock.hold`, from the grant to the release or the loss (`lock`, `kind`, `fence`), a
 *   loss being an event `lock lost` with the attribute `reason` (`not_owner`, `expired`,
 *   `max_hold_reached`).
 *
 * Throws an `InvalidArgumentError` for a bad option, and an `Error` if another metrics
 * recorder was installed in the process first.
 */
export function instrument (options?: InstrumentOptions): Instrumentation
