// The app proxy without Docker (plugins/ports): what crosses it in headers, which ports count as apps, and
// its pooled relay connections (over loopback TCP standing in for the exec relay).
import t from 'tap'
import { createServer, get } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import { AppSocket, SandboxAgent } from '../../../plugins/ports/connection.js'
import type { SandboxFileOp, SandboxFileResult, SandboxService, SandboxStream } from '../../../plugins/sandbox/types.js'
import type { LinkService } from '../../../plugins/capabilities/types.js'
import { ourCookie, requestHeaders, responseHeaders, rewriteLocation, scopeSetCookie, stripOurCookie, tokenCookie, withoutToken, type AppView } from '../../../plugins/ports/headers.js'
import { appPort, parseListening } from '../../../plugins/ports/listening.js'

const view: AppView = {
  port: 3000,
  prefix: '/apps/chat-a/3000',
  prefixOf: p => `/apps/chat-a/${p}`,
  publicOrigin: 'https://cubicle.example',
  publicHost: 'cubicle.example',
  publicProto: 'https'
}
const ours = (a: string): boolean => a === 'Bearer the-key' || a.startsWith('Bearer v1.')

t.test('none of our credentials or forwarding headers reach the app', async t => {
  const out = requestHeaders({
    host: 'evil.example',
    cookie: 'cubicle_app=v1.c.1.sig; theme=dark; CUBICLE_APP=x',
    authorization: 'Bearer the-key',
    referer: 'https://cubicle.example/preview/chat-a?t=v1.c.1.sig',
    'x-forwarded-host': 'spoofed',
    'x-forwarded-for': '10.0.0.1',
    forwarded: 'for=1.2.3.4',
    connection: 'keep-alive, x-secret',
    'x-secret': 'hop',
    'keep-alive': 'timeout=5',
    'x-chat-id': 'chat-b',
    accept: 'text/html'
  }, view, { ours })
  t.same(out, {
    cookie: 'theme=dark',
    accept: 'text/html',
    host: 'cubicle.example',
    'x-forwarded-host': 'cubicle.example',
    'x-forwarded-proto': 'https',
    'x-forwarded-prefix': '/apps/chat-a/3000'
  })
  t.equal(requestHeaders({ authorization: 'Bearer app-own-token' }, view, { ours }).authorization, 'Bearer app-own-token', 'the app\'s own Authorization passes')
  t.equal(requestHeaders({ authorization: 'Bearer v1.c.9.x' }, view, { ours }).authorization, undefined, 'a capability token does not')
  t.equal(requestHeaders({ referer: 'https://cubicle.example/apps/chat-a/3000/page' }, view, { ours }).referer, 'https://cubicle.example/apps/chat-a/3000/page', 'a Referer inside the app passes')
  t.equal(requestHeaders({ referer: 'https://cubicle.example/apps/chat-a/30001/' }, view, { ours }).referer, undefined, 'another prefix does not')
  t.equal(requestHeaders({ cookie: 'cubicle_app=v1' }, view, { ours }).cookie, undefined, 'a Cookie of ours alone is dropped')
  const ws = requestHeaders({ 'sec-websocket-key': 'k', 'sec-websocket-protocol': 'p', 'content-length': '3', origin: 'https://cubicle.example' }, view, { ours, websocket: true })
  t.same(Object.keys(ws).sort(), ['host', 'origin', 'x-forwarded-host', 'x-forwarded-prefix', 'x-forwarded-proto'])
})

t.test('our cookie is read and stripped by exact name', async t => {
  t.equal(ourCookie('a=1; cubicle_app=v1.c.2.s; cubicle_app=old'), 'v1.c.2.s')
  t.equal(ourCookie('xcubicle_app=1; cubicle_appx=2'), undefined)
  t.equal(stripOurCookie('a=1;cubicle_app=v;b=2'), 'a=1; b=2')
  t.equal(tokenCookie('v1.c.2.s', '/apps/chat-a/3000', true), 'cubicle_app=v1.c.2.s; Path=/apps/chat-a/3000/; HttpOnly; SameSite=Lax; Secure')
  t.equal(withoutToken('?t=abc&x=1&t=def&tt=2'), '?x=1&tt=2')
  t.equal(withoutToken('?t=abc'), '')
  t.equal(withoutToken(''), '')
})

