/*
 * Token scopes over every route of the default manifest (SECURITY.md "Identity and credentials"):
 * each route the OpenAPI description lists is in exactly one class below, and answers as its class
 * says to no credential, a files token, a control token of this chat or another, and the API key.
 * A new route must be placed in a class here, so none is added without a decision about its scope.
 * Inject only: the engine is unreachable on purpose, a route's own answer (503, 404) counts as "let in".
 */
import t from 'tap'
import type { Test } from 'tap'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { build, TEST_API_KEY } from '../helper.js'
import { tempDir } from '../fixtures/temp-dir.js'

/** Routes anyone may call (no chat, nothing a capability grants). */
const PUBLIC = ['GET /health', 'GET /ready', 'GET /api/runtime/cli', 'GET /system-prompt', 'GET /']
/** Routes that take the API key only: no capability token of any scope opens them. */
const KEY_ONLY = ['GET /metrics', 'POST /mcp', 'GET /mcp', 'DELETE /mcp', 'POST /mcp/', 'GET /mcp/', 'DELETE /mcp/', 'GET /mcp-info',
  'PUT /api/egress/{chat}', 'DELETE /api/egress/{chat}', 'GET /skill-list', 'GET /skill-mounts']
/** Chat routes a files token (read-only) opens. */
const FILES = ['GET /api/egress/{chat}', 'GET /api/egress/{chat}/log', 'GET /files/{chat}/{*}', 'GET /api/outputs/{chat}', 'GET /preview/{chat}']
/** Chat routes that need a control token of the chat (or the key): uploads, the browser, the terminal. */
const CONTROL = ['POST /api/uploads/{chat}/{*}', 'GET /api/uploads/{chat}/manifest', 'GET /api/uploads/{chat}/list',
  'GET /browser/{chat}/status', 'GET /browser/{chat}/json', 'GET /browser/{chat}/json/list', 'GET /browser/{chat}/json/version', 'POST /browser/{chat}/handoff/release',
  'GET /terminal/{chat}', 'GET /terminal/{chat}/status', 'POST /terminal/{chat}/start-ttyd', 'POST /terminal/{chat}/stop-ttyd',
  'POST /terminal/{chat}/restart-container', 'POST /terminal/{chat}/resurrect-container', 'GET /terminal/{chat}/sessions',
  'GET /terminal/{chat}/processes', 'POST /terminal/{chat}/processes/{pid}/kill', 'GET /terminal/{chat}/heartbeat',
  'GET /terminal/{chat}/ws', 'GET /api/apps/{chat}']
/**
 * App preview URLs (control scope): the one place a cookie is a credential, `cubicle_app`, set by a
 * `?t=` visit with Path=/apps/<chat>/<port>/ (docs/features.md#app-preview-urls), so an app's own
 * links and assets work; it opens nothing else.
 */
const APPS = ['GET', 'DELETE', 'PATCH', 'POST', 'PUT', 'OPTIONS'].flatMap(m => [`${m} /apps/{chat}/{port}`, `${m} /apps/{chat}/{port}/{*}`])

const refused = (status: number): boolean => status === 401 || status === 403

interface Server { app: FastifyInstance, routes: string[], call: (route: string, headers: Record<string, string>) => Promise<LightMyRequestResponse> }

/** The default manifest in protected mode, the routes of its OpenAPI description, and a way to call one for chat-a. */
async function server (t: Test): Promise<Server> {
  const dataDir = await tempDir(t, 'tscope-data')
  const app = await build(t, { MCP_API_KEY: TEST_API_KEY, DOCKER_HOST: 'unix:///nonexistent-cubicle.sock', DATA_DIR: dataDir, SANDBOX_PREFIX: 'tscope' })
  const spec = (await app.inject({ url: '/openapi.json', headers: { authorization: `Bearer ${TEST_API_KEY}` } })).json() as { paths: Record<string, Record<string, unknown>> }
  const routes = Object.entries(spec.paths).flatMap(([path, ops]) => Object.keys(ops).map(method => `${method.toUpperCase()} ${path}`))
  let n = 0
  const call = async (route: string, headers: Record<string, string>): Promise<LightMyRequestResponse> => {
    const [method = 'GET', path = '/'] = route.split(' ')
    return await app.inject({
      method: method as 'GET',
      url: path.replace('{chat}', 'chat-a').replace('{*}', 'a.txt').replace('{pid}', '42').replace('{port}', '3000'),
      headers,
      ...(method === 'PUT' && { payload: {} }),
      // A fresh client address per request: this many failures from one would be throttled (429).
      remoteAddress: `10.77.${Math.floor(n / 250)}.${(n++ % 250) + 1}`
    })
  }
  return { app, routes, call }
}

