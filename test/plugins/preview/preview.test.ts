import t from 'tap'
import type { Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { entry } from '../../../core/app.js'
import capabilities from '../../../plugins/capabilities/index.js'
import preview from '../../../plugins/preview/index.js'
import { scriptJson } from '../../../plugins/preview/page.js'
import { VENDOR } from '../../../plugins/preview/vendor.js'
import { build, TEST_API_KEY } from '../../helper.js'
import fp from 'fastify-plugin'

const KEY = TEST_API_KEY

async function app (t: Test, env: Record<string, string> = {}): Promise<FastifyInstance> {
  return await build(t, { MCP_API_KEY: KEY, ...env }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
    entry(preview, { frameAncestors: config.FRAME_ANCESTORS })
  ])
}

/** Every front-end module the page imports or the parser worker loads (static, public, nosniff). */
const FRONT_END = ['renderers.js', 'dom.js', 'fetch-file.js', 'parse.js', 'parser-worker.js', 'sanitize.js', 'crash-guard.js',
  'render/media.js', 'render/text.js', 'render/markdown.js', 'render/code.js', 'render/table.js', 'render/spreadsheet.js',
  'render/xlsx.js', 'render/docx.js', 'network-view.js'].map(f => `/static/preview/${f}`)

function configOf (html: string): Record<string, unknown> {
  const m = /<script type="application\/json" id="config">(.*?)<\/script>/s.exec(html)
  if (m === null) throw new Error('no config block')
  return JSON.parse(m[1] as string) as Record<string, unknown>
}

// `script-src 'self'` also trusted agent-written .js under /files. The CSP of docs/contract.md#preview-page is made
// stricter: a per-response nonce with 'strict-dynamic', workers from blob: only (the parser worker), no plugins,
// no <base>; everything else exactly as docs/contract.md#preview-page has it.
const CSP = (nonce: string, ancestors: string): string => `default-src 'self'; script-src 'nonce-${nonce}' 'strict-dynamic'; worker-src blob:; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors ${ancestors}`

function nonceOf (csp: unknown): string {
  const m = /script-src 'nonce-([A-Za-z0-9+/]{22}==)' /.exec(String(csp))
  if (m === null) throw new Error(`no nonce in ${String(csp)}`)
  return m[1] as string
}

t.test('the page carries the exact CSP, no-store caching, nosniff and no CORS header without an Origin', async t => {
  const server = await app(t, { FRAME_ANCESTORS: 'https://chat.example.com' })
  const token = server.links.token('chat-a', 'f') as string
  const res = await server.inject({ url: `/preview/chat-a?t=${token}` })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['content-type'], 'text/html; charset=utf-8')
  const nonce = nonceOf(res.headers['content-security-policy'])
  t.equal(res.headers['content-security-policy'], CSP(nonce, 'https://chat.example.com'))
  t.notMatch(String(res.headers['content-security-policy']), /script-src[^;]*'self'/, "script-src no longer trusts 'self' (agent .js under /files)")
  t.equal(res.headers['cache-control'], 'no-cache, no-store, must-revalidate')
  t.equal(res.headers['x-content-type-options'], 'nosniff')
  t.equal(res.headers['access-control-allow-origin'], undefined)
  t.equal(res.headers['referrer-policy'], 'no-referrer')
})

t.test('a files token opens the files-only UI; the config holds token, apiUrl and filesBase', async t => {
  const server = await app(t)
  const token = server.links.token('chat-a', 'f') as string
  const config = configOf((await server.inject({ url: `/preview/chat-a?t=${token}` })).body)
  t.same(config, {
    chatId: 'chat-a',
    apiUrl: `/api/outputs/chat-a?t=${token}`,
    filesBase: `/files/chat-a/~${token}`,
    scope: 'files',
    token,
    parseTimeoutMs: 20000,
    egress: null,
    apps: null
  })
})

t.test('a control token or the API key opens the full UI, whose data URLs still carry only a files token', async t => {
  const server = await app(t)
  const control = server.links.token('chat-a', 'c') as string
  const files = server.links.token('chat-a', 'f') as string
  const viaControl = configOf((await server.inject({ url: `/preview/chat-a?t=${control}` })).body)
  t.equal(viaControl.scope, 'full')
  t.equal(viaControl.token, control)
  t.equal(viaControl.apiUrl, `/api/outputs/chat-a?t=${files}`)
  t.equal(viaControl.filesBase, `/files/chat-a/~${files}`)
  const viaKey = configOf((await server.inject({ url: '/preview/chat-a', headers: { authorization: `Bearer ${KEY}` } })).body)
  t.equal(viaKey.scope, 'full')
  t.match(viaKey.token, /^v1\.c\./, 'an API-key opener gets a control token, never the key itself')
  t.notMatch(JSON.stringify(viaKey), new RegExp(KEY))
})

t.test('open mode: no tokens anywhere, reference-shaped paths', async t => {
  const server = await app(t, { MCP_API_KEY: '' })
  const config = configOf((await server.inject({ url: '/preview/chat-a' })).body)
  t.same(config, { chatId: 'chat-a', apiUrl: '/api/outputs/chat-a', filesBase: '/files/chat-a', scope: 'full', token: null, parseTimeoutMs: 20000, egress: null, apps: null })
})

t.test('config JSON escapes <, >, &, U+2028 and U+2029 so it cannot end the script block', async t => {
  const hostile = { chatId: '</script><script>alert(1)</script>&\u2028\u2029' }
  const out = scriptJson(hostile)
  t.notMatch(out, /[<>&\u2028\u2029]/)
  t.same(JSON.parse(out), hostile, 'still the same JSON value')
})

