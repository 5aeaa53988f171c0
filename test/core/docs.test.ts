// The documents the code is held to (README, SECURITY.md, the generated docs, plugin metadata, self-host files), one group per document, all in one test process (docs/testing.md#the-unit-tiers-time); citations.test.ts, which scans every file but itself, stays on its own.
import t from 'tap'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ConfigSchema, loadConfig } from '../../core/config.js'
import { GROUPS, settingsDoc, typeOf } from '../../scripts/docs/settings.js'
import { renderRoutes, routesDoc, type OpenApi } from '../../scripts/docs/routes.js'
import Fastify from 'fastify'
import type { FastifyPluginAsync } from 'fastify'
import capabilities from '../../plugins/capabilities/index.js'
import mcpTransport from '../../plugins/mcp-transport/index.js'
import oauth from '../../plugins/oauth/index.js'
import sandbox from '../../plugins/sandbox/index.js'
import { parse } from 'yaml'
import { TEST_API_KEY } from '../helper.js'

/*
 * The README is the newcomer's page (what Cubicle is, the two commands, each client, a short security
 * and architecture overview, links); the rest lives in docs/. These tests keep it short, keep every
 * link between the pages pointing at a file that exists, and keep the plugin guide's example the code
 * that examples/hello-plugin/index.ts really is (test/http/server.test.ts runs that code).
 * Anchors (`page.md#heading`) are checked by test/core/citations.test.ts.
 */
t.test('readme', async t => {
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
})

/*
 * SECURITY.md names, for every promise it makes, the tests that hold it ("Promise | Held by" tables).
 * This test keeps that true as the code moves: every cited test file exists and every cited test name
 * is the title of a test in that file, so a renamed or deleted test fails here instead of leaving the
 * page promising something nothing checks. A row no test holds yet must say so ("Open:").
 */
t.test('security-doc', async t => {
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
})

/*
 * docs/settings.md and docs/routes.md are generated (npm run docs, scripts/gen-docs.ts) from the config
 * schema and the OpenAPI document. These tests regenerate both in memory and fail when the committed
 * page differs, so a setting or route added without `npm run docs` is caught here; and they check
 * that the generators refuse what would make a page silently incomplete.
 */
t.test('docs-generated', async t => {
  const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8')

  t.test('docs/settings.md is what the config schema generates', async t => {
    t.equal(read('docs/settings.md'), settingsDoc(), 'docs/settings.md is stale: run npm run docs')
  })

  t.test('docs/settings.md lists every configuration variable with its default, type and description', async t => {
    const doc = read('docs/settings.md')
    for (const [name, schema] of Object.entries(ConfigSchema.properties as Record<string, { default?: unknown, description?: string }>)) {
      const row = doc.split('\n').find(line => line.startsWith(`| \`${name}\` |`))
      t.ok(row, `${name} has a row`)
      const shown = schema.default === '' ? '(empty)' : `\`${String(schema.default)}\``
      t.match(row ?? '', ` ${shown} |`, `${name} shows its default`)
      t.ok((schema.description ?? '').length >= 8, `${name} has a description`)
    }
    for (const [title] of GROUPS) t.match(doc, `\n## ${title}\n`, `group ${title}`)
  })

  t.test('setting types are read from the schema', async t => {
    t.equal(typeOf({ type: 'integer', minimum: 60 }), 'integer ≥ 60')
    t.equal(typeOf({ type: 'integer', minimum: 0, 'x-kind': 'size' }), 'size')
    t.equal(typeOf({ type: 'number', exclusiveMinimum: 0 }), 'number > 0')
    t.equal(typeOf({ anyOf: [{ const: 'open' }, { const: 'off' }] }), 'one of: `open`, `off`')
  })

  t.test('docs/routes.md is what the OpenAPI document and the measured credentials generate', async t => {
    const doc = await routesDoc()
    t.equal(read('docs/routes.md'), doc, 'docs/routes.md is stale: run npm run docs')
    // The measurement itself: a sample of each class, as route-scopes.test.ts holds them.
    t.match(doc, /\| GET \| `\/health` \| none \|/)
    t.match(doc, /\| POST \| `\/mcp` \| API key \|/)
    t.match(doc, /\| GET \| `\/api\/outputs\/\{chat\}` \| files or control token, or key \|/)
    t.match(doc, /\| POST \| `\/terminal\/\{chat\}\/start-ttyd` \| control token or key \|/)
    t.match(doc, /\| PUT \| `\/api\/egress\/\{chat\}` \| API key \|/)
  })

  t.test('the routes page refuses an operation without a summary or tag, and merges methods of one purpose', async t => {
    const spec = (ops: Record<string, object>): OpenApi => ({ info: {}, tags: [{ name: 'x', description: 'things' }], paths: { '/a': ops } })
    t.throws(() => renderRoutes(spec({ get: { tags: ['x'] } }), () => 'none'), /GET \/a has no summary/)
    t.throws(() => renderRoutes(spec({ get: { summary: 'A' } }), () => 'none'), /GET \/a has no tag/)
    const page = renderRoutes(spec({
      post: { summary: 'A', tags: ['x'], responses: { 200: {}, '4XX': {} } },
      get: { summary: 'A', tags: ['x'], responses: { 200: {}, '4XX': {} } },
      delete: { summary: 'A', tags: ['x'], responses: { 200: {} } }
    }), () => 'key')
    t.match(page, '\n## x\n\nThings.\n')
    t.match(page, '| GET, POST | `/a` | API key | A |  | 200, 4XX |')
    t.match(page, '| DELETE | `/a` | API key | A |  | 200 |', 'a row that differs in another column stays its own')
  })
})

