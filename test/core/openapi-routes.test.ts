// routes get real TypeBox schemas for params/query/body, so /openapi.json describes every input.
import t from 'tap'
import fp from 'fastify-plugin'
import type { RouteOptions } from 'fastify'
import { entry } from '../../core/app.js'
import manifest from '../../fastify.config.js'
import { build, TEST_API_KEY } from '../helper.js'

interface Seen { method: string, url: string, schema: Record<string, { properties?: Record<string, unknown> } | undefined>, websocket: boolean, hide: boolean }

/**
 * Routes exempt from the rule, each with its reason: they are not an API a client calls with inputs.
 * - the authorization server's own endpoints (node-oidc-provider parses and checks them; its
 *   metadata at /.well-known/oauth-authorization-server describes them)
 * - static assets of the pages and the icons (@fastify/static: a file path, nothing else)
 */
const allowed = (url: string): boolean => url === '/oauth/*' || url.startsWith('/static/') || url.startsWith('/icons/')

/** Routes that read query parameters besides the chat token `t`, and which. */
const QUERY: Record<string, string[]> = {
  '/system-prompt': ['chat_id', 'user_email', 'file_base_url'],
  '/skill-list': ['user_email'],
  '/skill-mounts': ['user_email'],
  '/files/:chat/*': ['t', 'download', 'raw'],
  '/oauth/interaction/:uid/upstream': ['ticket'],
  '/oauth/upstream/callback': ['code', 'state']
}

const paramsOf = (url: string): string[] => [...url.matchAll(/:([A-Za-z0-9_]+)|\*/g)].map(m => m[1] ?? '*')
const openapiPath = (url: string): string => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*/g, '{*}')

const collector = fp(async fastify => {
  fastify.addHook('onRoute', (route: RouteOptions & { websocket?: boolean }) => {
    for (const method of [route.method].flat()) {
      seen.push({ method, url: route.url, schema: (route.schema ?? {}) as Seen['schema'], websocket: route.websocket === true, hide: (route.schema as { hide?: boolean } | undefined)?.hide === true })
    }
  })
}, { name: 'route-collector' })
const seen: Seen[] = []

t.test('every route declares the params, query and body it takes, and /openapi.json describes them', async t => {
  const app = await build(t, {
    MCP_API_KEY: TEST_API_KEY, OAUTH_ENABLED: 'true', PUBLIC_BASE_URL: 'https://cubicle.example', DOCKER_HOST: 'unix:///nonexistent.sock'
  }, config => [entry(collector, {}), ...manifest(config)])
  const spec = (await app.inject('/openapi.json')).json() as { paths: Record<string, Record<string, { parameters?: Array<{ in: string, name: string, schema?: { type?: string }, description?: string }>, requestBody?: unknown }>> }
  const routes = seen.filter(r => r.method !== 'OPTIONS' && r.method !== 'HEAD' && !allowed(r.url))
  t.ok(routes.length > 40, `the full manifest's routes were collected (${routes.length})`)

  for (const r of routes) {
    const name = `${r.method} ${r.url}`
    const chatRoute = r.url.includes(':chat')
    const query = [...(QUERY[r.url] ?? []), ...(chatRoute ? ['t'] : [])]
    for (const p of paramsOf(r.url)) t.ok(r.schema.params?.properties?.[p], `${name}: params schema describes ${p}`)
    for (const q of query) t.ok(r.schema.querystring?.properties?.[q], `${name}: querystring schema describes ${q}`)
    if (['POST', 'PUT', 'PATCH'].includes(r.method)) t.ok(r.schema.body, `${name}: body schema`)
    if (r.websocket || r.hide) continue

    const op = spec.paths[openapiPath(r.url)]?.[r.method.toLowerCase()]
    if (op === undefined) { t.fail(`${name} is in /openapi.json`); continue }
    const params = op.parameters ?? []
    for (const p of paramsOf(r.url)) {
      t.ok(params.some(x => x.in === 'path' && x.name === p && x.description !== undefined), `${name}: /openapi.json describes path parameter ${p}`)
    }
    for (const q of query) t.ok(params.some(x => x.in === 'query' && x.name === q), `${name}: /openapi.json describes query parameter ${q}`)
    if (['POST', 'PUT', 'PATCH'].includes(r.method)) t.ok(op.requestBody, `${name}: /openapi.json describes the body`)
  }
})
