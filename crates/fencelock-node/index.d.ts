// Type declarations of fencelock's Node.js package (index.js). Durations are milliseconds;
// fences and terms are bigints.

/** The codes a `FencelockError` can have: the Rust core's `Error::code`. */
export type ErrorCode =
  | 'invalid_argument' | 'config' | 'timed_out' | 'busy' | 'not_held' | 'not_leader'
  | 'unreachable' | 'no_quorum' | 'tls' | 'not_replicated' | 'auth_failed'
  | 'permission_denied' | 'redis' | 'wrong_type' | 'fenced' | 'fenced_wrong_type' | 'sql'
  | 'conflict' | 'random_source' | 'unsupported' | 'closed'

/** Why a hold ended (a `not_held` error's `reason`). */
export type LostReason = 'not_owner' | 'expired' | 'max_hold_reached' | 'released'

/** A `conflict` error's `conflict`. */
export type ConflictCode = 'other_kind' | 'permits_mismatch' | 'upgrade' | 'write_reentry' | 'reentry_limit'

/** A lock's kind, as `inspect` reads it. */
export type KindCode = 'lock' | 'reentrant' | 'read-write' | 'semaphore' | 'other'

/**
 * An error of fencelock's. `code` says which; `lock` names the lock (or the resource, or the
 * election), `null` when there is none; the other fields are those of the code, for example
 * `remaining` (ms) for `busy`, `waited` (ms) for `timed_out`, `reason` for `not_held`,
 * `server` for `unreachable`, `fence` and `accepted` (bigints) for `fenced`.
 */
export class FencelockError extends Error {
  constructor (message: string, fields?: { code?: ErrorCode, lock?: string | null, cause?: unknown, [field: string]: unknown })
  /** The class's name: `FencelockError`, or the subclass's (`BusyError`, ...). */
  readonly name: string
  readonly code: ErrorCode
  readonly lock: string | null
  readonly [field: string]: unknown
  /** Every code a `FencelockError` can have. */
  static readonly CODES: readonly ErrorCode[]
}

/**
 * One subclass of `FencelockError` per code, for `instanceof` (each keeps its `code`):
 *
 * ```ts
 * try {
 *   await client.lock('jobs', { wait: 0 }).acquire()
 * } catch (err) {
 *   if (err instanceof BusyError) console.log('held elsewhere for', err.remaining, 'ms')
 *   else throw err
 * }
 * ```
 */
export class InvalidArgumentError extends FencelockError {
  /** `closed` for its subclass `ClientClosedError`. */
  readonly code: 'invalid_argument' | 'closed'
  /** What was wrong. */
  readonly reason: string
  /** The option at fault, when an option was (`wait`, `ttl`, ...). */
  readonly option?: string
}
/** A bad client configuration (a URL, a TLS file, an option of the client). */
export class ConfigError extends FencelockError { readonly code: 'config'; readonly reason: string; readonly option?: string }
/** The wait ran out (`waited`, ms). */
export class TimedOutError extends FencelockError { readonly code: 'timed_out' }
/** Held by another owner, and the request did not wait (`remaining`: ms left on its lease). */
export class BusyError extends FencelockError { readonly code: 'busy' }
/** No longer held (`reason`: why). */
export class NotHeldError extends FencelockError { readonly code: 'not_held'; readonly reason: LostReason }
export class NotLeaderError extends FencelockError { readonly code: 'not_leader' }
export class UnreachableError extends FencelockError { readonly code: 'unreachable' }
export class NoQuorumError extends FencelockError { readonly code: 'no_quorum' }
export class TlsError extends FencelockError { readonly code: 'tls' }
export class NotReplicatedError extends FencelockError { readonly code: 'not_replicated' }
export class AuthFailedError extends FencelockError { readonly code: 'auth_failed' }
export class PermissionDeniedError extends FencelockError { readonly code: 'permission_denied' }
export class RedisError extends FencelockError { readonly code: 'redis' }
export class WrongTypeError extends FencelockError { readonly code: 'wrong_type' }
/** A fence older than the newest the resource accepted: nothing written. */
export class FencedError extends FencelockError {
  readonly code: 'fenced'
  /** The resource (the fenced store's). */
  readonly resource: string
  /** The fence the write carried, refused. */
  readonly fence: bigint
  /** The newest fence the resource accepted. */
  readonly accepted: bigint
}
export class FencedWrongTypeError extends FencelockError { readonly code: 'fenced_wrong_type' }
export class SqlError extends FencelockError { readonly code: 'sql' }
export class ConflictError extends FencelockError { readonly code: 'conflict'; readonly conflict: ConflictCode }
export class RandomSourceError extends FencelockError { readonly code: 'random_source' }
export class UnsupportedError extends FencelockError { readonly code: 'unsupported' }
/**
 * A call on a closed client (`client.close()`), or on anything made from it, or a wait its
 * closing ended: code `closed` (the core's `Error::Closed`), an `InvalidArgumentError`
 * (`reason: "closed"`).
 */
