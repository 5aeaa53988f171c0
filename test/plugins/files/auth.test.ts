import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import type { Test } from 'tap'
import { entry } from '../../../core/app.js'
import { createLinkService } from '../../../plugins/capabilities/service.js'
import capabilities from '../../../plugins/capabilities/index.js'
import files from '../../../plugins/files/index.js'
import chatStorage from '../../../plugins/chat-storage/index.js'
import preview from '../../../plugins/preview/index.js'
import { build, OTHER_API_KEY } from '../../helper.js'
import { KEY } from './setup.js'
import { mkdirSync, writeFileSync } from 'node:fs'
import { chatPaths } from '../../../core/chat-paths.js'
import { CAPABILITY_TOKEN } from '../../../core/tokens.js'

async function app (t: Test, dataDir: string, key = KEY): Promise<FastifyInstance> {
  return await build(t, { DATA_DIR: dataDir, MCP_API_KEY: key }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
    entry(chatStorage, { dataDir: config.DATA_DIR }),
    entry(files, {}),
    entry(preview, {})
  ])
}

function dataDirWithOutputs (t: Test): string {
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-auth-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  for (const chat of ['chat-a', 'chat-b']) {
    const out = chatPaths(dataDir, chat).outputs
    mkdirSync(out, { recursive: true })
    writeFileSync(join(out, 'a.txt'), `content of ${chat}`)
  }
  return dataDir
}

/** Every chat route of this plugin pair, as a function of how the credential is presented. */
const ROUTES: Array<[string, (chat: string, token?: string) => { url: string, headers?: Record<string, string> }]> = [
  ['file (path token)', (chat, token) => ({ url: token === undefined ? `/files/${chat}/a.txt` : `/files/${chat}/~${token}/a.txt` })],
  ['file (?t=)', (chat, token) => ({ url: `/files/${chat}/a.txt${token === undefined ? '' : `?t=${token}`}` })],
  ['file (bearer)', (chat, token) => ({ url: `/files/${chat}/a.txt`, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } })],
  ['archive (path token)', (chat, token) => ({ url: token === undefined ? `/files/${chat}/archive` : `/files/${chat}/~${token}/archive` })],
  ['outputs listing', (chat, token) => ({ url: `/api/outputs/${chat}${token === undefined ? '' : `?t=${token}`}` })],
  ['preview page', (chat, token) => ({ url: `/preview/${chat}${token === undefined ? '' : `?t=${token}`}` })]
]

t.test('token matrix on every chat route: missing 401, bad 403, valid 200', async t => {
  const dataDir = dataDirWithOutputs(t)
  const server = await app(t, dataDir)
  const valid = server.links.token('chat-a', 'f') as string
  const control = server.links.token('chat-a', 'c') as string
  const expired = createLinkService({ apiKey: KEY, signingKey: '', tokenTtlSeconds: 60, publicBaseUrl: 'http://x', now: () => Date.now() - 3 * 86400_000 }).token('chat-a', 'f') as string
  const otherServer = createLinkService({ apiKey: OTHER_API_KEY, signingKey: '', tokenTtlSeconds: 86400, publicBaseUrl: 'http://x' }).token('chat-a', 'f') as string
  const [v, s, exp, sig] = valid.split('.') as [string, string, string, string]
  const bad: Record<string, string> = {
    expired,
    'wrong chat': server.links.token('chat-b', 'f') as string,
    'control token of another chat': server.links.token('chat-b', 'c') as string,
    'tampered signature': `${v}.${s}.${exp}.${sig.slice(0, -2)}${sig.endsWith('AA') ? 'BB' : 'AA'}`,
    'tampered expiry': `${v}.${s}.${Number(exp) + 86400}.${sig}`,
    'scope letter swapped': `${v}.c.${exp}.${sig}`,
    'signed by another server (rotated key)': otherServer,
    'wrong API key': 'not-the-key'
  }
  let n = 0
  for (const [route, build] of ROUTES) {
    // One client address per route keeps the failed-auth throttle (30/min per address) out of the way.
    const remoteAddress = `10.0.0.${++n}`
    const req = (chat: string, token?: string) => ({ ...build(chat, token), remoteAddress })
    const missing = await server.inject(req('chat-a'))
    t.equal(missing.statusCode, 401, `${route}: missing → 401`)
    t.equal(missing.headers['www-authenticate'], 'Bearer')
    t.equal(missing.json().error, 'Unauthorized')
    for (const [name, token] of Object.entries(bad)) {
      // Path-token routes only treat a well-formed token as a token; anything else is a file name there.
      const r = await server.inject(req('chat-a', token))
      if (route.includes('path token') && !CAPABILITY_TOKEN.test(token)) {
        t.equal(r.statusCode, 401, `${route}: ${name} is no token → 401`)
      } else {
        t.equal(r.statusCode, 403, `${route}: ${name} → 403`)
        t.equal(r.json().error, 'forbidden')
      }
      t.notMatch(r.body, /content of chat/, `${route}: ${name} leaks nothing`)
    }
    t.equal((await server.inject(req('chat-a', valid))).statusCode, 200, `${route}: valid files token → 200`)
    t.equal((await server.inject(req('chat-a', control))).statusCode, 200, `${route}: control token → 200`)
    const withKey = req('chat-a')
    t.equal((await server.inject({ ...withKey, headers: { ...withKey.headers, authorization: `Bearer ${KEY}` } })).statusCode, 200, `${route}: API key → 200`)
  }
})

