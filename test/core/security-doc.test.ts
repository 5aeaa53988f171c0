/*
 * SECURITY.md names, for every promise it makes, the tests that hold it ("Promise | Held by" tables).
 * This test keeps that true as the code moves: every cited test file exists and every cited test name
 * is the title of a test in that file, so a renamed or deleted test fails here instead of leaving the
 * page promising something nothing checks. A row no test holds yet must say so ("Open:").
 */
import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'

const root = new URL('../../', import.meta.url)
const read = (path: string): string => readFileSync(new URL(path, root), 'utf8')

/** A `${…}` of a template-literal title: it matches any text in a cited name. */
const HOLE = '\u0000'

/** The string after `pos` (a quote) as its value, or undefined when it is not a closed literal. */
function literalAt (src: string, pos: number): string | undefined {
  const quote = src[pos]
  if (quote !== '\'' && quote !== '"' && quote !== '`') return undefined
  let out = ''
  for (let i = pos + 1; i < src.length; i++) {
    const c = src[i] as string
    if (c === quote) return out
    if (c === '\\') {
      const next = src[++i] ?? ''
      out += next === 'n' ? '\n' : next === 't' ? '\t' : next
    } else if (quote === '`' && c === '$' && src[i + 1] === '{') {
      let depth = 1
      for (i += 2; i < src.length && depth > 0; i++) {
        if (src[i] === '{') depth++
        else if (src[i] === '}') depth--
      }
      i--
      out += HOLE
    } else if (quote !== '`' && c === '\n') {
      return undefined
    } else {
      out += c
    }
  }
  return undefined
}

