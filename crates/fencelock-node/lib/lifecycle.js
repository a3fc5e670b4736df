'use strict'
// The end of a process or a worker leaves nothing held or queued. A worker's end, and the main
// thread's natural exit, run the addon's cleanup hook. `process.exit()` skips that hook on the
// main thread, so the `exit` event ends fencelock too, for good: a grant whose settle is still
// queued, or that lands later, is given back, as is a hold a later `exit` listener makes.
// SIGINT and SIGTERM end the process without an `exit` event: when nobody else listens for
// them, fencelock listens, ends, and raises the signal again, so the process still dies of it.

const native = require('./native')

let ended = false
function end () {
  if (!ended) {
    ended = true
    native.shutdownAtExit()
  }
}

process.once('exit', end)

const { isMainThread } = require('node:worker_threads')
if (isMainThread) {
  for (const name of ['SIGINT', 'SIGTERM']) {
    const onSignal = () => {
      // Someone else handles it: the process goes on, and so do its locks.
      if (process.listenerCount(name) > 0) return
      end()
      process.kill(process.pid, name)
    }
    const install = () => {
      if (process.listenerCount(name) === 0) process.once(name, onSignal)
    }
    install()
    // A listener added later by the program takes over: ours stays, and steps aside (above).
  }
}
