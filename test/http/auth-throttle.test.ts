/*
 * Failed-auth throttling over a real socket (docs/contract.md#authentication-and-origin): 30+ bad
 * credentials from one address must never lock out the valid key or a valid token, on /mcp (via
 * the official SDK client) and on chat routes; only the failures get 429 with Retry-After. The
 * client address comes from X-Forwarded-For only for trusted proxy hops (TRUST_PROXY).
 */
import t, { type Test } from 'tap'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { entry } from '../../core/app.js'
import { chatPaths } from '../../core/chat-paths.js'
import { entries } from '../../fastify.config.js'
import { connect, probePlugin, textOf } from '../fixtures/mcp-probe.js'
import { awayFromMinuteEdge, listen, TEST_API_KEY } from '../helper.js'

async function server (t: Test, env: Record<string, string> = {}): Promise<{ app: FastifyInstance, url: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-throttle-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const outputs = chatPaths(dataDir, 'chat-a').outputs
  mkdirSync(outputs, { recursive: true })
  writeFileSync(join(outputs, 'a.txt'), 'content of chat-a')
  return await listen(t, { MCP_API_KEY: TEST_API_KEY, DATA_DIR: dataDir, ...env }, config => [
    ...entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'files']),
    entry(probePlugin({ calls: [], aborted: [] }), {})
  ])
}

async function mcp (url: string, headers: Record<string, string>): Promise<Response> {
  return await fetch(new URL('/mcp', url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-chat-id': 'chat-a', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' })
  })
}

const get = async (url: string, path: string, headers: Record<string, string> = {}): Promise<Response> =>
  await fetch(new URL(path, url), { headers })

function assertThrottled (t: Test, res: Response, what: string): void {
  t.equal(res.status, 429, `${what} → 429`)
  const retry = Number(res.headers.get('retry-after'))
  t.ok(retry >= 1 && retry <= 60, `${what}: Retry-After ${retry} s`)
}

t.test('35 bad credentials from one address: the valid key and tokens still get 200, bad ones 429', async t => {
  const { app, url } = await server(t)
  await awayFromMinuteEdge()
  for (let i = 0; i < 20; i++) t.equal((await mcp(url, { authorization: `Bearer bad-${i}` })).status, 401, `failure ${i + 1} on /mcp`)
  for (let i = 0; i < 10; i++) t.equal((await get(url, `/api/outputs/chat-a?t=bad-${i}`)).status, 403, `failure ${i + 1} on a chat route`)
  assertThrottled(t, await mcp(url, { authorization: 'Bearer bad-again' }), '/mcp with a wrong key')
  assertThrottled(t, await mcp(url, {}), '/mcp without a key')
  assertThrottled(t, await get(url, '/api/outputs/chat-a?t=bad-again'), 'outputs listing with a bad token')
  assertThrottled(t, await get(url, '/files/chat-a/a.txt', { authorization: 'Bearer bad-again' }), 'file with a bad bearer')
  assertThrottled(t, await get(url, `/files/chat-a/a.txt?t=${TEST_API_KEY}`), 'file with the API key in ?t=')

  const client = await connect(t, url, { Authorization: `Bearer ${TEST_API_KEY}`, 'X-Chat-Id': 'chat-a' })
  t.match(textOf(await client.callTool({ name: 'whoami', arguments: {} })), /"chatId":"chat-a"/, '/mcp: the SDK client with the valid key works')
  t.equal((await mcp(url, { authorization: `Bearer ${TEST_API_KEY}` })).status, 200, '/mcp: valid key → 200')
  const listing = await get(url, '/api/outputs/chat-a', { authorization: `Bearer ${TEST_API_KEY}` })
  t.equal(listing.status, 200, 'chat route: valid key → 200')
  t.match(await listing.json(), { files: [{ name: 'a.txt' }] })
  const token = app.links.token('chat-a', 'f') as string
  t.equal((await get(url, `/api/outputs/chat-a?t=${token}`)).status, 200, 'chat route: valid token in ?t= → 200')
  const file = await get(url, `/files/chat-a/~${token}/a.txt`)
  t.equal(file.status, 200, 'chat route: valid ~token path → 200')
  t.equal(await file.text(), 'content of chat-a')
  assertThrottled(t, await mcp(url, { authorization: 'Bearer still-bad' }), 'bad ones stay throttled')
})

t.test('TRUST_PROXY=1: the throttled address is the client named by X-Forwarded-For', async t => {
  const { url } = await server(t, { TRUST_PROXY: '1' })
  await awayFromMinuteEdge()
  for (let i = 0; i < 30; i++) await mcp(url, { authorization: 'Bearer bad', 'x-forwarded-for': '203.0.113.7' })
  assertThrottled(t, await mcp(url, { authorization: 'Bearer bad', 'x-forwarded-for': '203.0.113.7' }), 'client 203.0.113.7')
  t.equal((await mcp(url, { authorization: 'Bearer bad', 'x-forwarded-for': '203.0.113.8' })).status, 401, 'another client behind the same proxy is not throttled')
  t.equal((await mcp(url, { authorization: `Bearer ${TEST_API_KEY}`, 'x-forwarded-for': '203.0.113.7' })).status, 200, 'the throttled client with the valid key')
})

t.test('TRUST_PROXY unset: a forged X-Forwarded-For does not change the address', async t => {
  const { url } = await server(t)
  await awayFromMinuteEdge()
  for (let i = 0; i < 30; i++) await mcp(url, { authorization: 'Bearer bad', 'x-forwarded-for': `203.0.113.${i}` })
  assertThrottled(t, await mcp(url, { authorization: 'Bearer bad', 'x-forwarded-for': '198.51.100.1' }), 'a fresh forged address')
  assertThrottled(t, await get(url, '/api/outputs/chat-a?t=bad', { 'x-forwarded-for': '198.51.100.2' }), 'on a chat route too')
  t.equal((await mcp(url, { authorization: `Bearer ${TEST_API_KEY}` })).status, 200, 'the valid key still works')
})