/** Titles of every `x.test('title', …)` in a tap file, nested ones included. */
function testTitles (src: string): string[] {
  const titles: string[] = []
  for (const m of src.matchAll(/\b(?:t|tap|test)\.test\(\s*/g)) {
    const title = literalAt(src, (m.index ?? 0) + m[0].length)
    if (title !== undefined) titles.push(title)
  }
  return titles
}

/** A cited name ending in … stands for the titles it begins (to leave out a long or annotated tail). */
function titleMatches (title: string, cited: string): boolean {
  if (cited.endsWith('…')) return cited.length > 16 && title.startsWith(cited.slice(0, -1))
  if (!title.includes(HOLE)) return title === cited
  const pattern = title.split(HOLE).map(part => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.+')
  return new RegExp(`^${pattern}$`, 's').test(cited)
}

interface Row { line: number, promise: string, refs: Array<{ file: string, names: string[] }>, open: boolean }

/** The rows of every table whose header is `| Promise | Held by |`. */
function promiseRows (doc: string): Row[] {
  const rows: Row[] = []
  let inTable = false
  doc.split('\n').forEach((text, i) => {
    if (/^\|\s*Promise\s*\|\s*Held by\s*\|\s*$/.test(text)) { inTable = true; return }
    if (!text.startsWith('|')) { inTable = false; return }
    if (!inTable || /^\|[\s|:-]+\|$/.test(text)) return
    const cells = text.split(/(?<!\\)\|/).slice(1, -1).map(c => c.trim())
    const heldBy = cells.at(-1) ?? ''
    const refs: Row['refs'] = []
    // Names are in "…"; a " or | inside one is written \" or \| (Markdown escapes).
    for (const m of heldBy.matchAll(/`(test\/[^`]+)`|"((?:[^"\\]|\\.)+)"/g)) {
      if (m[1] !== undefined) refs.push({ file: m[1], names: [] })
      else if (m[2] !== undefined) refs.at(-1)?.names.push(m[2].replace(/\\(.)/g, '$1'))
    }
    rows.push({ line: i + 1, promise: cells[0] ?? '', refs, open: heldBy.includes('**Open:**') })
  })
  return rows
}

/** Problems of a document: rows without a test, files that do not exist, names that are no test's title. */
function problems (doc: string, readTest: (file: string) => string | undefined): string[] {
  const found: string[] = []
  const rows = promiseRows(doc)
  if (rows.length === 0) found.push('no "| Promise | Held by |" table')
  for (const row of rows) {
    const where = `line ${row.line} (${row.promise.slice(0, 60)})`
    if (row.refs.length === 0 && !row.open) found.push(`${where}: names no test and is not marked **Open:**`)
    for (const ref of row.refs) {
      const src = readTest(ref.file)
      if (src === undefined) { found.push(`${where}: ${ref.file} does not exist`); continue }
      if (ref.names.length === 0) found.push(`${where}: ${ref.file} is cited without a test name`)
      const titles = testTitles(src)
      for (const name of ref.names) {
        if (!titles.some(title => titleMatches(title, name))) found.push(`${where}: no test named "${name}" in ${ref.file}`)
      }
    }
  }
  return found
}

const readTest = (file: string): string | undefined => {
  if (!/^test\/[\w./-]+\.test\.ts$/.test(file) || file.includes('..')) return undefined
  return existsSync(new URL(file, root)) ? read(file) : undefined
}

t.test('every promise of SECURITY.md names tests that exist, or says it is open', async t => {
  const doc = read('SECURITY.md')
  const rows = promiseRows(doc)
  t.same(problems(doc, readTest), [], 'no dangling reference and no unheld promise')
  const cited = rows.flatMap(r => r.refs.flatMap(ref => ref.names)).length
  t.ok(rows.length >= 40 && cited >= rows.length, `${rows.length} promises, ${cited} test references`)
  t.comment(`open promises: ${rows.filter(r => r.open).length}`)
  for (const section of ['## Threat model', '**Identity and credentials**', '**The sandbox boundary**', '**Everything the sandbox writes is untrusted input**', '**Browsers', '**Availability**']) {
    const start = doc.indexOf(section)
    t.ok(start >= 0, `section ${section}`)
    const next = doc.slice(start + section.length).search(/\n(## |\*\*[A-Z])/)
    const body = doc.slice(start, next < 0 ? undefined : start + section.length + next)
    t.match(body, /\| Promise \| Held by \|/, `${section} has a Promise | Held by table`)
  }
})

t.test('the checker refuses a missing file, an unknown name, a row without a test and a file without a name', async t => {
  const src = 't.test(\'plain one\', async t => {\n  t.test(`nested ${name} case`, async () => {})\n  t.test("double \\"quoted\\" it\'s", async () => {})\n})\n'
  t.same(testTitles(src), ['plain one', `nested ${HOLE} case`, 'double "quoted" it\'s'])
  const files: Record<string, string> = { 'test/a.test.ts': src }
  const doc = (cell: string): string => `| Promise | Held by |\n|---|---|\n| a promise | ${cell} |\n`
  t.same(problems(doc('`test/a.test.ts`: "plain one"; "nested alpha case"'), f => files[f]), [])
  t.match(problems(doc('`test/b.test.ts`: "plain one"'), f => files[f]), [/test\/b\.test\.ts does not exist/])
  t.match(problems(doc('`test/a.test.ts`: "plain two"'), f => files[f]), [/no test named "plain two"/])
  t.match(problems(doc('`test/a.test.ts`: "nested  case"'), f => files[f]), [/no test named/], 'a hole matches at least one character')
  t.same(problems(doc('`test/a.test.ts`: "double \\"quoted\\" it…"'), f => files[f]), [], 'a name ending in … matches the titles it begins')
  t.match(problems(doc('`test/a.test.ts`: "double \\"quoted\\" is…"'), f => files[f]), [/no test named/])
  t.match(problems(doc('`test/a.test.ts`: "plain…"'), f => files[f]), [/no test named/], 'too short to stand for one test')
  t.match(problems(doc('nothing yet'), f => files[f]), [/names no test and is not marked/])
  t.same(problems(doc('**Open:** the lead adds the test'), f => files[f]), [])
  t.match(problems(doc('`test/a.test.ts`'), f => files[f]), [/cited without a test name/])
  t.match(problems('# no table here', f => files[f]), [/no "\| Promise \| Held by \|" table/])
})
