// `fencelock/bullmq`: BullMQ processors that run each repetition of a repeatable job once across
// workers, and that hold one of a semaphore's permits while they run. BullMQ 5 or 6 (an
// optional peer dependency); nothing here imports it: the jobs are typed by the fields read.

import type { Client, Guard } from '../index.js'

/** The fields of a BullMQ `Job` that the wrappers read (a BullMQ `Job` has them all). */
export interface BullJob {
  /** The job's name (`queue.add(name, ...)`, a job scheduler's template name). */
  name: string
  /** The job's id; a repetition's is `repeat:<key>:<millis>` (the time it was planned for). */
  id?: string
  /** Set on the repetitions of a repeatable job (the job scheduler's id, or the repeat key). */
  repeatJobKey?: string
}

/** What a processor gets beside the job: BullMQ's token and signal, and the wrappers' own fields. */
export interface ProcessorContext {
  /** BullMQ's token for the job (the processor's second argument without fencelock). */
  token?: string
  /**
   * BullMQ's signal (aborts when the job is cancelled); under `limitConcurrency`, it also
   * aborts when the permit is lost.
   */
  signal?: AbortSignal
}

/** What `oncePerRepetition`'s processor gets beside the job. */
export interface RepetitionContext extends ProcessorContext {
  /** The fence of this run (of the run-once lock): pass it to what the processor writes. */
  fence: bigint
  /** The time BullMQ planned the repetition for; `null` for a job that is not a repetition. */
  tick: Date | null
}

/** What `limitConcurrency`'s processor gets beside the job. */
export interface PermitContext extends ProcessorContext {
  /** The permit held while the processor runs (its `fence`, its `signal`). */
  guard: Guard
  /** Aborts when the permit is lost, or when BullMQ cancels the job. */
  signal: AbortSignal
}

/**
 * A wrapped processor: what `new Worker(queue, processor)` takes. Its second argument is
 * BullMQ's token, or the context of another wrapper of `fencelock/bullmq` that wraps it.
 */
export type WrappedProcessor<J, R> = (job: J, token?: string | ProcessorContext, signal?: AbortSignal) => Promise<R>

/** Options of `oncePerRepetition`. */
export interface OncePerRepetitionOptions<J> {
  /**
   * The run-once key (a string, or a function of the job): default the job's name. Its
   * repetitions are recorded as `KEY@TICK` (`fencelock:once:{KEY}:KEY@TICK`); a job that is not
   * a repetition as `KEY/ID`.
   */
  job?: string | ((job: J) => string)
  /** The run-once lock's lease (ms, default 30 000), renewed while the processor runs. */
  ttl?: number
  /**
   * How long the record of a run is kept (ms, default 7 days): at least as long as a
   * duplicate of the job can come (a re-delivery, a retry, another scheduler's repetition).
   */
  keep?: number
  /**
   * After this many failed runs of a repetition (of a job), its deliveries run nothing and
   * fail with an `UnrecoverableError`: a whole number, default 3 for a repetition, any number
   * for a job that is not one.
   */
  attempts?: number
  /** Who holds the run-once lock while the processor runs (as `LockOptions.label`). */
  label?: string
}

/** Options of `limitConcurrency`. */
export interface LimitConcurrencyOptions {
  /** The semaphore's name: every worker that shares the limit uses the same one. */
  name: string
  /** How many jobs may run at once, across every worker. */
  permits: number
  /** A permit's lease (ms, default 30 000), renewed while the processor runs. */
  ttl?: number
  /** How long a job waits for a permit (ms): `undefined` as long as it takes, `0` not at all (`busy`). */
  wait?: number
  /** Who holds the permit, in your words (as `LockOptions.label`). */
  label?: string
}

/**
 * Wraps a BullMQ processor so that each repetition of a repeatable job runs once across all
 * the workers, whatever BullMQ delivers twice (a stalled job, a retry, the same repetition
 * from two job schedulers): under `client.once(key, { tick: { planned } })`, the tick being the
 * time BullMQ planned the repetition for. A job that is not a repetition runs once per job id.
 * Resolves the processor's value when it ran, `undefined` when the repetition was done before.
 */
export function oncePerRepetition<J extends BullJob, R> (
  client: Client,
  processor: (job: J, context: RepetitionContext) => R | Promise<R>,
  options?: OncePerRepetitionOptions<J>
): WrappedProcessor<J, R | undefined>

/**
 * Wraps a BullMQ processor so that at most `permits` jobs run at once across every worker that
 * uses the semaphore `name`: each job holds one permit while the processor runs. Rejects
 * `not_held` if the processor resolved after its permit was lost.
 */
export function limitConcurrency<J, R> (
  client: Client,
  processor: (job: J, context: PermitContext) => R | Promise<R>,
  options: LimitConcurrencyOptions
): WrappedProcessor<J, R>

/**
 * The time BullMQ planned the repetition `job` is for, from its id (`repeat:<key>:<millis>`):
 * the tick `oncePerRepetition` runs it under; `null` for a job that is not a repetition.
 */
export function plannedTime (job: BullJob): Date | null