export class ClientClosedError extends InvalidArgumentError {
  readonly code: 'closed'
  constructor (lock?: string | null)
}

/**
 * An event's fields, as a logger gets them (the event's merged over its spans'): `lock`, `kind`
 * and `fence` of the lock it is about, a loss's `reason`, and others (`error`, `server`, ...).
 * A whole number is a `number` when it is a safe integer (every fence is: microseconds of the
 * server's clock), a `bigint` when it is larger; the rest are strings.
 */
export interface LogFields {
  lock?: string
  kind?: string
  fence?: number | bigint
  reason?: string
  [field: string]: string | number | bigint | undefined
}

/**
 * Where the library's log goes instead of standard error. Each event is given to the method of
 * its level as `(line, fields)`, winston's `(message, meta)`: one line of text, then the
 * event's fields. A winston logger keeps both as it is; a pino logger logs the line but drops
 * the fields unless they are turned round: `{ warn: (line, fields) => log.warn(fields, line),
 * ... }`. A missing method falls back to a more severe one the logger has (`debug` to `info` to
 * `warn` to `error`).
 */
export interface Logger {
  error?: (line: string, fields: LogFields) => unknown
  warn?: (line: string, fields: LogFields) => unknown
  info?: (line: string, fields: LogFields) => unknown
  debug?: (line: string, fields: LogFields) => unknown
}

/** Options of every client. */
export interface ClientOptions {
  /**
   * Prefix of every key fencelock writes (default `fencelock`), without the colon fencelock puts
   * between it and a lock's name (keys are `PREFIX:{NAME}`): a prefix ending with `:` is refused
   * (`FencelockError` with code `config`).
   */
  keyPrefix?: string
  /** Bound on each command (ms). */
  commandTimeout?: number
  /** Redlock: bound on each instance's answer (ms). */
  instanceTimeout?: number
  /** TLS for `rediss://` URLs: PEM certificates and key, as strings or bytes. */
  tls?: { ca?: string | Uint8Array, cert?: string | Uint8Array, key?: string | Uint8Array }
  /** After each grant, wait for this many replicas to acknowledge it (`WAIT`). */
  waitForReplicas?: number
  /** How long to wait for them (ms). */
  replicaTimeout?: number
  /** When fewer acknowledge: refuse the grant (`"fail"`, the default) or log and go on. */
  replicaShortfall?: 'fail' | 'warn'
  /** Sentinel: the master's user and password (the sentinels' are in their URLs). */
  masterUsername?: string
  masterPassword?: string
  /**
   * The library's warnings (a lost lock, a failed renewal) go to this logger instead of
   * standard error, while the client is open, as `(line, fields)`: `new Client(url, { logger:
   * winston.createLogger(...) })`. Their level is `FENCELOCK_LOG`'s (default `warn`).
   */
  logger?: Logger
}

/** Options of a lock request. */
export interface LockOptions {
  /** The lease (ms, default 30 000), renewed in the background while held. */
  ttl?: number
  /** How long to wait (ms): `undefined` as long as it takes, `0` not at all. */
  wait?: number
  /** Stop renewing after this long (ms): the lock then lapses at the end of its lease. */
  maxHold?: number
  /** `false`: no renewal (extend by hand). */
  autoRenew?: boolean
  /** If the lease runs out without a release, grant nobody for this long (ms). */
  lockDelay?: number
  /** Fair locks: a waiter that stops renewing its place loses it after this long (ms). */
  queueTimeout?: number
  /**
   * Who holds it, in your words (a host and a PID, say; at most 128 bytes, no control
   * characters), which `inspect` shows: one command more per grant, renewal and release.
   */
  label?: string
}