t.test('an app\'s redirects stay inside its prefix unless they leave the server', async t => {
  const cases: Array<[string, string, string]> = [
    ['/login', '/x', '/apps/chat-a/3000/login'],
    ['next?a=1#h', '/dir/page', '/apps/chat-a/3000/dir/next?a=1#h'],
    ['../../../chat-b/3000/', '/a/b', '/apps/chat-a/3000/chat-b/3000/'],
    ['/apps/chat-b/3000/', '/', '/apps/chat-a/3000/apps/chat-b/3000/'],
    ['https://cubicle.example/apps/chat-b/3000/x', '/', '/apps/chat-a/3000/apps/chat-b/3000/x'],
    ['https://cubicle.example/preview/chat-b', '/', '/apps/chat-a/3000/preview/chat-b'],
    ['/apps/chat-a/3000/already', '/', '/apps/chat-a/3000/already'],
    ['http://localhost:3000/home', '/', '/apps/chat-a/3000/home'],
    ['http://127.0.0.1:5173/', '/', '/apps/chat-a/5173/'],
    ['http://0.0.0.0/', '/', '/apps/chat-a/3000/'],
    ['https://github.com/login', '/', 'https://github.com/login'],
    ['//evil.example/x', '/', '//evil.example/x'],
    ['http://[bad', '/', '/apps/chat-a/3000/']
  ]
  for (const [location, inner, expected] of cases) t.equal(rewriteLocation(location, inner, view), expected, location)
})

t.test('an app\'s cookies are confined to its prefix', async t => {
  t.equal(scopeSetCookie('sid=1; Path=/; Domain=cubicle.example; HttpOnly', view.prefix), 'sid=1; HttpOnly; Path=/apps/chat-a/3000/')
  t.equal(scopeSetCookie('sid=1', view.prefix), 'sid=1; Path=/apps/chat-a/3000/')
  t.equal(scopeSetCookie('sid=1; path=/api', view.prefix), 'sid=1; Path=/apps/chat-a/3000/api')
  t.equal(scopeSetCookie('sid=1; Path=/apps/chat-a/3000/x', view.prefix), 'sid=1; Path=/apps/chat-a/3000/x')
  t.equal(scopeSetCookie('sid=1; Path=/apps/chat-a/30001', view.prefix), 'sid=1; Path=/apps/chat-a/3000/apps/chat-a/30001')
  t.equal(scopeSetCookie('cubicle_app=forged; Path=/apps/chat-a/3000/', view.prefix), undefined, 'ours is never set by an app')
  t.equal(scopeSetCookie('__Host-x=1; Path=/; Secure', view.prefix), undefined)
  t.equal(scopeSetCookie(`big=${'x'.repeat(5000)}`, view.prefix), undefined)
})

t.test('the answer keeps its own headers minus hop-by-hop and origin-wide ones', async t => {
  const out = responseHeaders([
    'Content-Type', 'text/html', 'Connection', 'close, X-Hop', 'X-Hop', '1', 'Transfer-Encoding', 'chunked',
    'Set-Cookie', 'a=1; Path=/', 'Set-Cookie', 'b=2; Domain=.example', 'Location', '/next',
    'Strict-Transport-Security', 'max-age=9', 'Clear-Site-Data', '"*"', 'Service-Worker-Allowed', '/',
    'Access-Control-Allow-Credentials', 'true', 'X-App', 'one', 'X-App', 'two', 'Content-Length', '12'
  ], view, '/')
  t.same(out, {
    'content-type': 'text/html',
    location: '/apps/chat-a/3000/next',
    'x-app': ['one', 'two'],
    'content-length': '12',
    'set-cookie': ['a=1; Path=/apps/chat-a/3000/', 'b=2; Path=/apps/chat-a/3000/']
  })
})

