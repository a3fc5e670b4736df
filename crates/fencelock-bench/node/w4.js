// node-redlock (the `redlock` package, 4.2.0, on ioredis) as a contender of fencelock-bench's W4:
// the Redlock algorithm over the instances named on the command line, with its default options.
//
//   node w4.js TTL_MS URL...
//
// Then, for each line `run LABEL SECONDS MAX_CYCLES CYCLE_LIMIT_MS` on stdin, sequential cycles
// (lock a new key, unlock it) on keys `bench:w4:LABEL:N` for SECONDS, and one line of JSON on
// stdout: {"cycles", "failures", "seconds", "latencies_us", "stalled", "last_error"}. A cycle
// that does not end within CYCLE_LIMIT_MS ends the phase as stalled (the cycle itself goes on in
// the background: node-redlock waits for every instance's answer, and ioredis sets no time
// limit on a command by default). The process ends when stdin closes.
'use strict';

const Redis = require('ioredis');
const Redlock = require('redlock');
const readline = require('readline');

const [ttlArg, ...urls] = process.argv.slice(2);
const ttl = Number(ttlArg);
if (!(ttl > 0) || urls.length === 0) {
  process.stderr.write('usage: node w4.js TTL_MS URL...\n');
  process.exit(2);
}

const clients = urls.map((url) => new Redis(url));
const redlock = new Redlock(clients);
// An unlock that fails on one instance (the stopped one) is reported by the cycle, not here.
redlock.on('clientError', () => {});

let cycleNumber = 0;

function withinLimit(promise, limitMs) {
  let timer;
  const limit = new Promise((resolve) => {
    timer = setTimeout(() => resolve('limit'), limitMs);
  });
  return Promise.race([promise.then(() => 'done'), limit]).finally(() => clearTimeout(timer));
}

async function phase(label, seconds, maxCycles, limitMs) {
  const out = { cycles: 0, failures: 0, seconds: 0, latencies_us: [], stalled: false, last_error: null };
  const started = process.hrtime.bigint();
  const end = started + BigInt(Math.round(seconds * 1e9));
  while (out.cycles + out.failures < maxCycles && process.hrtime.bigint() < end) {
    const key = `bench:w4:${label}:${cycleNumber++}`;
    const t0 = process.hrtime.bigint();
    let error = null;
    const cycle = redlock.lock(key, ttl).then((lock) => lock.unlock()).catch((e) => {
      error = e;
    });
    const how = await withinLimit(cycle, limitMs);
    if (how === 'limit') {
      out.stalled = true;
      out.last_error = `a cycle did not finish within ${limitMs} ms`;
      break;
    }
    if (error) {
      out.failures += 1;
      out.last_error = String(error && error.message ? error.message : error);
    } else {
      out.cycles += 1;
      out.latencies_us.push(Number(process.hrtime.bigint() - t0) / 1000);
    }
  }
  out.seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return out;
}

const lines = readline.createInterface({ input: process.stdin });
let queue = Promise.resolve();
lines.on('line', (line) => {
  queue = queue.then(async () => {
    const [command, label, seconds, maxCycles, limitMs] = line.trim().split(/\s+/);
    if (command !== 'run') {
      process.stdout.write(JSON.stringify({ error: `unknown command ${command}` }) + '\n');
      return;
    }
    const out = await phase(label, Number(seconds), Number(maxCycles), Number(limitMs));
    process.stdout.write(JSON.stringify(out) + '\n');
  });
});
lines.on('close', () => {
  queue.then(() => process.exit(0));
});