/** Options of a semaphore request. */
export interface SemaphoreOptions extends LockOptions {
  /** How many permits to hold, with one lease and one fence (default 1). */
  take?: number
}

export interface WaitOptions {
  /** Gives the wait up: the promise rejects with the signal's reason, nothing held. */
  signal?: AbortSignal
}

/** Something held: a guard, a multi-lock guard, a leadership. */
declare abstract class Held implements AsyncDisposable {
  /** Whether it is still held, as far as this process can tell now. */
  isHeld (): boolean
  /** `null` while held; then why it ended. */
  readonly lostReason: LostReason | null
  /**
   * Aborts when the hold is lost, and only then: its reason is a `NotHeldError` whose
   * `reason` says why (`not_owner`, `expired`, `max_hold_reached`). A release (a resignation,
   * the end of `using`, the client's `close()`) ends the hold without aborting it, so an abort
   * always means failure:
   *
   * ```ts
   * const guard = await client.lock('report').acquire()
   * guard.signal.addEventListener('abort', () => {
   *   // Lost, never released: guard.signal.reason.reason is 'not_owner', 'expired' or 'max_hold_reached'.
   *   console.error(guard.signal.reason.message)
   * })
   * await writeReport({ signal: guard.signal }) // stops if the lock is lost
   * await guard.release() // the listener does not run
   * ```
   *
   * While it is held, a hold keeps the process alive (as a timer does): a program that only
   * awaits its signal runs until the loss. Release it (or close its client) to let the process
   * exit.
   */
  readonly signal: AbortSignal
  /** `await using`: gives it back at the end of the block. */
  [Symbol.asyncDispose] (): Promise<void>
}

/** A held lock. */
export class Guard extends Held {
  private constructor ()
  readonly name: string
  /** The fence: strictly larger than every earlier holder's. */
  readonly fence: bigint
  /** What is left of the lease (ms), as this process knows it. */
  remaining (): number
  /** Re-arms the lease for `ttl` ms; rejects `not_held` if it was lost. */
  extend (ttl: number): Promise<void>
  /** Releases it: `true` if it was still held. */
  release (): Promise<boolean>
  /** Aborts when someone asks for this lock (`client.requestRelease`) while it is held. */
  readonly releaseRequested: AbortSignal
}

/** A request for a lock: acquire it, try once, or hold it around a function. */
export class LockRequest {
  private constructor ()
  readonly name: string
  /**
   * Waits for the lock and gives its guard. Rejects `timed_out` when the wait runs out, `busy`
   * with `wait: 0`, another `FencelockError`, or the signal's reason when it aborts (nothing
   * held, the place in line left).
   */
  acquire (options?: WaitOptions): Promise<Guard>
  /** One try: the guard, or `null` if another owner holds the lock. */
  tryAcquire (): Promise<Guard | null>
  /** Runs `fn(signal, guard)` holding the lock, and releases it after, whatever happens. */
  using<T> (fn: (signal: AbortSignal, guard: Guard) => T | Promise<T>, options?: WaitOptions): Promise<T>
}

/** A reentrant lock: the acquisitions made through one handle share one owner. */
export class ReentrantLock {
  private constructor ()
  readonly name: string
  request (options?: LockOptions): LockRequest
  acquire (options?: LockOptions & WaitOptions): Promise<Guard>
  tryAcquire (options?: LockOptions): Promise<Guard | null>
}

/** A read-write lock: many readers, or one writer. */
export class ReadWriteLock {
  private constructor ()
  readonly name: string
  read (options?: LockOptions): LockRequest
  write (options?: LockOptions): LockRequest
}

/** Several plain locks held together. */
export class MultiGuard extends Held {
  private constructor ()
  /** The names, in the order given. */
  readonly names: string[]
  /** Each name's fence. */
  readonly fences: Map<string, bigint>
  /** Releases every name: `true` if every one was still held. */
  release (): Promise<boolean>
}

/** Options of `client.multiLock`: every name's. */
export interface MultiLockOptions {
  /** Each name's lease (ms, default 30 000), renewed while held. */
  ttl?: number
  /** How long to wait in all (ms): `undefined` as long as it takes, `0` not at all. */
  wait?: number
  /** Who holds every name, in your words (as `LockOptions.label`): `inspect` shows it on each. */
  label?: string
}

