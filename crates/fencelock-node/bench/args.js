'use strict'
// The command line: its arguments, checked, and the usage text.

// ---------------------------------------------------------------------------------------------
// Arguments

function parseArgs (argv) {
  const args = { seconds: 5, rounds: 3, json: null, only: ['N1', 'N5', 'N2', 'N3', 'N4'], contenders: null }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    const value = () => {
      if (i + 1 >= argv.length) usage(`${arg} needs a value`)
      return argv[++i]
    }
    switch (arg) {
      case '--seconds': args.seconds = Number(value()); break
      case '--rounds': args.rounds = Number(value()); break
      case '--json': args.json = value(); break
      case '--only': args.only = value().split(',').map((w) => w.trim().toUpperCase()).filter(Boolean); break
      case '--contenders': args.contenders = value().split(',').map((c) => c.trim()).filter(Boolean); break
      case '-h': case '--help': usage(); break
      default: usage(`unknown argument ${arg}`)
    }
  }
  if (!(args.seconds > 0)) usage('--seconds must be positive')
  if (!(Number.isInteger(args.rounds) && args.rounds > 0)) usage('--rounds must be a positive integer')
  for (const w of args.only) if (!['N1', 'N2', 'N3', 'N4', 'N5'].includes(w)) usage(`unknown workload ${w}`)
  return args
}

function usage (error) {
  const text = 'usage: node bench.js [--seconds S] [--rounds R] [--json FILE] [--only N1,N2,N3,N4,N5] ' +
    '[--contenders fencelock,baseline,redlock,sesame,semaphore]\n'
  if (error) {
    process.stderr.write(`${error}\n${text}`)
    process.exit(2)
  }
  process.stdout.write(text)
  process.exit(0)
}

module.exports = { parseArgs, usage }
