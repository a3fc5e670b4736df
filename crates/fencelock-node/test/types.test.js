'use strict'
// index.d.ts against the package: every class, method and export it declares exists (tsc checks
// the examples against the declarations; this checks the declarations against the code).

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { PACKAGE } = require('./helpers')
const fencelock = require(PACKAGE)

const declarations = fs.readFileSync(path.join(PACKAGE, 'index.d.ts'), 'utf8')

function hasMethod (cls, name) {
  for (let proto = cls.prototype; proto; proto = Object.getPrototypeOf(proto)) {
    const d = Object.getOwnPropertyDescriptor(proto, name)
    if (d) return typeof d.value === 'function' || typeof d.get === 'function'
  }
  return false
}

test('every class and method index.d.ts declares exists', () => {
  const classes = [...declarations.matchAll(/^export class (\w+)[^{]*\{\n([\s\S]*?)^\}/gm)]
  assert.ok(classes.length >= 13, `found ${classes.length} classes`)
  let methods = 0
  for (const [, name, body] of classes) {
    const cls = fencelock[name]
    assert.equal(typeof cls, 'function', `${name} is declared but not exported`)
    for (const [, isStatic, method] of body.matchAll(/^ {2}(static )?(?!constructor|private|readonly)(\w+)(?:<[^>]*>)? \(/gm)) {
      const found = isStatic ? typeof cls[method] === 'function' : hasMethod(cls, method)
      assert.ok(found, `${name}.${method} is declared but missing`)
      methods++
    }
    // An error's fields are set by its constructor from the error's code (errors.test.js checks
    // them against real errors).
    const error = cls === fencelock.FencelockError || cls.prototype instanceof fencelock.FencelockError
    for (const [, getter] of body.matchAll(/^ {2}readonly (\w+):/gm)) {
      if (error) continue
      if (['name', 'key', 'resource', 'names', 'code', 'lock', 'reason', 'option'].includes(getter)) continue // set by constructors
      assert.ok(hasMethod(cls, getter), `${name}.${getter} is declared but missing`)
    }
  }
  assert.ok(methods >= 50, `checked ${methods} methods`)
  for (const [, kind, name] of declarations.matchAll(/^export (const|function) (\w+)/gm)) {
    assert.notEqual(fencelock[name], undefined, `${kind} ${name} is declared but not exported`)
  }
  assert.ok(hasMethod(fencelock.Guard, Symbol.asyncDispose))
})

test('the codes index.d.ts lists are the core\'s', () => {
  const union = (type) => [...declarations.match(new RegExp(`export type ${type} =([^/]*?)\\n\\n`))[1].matchAll(/'([\w-]+)'/g)].map((m) => m[1])
  assert.deepEqual(union('ErrorCode').sort(), [...fencelock.codes.error].sort())
  assert.deepEqual(union('LostReason').sort(), [...fencelock.codes.lost].sort())
  assert.deepEqual(union('ConflictCode').sort(), [...fencelock.codes.conflict].sort())
  assert.deepEqual(union('KindCode').sort(), [...fencelock.codes.kind].sort())
})
