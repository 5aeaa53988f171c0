/*
 * The README is the newcomer's page (what Cubicle is, the two commands, each client, a short security
 * and architecture overview, links); the rest lives in docs/. These tests keep it short, keep every
 * link between the pages pointing at a file that exists, and keep the plugin guide's example the code
 * that examples/hello-plugin/index.ts really is (test/http/example-plugin.test.ts runs that code).
 * Anchors (`page.md#heading`) are checked by test/core/citations.test.ts.
 */
import t from 'tap'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8')
const docs = readdirSync(join(ROOT, 'docs')).filter(f => f.endsWith('.md')).map(f => `docs/${f}`)

/** Relative link targets of a Markdown page (no scheme, no pure #anchor), without their anchor. */
function relativeLinks (markdown: string): string[] {
  const outside = markdown.replace(/```[\s\S]*?```/g, '')
  return [...outside.matchAll(/\]\(([^)\s]+)\)/g)].map(m => m[1] as string)
    .filter(href => !/^[a-z][a-z0-9+.-]*:/i.test(href) && !href.startsWith('#'))
    .map(href => href.split('#')[0] as string)
}

t.test('the README is short and names the two commands and every client', async t => {
  const readme = read('README.md')
  const lines = readme.split('\n').length
  t.ok(lines <= 350, `README.md has ${lines} lines (at most 350)`)
  t.match(readme, /npm test/)
  t.match(readme, /npm start/)
  for (const client of ['Any MCP client', 'Open WebUI', 'n8n', 'Claude (Desktop, web, mobile) by URL', 'mcp-remote', 'Claude Code', 'LiteLLM', 'MCP Inspector']) {
    t.ok(readme.includes(client), `names ${client}`)
  }
  t.match(readme, /\]\(SECURITY\.md\)/, 'links SECURITY.md')
})

t.test('every page of docs/ is linked from the README or the docs index', async t => {
  const index = read('README.md') + read('docs/README.md').replace(/\]\((?!\.\.\/)/g, '](docs/')
  for (const doc of docs.filter(d => d !== 'docs/README.md')) t.ok(index.includes(`](${doc})`), `${doc} is linked`)
})

t.test('every relative link of the README, SECURITY.md, integrations/README.md and docs/ names a file that exists', async t => {
  const broken: string[] = []
  for (const page of ['README.md', 'SECURITY.md', 'integrations/README.md', ...docs]) {
    for (const href of relativeLinks(read(page))) {
      if (href === '') continue
      const target = normalize(join(dirname(page), decodeURIComponent(href)))
      if (!existsSync(join(ROOT, target))) broken.push(`${page}: ${href}`)
    }
  }
  t.same(broken, [])
})

t.test('every repository path the README and docs/ name in backticks exists', async t => {
  const missing: string[] = []
  for (const page of ['README.md', ...docs]) {
    for (const m of read(page).matchAll(/`((?:core|plugins|test|scripts|examples|bench|sandbox-image|integrations|docs)\/[\w./-]+\.(?:ts|mjs|js|sh|md|json|py))`/g)) {
      if (!existsSync(join(ROOT, m[1] as string))) missing.push(`${page}: ${m[1] as string}`)
    }
  }
  t.same(missing, [], 'a moved or renamed file is named by its new path')
})

t.test('the link finder sees relative links and skips URLs, anchors and code', async t => {
  t.same(relativeLinks('[a](docs/contract.md#tools) [b](https://e.org) [c](#top) ```\n[d](nope.md)\n``` [e](../y.md)'), ['docs/contract.md', '../y.md'])
})

t.test('the plugin guide shows examples/hello-plugin/index.ts as it is', async t => {
  const code = read('examples/hello-plugin/index.ts')
  const shown = /```ts\n([\s\S]*?)```/.exec(read('docs/writing-a-plugin.md'))?.[1] ?? ''
  t.equal(shown, code.slice(code.indexOf('import fp')), 'the first ts block is the file after its header comment')
})
