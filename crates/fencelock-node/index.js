'use strict'
// fencelock for Node.js: fenced distributed locks on Redis, on the same Rust core as the
// Rust library, the Python package and the `fencelock` command (one lock, held by all four).

const native = require('./lib/native')
const { Client } = require('./lib/client')
const { FencelockError, classes: errorClasses } = require('./lib/errors')
const { Election, Leadership } = require('./lib/election')
const { Writes, FencedStore } = require('./lib/fenced')
const { Guard, LockRequest, ReentrantLock, ReadWriteLock } = require('./lib/locks')
const { MultiGuard, MultiLockRequest, Once } = require('./lib/recipes')

module.exports = {
  Client,
  FencelockError,
  // One subclass of FencelockError per code (BusyError, TimedOutError, NotHeldError, ...), and
  // ClientClosedError (code closed, an InvalidArgumentError).
  ...errorClasses,
  Guard,
  LockRequest,
  ReentrantLock,
  ReadWriteLock,
  Election,
  Leadership,
  MultiLockRequest,
  MultiGuard,
  Once,
  FencedStore,
  Writes,
  /** The codes of the core's vocabularies. */
  codes: Object.freeze({
    error: Object.freeze(native.codes('error')),
    lost: Object.freeze(native.codes('lost')),
    conflict: Object.freeze(native.codes('conflict')),
    observation: Object.freeze(native.codes('observation')),
    kind: Object.freeze(native.codes('kind'))
  }),
  /** The package's version. */
  version: native.VERSION,
  /** The wire protocol's version (PROTOCOL.md). */
  protocolVersion: native.PROTOCOL_VERSION,
  /**
   * Releases what this thread still holds (and resigns what it leads), and waits for the
   * background work (a waiter leaving its place in line), at most 2 s. Runs by itself at the
   * process's exit and a worker's end; call it where a program ends otherwise.
   */
  shutdown: native.shutdown
}