t.test('the answer carries our headers where the app set none of that name, the app\'s own otherwise', async t => {
  const server = { 'x-request-id': 'r1', 'referrer-policy': 'same-origin', vary: 'Origin' }
  const out = responseHeaders(['Vary', 'Accept', 'Content-Type', 'text/plain', 'Connection', 'keep-alive', 'Keep-Alive', 'timeout=5'], view, '/', server)
  t.same(out, { vary: 'Accept', 'content-type': 'text/plain', 'x-request-id': 'r1', 'referrer-policy': 'same-origin' })
  t.same(server, { 'x-request-id': 'r1', 'referrer-policy': 'same-origin', vary: 'Origin' }, 'ours is left as it was')
  t.same(responseHeaders(['Referrer-Policy', 'no-referrer'], view, '/', server)['referrer-policy'], 'no-referrer', 'the app\'s policy wins')
  t.same(requestHeaders({ connection: 'keep-alive', 'keep-alive': 'timeout=5', accept: '*/*' }, view, { ours }), {
    accept: '*/*', host: 'cubicle.example', 'x-forwarded-host': 'cubicle.example', 'x-forwarded-proto': 'https', 'x-forwarded-prefix': '/apps/chat-a/3000'
  }, 'Connection: keep-alive names nothing else')
  t.equal(requestHeaders({ connection: 'close', close: 'x', cookie: 'a=1' }, view, { ours }).close, undefined, 'a header named in Connection: close is dropped')
})

t.test('listening ports are read from /proc/net/tcp tables, reachable ones in the app range only', async t => {
  const tcp = [
    '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
    '   0: 00000000:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1',
    '   1: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 2 1',
    '   2: 0100007F:240E 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 3 1',
    '   3: 0200A8C0:1F41 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4 1',
    '   4: 0100007F:1F42 0100007F:0BB8 01 00000000:00000000 00:00000000 00000000  1000        0 5 1',
    '   5: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 6 1'
  ].join('\n')
  const tcp6 = [
    '  sl  local_address                         remote_address                        st',
    '   0: 00000000000000000000000000000000:1435 00000000000000000000000000000000:0000 0A 0',
    '   1: 00000000000000000000000001000000:1436 00000000000000000000000000000000:0000 0A 0',
    '   2: 0000000000000000FFFF00000100007F:1437 00000000000000000000000000000000:0000 0A 0'
  ].join('\n')
  t.same(parseListening(`${tcp}\n${tcp6}`, new Set([9230])), [3000, 5173, 5175, 8000], '0.0.0.0, 127.0.0.1, :: and v4-mapped; not another address, ::1 only, a connection, port 80 or a hidden port')
  t.same(parseListening('garbage\n\n: : :\n'.repeat(100)), [])
  t.same(parseListening(`${'x'.repeat(10_000)} 00000000:0BB8 0 0A`), [], 'an overlong line is skipped')
})

t.test('a port segment is a decimal number from 1024 to 65535', async t => {
  t.equal(appPort('3000'), 3000)
  t.equal(appPort('65535'), 65535)
  for (const bad of ['80', '1023', '65536', '03000', '3000.0', '+3000', '0x10', '', '99999999']) t.equal(appPort(bad), undefined, bad)
})

/** A sandbox stream over a TCP connection to `port`: what the exec relay is, minus Docker. */
function tcpStream (port: number): SandboxStream {
  const socket = connect(port, '127.0.0.1')
  return { socket, demux: onStdout => { socket.on('data', onStdout) }, resize: async () => {}, exitCode: async () => 0, close: () => { socket.destroy() } }
}

