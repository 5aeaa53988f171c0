import t from 'tap'
import type { FastifyInstance, FastifyRequest, InjectOptions } from 'fastify'
import type { Test } from 'tap'
import type WebSocket from 'ws'
import { entry } from '../../core/app.js'
import { chatAccess, chatOf, chatRoutes, mcpChat, noteKey, requireKey } from '../../core/route-kit.js'
import { userChatId, type Principal } from '../../core/identity.js'
import { build, TEST_API_KEY } from '../helper.js'

/*
 * Core's route kit on the real core (auth, Origin rule, error handler): one HTTP chat route and one
 * WebSocket chat route built with the same kit, a key route, a route open to anonymous callers, an
 * /mcp-like route with an OAuth-style bearer verifier, and a route that uses none of it. Capability
 * tokens `tok-<chat>-<scope>` are valid; `oauth-alice` is Alice's bearer token on /mcp.
 */

interface State { chat: string | null, principal: Principal | null }
const state = (request: FastifyRequest): State => ({ chat: request.chat, principal: request.principal })

const ALICE = { subject: 'alice@example.com', email: 'alice@example.com', name: 'Alice' }

async function probe (fastify: FastifyInstance): Promise<void> {
  fastify.auth.addTokenVerifier((token, chatId, scope) => token === `tok-${chatId}-${scope}` ? 'ok' : 'forbidden')
  fastify.auth.addBearerVerifier({ routes: ['/mcp'], verify: async token => token === 'oauth-alice' ? ALICE : undefined, challenge: {} })
  await fastify.register(async routes => {
    chatRoutes(routes, ['/http/:chat'])
    routes.route({ method: ['GET', 'POST'], url: '/http/:chat', onRequest: chatAccess('c'), handler: async request => state(request) })
    routes.get('/ws/:chat', { websocket: true, onRequest: chatAccess('c') }, (socket, request) => {
      socket.send(JSON.stringify(state(request)))
    })
  })
  fastify.get('/key', { onRequest: requireKey }, async request => state(request))
  fastify.get('/anyone', async request => { noteKey(request); return state(request) })
  fastify.post('/mcp', { onRequest: requireKey }, async request => ({ resolution: mcpChat(request, 'false'), ...state(request) }))
  fastify.get('/plain', async request => state(request))
}

async function app (t: Test, env: Record<string, string> = { MCP_API_KEY: TEST_API_KEY }): Promise<FastifyInstance> {
  return await build(t, env, () => [entry(probe, {})])
}

const KEY_HEADER = { authorization: `Bearer ${TEST_API_KEY}` }
const UPGRADE = { connection: 'upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' }

interface Answer { status: number, body: unknown }

/** The HTTP route's answer. */
async function http (server: FastifyInstance, path: string, headers: Record<string, string> = {}, method: InjectOptions['method'] = 'GET'): Promise<Answer> {
  const res = await server.inject({ method, url: `/http/${path}`, headers })
  return { status: res.statusCode, body: res.json() }
}

/**
 * The socket route's answer: through a real upgrade (injectWS), the state its handler sent, or the
 * refused handshake's status; the body of a refusal comes from the same handshake injected as a
 * plain request (the hooks run before any upgrade, so they see the same request).
 */
async function socket (server: FastifyInstance, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  // injectWS's request has no real socket: give the Origin rule the listening port it would read.
  const context = { headers, socket: { localPort: 80, remoteAddress: '127.0.0.1' } }
  // The handler sends as soon as the socket opens: listen from the start.
  let received: (text: string) => void = () => {}
  const message = new Promise<string>(resolve => { received = resolve })
  let ws: WebSocket
  try {
    ws = await server.injectWS(`/ws/${path}`, context as unknown as Parameters<FastifyInstance['injectWS']>[1], {
      onInit: client => { client.once('message', (data: Buffer) => { received(data.toString()) }) }
    })
  } catch (err) {
    const status = Number(/Unexpected server response: (\d+)/.exec((err as Error).message)?.[1])
    const refused = await server.inject({ url: `/ws/${path}`, headers: { ...headers, ...UPGRADE } })
    return { status, body: refused.statusCode === status ? refused.json() : `plain handshake answered ${refused.statusCode}` }
  }
  const body = JSON.parse(await message)
  ws.terminate()
  return { status: 101, body }
}

t.test('an HTTP route and a socket route of the kit get the same chat and principal', async t => {
  const server = await app(t)
  const cases: Array<[string, string, Record<string, string>, State]> = [
    ['the API key', 'Chat-1', KEY_HEADER, { chat: 'chat-1', principal: { kind: 'key' } }],
    ['a control token in ?t=', 'chat-1?t=tok-chat-1-c', {}, { chat: 'chat-1', principal: { kind: 'link', scope: 'c', token: 'tok-chat-1-c' } }],
    ['a control token as Bearer', 'chat-1', { authorization: 'Bearer tok-chat-1-c' }, { chat: 'chat-1', principal: { kind: 'link', scope: 'c', token: 'tok-chat-1-c' } }]
  ]
  for (const [name, path, headers, expected] of cases) {
    const viaHttp = await http(server, path, headers)
    const viaSocket = await socket(server, path, headers)
    t.same(viaHttp, { status: 200, body: expected }, `HTTP: ${name}`)
    t.same(viaSocket, { status: 101, body: expected }, `socket: ${name}`)
  }
})