/** A request for several plain locks at once: all or none, deadlock-free whatever the order. */
export class MultiLockRequest {
  private constructor ()
  readonly names: string[]
  acquire (options?: WaitOptions): Promise<MultiGuard>
  using<T> (fn: (signal: AbortSignal, guard: MultiGuard) => T | Promise<T>, options?: WaitOptions): Promise<T>
}

/**
 * Which tick of a scheduled job a run belongs to (docs/schedulers.md): the record is then
 * `KEY@TICK` (the tick's beginning, UTC, to the millisecond), so every start of one tick finds
 * the record of the one that did the work.
 *
 * - `{ every }`: the Redis server's clock floored to `every` ms (periods counted from the Unix
 *   epoch, in UTC); a start up to `early` ms before a tick belongs to it (default 5 000, at most a
 *   tenth of the period; less than half of it); a start more than `late` ms after its tick began
 *   runs nothing (default: any start within the period runs its tick).
 * - `{ planned }`: the time the scheduler planned the run for (a `Date`, or ms since the epoch),
 *   the same for every worker it fires and for the run's retries.
 */
export type OnceTick =
  | { every: number, early?: number, late?: number, planned?: undefined }
  | { planned: Date | number, every?: undefined, early?: undefined, late?: undefined }

/** Options of `client.once`. */
export interface OnceOptions {
  /** The lock the runs take turns on (default: the key). */
  lock?: string
  /** The lock's lease (ms, default 30 000), renewed while the work runs. */
  ttl?: number
  /** How long to wait for the lock (ms): `undefined` as long as it takes, `0` not at all. */
  wait?: number
  /** Who holds the lock while the work runs, in your words (as `LockOptions.label`). */
  label?: string
  /**
   * How long the record is kept (ms) after the run that did the work recorded it: default for
   * ever, with a `tick` 7 days; with `tick.every`, at least twice the period (shorter is
   * refused). Once it expires, the work may run again.
   */
  keep?: number
  /** Once per tick of a scheduled job (see `OnceTick`). */
  tick?: OnceTick
  /**
   * How many runs of the key (of a tick, with `tick`) may fail (their `work` threw) before a
   * start gives up and runs nothing (`OnceGaveUp`): a whole number, default any number, with a
   * `tick` 3 (0 is refused). The count is kept as long as the record; a run that succeeds
   * clears it.
   */
  attempts?: number
}

/** `Once.run`'s result when this run did the work: what `work` gave, and its tick. */
export interface OnceRan<T> {
  ran: true
  value: T
  fence: bigint
  /** The tick the work was done for (its beginning), `null` without a tick. */
  tick: Date | null
}

/** `Once.run`'s result when the work was done before: the record of the run that did it. */
export interface OnceDone {
  ran: false
  tooLate: false
  /** `false` (see `OnceGaveUp`). */
  gaveUp?: false
  fence: bigint
  /** When it was recorded, by the server's clock. */
  at: Date
  /** The tick it was done for (its beginning), `null` without a tick. */
  tick: Date | null
}

/** `Once.run`'s result when this start came too late for its tick (`tick.late`): nothing ran. */
export interface OnceTooLate {
  ran: false
  tooLate: true
  /** `false` (see `OnceGaveUp`). */
  gaveUp?: false
  /** When the tick began. */
  tick: Date
  /** How long after it this start came (ms, by the server's clock). */
  late: number
}

/**
 * `Once.run`'s result when as many runs of the key (of the tick) failed as `attempts` allows
 * (with a tick, 3 by default): nothing ran.
 */
export interface OnceGaveUp {
  ran: false
  tooLate: false
  gaveUp: true
  /** How many runs failed. */
  failures: number
  /** The tick (its beginning), `null` without a tick. */
  tick: Date | null
}

/**
 * What `Once.run` came to. `Late` is what a start may also come to: `OnceTooLate | OnceGaveUp`
 * for a run-once with a tick (a start can come too late for it, and gives up after `attempts`
 * failed runs), `OnceGaveUp` with `attempts` and no tick, `never` with neither.
 */
export type OnceResult<T, Late extends OnceTooLate | OnceGaveUp = never> = OnceRan<T> | OnceDone | Late