t.test('a kept-alive relay connection serves many requests without gathering listeners, and frees itself when idle', async t => {
  const server = createServer((_req, res) => { res.end('ok') })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.close() })
  const { port } = server.address() as AddressInfo
  const opened: AppSocket[] = []
  const agent = new SandboxAgent(async p => { const s = AppSocket.relay(tcpStream(p)); opened.push(s); return s }, { keepAlive: true, maxSockets: 2, maxTotalSockets: 2, timeout: 300 })
  t.teardown(() => { agent.destroy() })
  for (let i = 0; i < 40; i++) {
    const body = await new Promise<string>((resolve, reject) => {
      get({ agent, host: '127.0.0.1', port, path: '/' }, res => { let b = ''; res.on('data', (c: Buffer) => { b += c.toString() }); res.on('end', () => { resolve(b) }) }).on('error', reject)
    })
    t.equal(body, 'ok')
  }
  t.equal(opened.length, 1, 'one relay for 40 sequential requests')
  t.ok((opened[0] as AppSocket).listenerCount('timeout') <= 2, `timeout listeners stay bounded (${(opened[0] as AppSocket).listenerCount('timeout')})`)
  await new Promise(resolve => setTimeout(resolve, 800))
  t.ok((opened[0] as AppSocket).destroyed, 'an unused pooled relay is closed after the agent\'s timeout')
})

t.test('new listening ports after a command: the agent\'s socket listing, no engine call; the TCP tables from an older agent', async t => { // docs/performance.md
  const { createPortsService } = await import('../../../plugins/ports/service.js')
  const { default: pino } = await import('pino')
  const calls: string[] = []
  let listing: SandboxFileResult = { ok: true, errno: 0, error: '', data: Buffer.alloc(0), timedOut: false, cancelled: false, sockets: [{ family: 4, address: '0.0.0.0', port: 3000 }, { family: 6, address: '::1', port: 3001 }, { family: 4, address: '10.0.0.2', port: 3002 }] }
  const table = '   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 2 1'
  const sandbox = {
    status: async () => { calls.push('status'); return { state: 'running' as const, metaExists: true } },
    knownRunning: () => { calls.push('knownRunning'); return true },
    openStream: async () => { throw new Error('not used') },
    fileOp: async (_chat: string, op: SandboxFileOp) => {
      calls.push(op.op === 'read' ? `read ${op.path}` : op.op)
      if (op.op === 'listening') return listing
      return { ok: true, errno: 0, error: '', data: Buffer.from(op.op === 'read' && op.path === '/proc/net/tcp' ? table : ''), timedOut: false, cancelled: false }
    },
    exec: async () => { throw new Error('no exec expected') }
  } as unknown as SandboxService
  const runtime = createPortsService({ sandbox, links: { publicBaseUrl: 'https://cubicle.example' } as unknown as LinkService, log: pino({ level: 'silent' }) },
    { maxConnectionsPerChat: 4, freeSocketMs: 1000, hiddenPorts: [], listTimeoutMs: 2000 })
  t.same(await runtime.newlyListening('chat-a'), [3000], 'reachable from 127.0.0.1 only (::1 and another address are not)')
  t.same(calls, ['knownRunning', 'listening'], 'the server\'s own record and one listing: no status (an engine inspect), no table walk')
  calls.length = 0
  listing = { ok: false, errno: 0, error: 'unknown operation', data: Buffer.alloc(0), timedOut: false, cancelled: false }
  t.same(await runtime.newlyListening('chat-a'), [8000], 'an agent without the listing: its TCP tables')
  t.same(calls, ['knownRunning', 'listening', 'read /proc/net/tcp', 'read /proc/net/tcp6'])
  calls.length = 0
  t.same(await runtime.service.apps('chat-a'), [{ port: 8000, url: 'https://cubicle.example/apps/chat-a/8000/' }])
  t.equal(calls[0], 'status', 'the apps listing asks the engine (it runs outside any call)')
  calls.length = 0
  t.same(await runtime.newlyListening('chat-a', [{ family: 4, address: '127.0.0.1', port: 8000 }, { family: 4, address: '0.0.0.0', port: 5000 }]), [5000],
    'the sockets the command\'s exit carried: only the ones new since the last call')
  t.same(calls, [], 'nothing asked of the sandbox')
  await runtime.close()
})

