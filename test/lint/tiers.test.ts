/*
 * The test tiers are directories (docs/testing.md): every directory of test/ but integration/ and serial/
 * is the unit tier, which runs without Docker, Chromium or network. Held two ways: no file of the unit
 * tier imports, even through a helper, anything under the full-only directories or Playwright; and the
 * Docker and Chromium helpers refuse to load when CUBICLE_TEST_TIER=unit (what `npm run test:unit` sets).
 */
import t from 'tap'
import { execFile } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
// @ts-expect-error test/run.mjs is plain JavaScript without declarations
import { FULL_ONLY } from '../run.mjs'

const root = fileURLToPath(new URL('../..', import.meta.url))
const fullOnly = (FULL_ONLY as string[]).map(dir => join(root, dir) + '/')

function testFiles (dir: string): string[] {
  return readdirSync(dir).flatMap(name => {
    const path = join(dir, name)
    if (name === 'node_modules') return []
    if (statSync(path).isDirectory()) return testFiles(path)
    return name.endsWith('.test.ts') ? [path] : []
  })
}

/** Value imports of a file (static and dynamic; `import type` loads nothing). */
function imports (file: string): string[] {
  const source = readFileSync(file, 'utf8')
  const found: string[] = []
  for (const m of source.matchAll(/^\s*(?:import|export)\s+(?!type\s)(?:[^'"]*?\sfrom\s+)?['"]([^'"]+)['"]/gm)) found.push(m[1] as string)
  for (const m of source.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push(m[1] as string)
  return found
}

/** The chain of imports from `file` to a module the unit tier may not load, or undefined. */
function forbiddenChain (file: string, seen = new Set<string>()): string[] | undefined {
  if (seen.has(file)) return undefined
  seen.add(file)
  for (const spec of imports(file)) {
    if (spec === 'playwright-core' || spec.startsWith('playwright')) return [file, spec]
    if (!spec.startsWith('.')) continue
    const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'))
    if (fullOnly.some(dir => target.startsWith(dir))) return [file, target]
    // Only test code is followed: the product never imports test helpers.
    if (!target.startsWith(join(root, 'test') + '/') || !existsSync(target)) continue
    const chain = forbiddenChain(target, seen)
    if (chain !== undefined) return [file, ...chain]
  }
  return undefined
}

const unitFiles = testFiles(join(root, 'test')).filter(f => !fullOnly.some(dir => f.startsWith(dir)))

t.test('no file of the unit tier loads a full-only helper or Playwright, directly or through a helper', async t => {
  t.ok(unitFiles.length > 40, `${unitFiles.length} files in the unit tier (small ones are merged per plugin or concern, docs/testing.md)`)
  const offenders = unitFiles.flatMap(file => {
    const chain = forbiddenChain(file)
    return chain === undefined ? [] : [chain.map(p => p.startsWith('/') ? relative(root, p) : p).join(' → ')]
  })
  t.same(offenders, [], 'move these files to test/integration/ (docs/testing.md)')
})

t.test('the chain check finds a helper that reaches the Docker helper', async t => {
  const chain = forbiddenChain(join(root, 'test/integration/browser-app.ts'))
  t.ok(chain !== undefined && chain.some(p => p.endsWith('test/integration/docker.ts')), 'browser-app.ts → docker.ts is found')
})

t.test('with CUBICLE_TEST_TIER=unit the Docker and Chromium helpers refuse to load', async t => {
  const probe = `for (const f of ['./test/integration/docker.ts', './test/integration/chromium.ts']) {
    try { await import(f); console.log('loaded', f) } catch (err) { console.log('refused', f, err.message) }
  }`
  const { stdout } = await promisify(execFile)(process.execPath, ['--import=tsx', '--input-type=module', '-e', probe], {
    cwd: root, env: { ...process.env, CUBICLE_TEST_TIER: 'unit' }, timeout: 60_000
  })
  t.match(stdout, /^refused \.\/test\/integration\/docker\.ts .*unit tier.*test\/integration\/docker\.ts \(Docker\)/m)
  t.match(stdout, /^refused \.\/test\/integration\/chromium\.ts .*unit tier.*\(Chromium\)/m)
  t.notMatch(stdout, /^loaded/m)
})
