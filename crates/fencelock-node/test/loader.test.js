'use strict'
// The addon's loader: on a platform without a prebuilt addon it says how to build one, and an
// addon built from source loads through FENCELOCK_NATIVE_ADDON.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { PACKAGE, node, ended } = require('./helpers')

const pkg = JSON.stringify(PACKAGE)

/** The prebuilt addon this package loads here (the platform package's, or a build tree's). */
function prebuilt () {
  const beside = path.join(PACKAGE, 'fencelock.linux-x64-gnu.node')
  if (fs.existsSync(beside)) return beside
  return require.resolve('fencelock-linux-x64-gnu', { paths: [PACKAGE] })
}

/** Runs `require(PACKAGE)` in a child as if on `arch`; its exit code, stdout and stderr. */
async function loadAs (arch, env = {}) {
  const child = node(`
    Object.defineProperty(process, 'arch', { value: ${JSON.stringify(arch)} })
    try {
      const fencelock = require(${pkg})
      console.log('loaded ' + fencelock.version)
    } catch (error) {
      console.log('error ' + error.message)
    }
  `, env)
  let out = ''
  child.stdout.on('data', (chunk) => { out += chunk })
  const { code } = await ended(child)
  return { code, out: out.trim() }
}

test('on a platform without a prebuilt addon, loading says how to build it from source', async () => {
  const { code, out } = await loadAs('arm64', { FENCELOCK_NATIVE_ADDON: '' })
  assert.equal(code, 0)
  assert.match(out, /^error fencelock: no prebuilt native addon for linux-arm64-gnu \(prebuilt: linux-x64-gnu only\)/)
  assert.match(out, /cargo build --release -p fencelock-node/)
  assert.match(out, /FENCELOCK_NATIVE_ADDON/)
})

test('an addon built from source loads through FENCELOCK_NATIVE_ADDON, on any platform', async () => {
  // A copy under another name, as a self-built addon would be (libfencelock_node.so).
  const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'fencelock-addon-'))
  try {
    const own = path.join(dir, 'libfencelock_node.so')
    fs.copyFileSync(prebuilt(), own)
    const { code, out } = await loadAs('arm64', { FENCELOCK_NATIVE_ADDON: own })
    assert.equal(code, 0)
    assert.equal(out, `loaded ${require(PACKAGE).version}`)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('a FENCELOCK_NATIVE_ADDON that does not load is named in the error', async () => {
  const missing = path.join(require('node:os').tmpdir(), 'no-such-fencelock-addon.so')
  const { out } = await loadAs('x64', { FENCELOCK_NATIVE_ADDON: missing })
  assert.ok(out.startsWith(`error fencelock: FENCELOCK_NATIVE_ADDON=${missing} could not be loaded`), out)
})
