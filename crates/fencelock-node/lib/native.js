'use strict'
// The native addon: `fencelock.linux-x64-gnu.node` beside the package in a build tree
// (scripts/node-package puts it there), else the platform's package, `fencelock-linux-x64-gnu`
// (an optional dependency that npm installs on that platform only). Linux on x86-64 with glibc
// is the one platform built today; anywhere else this says so.

const path = require('node:path')

const PLATFORM = 'linux-x64-gnu'

function isGlibc () {
  if (process.platform !== 'linux') return false
  const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null
  return Boolean(report?.header?.glibcVersionRuntime)
}

function load () {
  if (process.platform !== 'linux' || process.arch !== 'x64' || !isGlibc()) {
    throw new Error(`fencelock's native addon is built for ${PLATFORM} only; this is ${process.platform}-${process.arch}${process.platform === 'linux' && !isGlibc() ? ' (musl)' : ''}`)
  }
  const errors = []
  for (const candidate of [path.join(__dirname, '..', `fencelock.${PLATFORM}.node`), `fencelock-${PLATFORM}`]) {
    try {
      return require(candidate)
    } catch (error) {
      if (error.code !== 'MODULE_NOT_FOUND' || !String(error.message).includes(candidate)) throw error
      errors.push(candidate)
    }
  }
  throw new Error(`fencelock's native addon was not found (looked for ${errors.join(' and ')}): install the package with its optional dependencies (npm install fencelock, without --no-optional / --omit=optional)`)
}

module.exports = load()