t.test('plugin-metadata', async t => {
// services a plugin takes from core (auth, readiness) are declared in its fastify-plugin
// metadata, so a registration without them stops the boot with a clear error instead of a TypeError later.
  const CASES: Array<[string, FastifyPluginAsync<any>, string]> = [
    ['capabilities', capabilities, 'auth'],
    ['mcp-transport', mcpTransport, 'auth'],
    ['oauth', oauth, 'auth'],
    ['sandbox', sandbox, 'readiness']
  ]

  for (const [name, plugin, decorator] of CASES) {
    t.test(`${name} declares that it needs fastify.${decorator}`, async t => {
      const app = Fastify({ logger: false })
      t.teardown(async () => { await app.close() })
      const err = await app.register(plugin, {}).ready().then(() => undefined, (e: unknown) => e as { code?: string, message?: string })
      t.equal(err?.code, 'FST_ERR_PLUGIN_NOT_PRESENT_IN_INSTANCE', `${name} without ${decorator}`)
      t.match(err?.message, new RegExp(decorator))
    })
  }
})

t.test('selfhost-files', async t => {
  const root = fileURLToPath(new URL('../..', import.meta.url))
  const read = (path: string): string => readFileSync(`${root}/${path}`, 'utf8')

  /** KEY=value lines of an env file (comments and blanks skipped). */
  function envFile (text: string): Map<string, string> {
    const out = new Map<string, string>()
    for (const line of text.split('\n')) {
      const m = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line)
      if (m?.[1] !== undefined) out.set(m[1], m[2] ?? '')
    }
    return out
  }

  /** Variables compose.yaml itself reads (interpolation), not the server. */
  const COMPOSE_ONLY = new Set(['DOCKER_GID', 'HOST_PORT', 'NODE_IMAGE', 'SERVER_IMAGE'])

  // .env.example documents every variable that matters, and the server accepts it as is
  t.test('.env.example: every server variable exists in the config schema, is commented, and boots once a key is set', async t => {
    const text = read('.env.example')
    const env = envFile(text)
    const known = new Set(Object.keys(ConfigSchema.properties))
    for (const name of ['MCP_API_KEY', 'PUBLIC_BASE_URL', 'LINK_SIGNING_KEY', 'DATA_DIR', 'MAX_RUNNING_SANDBOXES', 'CONTAINER_MEM_LIMIT', 'COMMAND_TIMEOUT', 'UPLOAD_MAX_BYTES']) {
      t.ok(env.has(name), `${name} is in .env.example`)
    }
    for (const name of env.keys()) {
      if (!COMPOSE_ONLY.has(name)) t.ok(known.has(name), `${name} is a real setting`)
      const before = text.slice(0, text.indexOf(`\n${name}=`))
      t.match(before.slice(before.lastIndexOf('\n\n')), /\n# /, `${name} has a comment above it`)
    }
    const values = Object.fromEntries([...env].filter(([k]) => !COMPOSE_ONLY.has(k)))
    t.throws(() => loadConfig({ ...values, MCP_API_KEY: 'short' }), /MCP_API_KEY/, 'a weak key is still refused')
    const config = loadConfig({ ...values, MCP_API_KEY: TEST_API_KEY })
    t.equal(config.CONTAINER_MEM_LIMIT, 2 * 1024 ** 3)
    t.equal(config.host, '0.0.0.0', 'with a key the server listens on all interfaces (reachable through -p)')
  })

  t.test('compose.yaml: socket, its group, the data dir at the same path inside and outside, env file, stop grace over CLOSE_GRACE_MS', async t => {
    const compose = parse(read('compose.yaml')) as { services: Record<string, { build: { context: string, args: Record<string, string> }, env_file: string, environment: Record<string, string>, volumes: string[], group_add: string[], stop_grace_period: string, ports: string[] }> }
    const svc = compose.services.cubicle
    t.ok(svc, 'one service, cubicle')
    if (svc === undefined) return
    t.equal(svc.build.context, '.')
    t.match(svc.build.args, { NODE_IMAGE: /node:24-bookworm-slim/, DOCKER_GID: /DOCKER_GID/ })
    t.ok(svc.volumes.includes('/var/run/docker.sock:/var/run/docker.sock'))
    const data = svc.volumes.find(v => v.includes('DATA_DIR'))
    const [outside, inside] = data?.split(/:(?=\$)/) ?? []
    t.equal(outside, inside, 'data dir: same path inside and outside')
    t.equal(svc.environment.DATA_DIR, outside, 'and the server is told that path')
    t.same(svc.group_add, ['${DOCKER_GID:-999}'])
    t.equal(svc.env_file, '${ENV_FILE:-.env}')
    t.match(svc.ports, ['${HOST_PORT:-8081}:8081'])
    const grace = Number(/^(\d+)s$/.exec(svc.stop_grace_period)?.[1]) * 1000
    t.ok(grace > loadConfig({}).CLOSE_GRACE_MS, 'docker waits longer than the server\'s own shutdown bound')
  })

  // npm start, the image's CMD and the bench run the server alike.
  t.test('npm start and the Dockerfile\'s CMD give the server the same node flags (--optimize-for-size)', async t => {
    const start = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts.start ?? ''
    const m = /^node ((?:--[a-z-]+(?:=\S+)? )*)dist\/core\/server\.js$/.exec(start)
    t.ok(m !== null, `npm start runs the built server: ${start}`)
    const flags = (m?.[1] ?? '').split(' ').filter(Boolean)
    t.ok(flags.includes('--optimize-for-size'), 'memory over speed (docs/performance.md)')
    const cmd = /^CMD (\[.*\])$/m.exec(read('Dockerfile'))?.[1]
    t.same(JSON.parse(cmd ?? '[]'), ['node', ...flags, 'dist/core/server.js'], 'the image runs it the same way')
    t.notMatch(read('compose.yaml'), /^\s*(command|entrypoint):/m, 'compose.yaml keeps the image\'s CMD')
    const { deployedNodeArgs } = await import('../../bench/common.js')
    t.same(deployedNodeArgs(), flags, 'the bench measures the server as npm start runs it')
  })

  // The image's build stage runs `npm run build`: its script must be in the build context and copied in (docs/architecture.md#the-build).
  t.test('the Dockerfile\'s build stage has what npm run build runs', async t => {
    const build = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts.build ?? ''
    const m = /^node (scripts\/[a-z-]+\.mjs)$/.exec(build)
    t.ok(m !== null, `npm run build runs one script: ${build}`)
    const script = m?.[1] ?? ''
    const dockerfile = read('Dockerfile')
    const stage = dockerfile.slice(0, dockerfile.indexOf('RUN npm run build'))
    t.ok(stage.length < dockerfile.length, 'the build stage runs npm run build')
    t.ok(stage.split('\n').some(line => line.startsWith('COPY ') && line.split(' ').includes(script)), `the build stage copies ${script} before it runs`)
    t.ok(read('.dockerignore').split('\n').includes(`!${script}`), `.dockerignore lets ${script} into the build context`)
  })
})
