/*
 * REQUEST_TIMEOUT over real sockets, with a 1 s limit: a client that takes longer to
 * *send* its request (slow upload body, slow headers, nothing at all) gets 408 and is closed, while
 * everything that is slow on the response side runs on: an SSE tool call, a silent JSON tool call,
 * the GET /mcp event stream and a WebSocket, each kept open three times as long as the limit.
 */
import t, { type Test } from 'tap'
import { connect as tcp, type Socket } from 'node:net'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { entry } from '../../core/app.js'
import { chatPaths } from '../../core/chat-paths.js'
import { entries } from '../../fastify.config.js'
import { connect, probePlugin, textOf } from '../fixtures/mcp-probe.js'
import { listen } from '../helper.js'
import { fakeSandbox, newSandboxLog } from '../fixtures/tiers-app.js'

const HOLD_MS = 3000

/** A WebSocket route that answers only after HOLD_MS, as a terminal that is quiet for a while. */
const lateWebSocket = fp(async (fastify: FastifyInstance) => {
  fastify.get('/ws-probe', { websocket: true }, socket => {
    const timer = setTimeout(() => socket.send('late'), HOLD_MS)
    socket.on('close', () => clearTimeout(timer))
  })
}, { name: 'ws-probe' })

async function server (t: Test): Promise<{ url: string, port: number, dataDir: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-timeout-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const { url } = await listen(t, { REQUEST_TIMEOUT: '1', DATA_DIR: dataDir, PROGRESS_INTERVAL_SECONDS: '1' }, config => [
    ...entries(config, ['mcp-transport', 'capabilities', 'prompt-render']),
    entry(fakeSandbox(newSandboxLog()), {}),
    ...entries(config, ['chat-storage', 'uploads']),
    entry(probePlugin({ calls: [], aborted: [] }), {}),
    entry(lateWebSocket, {})
  ])
  return { url, port: Number(new URL(url).port), dataDir }
}

/** Opens a raw connection, writes `head`, then `drip` one byte every 100 ms; resolves with what came back and when it closed. */
async function slowClient (port: number, head: string, drip: string): Promise<{ text: string, ms: number }> {
  const start = Date.now()
  return await new Promise((resolve, reject) => {
    const socket: Socket = tcp(port, '127.0.0.1', () => {
      if (head !== '') socket.write(head)
      if (drip === '') return
      let i = 0
      const timer = setInterval(() => {
        if (socket.destroyed || socket.writableEnded) { clearInterval(timer); return }
        socket.write(drip[i++ % drip.length] as string)
      }, 100)
      socket.on('close', () => clearInterval(timer))
    })
    let text = ''
    socket.on('data', chunk => { text += chunk.toString('latin1') })
    socket.on('error', err => { if ((err as NodeJS.ErrnoException).code !== 'ECONNRESET' && (err as NodeJS.ErrnoException).code !== 'EPIPE') reject(err) })
    socket.on('close', () => resolve({ text, ms: Date.now() - start }))
    setTimeout(() => socket.destroy(), 10_000).unref()
  })
}

t.test('a request that takes longer than REQUEST_TIMEOUT to arrive gets 408 and is closed', async t => {
  const { port, dataDir } = await server(t)
  const boundary = 'cubicleboundary'
  const upload = await slowClient(port,
    `POST /api/uploads/chat-a/slow.txt HTTP/1.1\r\nHost: localhost\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: 100000\r\n\r\n` +
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="slow.txt"\r\nContent-Type: text/plain\r\n\r\n`, 'x')
  t.match(upload.text, /^HTTP\/1\.1 408 /, 'a slow upload body')
  t.ok(upload.ms < 2900, `closed after ${upload.ms} ms, well before the client would have finished`)
  const uploads = chatPaths(dataDir, 'chat-a').uploads
  const leftovers = (): string[] => { try { return readdirSync(uploads) } catch { return [] } }
  for (let i = 0; i < 40 && leftovers().length > 0; i++) await new Promise(resolve => setTimeout(resolve, 50))
  t.same(leftovers(), [], 'no file or temporary file is left behind')

  const headers = await slowClient(port, 'GET /health HTTP/1.1\r\nHost: localhost\r\n', 'X-Slow: 1\r\n')
  t.match(headers.text, /^HTTP\/1\.1 408 /, 'slowly dripped headers')
  const idle = await slowClient(port, '', '')
  t.ok(idle.ms < 2900, `a connection that sends nothing is closed after ${idle.ms} ms`)
})

// response-side work is never cut by the request timeout
t.test('SSE tool calls, silent JSON tool calls, the GET stream and WebSockets outlive REQUEST_TIMEOUT', async t => {
  const { url, port } = await server(t)
  const client = await connect(t, url, { 'X-Chat-Id': 'chat-a' })

  const sse = client.callTool({ name: 'slow', arguments: { ms: HOLD_MS } })
  const json = fetch(new URL('/mcp', url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', 'x-chat-id': 'chat-a' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'slow', arguments: { ms: HOLD_MS } } })
  }).then(async res => ({ status: res.status, body: await res.json() as unknown }))

  const controller = new AbortController()
  const stream = fetch(new URL('/mcp', url), { headers: { accept: 'text/event-stream', 'x-chat-id': 'chat-a' }, signal: controller.signal })
    .then(async res => {
      const reader = (res.body as ReadableStream<Uint8Array>).getReader()
      const opened = Date.now()
      let received = ''
      while (Date.now() - opened < HOLD_MS) {
        const { done, value } = await reader.read()
        if (done) return { status: res.status, openFor: Date.now() - opened, received, ended: true }
        received += new TextDecoder().decode(value)
      }
      controller.abort()
      return { status: res.status, openFor: Date.now() - opened, received, ended: false }
    })

  const ws = webSocketMessage(port, '/ws-probe')

  const [sseResult, jsonResult, streamResult, wsResult] = await Promise.all([sse, json, stream, ws])
  t.equal(textOf(sseResult), 'done', `an SSE tool call of ${HOLD_MS} ms completes`)
  t.equal(jsonResult.status, 200)
  t.match(jsonResult.body, { id: 9, result: { content: [{ text: 'done' }] } }, `a JSON tool call silent for ${HOLD_MS} ms completes`)
  t.equal(streamResult.status, 200)
  t.equal(streamResult.ended, false, `the GET /mcp stream is still open after ${streamResult.openFor} ms`)
  t.match(streamResult.received, /: keep-alive/, 'and carried keep-alive comments')
  t.equal(wsResult, 'late', `a WebSocket quiet for ${HOLD_MS} ms still delivers`)
})

/** A minimal WebSocket client over a raw socket: handshake, then the first (unmasked, short) text frame. */
async function webSocketMessage (port: number, path: string): Promise<string> {
  return await new Promise((resolve, reject) => {
    const socket = tcp(port, '127.0.0.1', () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n')
    })
    let buffer = Buffer.alloc(0)
    socket.on('data', chunk => {
      buffer = Buffer.concat([buffer, chunk])
      const end = buffer.indexOf('\r\n\r\n')
      if (end === -1) return
      if (!/^HTTP\/1\.1 101 /.test(buffer.toString('latin1'))) { socket.destroy(); reject(new Error(`no upgrade: ${buffer.toString('latin1', 0, 40)}`)); return }
      const frame = buffer.subarray(end + 4)
      if (frame.length < 2 || frame.length < 2 + (frame[1] as number)) return
      socket.destroy()
      resolve(frame.subarray(2, 2 + (frame[1] as number)).toString('utf8'))
    })
    socket.on('error', reject)
    socket.on('close', () => reject(new Error('closed before a message arrived')))
  })
}
