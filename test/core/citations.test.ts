import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'

/*
 * Everything the code cites lives in the repository (docs/conventions.md#comments): no citation of a
 * tracker issue or of a document outside the repository, and every `docs/<file>.md#<anchor>` names a
 * heading that exists, so a renamed heading fails here instead of leaving dead references behind.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

// Built from pieces so that this file does not match its own patterns.
const FORBIDDEN: Array<[string, RegExp]> = [
  ['a section sign', /\u00a7/],
  ['the external contract', new RegExp(['surface', 'md'].join('\\.'), 'i')],
  ['the external house style', new RegExp(['house', 'style'].join('[- ]'), 'i')],
  ['an issue number', new RegExp(['\\bissues?', '#?\\d+\\b'].join(' '), 'i')]
]

const SKIPPED = new Set(['package-lock.json'])
const BINARY = /\.(png|jpe?g|gif|webp|bmp|ico|pdf|zip|gz|tgz|tar|woff2?|ttf|otf|docx|xlsx|xls|pptx|wasm|node)$/i

function trackedFiles (): string[] {
  try {
    const out = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
    return out.split('\0').filter(f => f !== '' && existsSync(join(ROOT, f)))
  } catch {
    return walk(ROOT) // a tree without git metadata (an exported source tarball)
  }
}

function walk (dir: string): string[] {
  const files: string[] = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (['node_modules', '.git', 'dist'].includes(entry.name)) continue
    const path = join(dir, entry.name)
    if (entry.isDirectory()) files.push(...walk(path))
    else if (entry.isFile()) files.push(relative(ROOT, path))
  }
  return files
}

function textOf (file: string): string | null {
  if (file.split('/').includes('node_modules') || SKIPPED.has(file) || BINARY.test(file)) return null
  const path = join(ROOT, file)
  if (statSync(path).size > 2_000_000) return null
  const buf = readFileSync(path)
  return buf.includes(0) ? null : buf.toString('utf8')
}

/** GitHub's heading anchors: lowercase, punctuation dropped (`-` and `_` kept), spaces to `-`, repeats numbered. */
function headingAnchors (markdown: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  let fenced = false
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced
    const m = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (m === null) continue
    const text = (m[1] as string).replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    const base = text.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    anchors.add(n === 0 ? base : `${base}-${n}`)
  }
  return anchors
}

const files = trackedFiles()
const texts = new Map<string, string>()
for (const file of files) {
  const text = textOf(file)
  if (text !== null) texts.set(file, text)
}

t.test('the repository is scanned (a broken file listing would make every check below pass)', async t => {
  t.ok(texts.has('core/app.ts') && texts.has('docs/contract.md') && texts.has('docs/conventions.md'))
  t.ok(texts.size > 300, `${texts.size} text files`)
})

t.test('no file cites a tracker issue, a section sign or a document outside the repository', async t => {
  const found: string[] = []
  for (const [file, text] of texts) {
    if (file === 'test/core/citations.test.ts') continue
    text.split('\n').forEach((line, i) => {
      for (const [what, re] of FORBIDDEN) {
        if (re.test(line)) found.push(`${file}:${i + 1}: ${what}: ${line.trim().slice(0, 120)}`)
      }
    })
  }
  t.same(found, [], 'cite docs/contract.md#… or docs/conventions.md#… instead')
})

t.test('every cited docs/<file>.md#<anchor> names an existing heading, every named docs/ file exists', async t => {
  const anchorsOf = new Map<string, Set<string> | null>()
  const anchors = (doc: string): Set<string> | null => {
    if (!anchorsOf.has(doc)) anchorsOf.set(doc, existsSync(join(ROOT, doc)) ? headingAnchors(readFileSync(join(ROOT, doc), 'utf8')) : null)
    return anchorsOf.get(doc) ?? null
  }
  const broken: string[] = []
  let checked = 0
  const check = (file: string, target: string, anchor: string | undefined): void => {
    checked++
    if (!existsSync(join(ROOT, target))) broken.push(`${file}: ${target}: no such file`)
    else if (anchor !== undefined && target.endsWith('.md') && anchors(target)?.has(anchor) !== true) broken.push(`${file}: ${target}#${anchor}: no such heading`)
  }
  for (const [file, text] of texts) {
    for (const m of text.matchAll(/\bdocs\/([a-z0-9_-]+\.md)(?:#([A-Za-z0-9_-]+))?/g)) check(file, `docs/${m[1]}`, m[2])
    // Inside docs/, relative links: `(other.md)`, `(other.md#anchor)`, `(#anchor)`, `(../SECURITY.md)`.
    if (file.startsWith('docs/') && file.endsWith('.md')) {
      for (const m of text.matchAll(/\]\(([^)\s#:]*)(?:#([^)\s]+))?\)/g)) {
        check(file, m[1] === '' ? file : normalize(join(dirname(file), m[1] as string)), m[2])
      }
    }
  }
  t.same(broken, [])
  t.ok(checked > 500, `${checked} citations and links checked`)
})

t.test('anchors follow GitHub: punctuation dropped, underscores kept, repeated headings numbered', async t => {
  const a = headingAnchors('# The wire contract\n## Methods on `/mcp`\n### bash_tool\n```\n# not a heading\n```\n## Tier 6: GET /system-prompt\n## View\n## View\n')
  t.same([...a], ['the-wire-contract', 'methods-on-mcp', 'bash_tool', 'tier-6-get-system-prompt', 'view', 'view-1'])
})