/** Work done once across the fleet (`client.once`). */
export class Once<Late extends OnceTooLate | OnceGaveUp = never> {
  private constructor ()
  readonly key: string
  /**
   * Calls `work(fence, tick, signal)` unless the work was done (or, with a tick, the start is
   * too late for it; or `attempts` runs failed), and records it if `work` resolves (nothing if
   * it throws: the run is counted as failed). `signal` aborts, as a guard's does, if the run's
   * lock is lost while the work runs: its reason is a `NotHeldError` whose `reason` says why
   * (`not_owner`, `expired`, `max_hold_reached`); the release after the work does not abort it.
   * Rejects `fenced` if this run lost its lock to a newer one meanwhile.
   */
  run<T> (work: (fence: bigint, tick: Date | null, signal: AbortSignal) => T | Promise<T>, options?: WaitOptions): Promise<OnceResult<T, Late>>
}

/** Writes applied together by a fenced store. */
export class Writes {
  constructor ()
  set (key: string, value: string | Uint8Array | number | bigint): this
  /** `SET` with `PX` (ms). */
  setWithTtl (key: string, value: string | Uint8Array | number | bigint, ttl: number): this
  del (key: string): this
  hset (key: string, field: string | Uint8Array, value: string | Uint8Array | number | bigint): this
  hdel (key: string, field: string | Uint8Array): this
  incrBy (key: string, by: number): this
  /** `PEXPIRE` (ms). */
  pexpire (key: string, ttl: number): this
  rpush (key: string, value: string | Uint8Array | number | bigint): this
  lpush (key: string, value: string | Uint8Array | number | bigint): this
  sadd (key: string, member: string | Uint8Array | number | bigint): this
  srem (key: string, member: string | Uint8Array | number | bigint): this
  xadd (key: string, fields: Record<string, string | Uint8Array | number | bigint> | Array<[string, string | Uint8Array | number | bigint]>): this
}

/** Writes to a resource that refuse a fence older than the newest it accepted. */
export class FencedStore {
  private constructor ()
  readonly resource: string
  /**
   * Applies `writes` atomically if `fence` is not older than the resource's, and gives the
   * fence now accepted. Rejects `fenced` (nothing written) when a newer fence was accepted.
   */
  apply (fence: bigint | number, writes: Writes): Promise<bigint>
  /** The fence the resource accepted last (`0n`: none yet). */
  accepted (): Promise<bigint>
}

/** A leader as its record says. */
export interface Leader {
  value: string
  /** A fence: strictly larger than every earlier leader's. */
  term: bigint
  since: Date
}

export type Observation =
  | ({ code: 'leader' } & Leader)
  | { code: 'vacant' }
  | { code: 'gap' }

/** This process leads an election until it resigns or the leadership is lost. */
export class Leadership extends Held {
  private constructor ()
  readonly election: string
  readonly term: bigint
  readonly since: Date
  /** The value announced last in this term. */
  readonly value: string
  /** Announces a new value; rejects `not_leader` if this process no longer leads. */
  proclaim (value: string): Promise<void>
  /** Steps down: `true` if it still led. */
  resign (): Promise<boolean>
}

/** Options of `Election.campaign`. */
export interface CampaignOptions extends WaitOptions {
  /** The leadership's lease (ms, default 30 000), renewed while it leads. */
  ttl?: number
  /** How long to wait while another leads (ms): `undefined` as long as it takes, `0` not at all. */
  wait?: number
  /**
   * Who holds the leadership, in your words (as `LockOptions.label`): `inspect` of the
   * election's name shows it (the election's readers see `value`).
   */
  label?: string
}

export class Election {
  private constructor ()
  readonly name: string
  /** Waits to lead (`wait` as for locks) and gives the leadership. */
  campaign (value: string, options?: CampaignOptions): Promise<Leadership>
  /** The current leader, or `null`. */
  leader (): Promise<Leader | null>
  /** The leaders as they change; the first is the leader now. Ends when `signal` aborts. */
  observe (options?: WaitOptions): AsyncGenerator<Observation, void, undefined>
}

/** A holder as `inspect` reads it. */
export interface HolderInfo {
  tokenPrefix: string
  fence: bigint | null
  /** What is left of its lease (ms). */
  remaining: number | null
  /** Reentrant locks: how many times it holds. */
  holds: number | null
  /** Semaphores: how many permits it holds. */
  permits: number | null
  /** Its request's `label`, if it gave one. */
  label: string | null
}