t.test('every route answers no credential, files and control tokens and the key as its scope says', async t => {
  const { app, routes, call } = await server(t)
  const classes = [...PUBLIC, ...KEY_ONLY, ...FILES, ...CONTROL, ...APPS]
  t.same(routes.filter(r => !classes.includes(r)), [], 'every route is in a class')
  t.same(classes.filter(r => !routes.includes(r)), [], 'every class lists only routes that exist')
  const credentials: Record<string, string | undefined> = {
    none: undefined,
    files: app.links.token('chat-a', 'f'),
    control: app.links.token('chat-a', 'c'),
    otherChat: app.links.token('chat-b', 'c'),
    key: TEST_API_KEY
  }
  const status = async (route: string, credential: string | undefined): Promise<number> =>
    (await call(route, credential === undefined ? {} : { authorization: `Bearer ${credential}` })).statusCode
  for (const route of routes) {
    const got: Record<string, number> = {}
    for (const [name, credential] of Object.entries(credentials)) got[name] = await status(route, credential)
    const seen = JSON.stringify(got)
    if (PUBLIC.includes(route)) {
      t.notOk(refused(got.none ?? 0), `${route} answers without a credential ${seen}`)
      continue
    }
    t.equal(got.none, 401, `${route}: no credential is 401 ${seen}`)
    t.ok(refused(got.otherChat ?? 0), `${route}: another chat's control token is refused ${seen}`)
    t.notOk(refused(got.key ?? 0), `${route}: the API key is let in ${seen}`)
    if (KEY_ONLY.includes(route)) {
      t.ok(refused(got.files ?? 0) && refused(got.control ?? 0), `${route}: no capability token opens it ${seen}`)
    } else if (FILES.includes(route)) {
      t.ok(!refused(got.files ?? 0) && !refused(got.control ?? 0), `${route}: files and control tokens of the chat open it ${seen}`)
    } else {
      t.equal(got.files, 403, `${route}: a files token is 403 ${seen}`)
      t.notOk(refused(got.control ?? 0), `${route}: the chat's control token opens it ${seen}`)
    }
  }
})

t.test('a cookie is no credential: every protected route refuses it, and no route sets one', async t => {
  const { app, routes, call } = await server(t)
  const control = app.links.token('chat-a', 'c') as string
  // What a browser would attach on its own if the server ever looked at cookies: the key and a token under
  // likely names, and the app cookie of chat-a, which only the app routes take.
  const cookie = [`session=${TEST_API_KEY}`, `token=${control}`, `t=${control}`, `authorization=Bearer%20${TEST_API_KEY}`, `_session=${control}`, `cubicle_app=${control}`].join('; ')
  for (const route of routes.filter(r => !PUBLIC.includes(r))) {
    const res = await call(route, { cookie, origin: 'http://cubicle.test', 'sec-fetch-site': 'same-origin' })
    if (APPS.includes(route)) t.notOk(refused(res.statusCode), `${route}: the app cookie of the chat opens its apps (${res.statusCode})`)
    else t.equal(res.statusCode, 401, `${route}: cookies alone are 401`)
  }
  for (const route of routes) {
    const res = await call(route, { authorization: `Bearer ${TEST_API_KEY}` })
    t.equal(res.headers['set-cookie'], undefined, `${route} sets no cookie`)
  }
})
