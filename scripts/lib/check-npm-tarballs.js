'use strict'
// `node scripts/lib/check-npm-tarballs.js MAIN.tgz PLATFORM.tgz`: checks the Node packages'
// file lists against what loading them needs, before anyone installs them. In the main package,
// every relative `require` reachable from its `main` and from each subpath of its `exports`
// (`fencelock/bullmq`, ...) must resolve to a file in the tarball, its `types` and each
// subpath's must be there, and every package it requires by name must be a builtin or one of
// its (optional, or optional peer) dependencies; the platform package must hold its `main` (the
// addon). Exits 1 with the list of what is missing.

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { builtinModules } = require('node:module')

function unpack (tarball) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fencelock-npm-check-'))
  execFileSync('tar', ['-xzf', tarball, '-C', dir])
  return { dir, root: path.join(dir, 'package') }
}

function resolveIn (root, from, request) {
  const base = path.resolve(path.dirname(from), request)
  for (const candidate of [base, `${base}.js`, `${base}.json`, path.join(base, 'index.js')]) {
    if (candidate.startsWith(root) && fs.existsSync(candidate) && fs.statSync(candidate).isFile()) return candidate
  }
  return null
}

function checkMain (tarball, problems) {
  const { dir, root } = unpack(tarball)
  try {
    const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
    const deps = new Set([
      ...Object.keys(manifest.dependencies || {}),
      ...Object.keys(manifest.optionalDependencies || {}),
      ...Object.keys(manifest.peerDependencies || {})
    ])
    for (const field of ['main', 'types']) {
      if (!manifest[field] || !fs.existsSync(path.join(root, manifest[field]))) {
        problems.push(`${path.basename(tarball)}: its ${field} (${manifest[field]}) is not in the package`)
      }
    }
    const starts = [`./${manifest.main || 'index.js'}`]
    for (const [subpath, target] of Object.entries(manifest.exports || {})) {
      const files = typeof target === 'string' ? { default: target } : target
      for (const [condition, file] of Object.entries(files)) {
        if (!fs.existsSync(path.join(root, file))) {
          problems.push(`${path.basename(tarball)}: its export ${subpath} (${condition}: ${file}) is not in the package`)
        } else if (file.endsWith('.js')) {
          starts.push(file)
        }
      }
    }
    const seen = new Set()
    const queue = starts.map((start) => resolveIn(root, path.join(root, 'package.json'), start)).filter(Boolean)
    while (queue.length > 0) {
      const file = queue.pop()
      if (seen.has(file)) continue
      seen.add(file)
      if (!file.endsWith('.js')) continue
      const source = fs.readFileSync(file, 'utf8')
      for (const match of source.matchAll(/require\(\s*(['"`])([^'"`$]+)\1\s*\)/g)) {
        const request = match[2]
        if (request.startsWith('.')) {
          const found = resolveIn(root, file, request)
          if (found) queue.push(found)
          else problems.push(`${path.basename(tarball)}: ${path.relative(root, file)} requires ${request}, which is not in the package`)
        } else if (!request.startsWith('node:') && !builtinModules.includes(request) && !deps.has(request)) {
          problems.push(`${path.basename(tarball)}: ${path.relative(root, file)} requires ${request}, which is neither a builtin nor a dependency`)
        }
      }
    }
    return { files: seen.size, optional: Object.keys(manifest.optionalDependencies || {}) }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

function checkPlatform (tarball, problems) {
  const { dir, root } = unpack(tarball)
  try {
    const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
    if (!manifest.main || !fs.existsSync(path.join(root, manifest.main))) {
      problems.push(`${path.basename(tarball)}: its addon (${manifest.main}) is not in the package`)
    }
    return manifest.name
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

const [main, platform] = process.argv.slice(2)
if (!main || !platform) {
  console.error('usage: node scripts/lib/check-npm-tarballs.js MAIN.tgz PLATFORM.tgz')
  process.exit(2)
}
const problems = []
const { files, optional } = checkMain(main, problems)
const platformName = checkPlatform(platform, problems)
if (!optional.includes(platformName)) problems.push(`${path.basename(main)} does not name ${platformName} as an optional dependency`)
if (problems.length > 0) {
  for (const problem of problems) console.error(`npm package check: ${problem}`)
  process.exit(1)
}
console.log(`npm package check: ${path.basename(main)} (${files} files reached from its main and its exports) and ${path.basename(platform)} hold what loading needs`)
