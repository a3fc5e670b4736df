'use strict'
// One load of the package alone, for a profiler (perf, callgrind) or to compare two builds of
// the package on one machine (run in turns): LOOPS async loops on one client, each
// acquire + release on keys of its own, CYCLES in all. Prints the cycles per second and this
// process's CPU per cycle (the JavaScript, the addon and its runtime thread together).
//
//   node crates/fencelock-node/bench/cycles.js redis://127.0.0.1:6379/ [CYCLES] [LOOPS]
//
// FENCELOCK_NODE_PACKAGE: the fencelock package (default: the directory above this one).

const path = require('node:path')

const fencelock = require(process.env.FENCELOCK_NODE_PACKAGE || path.resolve(__dirname, '..'))

async function main () {
  const [url, cyclesArg = '20000', loopsArg = '32'] = process.argv.slice(2)
  const cycles = Number(cyclesArg)
  const loops = Number(loopsArg)
  if (!url || !(Number.isInteger(cycles) && cycles > 0) || !(Number.isInteger(loops) && loops > 0)) {
    process.stderr.write('usage: node cycles.js URL [CYCLES] [LOOPS]\n')
    process.exit(2)
  }
  const client = new fencelock.Client(url)
  let left = cycles
  const start = process.hrtime.bigint()
  const cpu = process.cpuUsage()
  await Promise.all(Array.from({ length: loops }, async (_, loop) => {
    for (let n = 0; left > 0; n++) {
      left--
      const guard = await client.lock(`cycles:${loop}:${n % 64}`, { ttl: 10000 }).acquire()
      await guard.release()
    }
  }))
  const seconds = Number(process.hrtime.bigint() - start) / 1e9
  const used = process.cpuUsage(cpu)
  await client.close()
  console.log(JSON.stringify({
    cycles,
    loops,
    per_s: Math.round(cycles / seconds),
    cpu_us_per_cycle: Number(((used.user + used.system) / cycles).toFixed(1))
  }))
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
