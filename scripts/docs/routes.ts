/*
 * docs/routes.md, rendered from the OpenAPI document (/openapi.json, @fastify/swagger over the route
 * schemas): every operation with its purpose (the schema's summary), its query parameters and the
 * answers it declares. The credentials column is measured, not written down: each operation is
 * injected into the full manifest (protected mode, OAuth on, an unreachable Docker engine) with no
 * credential, a files token, a control token and the API key, and the first that is let in is shown.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../core/app.js'
import { loadConfig } from '../../core/config.js'
import manifest from '../../fastify.config.js'
import { anchor, cell, GENERATED_NOTE } from './markdown.js'

/** Only used inside the throwaway app the page is measured on. */
const KEY = 'docs-generator-api-key-0123456789abcdef'
const CHAT = 'docs-chat'

interface Parameter { in: string, name: string }
interface Operation { summary?: string, tags?: string[], parameters?: Parameter[], responses?: Record<string, unknown> }
export interface OpenApi { info: { description?: string }, tags?: Array<{ name: string, description?: string }>, paths: Record<string, Record<string, Operation>> }

/** Who is let in, from the statuses of one operation under each credential. */
export type Access = 'none' | 'files' | 'control' | 'key'
export const ACCESS: Record<Access, string> = {
  none: 'none',
  files: 'files or control token, or key',
  control: 'control token or key',
  key: 'API key'
}

const refused = (status: number): boolean => status === 401 || status === 403 || status === 429

/** The app the page is measured on: the whole manifest, nothing reachable outside the process. */
export async function measuredApp (dataDir: string): Promise<FastifyInstance> {
  const config = loadConfig({
    LOG_LEVEL: 'silent',
    MCP_API_KEY: KEY,
    PUBLIC_BASE_URL: 'https://cubicle.example',
    DATA_DIR: dataDir,
    SANDBOX_PREFIX: 'docsgen',
    DOCKER_HOST: 'unix:///nonexistent-cubicle-docs.sock',
    OAUTH_ENABLED: 'true',
    OIDC_ISSUER: 'https://issuer.example',
    OIDC_CLIENT_ID: 'cubicle',
    OIDC_ALLOWED_EMAILS: '@example.com'
  })
  const app = await buildApp(config, manifest(config), { logger: false })
  await app.ready()
  return app
}

/** Injects one operation with each credential in turn; a fresh client address each time (no throttling). */
export async function probe (app: FastifyInstance, method: string, path: string, seq: { n: number }): Promise<Access> {
  const url = path.replace('{chat}', CHAT).replace('{*}', 'a.txt').replace('{pid}', '42').replace(/\{[^}]+\}/g, 'x')
  const tokens: Array<[Access, string | undefined]> = [
    ['none', undefined], ['files', app.links.token(CHAT, 'f')], ['control', app.links.token(CHAT, 'c')], ['key', KEY]
  ]
  for (const [access, credential] of tokens) {
    const n = seq.n++
    const res = await app.inject({
      method: method as 'GET',
      url,
      headers: credential === undefined ? {} : { authorization: `Bearer ${credential}` },
      ...(['POST', 'PUT', 'PATCH'].includes(method) && { payload: {} }),
      remoteAddress: `10.99.${Math.floor(n / 250)}.${(n % 250) + 1}`
    })
    if (!refused(res.statusCode)) return access
  }
  throw new Error(`${method} ${path} refuses even the API key`)
}

interface Row { method: string, path: string, access: Access, op: Operation }

const METHOD_ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'QUERY']

/** Rows of one path that agree in every column but the method become one row (`GET, POST /oauth/{*}`). */
function merged (rows: Row[]): Row[] {
  const out: Row[] = []
  const key = (r: Row): string => JSON.stringify([r.path, r.access, r.op.summary, queryOf(r.op), answersOf(r.op)])
  for (const row of rows) {
    const same = out.find(r => key(r) === key(row))
    if (same !== undefined) same.method = [...same.method.split(', '), row.method].sort((a, b) => METHOD_ORDER.indexOf(a) - METHOD_ORDER.indexOf(b)).join(', ')
    else out.push({ ...row })
  }
  return out
}

const queryOf = (op: Operation): string =>
  (op.parameters ?? []).filter(p => p.in === 'query' && p.name !== 't').map(p => `\`${p.name}\``).join(', ')
