/*
 * docs/settings.md and docs/routes.md are generated (npm run docs, scripts/gen-docs.ts) from the config
 * schema and the OpenAPI document. These tests regenerate both in memory and fail when the committed
 * page differs, so a setting or route added without `npm run docs` is caught here; and they check
 * that the generators refuse what would make a page silently incomplete.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { ConfigSchema } from '../../core/config.js'
import { GROUPS, settingsDoc, typeOf } from '../../scripts/docs/settings.js'
import { renderRoutes, routesDoc, type OpenApi } from '../../scripts/docs/routes.js'

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
