'use strict'
// Fenced writes to Redis: a batch of writes that only goes through with a fence at least as
// new as the last one the resource accepted.

const { run } = require('./run')

function bytes (value, what) {
  if (Buffer.isBuffer(value)) return value
  if (typeof value === 'string') return Buffer.from(value)
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength)
  if (typeof value === 'number' || typeof value === 'bigint') return Buffer.from(String(value))
  throw new TypeError(`${what} must be a string, a Buffer or a number`)
}

/** The writes of one fenced batch, applied atomically (each method returns `this`). */
class Writes {
  /** @internal */
  ops = []

  set (key, value) {
    this.ops.push({ op: 'set', key, value: bytes(value, 'value') })
    return this
  }

  /** `SET` with a time to live in milliseconds. */
  setWithTtl (key, value, ttl) {
    this.ops.push({ op: 'setWithTtl', key, value: bytes(value, 'value'), ttl })
    return this
  }

  del (key) {
    this.ops.push({ op: 'del', key })
    return this
  }

  hset (key, field, value) {
    this.ops.push({ op: 'hset', key, field: bytes(field, 'field'), value: bytes(value, 'value') })
    return this
  }

  hdel (key, field) {
    this.ops.push({ op: 'hdel', key, field: bytes(field, 'field') })
    return this
  }

  /** `INCRBY` (`by` a safe integer). */
  incrBy (key, by) {
    if (!Number.isSafeInteger(by)) throw new TypeError('incrBy takes a safe integer')
    this.ops.push({ op: 'incrBy', key, by })
    return this
  }

  /** `PEXPIRE` (`ttl` in milliseconds). */
  pexpire (key, ttl) {
    this.ops.push({ op: 'pexpire', key, ttl })
    return this
  }

  rpush (key, value) {
    this.ops.push({ op: 'rpush', key, value: bytes(value, 'value') })
    return this
  }

  lpush (key, value) {
    this.ops.push({ op: 'lpush', key, value: bytes(value, 'value') })
    return this
  }

  sadd (key, member) {
    this.ops.push({ op: 'sadd', key, value: bytes(member, 'member') })
    return this
  }

  srem (key, member) {
    this.ops.push({ op: 'srem', key, value: bytes(member, 'member') })
    return this
  }

  /** `XADD key * field value ...` (`fields` an object or `[field, value]` pairs). */
  xadd (key, fields) {
    const pairs = Array.isArray(fields) ? fields : Object.entries(fields)
    const flat = pairs.flatMap(([name, value]) => [bytes(name, 'field'), bytes(value, 'value')])
    this.ops.push({ op: 'xadd', key, fields: flat })
    return this
  }
}

function fence (value) {
  if (typeof value === 'bigint') return value
  if (Number.isSafeInteger(value) && value >= 0) return BigInt(value)
  throw new TypeError('a fence is a bigint (or a safe, non-negative integer)')
}

/** Fenced writes to one resource (`client.fencedStore(resource)`). */
class FencedStore {
  #client
  #scope

  /** @internal */
  constructor (client, resource, scope) {
    this.#client = client
    this.#scope = scope
    this.resource = resource
  }

  /**
   * Applies `writes` (a `Writes`) atomically if `fence` is not older than the resource's, and
   * gives the fence now accepted. Rejects `fenced` (nothing written) when a newer fence was
   * accepted.
   */
  async apply (fenceValue, writes) {
    if (!(writes instanceof Writes)) throw new TypeError('writes must be a fencelock Writes')
    this.#scope.check(this.resource)
    return run(this.#client.fencedApply(this.resource, fence(fenceValue), writes.ops))
  }

  /** The fence the resource accepted last (`0n`: none yet). */
  accepted () {
    this.#scope.check(this.resource)
    return run(this.#client.fencedAccepted(this.resource))
  }
}

module.exports = { Writes, FencedStore }