const answersOf = (op: Operation): string => Object.keys(op.responses ?? {}).join(', ')

/** The page, from the OpenAPI document and the measured access of each operation. */
export function renderRoutes (spec: OpenApi, access: (method: string, path: string) => Access): string {
  const rows: Row[] = []
  for (const [path, ops] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const name = `${method.toUpperCase()} ${path}`
      if (op.summary === undefined || op.summary.trim() === '') throw new Error(`${name} has no summary in its route schema`)
      if (op.tags?.[0] === undefined) throw new Error(`${name} has no tag in its route schema`)
      rows.push({ method: method.toUpperCase(), path, access: access(method.toUpperCase(), path), op })
    }
  }
  const tags = [...(spec.tags ?? []).map(t => t.name), ...rows.map(r => r.op.tags?.[0] as string)].filter((t, i, all) => all.indexOf(t) === i)
  const described = new Map((spec.tags ?? []).map(t => [t.name, t.description]))
  const out = [GENERATED_NOTE('the OpenAPI document (`GET /openapi.json`, built from every route\'s schema)'), '# HTTP routes', '', INTRO, '']
  out.push(tags.filter(t => rows.some(r => r.op.tags?.[0] === t)).map(t => `[${t}](#${anchor(t)})`).join(' · '), '')
  for (const tag of tags) {
    const mine = merged(rows.filter(r => r.op.tags?.[0] === tag))
    if (mine.length === 0) continue
    out.push(`## ${tag}`, '')
    const about = described.get(tag)
    if (about !== undefined) out.push(`${about[0]?.toUpperCase() ?? ''}${about.slice(1)}.`, '')
    out.push('| Method | Path | Credentials | Purpose | Query | Answers |', '|---|---|---|---|---|---|')
    for (const r of mine) {
      out.push(`| ${r.method} | \`${r.path}\` | ${ACCESS[r.access]} | ${cell(r.op.summary ?? '')} | ${queryOf(r.op)} | ${answersOf(r.op)} |`)
    }
    out.push('')
  }
  return out.join('\n')
}

const INTRO = `Every HTTP route of the full manifest (\`fastify.config.ts\`), as the server's OpenAPI 3.1
document describes it (\`GET /openapi.json\` serves the same document with every schema in full). MCP
itself is one route, \`POST /mcp\`: its methods and tools are in [contract.md](contract.md#mcp-endpoint);
error codes are in [errors.md](errors.md).

**Credentials** is what the route lets in, measured on a server in protected mode (\`MCP_API_KEY\` set):
*none*; a *files* token of the chat (read-only links) or a *control* token (preview, browser, terminal,
uploads), which also opens everything a files token opens; or only the *API key*
(\`Authorization: Bearer <MCP_API_KEY>\`). Tokens travel as \`Authorization: Bearer\`, as \`?t=\` or, on
\`/files\`, as a \`~token\` path segment; the key only as the header. With \`OAUTH_ENABLED\`, an OAuth access
token opens \`/mcp\` and nothing else. In open mode (no key) no route asks for credentials.
**Query** lists query parameters besides the token \`t\`; **Answers** the statuses the schema declares
(\`4XX\`: a JSON \`{"error","detail"}\` body). Chat routes take the chat id in \`{chat}\` and answer
400 \`invalid_chat_id\` before anything else. The live browser's CDP WebSocket,
\`/browser/{chat}/devtools/page/{id}\` (control token or key), is described in
[contract.md](contract.md#browser).`

/** Builds the measured app, renders the page, and removes everything it made. */
export async function routesDoc (): Promise<string> {
  const dataDir = await mkdtemp(join(tmpdir(), 'cubicle-docs-'))
  const app = await measuredApp(dataDir)
  try {
    const spec = app.swagger() as unknown as OpenApi
    const seq = { n: 0 }
    const measured = new Map<string, Access>()
    for (const [path, ops] of Object.entries(spec.paths)) {
      for (const method of Object.keys(ops)) measured.set(`${method.toUpperCase()} ${path}`, await probe(app, method.toUpperCase(), path, seq))
    }
    return renderRoutes(spec, (method, path) => measured.get(`${method} ${path}`) as Access)
  } finally {
    await app.close()
    await rm(dataDir, { recursive: true, force: true })
  }
}
