// The test runner of `npm test` and `npm run test:unit` (docs/testing.md). Runs tap with several files at
// once (most wait on Docker or sockets, not on the CPU; the files under test/serial/ still run alone) and
// ends with what CI shows: the failed tests with their assertion, the slowest files, then the plain line
// CI reads, "N passed, M failed, K skipped", always last.
//
//   node test/run.mjs [--unit] [tap options and files]
//
// --unit runs the unit tier: every directory of test/ but integration/ and serial/, with
// CUBICLE_TEST_TIER=unit (the Docker and Chromium helpers then refuse to load, see test/fixtures/tier.ts).
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { availableParallelism } from 'node:os'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'

/** Directories that need Docker, Chromium or a quiet machine: left out of the unit tier. */
export const FULL_ONLY = ['test/integration', 'test/serial']
/** Files at once when the caller does not say (-j/--jobs); measured in docs/testing.md. */
export const DEFAULT_JOBS = Math.max(4, availableParallelism())
const SLOWEST = 10
const MAX_FAILURES = 30
const MAX_LINE = 300

const require = createRequire(import.meta.url)
const tapPackage = require.resolve('tap/package.json')
const tapBin = join(dirname(tapPackage), require(tapPackage).bin.tap)
// tap's own TAP parser (a dependency of @tapjs/core), resolved from there so no second copy is needed.
const { Parser } = createRequire(require.resolve('@tapjs/core/package.json'))('tap-parser')

/** tap's argv and environment for this runner's arguments. */
export function tapInvocation (argv, env = process.env) {
  const unit = argv.includes('--unit')
  const args = argv.filter(a => a !== '--unit')
  const jobs = args.some(a => /^(-j\d*|--jobs(=.*)?)$/.test(a)) ? [] : [`--jobs=${DEFAULT_JOBS}`]
  const tier = unit ? FULL_ONLY.map(dir => `--exclude=${dir}/**`) : []
  return {
    args: ['--reporter=tap', ...jobs, ...tier, ...args],
    env: unit ? { ...env, CUBICLE_TEST_TIER: 'unit' } : env
  }
}

const clip = (s, n = MAX_LINE) => {
  const flat = String(s).replace(/\s+/g, ' ').trim()
  return flat.length > n ? `${flat.slice(0, n - 1)}…` : flat
}

/** One line saying why an assertion failed: its diagnostic, bounded. */
function reason (diag) {
  if (diag === null || typeof diag !== 'object') return ''
  const parts = []
  if (diag.message !== undefined && typeof diag.message === 'string') parts.push(diag.message)
  const show = v => clip(JSON.stringify(v) ?? 'undefined', 100)
  if ('pattern' in diag) parts.push(`found ${show(diag.found)}, pattern ${String(diag.pattern)}`)
  else if ('found' in diag || 'wanted' in diag) parts.push(`found ${show(diag.found)}, wanted ${show(diag.wanted)}`)
  else if (typeof diag.diff === 'string') {
    const lines = sign => diag.diff.split('\n').filter(l => l.startsWith(sign) && !l.startsWith(sign.repeat(3))).map(l => l.slice(1).trim())
    parts.push(`found ${clip(lines('+').join(' '), 100)}, wanted ${clip(lines('-').join(' '), 100)}`)
  }
  if (diag.signal != null || diag.exitCode != null) parts.push(`exit ${diag.exitCode ?? '-'}${diag.signal != null ? `, signal ${diag.signal}` : ''}`)
  if (diag.expired !== undefined) parts.push(`timed out (${diag.expired})`)
  const at = diag.at
  if (at !== undefined && at !== null && typeof at === 'object' && at.fileName !== undefined) parts.push(`at ${at.fileName}:${at.lineNumber}:${at.columnNumber}`)
  return clip(parts.join('; '))
}

/**
 * Follows a TAP stream (tap's own output: one top-level point per file): per file its result and
 * `# time=`, and every failed point with its full name and diagnostic.
 */
export function follow () {
  const files = []
  const failures = []
  const parser = new Parser()
  parser.on('assert', res => {
    files.push({ name: res.name, ok: res.ok, ms: res.time ?? 0 })
    if (!res.ok) failures.push({ path: [res.name], diag: res.diag })
  })
  const watch = (p, path) => {
    p.on('assert', res => {
      if (!res.ok && !res.todo && !res.skip) failures.push({ path: [...path, res.name], diag: res.diag })
    })
    p.on('child', c => { watch(c, [...path, c.name]) })
  }
  parser.on('child', c => { watch(c, [c.name]) })
  return { parser, files, failures }
}

/** The lines printed after tap's own output (everything but the last line). */
export function report ({ files, failures }, wallMs) {
  const out = []
  const failed = files.filter(f => !f.ok)
  // A failed subtest is also a failed point of its parent: keep the deepest only.
  const key = f => f.path.join('\u0000')
  const leaves = failures.filter(f => !failures.some(g => g !== f && key(g).startsWith(key(f) + '\u0000')))
  if (failed.length > 0 || leaves.length > 0) {
    out.push('', `Failed: ${failed.length} file(s), ${leaves.length} test point(s)`)
    for (const f of leaves.slice(0, MAX_FAILURES)) {
      out.push(`  ✗ ${clip(f.path.join(' › '))}`)
      const why = reason(f.diag)
      if (why !== '') out.push(`      ${why}`)
    }
    if (leaves.length > MAX_FAILURES) out.push(`  … and ${leaves.length - MAX_FAILURES} more (search the log for "not ok")`)
  }
  const slowest = [...files].sort((a, b) => b.ms - a.ms).slice(0, SLOWEST)
  if (slowest.length > 0) {
    out.push('', `Slowest files (of ${files.length}; wall time ${(wallMs / 60000).toFixed(1)} min):`)
    for (const f of slowest) out.push(`  ${(f.ms / 1000).toFixed(1).padStart(7)} s  ${f.name}`)
  }
  return out
}

/** The last line: tap's closing `# { total, pass, fail, skip }` counts; a run that failed without a count is 1 failed. */
export function summaryLine (tail, code) {
  const summary = /#\s*\{([^}]*)\}\s*(?:#[^\n]*)?\s*$/m.exec(tail.split('\n').filter(l => l.includes('total:')).pop() ?? '')
  const count = key => Number(new RegExp(`${key}:\\s*(\\d+)`).exec(summary?.[1] ?? '')?.[1] ?? 0)
  let failed = count('fail')
  if (code !== 0 && failed === 0) failed = 1 // a crash or a failure tap did not count
  return `${count('pass')} passed, ${failed} failed, ${count('skip')} skipped`
}

async function main () {
  const { args, env } = tapInvocation(process.argv.slice(2))
  const started = Date.now()
  const state = follow()
  const child = spawn(process.execPath, [tapBin, ...args], { stdio: ['ignore', 'pipe', 'inherit'], env })
  let tail = ''
  child.stdout.on('data', chunk => {
    process.stdout.write(chunk)
    state.parser.write(chunk)
    tail = (tail + chunk.toString('utf8')).slice(-4096)
  })
  const code = await new Promise(resolve => { child.on('close', c => { resolve(c ?? 1) }) })
  state.parser.end()
  for (const line of report(state, Date.now() - started)) console.log(line)
  console.log(`\n${summaryLine(tail, code)}`)
  process.exit(code)
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main()