t.test('the page has no inline script: only src scripts and the JSON data block', async t => {
  const server = await app(t)
  const html = (await server.inject({ url: '/preview/chat-a', headers: { authorization: `Bearer ${KEY}` } })).body
  const tags = html.match(/<script[^>]*>/g) ?? []
  t.ok(tags.length >= 2)
  for (const tag of tags) t.ok(/ src="/.test(tag) || tag.includes('type="application/json"'), tag)
  t.notMatch(html, /\son[a-z]+=/i, 'no inline event handlers')
})

t.test('each response has its own nonce, and only the page\'s module script carries it', async t => {
  const server = await app(t)
  const get = async (): Promise<{ html: string, nonce: string }> => {
    const res = await server.inject({ url: '/preview/chat-a', headers: { authorization: `Bearer ${KEY}` } })
    return { html: res.body, nonce: nonceOf(res.headers['content-security-policy']) }
  }
  const [a, b] = [await get(), await get()]
  t.not(a.nonce, b.nonce, 'a fresh nonce per response')
  const nonced = a.html.match(/<script[^>]*nonce="[^"]*"[^>]*>/g) ?? []
  t.same(nonced, [`<script type="module" nonce="${a.nonce}" src="../static/preview/app.js">`])
  t.notMatch(a.html, new RegExp(b.nonce.replace(/[+/]/g, '\\$&')), 'no other response\'s nonce')
})

t.test('parseTimeoutMs reaches the page config and is validated', async t => {
  const server = await build(t, { MCP_API_KEY: KEY }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
    entry(preview, { frameAncestors: config.FRAME_ANCESTORS, parseTimeoutMs: 1500 })
  ])
  const config = configOf((await server.inject({ url: '/preview/chat-a', headers: { authorization: `Bearer ${KEY}` } })).body)
  t.equal(config.parseTimeoutMs, 1500)
  await t.rejects(build(t, { MCP_API_KEY: KEY }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
    entry(preview, { frameAncestors: config.FRAME_ANCESTORS, parseTimeoutMs: 0 })
  ]), /parseTimeoutMs/)
})

t.test('every asset the page references is served from /static without credentials', async t => {
  const server = await app(t)
  const html = (await server.inject({ url: '/preview/chat-a', headers: { authorization: `Bearer ${KEY}` } })).body
  const refs = [...html.matchAll(/(?:src|href)="(\.\.\/static\/[^"]+)"/g)].map(m => new URL(m[1] as string, 'http://x/preview/chat-a').pathname)
  t.ok(refs.length >= 4)
  for (const path of [...refs, ...FRONT_END]) {
    const res = await server.inject({ url: path })
    t.equal(res.statusCode, 200, path)
    t.equal(res.headers['x-content-type-options'], 'nosniff', `${path} nosniff`)
  }
  t.match((await server.inject({ url: '/static/preview/app.js' })).headers['content-type'], /javascript/)
})

t.test('vendored libraries come from node_modules; only their listed dist files are reachable', async t => {
  const server = await app(t)
  for (const v of VENDOR) {
    for (const file of v.files) {
      const res = await server.inject({ url: `/static/vendor/${v.alias}/${file}` })
      t.equal(res.statusCode, 200, `${v.pkg}/${file}`)
      t.ok(res.rawPayload.length > 1000, `${v.pkg}/${file} has content`)
    }
    const pkg = await server.inject({ url: `/static/vendor/${v.alias}/package.json` })
    t.not(pkg.statusCode, 200, `${v.pkg}/package.json is not served`)
  }
  t.not((await server.inject({ url: '/static/vendor/dompurify/dist/purify.js' })).statusCode, 200, 'unlisted file')
  t.not((await server.inject({ url: '/static/preview/../index.ts' })).statusCode, 200)
  t.not((await server.inject({ url: '/static/preview/%2e%2e/index.ts' })).statusCode, 200)
})

t.test('HEAD and OPTIONS work on the page route', async t => {
  const server = await app(t)
  const head = await server.inject({ method: 'HEAD', url: '/preview/chat-a', headers: { authorization: `Bearer ${KEY}` } })
  t.equal(head.statusCode, 200)
  t.equal(head.body, '')
  const pre = await server.inject({ method: 'OPTIONS', url: '/preview/chat-a' })
  t.equal(pre.statusCode, 204)
  t.equal(pre.headers['access-control-allow-headers'], 'Authorization, Content-Type')
  t.notOk(pre.headers['access-control-allow-credentials'])
})

t.test('with the egress plugin the page offers the Network view, reading both routes with the files token only', async t => {
  const fakeEgress = fp(async f => { f.decorate('egress', {} as never) }, { name: 'egress' })
  const server = await build(t, { MCP_API_KEY: KEY }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
    entry(fakeEgress, {}),
    entry(preview, { frameAncestors: config.FRAME_ANCESTORS })
  ])
  const control = server.links.token('chat-a', 'c') as string
  const files = server.links.token('chat-a', 'f') as string
  const html = (await server.inject({ url: `/preview/chat-a?t=${control}` })).body
  t.same(configOf(html).egress, { policy: `/api/egress/chat-a?t=${files}`, log: `/api/egress/chat-a/log?t=${files}` })
  t.match(html, /<button type="button" role="tab" id="view-network" data-view="network"/)
  t.match(html, /<section class="pane" id="network-pane" data-view-pane="network"/)
  const plain = await app(t)
  t.notMatch((await plain.inject({ url: `/preview/chat-a?t=${control}` })).body, /view-network/, 'no tab without the egress plugin')
})
