import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Fastify from 'fastify'
import t from 'tap'
import { errorHandler } from '../../core/error-handler.js'
import { FRAMEWORK_WIRE, INTERNAL_ERROR, isErrorDefinition, type ErrorDefinition } from '../../core/errors.js'

/*
 * docs/errors.md is the catalogue of every error, held complete here as fastify's own test/errors.test.js
 * holds its Errors reference: every definition of every errors module is listed with its wire code and
 * status, nothing listed is gone, errors are defined nowhere else, and every wire code a route sends
 * without a definition is listed too. The handler is checked to answer each definition as listed.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const MODULES = ['core/errors.ts', ...readdirSync(join(ROOT, 'plugins')).sort()
  .map(name => `plugins/${name}/errors.ts`).filter(path => existsSync(join(ROOT, path)))]
const DOC = readFileSync(join(ROOT, 'docs/errors.md'), 'utf8')

async function loadDefinitions (): Promise<Map<string, ErrorDefinition>> {
  const found = new Map<string, ErrorDefinition>()
  for (const path of MODULES) {
    const mod = await import(join(ROOT, path)) as Record<string, unknown>
    for (const [name, value] of Object.entries(mod)) {
      if (!isErrorDefinition(value)) continue
      if (name !== value.code) throw new Error(`${path}: ${name} is defined as ${value.code} (a constructor is named as its code)`)
      found.set(name, value)
    }
  }
  return found
}

/** `| \`CODE\` | \`wire\` | 413 | …` rows of the catalogue. */
const listed = new Map([...DOC.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \| `([A-Za-z_]+)` \| (\d{3}) \|/gm)]
  .map(([, code, wire, status]) => [code as string, { wire: wire as string, status: Number(status) }]))
/** `| \`wire\` | 404 | …` rows of the table of wire codes without a definition. */
const plain = new Set([...DOC.matchAll(/^\| `([A-Za-z_]+)` \| (?:\d{3}|–) \|/gm)].map(([, wire]) => wire as string))

function sources (dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter(path => path.endsWith('.ts') && !path.includes('node_modules')).map(path => join(dir, path))
}

const definitions = await loadDefinitions()

t.test('the catalogue was parsed', async t => {
  t.ok(definitions.size >= 60, `${definitions.size} definitions in ${MODULES.length} modules`)
  t.ok(listed.size >= 60, `${listed.size} rows`)
  t.ok(plain.size >= 5, `${plain.size} rows without a definition`)
})

t.test('every definition is in docs/errors.md with its wire code and status', async t => {
  for (const [code, def] of definitions) {
    t.same(listed.get(code), { wire: def.wire, status: def.statusCode }, `${code} is listed as ${def.wire}, ${def.statusCode}`)
  }
})

t.test('docs/errors.md lists no error that is not defined', async t => {
  for (const code of listed.keys()) t.ok(definitions.has(code), `${code} is defined in an errors module`)
})

t.test('errors are defined only in errors modules, and only with defineError', async t => {
  for (const path of [...sources('core'), ...sources('plugins')]) {
    const text = readFileSync(join(ROOT, path), 'utf8')
    if (path !== 'core/errors.ts') t.notMatch(text, /\bcreateError\(/, `${path} makes no error with createError`)
    if (!MODULES.includes(path)) t.notMatch(text, /\bdefineError\(/, `${path} defines no error`)
    if (path !== 'core/errors.ts') t.notMatch(text, /wireCode\b/, `${path} sets no wire code on an instance`)
  }
})

t.test('every wire code sent without a definition is listed', async t => {
  const sent = new Set<string>([...FRAMEWORK_WIRE.map(([, wire]) => wire), 'bad_request', 'Unauthorized'])
  for (const path of [...sources('core'), ...sources('plugins')]) {
    const text = readFileSync(join(ROOT, path), 'utf8')
    for (const [, wire] of text.matchAll(/\berror: '([A-Za-z_]+)'/g)) sent.add(wire as string)
  }
  t.ok(sent.has('access_denied') && sent.has('too_many_requests'), 'the scan finds route bodies')
  for (const wire of sent) t.ok(plain.has(wire), `${wire} is in the table without a definition`)
  for (const wire of plain) t.ok(sent.has(wire), `${wire}, listed without a definition, is still sent without one`)
})

t.test('the error handler answers each definition with its wire code and status', async t => {
  const app = Fastify({ logger: false })
  app.setErrorHandler(errorHandler)
  app.get('/:code', async request => {
    const Def = definitions.get((request.params as { code: string }).code)
    if (Def === undefined) throw new Error('unknown code')
    throw new Def('x', 1)
  })
  t.teardown(async () => await app.close())
  for (const [code, def] of definitions) {
    const res = await app.inject(`/${code}`)
    t.equal(res.statusCode, def.statusCode, `${code}: status`)
    t.equal(res.json().error, def.wire, `${code}: wire code`)
    if (def.statusCode >= 500) t.match(res.json().detail, /^internal error \(ref /, `${code}: a 5xx body has no detail`)
  }
  const internal = [...definitions.values()].filter(d => d.wire === INTERNAL_ERROR)
  t.ok(internal.every(d => d.statusCode >= 500), 'only 5xx answer internal_error')
})