t.test('a token for chat A never opens chat B, on any route', async t => {
  const server = await app(t, dataDirWithOutputs(t))
  const tokenA = server.links.token('chat-a', 'f') as string
  for (const [route, req] of ROUTES) {
    const res = await server.inject({ ...req('chat-b', tokenA), remoteAddress: `10.1.0.${route.length}` })
    t.equal(res.statusCode, 403, route)
    t.notMatch(res.body, /content of chat-b/)
  }
})

t.test('validation order: bad chat id 400, then 401/403, only then 404', async t => {
  const server = await app(t, dataDirWithOutputs(t))
  const token = server.links.token('chat-a', 'f') as string
  for (const url of ['/files/Bad.Chat/a.txt', '/api/outputs/-x', '/preview/a%20b', '/files/_x/archive']) {
    const res = await server.inject({ url })
    t.equal(res.statusCode, 400, `${url} without credentials`)
    t.equal(res.json().error, 'invalid_chat_id')
  }
  t.equal((await server.inject({ url: '/files/no-such-chat/x.txt' })).statusCode, 401, 'no existence oracle without credentials')
  t.equal((await server.inject({ url: `/files/no-such-chat/x.txt?t=${token}` })).statusCode, 403, 'nor with a token of another chat')
  t.equal((await server.inject({ url: `/files/chat-a/~${token}/missing.txt` })).statusCode, 404, 'existence only after auth')
  t.equal((await server.inject({ url: '/files/chat-a/a.txt', headers: { authorization: 'Bearer nope' } })).statusCode, 403)
})

t.test('rotating MCP_API_KEY revokes every link', async t => {
  const dataDir = dataDirWithOutputs(t)
  const before = await app(t, dataDir, KEY)
  const token = before.links.token('chat-a', 'f') as string
  t.equal((await before.inject({ url: `/files/chat-a/~${token}/a.txt` })).statusCode, 200)
  const restarted = await app(t, dataDir, KEY)
  t.equal((await restarted.inject({ url: `/files/chat-a/~${token}/a.txt` })).statusCode, 200, 'a restart with the same key keeps links')
  const rotated = await app(t, dataDir, OTHER_API_KEY)
  t.equal((await rotated.inject({ url: `/files/chat-a/~${token}/a.txt` })).statusCode, 403)
  t.equal((await rotated.inject({ url: `/preview/chat-a?t=${token}` })).statusCode, 403)
})

t.test('uppercase chat ids are normalised before the token check', async t => {
  const server = await app(t, dataDirWithOutputs(t))
  const token = server.links.token('chat-a', 'f') as string
  const res = await server.inject({ url: `/files/CHAT-A/~${token}/a.txt` })
  t.equal(res.statusCode, 200)
  t.equal(res.body, 'content of chat-a')
})
