'use strict'
// The library's log in the application's logger: while a client has a `logger` option
// (`{ warn, info, debug }`, as pino and winston give; `error` too if it has one), each event of
// the library (a lost lock's warning, a renewal that failed) is a call of its method for the
// event's level, `method(line, fields)`: the event as one line of text first (the message, as
// before), then its fields as an object (`{ lock, kind, fence, reason }` for a lost lock; the
// event's merged over its spans'), as winston's `logger.warn(message, meta)` takes them; pino
// takes them the other way round (`{ warn: (line, fields) => log.warn(fields, line) }`). A
// field is a number when it is a safe integer (every fence is), a `bigint` if larger, else a
// string. A missing method falls back to the next more severe one the logger has, and to
// standard error when it has none. The loggers are this thread's (this module is loaded once
// per thread): the addon keeps one sink per thread, so a worker's never replaces the main
// thread's, nor removes it, and every thread's sink gets each event of the process. With no
// such client in any thread, the log goes to standard error (its level: FENCELOCK_LOG, default
// `warn`), as text.

const native = require('./native')

const FALLBACK = {
  error: ['error', 'warn'],
  warn: ['warn', 'error'],
  info: ['info', 'warn', 'error'],
  debug: ['debug', 'info', 'warn', 'error'],
  trace: ['trace', 'debug', 'info', 'warn', 'error']
}

/** The loggers of this thread's clients that have one, each with how many clients gave it. */
const loggers = new Map()

/** The event's fields (`[{ name, value }]`, in order) as one object, `{ lock, fence, ... }`. */
function fieldsOf (entries) {
  const fields = {}
  for (const { name, value } of entries ?? []) fields[name] = value
  return fields
}

function deliver (level, line, entries) {
  // Colours, when standard error is a terminal, are for the terminal only.
  const text = line.replace(/\x1b\[[0-9;]*m/g, '') // eslint-disable-line no-control-regex
  for (const logger of loggers.keys()) {
    const method = (FALLBACK[level] ?? FALLBACK.warn).find((name) => typeof logger[name] === 'function')
    try {
      if (method === undefined) process.stderr.write(text + '\n')
      // Each logger its own object: a logger may keep it, or change it.
      else logger[method](text, fieldsOf(entries))
    } catch {
      // A logger that throws loses the line; fencelock goes on.
    }
  }
}

function addLogger (logger) {
  loggers.set(logger, (loggers.get(logger) ?? 0) + 1)
  if (loggers.size === 1 && loggers.get(logger) === 1) native.setLogSink(deliver)
}

function removeLogger (logger) {
  const count = loggers.get(logger)
  if (count === undefined) return
  if (count > 1) loggers.set(logger, count - 1)
  else loggers.delete(logger)
  if (loggers.size === 0) native.setLogSink(null)
}

module.exports = { addLogger, removeLogger }
