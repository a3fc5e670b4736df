'use strict'
// Leader election: campaign for a leadership (a lock with a term and an announced value), read
// the leader, or observe the leaders as they change.

const { Held } = require('./held')
const { run, cancellable } = require('./run')
const { checkOptions, checkName } = require('./options')

/** A leader as its record says: `value`, `term` (a `bigint` fence) and `since` (a `Date`). */
function leader (native) {
  return { value: native.value, term: native.term, since: new Date(native.since) }
}

/** This process leads an election until it resigns or the leadership is lost. */
class Leadership extends Held {
  get _what () {
    return 'the leadership of'
  }

  get _label () {
    return this._native.election
  }

  /** The election's name. */
  get election () {
    return this._native.election
  }

  /** The term (a `bigint`): a fence, strictly larger than every earlier leader's. */
  get term () {
    return this._native.term
  }

  /** When the term began (the server's clock). */
  get since () {
    return new Date(this._native.since)
  }

  /** The value announced last in this term. */
  get value () {
    return this._native.value
  }

  /** Announces a new value in this term; rejects `not_leader` if this process no longer leads. */
  proclaim (value) {
    return run(this._native.proclaim(String(value)))
  }

  /** Steps down: `true` if this process still led. */
  resign () {
    return this._giveBack()
  }
}

/** One election (`client.election(name)`). */
class Election {
  #client
  #scope

  /** @internal */
  constructor (client, name, scope) {
    checkName(name)
    scope.check(name)
    this.#client = client
    this.#scope = scope
    this.name = name
  }

  /**
   * Waits to lead (`wait`: `undefined` as long as it takes, `0` not at all, else milliseconds)
   * and gives the leadership; `label` labels the leadership's hold (as a lock's: `inspect`
   * shows it; the value is what the election's readers see). Rejects `busy` or `timed_out`
   * when someone else leads and the wait is over, or the signal's reason when `signal` aborts.
   */
  async campaign (value, options = {}) {
    const { ttl, wait, label, signal } = checkOptions(this.name, options, { ttl: 'ms', wait: 'ms', label: 'string', signal: 'signal' })
    const scope = this.#scope
    return scope.during(signal, async (either) => scope.adopt(new Leadership(await cancellable(
      either,
      (cancel) => this.#client.campaign(this.name, String(value), ttl, wait, label, cancel),
      (leadership) => leadership.resign()
    ), scope), this.name))
  }

  /** The current leader, or `null`. */
  async leader () {
    this.#scope.check(this.name)
    const found = await run(this.#client.leader(this.name))
    return found ? leader(found) : null
  }

  /**
   * The leaders as they change: `{ code: "leader", value, term, since }`, `{ code: "vacant" }`
   * (nobody leads) or `{ code: "gap" }` (announcements may have been missed; the current
   * leader follows). The first is the leader now. Ends when `signal` aborts.
   */
  async * observe (options = {}) {
    const { signal } = checkOptions(this.name, options, { signal: 'signal' })
    this.#scope.check(this.name)
    const observer = await run(this.#client.observe(this.name))
    const [either, dispose] = this.#scope.combine(signal)
    try {
      while (true) {
        let seen
        try {
          seen = await cancellable(either, (cancel) => observer.next(undefined, cancel))
        } catch (error) {
          if (signal && signal.aborted && error === signal.reason) return
          throw error
        }
        if (seen === null) return
        yield seen.code === 'leader' ? { code: 'leader', ...leader(seen.leader) } : { code: seen.code }
      }
    } finally {
      dispose()
    }
  }
}

module.exports = { Election, Leadership }