t.test('a small answer leaves in one write with its head and its length; a streamed one gets its head at once', async t => { // docs/performance.md, (k)
  const { default: Fastify } = await import('fastify')
  const { relayHttp } = await import('../../../plugins/ports/proxy.js')
  const app = createServer((req, res) => {
    if (req.url === '/small') { res.writeHead(200, { 'content-type': 'text/plain', 'set-cookie': 'a=1; Path=/' }); res.end('ok'); return }
    // streamed: the head, then the body only after the client saw the head
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.flushHeaders()
    setTimeout(() => { res.end('data: late\n\n') }, 300)
  })
  await new Promise<void>(resolve => app.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { app.close() })
  const appPortNo = (app.address() as AddressInfo).port
  const agent = new SandboxAgent(async p => AppSocket.relay(tcpStream(p)), { keepAlive: true, maxSockets: 2, maxTotalSockets: 2, timeout: 1000 })
  t.teardown(() => { agent.destroy() })
  const limits = { maxRequestBytes: 1 << 20, maxResponseBytes: 1 << 20, headersTimeoutMs: 5000, idleTimeoutMs: 5000, maxHeaderBytes: 16384 }
  const proxy = Fastify()
  proxy.get('/*', async (request, reply) => {
    await relayHttp(agent, { method: 'GET', path: request.url, headers: { host: 'app' }, body: undefined, view: { ...view, port: appPortNo } }, reply, limits, {})
  })
  await proxy.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(async () => { await proxy.close() })
  // Writes to the client's socket, counted on the server's side (a syscall each: writev for corked chunks).
  let writes = 0
  proxy.server.on('connection', s => {
    const w = s._write.bind(s)
    const wv = (s as unknown as { _writev: (...a: unknown[]) => void })._writev.bind(s)
    s._write = (...a: Parameters<typeof s._write>) => { writes++; w(...a) }
    ;(s as unknown as { _writev: (...a: unknown[]) => void })._writev = (...a: unknown[]) => { writes++; wv(...a) }
  })
  const { port } = proxy.server.address() as AddressInfo
  const client = connect(port, '127.0.0.1')
  t.teardown(() => { client.destroy() })
  let got = ''
  client.on('data', (c: Buffer) => { got += c.toString('latin1') })
  const until = async (done: () => boolean): Promise<void> => {
    for (let i = 0; i < 400 && !done(); i++) await new Promise(resolve => setTimeout(resolve, 5))
  }
  for (let i = 0; i < 3; i++) {
    writes = 0
    got = ''
    client.write('GET /small HTTP/1.1\r\nHost: x\r\n\r\n')
    await until(() => got.endsWith('\r\n\r\nok'))
    // The app chunked it; whole, it leaves with its length instead.
    t.match(got, /\r\ncontent-length: 2\r\n/i, 'with its length')
    t.notMatch(got, /transfer-encoding/i, 'not chunked')
    t.match(got, /\r\n\r\nok$/, 'the whole answer')
    t.equal(writes, 1, `answer ${i + 1}: head and body in one write`)
    t.match(got, /set-cookie: a=1; Path=\/apps\/chat-a\/3000\//i, 'the head is still filtered')
  }
  got = ''
  const t0 = Date.now()
  client.write('GET /stream HTTP/1.1\r\nHost: x\r\n\r\n')
  await until(() => got.includes('\r\n\r\n'))
  t.ok(Date.now() - t0 < 250 && !got.includes('late'), 'a streamed answer\'s head comes before its body')
  await until(() => got.includes('late'))
  t.match(got, /data: late/, 'then its body')
})