t.test('a socket route refuses exactly what the HTTP route refuses, with the same answer', async t => {
  const server = await app(t)
  const cases: Array<[string, string, Record<string, string>, number, string]> = [
    ['an invalid chat id', 'a.b?t=tok-a.b-c', KEY_HEADER, 400, 'invalid_chat_id'],
    ['no credential', 'chat-1', {}, 401, 'Unauthorized'],
    ['a token of another chat', 'chat-1?t=tok-chat-2-c', {}, 403, 'forbidden'],
    ['a files token where control is needed', 'chat-1?t=tok-chat-1-f', {}, 403, 'forbidden'],
    ['the API key in ?t=', `chat-1?t=${TEST_API_KEY}`, {}, 403, 'forbidden'],
    ['a foreign Origin, even with the key', 'chat-1', { ...KEY_HEADER, origin: 'https://evil.example' }, 403, 'forbidden_origin'],
    ['an opaque Origin without a credential', 'chat-1', { origin: 'null' }, 403, 'forbidden_origin']
  ]
  for (const [name, path, headers, status, error] of cases) {
    // A state-changing request: the Origin rule refuses it as it refuses an upgrade.
    const viaHttp = await http(server, path, headers, 'POST')
    const viaSocket = await socket(server, path, headers)
    t.match(viaHttp, { status, body: { error } }, `HTTP: ${name}`)
    t.same(viaSocket, viaHttp, `socket: ${name}`)
  }
  const read = await server.inject({ url: '/http/chat-1', headers: { ...KEY_HEADER, origin: 'https://evil.example' } })
  t.equal(read.statusCode, 200, 'a cross-origin read is answered')
  t.equal(read.headers['access-control-allow-origin'], undefined, '... without CORS headers, so the page cannot read it')
  t.equal((await server.inject({ method: 'OPTIONS', url: '/http/chat-1', headers: { origin: 'http://cubicle.test', 'access-control-request-method': 'POST' } })).statusCode, 204, 'a preflight passes the access hook untouched')
})

t.test('open mode: the chat is decided, no principal is recorded, no credential is asked for', async t => {
  const server = await app(t, {})
  t.same(await http(server, 'Chat-1'), { status: 200, body: { chat: 'chat-1', principal: null } })
  t.same(await socket(server, 'Chat-1'), { status: 101, body: { chat: 'chat-1', principal: null } })
  t.same((await server.inject('/key')).json(), { chat: null, principal: null })
  t.match(await http(server, 'a.b'), { status: 400, body: { error: 'invalid_chat_id' } })
  t.match(await socket(server, 'a.b'), { status: 400, body: { error: 'invalid_chat_id' } })
  t.match(await socket(server, 'chat-1', { origin: 'null' }), { status: 403, body: { error: 'forbidden_origin' } }, 'no tokens in open mode, so an opaque page never gets a socket')
})

t.test('key routes, anonymous routes and /mcp record who the caller is; nothing leaks between requests', async t => {
  const server = await app(t)
  t.same((await server.inject({ url: '/key', headers: KEY_HEADER })).json(), { chat: null, principal: { kind: 'key' } })
  t.equal((await server.inject('/key')).statusCode, 401)
  t.equal((await server.inject({ url: '/key', headers: { authorization: 'Bearer oauth-alice' } })).statusCode, 401, 'a bearer verifier counts only on the routes it claims')
  t.same((await server.inject({ url: '/anyone', headers: KEY_HEADER })).json(), { chat: null, principal: { kind: 'key' } })
  t.same((await server.inject({ url: '/anyone', headers: { authorization: 'Bearer wrong' } })).json(), { chat: null, principal: null }, 'never refused')

  const mcp = async (headers: Record<string, string>): Promise<unknown> => (await server.inject({ method: 'POST', url: '/mcp', headers })).json()
  const home = userChatId(ALICE.subject)
  t.same(await mcp({ authorization: 'Bearer oauth-alice', 'x-chat-id': 'Proj' }), {
    resolution: { kind: 'chat', chatId: `${home}:proj`, lenientNote: false },
    chat: `${home}:proj`,
    principal: { kind: 'user', ...ALICE }
  }, 'an OAuth user: the token names the user, the chat stays below theirs')
  t.same(await mcp({ ...KEY_HEADER, 'x-chat-id': 'Proj' }), { resolution: { kind: 'chat', chatId: 'proj', lenientNote: false }, chat: 'proj', principal: { kind: 'key' } })
  t.same(await mcp(KEY_HEADER), { resolution: { kind: 'missing' }, chat: null, principal: { kind: 'key' } }, 'strict mode without a header: no chat')

  t.same((await server.inject({ url: '/plain', headers: KEY_HEADER })).json(), { chat: null, principal: null }, 'a route without the kit sees the initial nulls')
  t.same((await server.inject('/plain')).json(), { chat: null, principal: null }, 'and so does every later request')
})

t.test('the kit refuses the route that forgot its access hook instead of acting for no chat', async t => {
  const server = await build(t, {}, () => [entry(async (fastify: FastifyInstance) => {
    fastify.get('/forgot/:chat', async request => ({ chat: chatOf(request) }))
  }, {})])
  const res = await server.inject('/forgot/chat-1')
  t.equal(res.statusCode, 500)
  t.notMatch(res.body, /chat-1/, 'and the answer names nothing of the request')
})
