/*
 * A web app the app-proxy tests run inside a sandbox (test/integration/apps-proxy.test.ts, bench/run.ts):
 * Node's http server with a hand-made WebSocket echo (the image has no npm packages for it), an asset,
 * a redirect, cookies, SSE, a streamed download and the hostile answers (huge headers, a head that
 * never comes, a redirect into another chat's prefix, a cookie for `/`).
 */
import type { Test } from 'tap'
import { browserApp, type BrowserApp } from './browser-app.js'

export const APP_JS = String.raw`
const http = require('http'), crypto = require('crypto')
const port = Number(process.argv[2] || 3000)
const page = prefix => '<!doctype html><html><head><title>loading</title>' +
  '<link rel="stylesheet" href="' + prefix + '/style.css"></head><body><h1 id="h">App on ' + port + '</h1>' +
  '<script src="static/app.js"></script></body></html>'
const script = "const u = new URL('ws', location.href); u.protocol = u.protocol.replace('http', 'ws');" +
  "const ws = new WebSocket(u); ws.onopen = () => ws.send('ping');" +
  "ws.onmessage = e => { document.title = 'ws:' + e.data };" +
  "fetch('headers').then(r => r.json()).then(h => { window.appHeaders = h })"
function frame (text) {
  const body = Buffer.from(text)
  return Buffer.concat([Buffer.from([0x81, body.length]), body])
}
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x')
  switch (url.pathname) {
    case '/': res.writeHead(200, { 'content-type': 'text/html' }); return res.end(page(req.headers['x-forwarded-prefix'] || ''))
    case '/style.css': res.writeHead(200, { 'content-type': 'text/css' }); return res.end('h1 { color: rgb(1, 2, 3) }')
    case '/static/app.js': res.writeHead(200, { 'content-type': 'text/javascript' }); return res.end(script)
    case '/headers': res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': 'appsid=s1; Path=/' }); return res.end(JSON.stringify({ url: req.url, headers: req.headers }))
    case '/go': res.writeHead(302, { location: '/landed?from=go' }); return res.end()
    case '/landed': res.writeHead(200, { 'content-type': 'text/html' }); return res.end('<title>landed</title>landed')
    case '/evil-redirect': res.writeHead(302, { location: url.searchParams.get('to') }); return res.end()
    case '/cookie': res.writeHead(200, { 'set-cookie': ['root=1; Path=/; Domain=127.0.0.1', 'cubicle_app=forged; Path=/'] }); return res.end('ok')
    case '/big-headers': res.writeHead(200, { 'x-big': 'x'.repeat(100000) }); return res.end('big')
    case '/slow': res.socket.write('HTTP/1.1 200 OK\r\n'); return
    case '/sse': {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
      let n = 0
      const timer = setInterval(() => { res.write('data: ' + (++n) + ' ' + Date.now() + '\n\n'); if (n === 5) { clearInterval(timer); res.end() } }, 300)
      return
    }
    case '/bytes': {
      let left = Number(url.searchParams.get('n') || 0)
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(left) })
      const chunk = Buffer.alloc(256 * 1024, 120)
      const more = () => { while (left > 0) { const c = left >= chunk.length ? chunk : chunk.subarray(0, left); left -= c.length; if (!res.write(c)) return res.once('drain', more) } res.end() }
      return more()
    }
    case '/upload': { let n = 0; req.on('data', c => { n += c.length }); req.on('end', () => { res.writeHead(200, { 'content-type': 'application/json' }); res.end(JSON.stringify({ received: n })) }); return }
    case '/small': res.writeHead(200, { 'content-type': 'text/plain' }); return res.end('ok')
    default: res.writeHead(404); return res.end('not found')
  }
})
server.on('upgrade', (req, socket) => {
  const accept = crypto.createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64')
  socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ' + accept + '\r\n\r\n')
  socket.on('data', buf => {
    if ((buf[0] & 0x0f) === 8) return socket.end()
    const len = buf[1] & 0x7f, mask = buf.subarray(2, 6)
    const text = Buffer.from(buf.subarray(6, 6 + len).map((b, i) => b ^ mask[i % 4])).toString()
    socket.write(frame(text === 'ping' ? 'pong' : 'echo:' + text))
  })
})
server.listen(port, '0.0.0.0')
`

/** bash that writes the app and starts it on `port` in the background, returning once it answers. */
export const startApp = (port: number): string => `mkdir -p ~/app && cat > ~/app/server.js <<'EOF'
${APP_JS}
EOF
(cd ~/app && nohup node server.js ${port} > ~/app/${port}.log 2>&1 &)
for i in $(seq 100); do curl -fs -o /dev/null http://127.0.0.1:${port}/small && break; sleep 0.1; done; echo started`

/** The server the app tests run (browser-app.ts: protected mode, a fixed free port that PUBLIC_BASE_URL names) with the ports plugin. */
export async function appsServer (t: Test, env: Record<string, string> = {}): Promise<BrowserApp> {
  return await browserApp(t, { COMMAND_TIMEOUT: '120', ...env }, ['ports'])
}