export interface LockInfo {
  name: string
  kind: KindCode | null
  permits: number | null
  holder: HolderInfo | null
  /** Readers, or a semaphore's holders. */
  shared: HolderInfo[]
  waiting: number
  waiters: Array<{ place: number | null, waited: number | null, tokenPrefix: string, side: 'read' | 'write' | null }>
  lastFence: bigint | null
}

export class Client implements AsyncDisposable {
  /**
   * A client for one Redis server (`redis://` or `rediss://` URL). It connects on first use;
   * one client serves a whole process.
   */
  constructor (url: string, options?: ClientOptions)
  /** Redlock over independent servers: a majority must agree. */
  static redlock (urls: string[], options?: ClientOptions): Client
  /** A Redis Cluster, from one or more seed URLs. */
  static cluster (urls: string | string[], options?: ClientOptions): Client
  /** The master that Sentinel names `master`. */
  static sentinel (sentinels: string | string[], master: string, options?: ClientOptions): Client
  /** The server (or servers) this client talks to, without any password. */
  readonly server: string
  lock (name: string, options?: LockOptions): LockRequest
  /** Granted in the order of asking. */
  fairLock (name: string, options?: LockOptions): LockRequest
  /** `take` (default 1) of the semaphore's `permits`, first come, first served. */
  semaphore (name: string, permits: number, options?: SemaphoreOptions): LockRequest
  readWriteLock (name: string): ReadWriteLock
  reentrantLock (name: string, options?: { maxReentry?: number }): ReentrantLock
  /** Holds the plain lock `name` while `fn` runs, and releases it after, whatever happens. */
  using<T> (name: string, options: LockOptions & WaitOptions, fn: (signal: AbortSignal, guard: Guard) => T | Promise<T>): Promise<T>
  using<T> (name: string, fn: (signal: AbortSignal, guard: Guard) => T | Promise<T>): Promise<T>
  multiLock (names: string[], options?: MultiLockOptions): MultiLockRequest
  /**
   * Work to do once, recorded under `key` (with `tick`, once per tick of a scheduled job); runs
   * take turns on `lock` (the key by default).
   */
  once (key: string, options?: OnceOptions & { tick?: undefined, attempts?: undefined }): Once
  once (key: string, options: OnceOptions & { tick?: undefined }): Once<OnceGaveUp>
  once (key: string, options: OnceOptions): Once<OnceTooLate | OnceGaveUp>
  fencedStore (resource: string): FencedStore
  election (name: string): Election
  /** Asks the holders of `name` to release it: `true` if it was held. */
  requestRelease (name: string): Promise<boolean>
  /** The state of lock `name`: its holders and its line. Reads only. */
  inspect (name: string): Promise<LockInfo>
  /** The held locks whose name matches `pattern` (a Redis glob). Reads only. */
  list (pattern?: string): Promise<{ locks: LockInfo[], skipped: FencelockError[], unanswered: string[] }>
  /** Deletes lock `name`, whoever holds it: `true` if it was held. */
  forceRelease (name: string): Promise<boolean>
  /**
   * Closes the client: its waits reject with `ClientClosedError`, what it holds is released
   * (its leaderships resigned), and later calls on it, or on the requests it made, throw
   * `ClientClosedError`. Resolves once the releases are done and the waits it ended have
   * given back their places in line (at most 2 s), and the client's connections are closed
   * (its listener's too), though guards and requests made from it still exist; closing twice
   * is harmless. `await using client = new Client(url)` closes it at the end of the block.
   */
  close (): Promise<void>
  /** Whether `close()` was called. */
  readonly closed: boolean
  [Symbol.asyncDispose] (): Promise<void>
  /** Each release of lock `name` as it happens, until `signal` aborts. */
  releases (name: string, options?: WaitOptions): AsyncGenerator<string, void, undefined>
}

/** The codes of the core's vocabularies. */
export const codes: {
  readonly error: readonly ErrorCode[]
  readonly lost: readonly LostReason[]
  readonly conflict: readonly ConflictCode[]
  readonly observation: ReadonlyArray<Observation['code']>
  readonly kind: readonly KindCode[]
}
/** The package's version. */
export const version: string
/** The wire protocol's version (PROTOCOL.md). */
export const protocolVersion: number
/**
 * Releases what this thread still holds, and waits for the background work, at most 2 s.
 * Runs by itself at the process's exit and a worker's end.
 */
export function shutdown (): void
