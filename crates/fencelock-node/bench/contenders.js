'use strict'
// The contenders: fencelock and its peers on npm, each behind the same small adapter.

const fs = require('node:fs')
const path = require('node:path')

const { default: RedlockV5, ResourceLockedError: V5Locked, ExecutionError: V5Execution } = require('redlock')
const Sesame = require('@sesamecare-oss/redlock')
const { Mutex, RedlockMutex, TimeoutError: SemaphoreTimeout } = require('redis-semaphore')

const FENCELOCK_PACKAGE = process.env.FENCELOCK_NODE_PACKAGE || path.resolve(__dirname, '..')
const fencelock = require(FENCELOCK_PACKAGE)
// Another build of the package (an earlier commit's checkout, its addon beside its sources), run
// as one more contender, "fencelock (baseline)": a before and after in one run.
const BASELINE_PACKAGE = process.env.FENCELOCK_BASELINE_PACKAGE

const { newRedis, closeRedis } = require('./servers')

const TTL = 10000 // ms, every contender's lease
const WAIT = 60000 // ms, the longest a contended acquire may wait (fencelock, redis-semaphore)

/** fencelock, as the package `pkg` gives it. */
function fencelockContender (key, name, pkg) {
  return {
    key,
    name,
    version: pkg.version,
    // Waiters are woken by the server (no polling); `wait` bounds the wait. Over Redlock each
    // call to an instance has its own limit (default: 5 % of the lease, here 500 ms).
    async open (urls) {
      const client = urls.length === 1 ? new pkg.Client(urls[0]) : pkg.Client.redlock(urls)
      return {
        acquire: (key, { wait } = {}) => client.lock(key, { ttl: TTL, wait }).acquire(),
        release: (guard) => guard.release(),
        gaveUp: (error) => error instanceof pkg.FencelockError && error.code === 'timed_out',
        // The package has no close(): its connections go with the client (and the process).
        close: async () => {}
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Contenders. `open(urls)` gives a handle on one client (or, for Redlock, one set of clients):
//   acquire(key, { wait })   the lock `key`, waiting if it is held; rejects as the library does
//   release(handle)          releases it; false if the library says it was no longer held
//   gaveUp(error)            whether `error` is the library giving up a wait (the bench asks again)
//   close()                  closes its connections
// `urls` has one URL (N1-N3) or five (N4, Redlock).

function peerVersion (name) {
  const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, 'node_modules', name, 'package.json'), 'utf8'))
  return String(pkg.version).replace(/^v/, '')
}

/** redlock v5 and @sesamecare-oss/redlock share an API (the latter is a fork of the former). */
function redlockFamily (RedlockClass, LockedError, ExecError) {
  return async (urls) => {
    const opened = []
    const redlock = new RedlockClass(urls.map((url) => newRedis(url, opened)))
    const handle = { otherErrors: 0, lastError: null }
    // Both emit an `error` event for every vote against (the lock being held counts), and an
    // EventEmitter with no `error` listener throws: without this listener the first contended
    // attempt ends in an unhandled rejection. The README shows this very listener.
    redlock.on('error', (error) => {
      if (error instanceof LockedError) return
      handle.otherErrors++
      handle.lastError = error
    })
    return Object.assign(handle, {
      acquire: (key) => redlock.acquire([key], TTL),
      release: async (lock) => {
        await lock.release()
        return true
      },
      gaveUp: (error) => error instanceof ExecError,
      close: () => closeRedis(opened) // what redlock.quit() does, but bounded
    })
  }
}

const CONTENDERS = [
  fencelockContender('fencelock', 'fencelock', fencelock),
  {
    key: 'redlock',
    name: 'redlock v5',
    version: peerVersion('redlock'),
    // Defaults: retryCount 10, retryDelay 200 ms, retryJitter 100 ms (each retry 100-300 ms
    // later), so an acquire gives up (ExecutionError) after ~2 s; the bench then asks again
    // and counts it as "gave up". Resolves at a quorum, without waiting for every instance.
    open: redlockFamily(RedlockV5, V5Locked, V5Execution)
  },
  {
    key: 'sesame',
    name: '@sesamecare-oss/redlock',
    version: peerVersion('@sesamecare-oss/redlock'),
    // The same defaults as redlock v5 (10 retries, 200 ms +/- 100 ms).
    open: redlockFamily(Sesame.Redlock, Sesame.ResourceLockedError, Sesame.ExecutionError)
  },
  {
    key: 'semaphore',
    name: 'redis-semaphore Mutex',
    redlockName: 'redis-semaphore RedlockMutex',
    version: peerVersion('redis-semaphore'),
    // Polls: SET NX every retryInterval (default 10 ms) until acquireTimeout (here 60 s; default
    // 10 s), then TimeoutError. RedlockMutex sends to every instance and waits for all the
    // answers (Promise.all) before counting the votes.
    async open (urls) {
      const opened = []
      const clients = urls.map((url) => newRedis(url, opened))
      const options = { lockTimeout: TTL, acquireTimeout: WAIT }
      return {
        acquire: async (key) => {
          const mutex = clients.length === 1 ? new Mutex(clients[0], key, options) : new RedlockMutex(clients, key, options)
          await mutex.acquire()
          return mutex
        },
        release: async (mutex) => {
          await mutex.release()
          return true
        },
        gaveUp: (error) => error instanceof SemaphoreTimeout,
        close: () => closeRedis(opened)
      }
    }
  }
]

if (BASELINE_PACKAGE) {
  CONTENDERS.splice(1, 0, fencelockContender('baseline', 'fencelock (baseline)', require(path.resolve(BASELINE_PACKAGE))))
}

module.exports = { WAIT, CONTENDERS, peerVersion }
