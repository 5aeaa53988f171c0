/*
 * test/run.mjs, the runner of `npm test` and `npm run test:unit`: what it asks of tap, and the end of its
 * output, which is all CI shows: the failed tests with their assertion, the slowest files, and the
 * "N passed, M failed, K skipped" line CI reads, last.
 */
import t from 'tap'
// @ts-expect-error test/run.mjs is plain JavaScript without declarations
import { DEFAULT_JOBS, FULL_ONLY, follow, report, summaryLine, tapInvocation } from '../run.mjs'

interface Followed { parser: { write: (s: string) => void, end: () => void } }
const run = (tap: string): { lines: string[], followed: Followed } => {
  const followed = follow() as Followed
  followed.parser.write(tap)
  followed.parser.end()
  return { lines: report(followed, 90_000) as string[], followed }
}

const file = (n: number, name: string, ms: number, body = '    ok 1 - fine\n    1..1\n'): string =>
  `# Subtest: ${name}\n${body}ok ${n} - ${name} # time=${ms}ms\n\n`

const failing = `# Subtest: test/http/a.test.ts
    # Subtest: the throttle
        ok 1 - the valid key → 200
        not ok 2 - bad ones stay throttled → 429
          ---
          at:
            fileName: test/http/a.test.ts
            lineNumber: 42
            columnNumber: 5
          diff: |
            --- expected
            +++ actual
            @@ -1,1 +1,1 @@
            -429
            +401
          ...
        1..2
    not ok 1 - the throttle # time=759ms
    1..1
not ok 1 - test/http/a.test.ts # time=1889ms

`
const unmatched = `# Subtest: test/http/d.test.ts
    not ok 1 - the secret is not printed
      ---
      found: "key=hunter2"
      pattern: /hunter2/
      ...
    1..1
not ok 4 - test/http/d.test.ts # time=20ms

`
const crashed = `# Subtest: test/integration/b.test.ts
    ok 1 - started
not ok 2 - test/integration/b.test.ts # time=5000ms
  ---
  exitCode: 1
  ...

`

t.test('a failed assertion is named by file, subtest and message, with what was found and wanted', async t => {
  const { lines } = run(`TAP version 14\n${failing}${crashed}${file(3, 'test/core/c.test.ts', 300)}1..3\n`)
  const text = lines.join('\n')
  t.match(text, /Failed: 2 file\(s\), 2 test point\(s\)/)
  t.match(text, /✗ test\/http\/a\.test\.ts › the throttle › bad ones stay throttled → 429\n\s+found 401, wanted 429; at test\/http\/a\.test\.ts:42:5/)
  t.notMatch(text, /✗ test\/http\/a\.test\.ts › the throttle\n/, 'the failed parent is not listed beside its failed point')
  t.match(text, /✗ test\/integration\/b\.test\.ts\n\s+exit 1/, 'a file that failed without a failed point is listed with its exit')
  const { lines: matched } = run(`TAP version 14\n${unmatched}1..1\n`)
  t.match(matched.join('\n'), /✗ test\/http\/d\.test\.ts › the secret is not printed\n\s+found "key=hunter2", pattern \/hunter2\//, 'a (not)match names its pattern')
})

t.test('the ten slowest files close the report, slowest first, with the wall time', async t => {
  const tap = Array.from({ length: 12 }, (_, i) => file(i + 1, `test/core/f${i}.test.ts`, (i + 1) * 1000)).join('')
  const { lines } = run(`TAP version 14\n${tap}1..12\n`)
  const at = lines.findIndex(l => l.startsWith('Slowest files (of 12; wall time 1.5 min):'))
  t.ok(at >= 0, 'the heading counts the files and gives the wall time')
  t.same(lines.slice(at + 1), Array.from({ length: 10 }, (_, i) => `  ${`${12 - i}.0`.padStart(7)} s  test/core/f${11 - i}.test.ts`))
  t.notOk(lines.some(l => l.startsWith('Failed')), 'no failure section when nothing failed')
})

t.test('failures are bounded: at most 30 listed, each line at most 300 characters', async t => {
  const many = Array.from({ length: 40 }, (_, i) => `    not ok ${i + 1} - ${'x'.repeat(400)} ${i}\n`).join('')
  const { lines } = run(`TAP version 14\n# Subtest: test/core/many.test.ts\n${many}    1..40\nnot ok 1 - test/core/many.test.ts # time=10ms\n1..1\n`)
  t.equal(lines.filter(l => l.startsWith('  ✗ ')).length, 30)
  t.match(lines.join('\n'), /… and 10 more/)
  t.ok(lines.every(l => l.length <= 310), 'no line longer than the bound')
})

t.test('the last line is the plain count CI reads', async t => {
  t.equal(summaryLine('ok 1 - x\n# { total: 12, pass: 10, fail: 1, skip: 1 }\n# time=1ms\n', 1), '10 passed, 1 failed, 1 skipped')
  t.equal(summaryLine('# { total: 3, pass: 3 }\n', 0), '3 passed, 0 failed, 0 skipped')
  t.equal(summaryLine('# { total: 3, pass: 3 }\n', 1), '3 passed, 1 failed, 0 skipped', 'a failing exit is never reported as 0 failed')
})

t.test('tap runs with several jobs and the tap reporter; the unit tier leaves the full-only directories out', async t => {
  t.ok(DEFAULT_JOBS >= 4)
  t.same(FULL_ONLY, ['test/integration', 'test/serial'])
  const full = tapInvocation(['test/core/x.test.ts'], { A: '1' })
  t.same(full.args, ['--reporter=tap', `--jobs=${DEFAULT_JOBS as number}`, 'test/core/x.test.ts'])
  t.same(full.env, { A: '1' })
  const unit = tapInvocation(['--unit', '-j2'], { A: '1' })
  t.same(unit.args, ['--reporter=tap', '--exclude=test/integration/**', '--exclude=test/serial/**', '-j2'], 'the caller\'s jobs win')
  t.same(unit.env, { A: '1', CUBICLE_TEST_TIER: 'unit' })
})
