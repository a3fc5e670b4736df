'use strict'
// The native addon, found in this order:
//   1. FENCELOCK_NATIVE_ADDON, the path of an addon built from source (any platform Rust builds
//      for: `cargo build --release -p fencelock-node` makes target/release/libfencelock_node.so,
//      .dylib on macOS, fencelock_node.dll on Windows);
//   2. `fencelock.linux-x64-gnu.node` beside the package in a build tree (scripts/node-package
//      puts it there);
//   3. the platform's package, `fencelock-linux-x64-gnu` (an optional dependency that npm
//      installs on that platform only).
// Linux on x86-64 with glibc is the one platform with a prebuilt addon; anywhere else, without
// FENCELOCK_NATIVE_ADDON, loading fails with an error that says how to build it (napi-rs's
// convention: a clear error rather than a build at install time).

const path = require('node:path')

const PLATFORM = 'linux-x64-gnu'
const ENV = 'FENCELOCK_NATIVE_ADDON'

function isGlibc () {
  if (process.platform !== 'linux') return false
  const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null
  return Boolean(report?.header?.glibcVersionRuntime)
}

/** This machine's platform, in the platform packages' spelling (`linux-x64-gnu`). */
function platform () {
  const libc = process.platform === 'linux' ? (isGlibc() ? '-gnu' : '-musl') : ''
  return `${process.platform}-${process.arch}${libc}`
}

const HOW_TO_BUILD = `build the addon from source with the Rust toolchain (https://rustup.rs): in a checkout of fencelock, \`cargo build --release -p fencelock-node\`, then point ${ENV} at target/release/libfencelock_node.so (libfencelock_node.dylib on macOS, fencelock_node.dll on Windows)`

/** Loads the addon at `file`, whatever its file name ends with. */
function loadFile (file) {
  const addon = { exports: {} }
  try {
    process.dlopen(addon, path.resolve(file))
  } catch (error) {
    throw new Error(`fencelock: ${ENV}=${file} could not be loaded (${error.message}); ${HOW_TO_BUILD}`)
  }
  return addon.exports
}

function load () {
  const own = process.env[ENV]
  if (own) return loadFile(own)
  const here = platform()
  if (here !== PLATFORM) {
    throw new Error(`fencelock: no prebuilt native addon for ${here} (prebuilt: ${PLATFORM} only); ${HOW_TO_BUILD}`)
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
  throw new Error(`fencelock's native addon was not found (looked for ${errors.join(' and ')}): install the package with its optional dependencies (npm install fencelock, without --no-optional / --omit=optional), or ${HOW_TO_BUILD}`)
}

const addon = load()
require('./bridge').install(addon)
module.exports = addon
