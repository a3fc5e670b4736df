'use strict'
// The floor of a call from Node.js: one round trip through the package's bridge with no Redis
// I/O (a `Cancel`'s `settled()`, which has nothing to wait for: the call crosses to the
// library's runtime thread and its answer comes back), beside one Redis round trip made on the
// JavaScript thread (ioredis `PING`), each sequential, in turns, ROUNDS times.
//
//   node crates/fencelock-node/bench/handoff.js redis://127.0.0.1:6379/ [CALLS] [ROUNDS]
//
// FENCELOCK_NODE_PACKAGE: the fencelock package (default: the directory above this one).

const path = require('node:path')

const Redis = require('ioredis')

const PACKAGE = process.env.FENCELOCK_NODE_PACKAGE || path.resolve(__dirname, '..')
require(PACKAGE) // installs the bridge
const native = require(path.join(PACKAGE, 'lib', 'native'))

async function timed (calls, call) {
  for (let i = 0; i < Math.min(2000, calls); i++) await call()
  const cpu = process.cpuUsage()
  const start = process.hrtime.bigint()
  for (let i = 0; i < calls; i++) await call()
  const ns = Number(process.hrtime.bigint() - start)
  const used = process.cpuUsage(cpu)
  return { us_per_call: +(ns / calls / 1000).toFixed(1), cpu_us_per_call: +((used.user + used.system) / calls).toFixed(1) }
}

async function main () {
  const [url, callsArg = '20000', roundsArg = '3'] = process.argv.slice(2)
  const calls = Number(callsArg)
  const rounds = Number(roundsArg)
  if (!url || !(Number.isInteger(calls) && calls > 0) || !(Number.isInteger(rounds) && rounds > 0)) {
    process.stderr.write('usage: node handoff.js URL [CALLS] [ROUNDS]\n')
    process.exit(2)
  }
  const redis = new Redis(url)
  const cancel = new native.Cancel()
  try {
    for (let round = 1; round <= rounds; round++) {
      const bridge = await timed(calls, () => cancel.settled())
      const ping = await timed(calls, () => redis.ping())
      console.log(JSON.stringify({ round, bridge, ioredis_ping: ping }))
    }
  } finally {
    redis.disconnect()
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
