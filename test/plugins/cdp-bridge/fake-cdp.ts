/*
 * A stand-in for Chromium's DevTools endpoint on the test's loopback: /json/list, /json/version and a
 * WebSocket per page that answers Runtime.evaluate, echoes binary frames and can be told to misbehave.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import { WebSocketServer, type WebSocket } from 'ws'

export interface FakeCdp {
  port: number
  /** the answer of /json/list (default: one page, one worker) */
  list: unknown
  /** raw answer override for any /json path: status, body */
  raw?: (path: string, res: ServerResponse) => void
  sockets: Set<WebSocket>
  /** paths of the WebSocket upgrades the fake accepted */
  upgrades: string[]
  /** headers of the last upgrade */
  lastHeaders?: IncomingMessage['headers']
}

export const PAGE_ID = 'A1B2C3D4E5F60718293A4B5C6D7E8F90'

export function defaultList (port: number): unknown[] {
  return [
    {
      id: PAGE_ID,
      type: 'page',
      title: 'Agent page',
      url: 'http://127.0.0.1:8000/index.html',
      description: '',
      devtoolsFrontendUrl: `/devtools/inspector.html?ws=127.0.0.1:${port}/devtools/page/${PAGE_ID}`,
      webSocketDebuggerUrl: `ws://127.0.0.1:${port}/devtools/page/${PAGE_ID}`,
      faviconUrl: 'http://10.0.0.7/secret.ico'
    },
    { id: 'W0RKER', type: 'service_worker', title: 'sw', url: 'http://127.0.0.1:8000/sw.js', webSocketDebuggerUrl: `ws://127.0.0.1:${port}/devtools/page/W0RKER` }
  ]
}

export async function fakeCdp (t: Test): Promise<FakeCdp> {
  const state: FakeCdp = { port: 0, list: [], sockets: new Set(), upgrades: [] }
  const server = createServer((req, res) => {
    const path = req.url ?? '/'
    if (state.raw !== undefined) { state.raw(path, res); return }
    res.setHeader('Content-Type', 'application/json; charset=UTF-8')
    if (path === '/json/list' || path === '/json') { res.end(JSON.stringify(state.list)); return }
    if (path === '/json/version') {
      res.end(JSON.stringify({ Browser: 'Chrome/156.0.0.0', 'Protocol-Version': '1.3', 'User-Agent': 'UA', webSocketDebuggerUrl: `ws://127.0.0.1:${state.port}/devtools/browser/x` }))
      return
    }
    res.statusCode = 404
    res.end('{}')
  })
  const wss = new WebSocketServer({ server, maxPayload: 64 * 1024 * 1024 })
  wss.on('connection', (ws, req) => {
    state.upgrades.push(req.url ?? '')
    state.lastHeaders = req.headers
    state.sockets.add(ws)
    ws.on('close', () => state.sockets.delete(ws))
    ws.on('message', (data, isBinary) => {
      if (isBinary) { ws.send(data, { binary: true }); return }
      const msg = JSON.parse(data.toString()) as { id: number, method: string, params?: { expression?: string } }
      if (msg.method === 'Runtime.evaluate') {
        const value = msg.params?.expression === 'location.href' ? 'http://127.0.0.1:8000/index.html' : String(msg.params?.expression)
        ws.send(JSON.stringify({ id: msg.id, result: { result: { type: 'string', value } } }))
      } else if (msg.method === 'Test.close') {
        ws.close(4001, 'bye')
      } else {
        ws.send(JSON.stringify({ id: msg.id, result: {} }))
      }
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  state.port = (server.address() as AddressInfo).port
  state.list = defaultList(state.port)
  t.teardown(async () => {
    for (const ws of wss.clients) ws.terminate()
    wss.close()
    server.closeAllConnections()
    await new Promise<void>(resolve => server.close(() => { resolve() }))
  })
  return state
}
