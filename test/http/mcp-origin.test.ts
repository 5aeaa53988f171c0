import t from 'tap'
import { request } from 'node:http'
import { listen } from '../helper.js'
import { connect, kernelManifest, textOf } from '../fixtures/mcp-probe.js'

// DNS-rebinding defence of /mcp (docs/contract.md#authentication-and-origin). Requests go through node:http so
// that Host and Origin are exactly what a browser under a rebinding attack would send.

const PING = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' })

async function ping (url: string, headers: Record<string, string>): Promise<{ status: number, body: string }> {
  const target = new URL('/mcp', url)
  return await new Promise((resolve, reject) => {
    const req = request(target, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } }, res => {
      let body = ''
      res.on('data', (c: Buffer) => { body += c.toString('utf8') })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, body }) })
    })
    req.on('error', reject)
    req.end(PING)
  })
}

const manifest = kernelManifest({ calls: [], aborted: [] })

t.test('PUBLIC_BASE_URL unset: the server\'s own loopback origin is accepted (conformance dns-rebinding-protection)', async t => {
  const { url } = await listen(t, { PUBLIC_BASE_URL: '' }, manifest)
  const port = new URL(url).port
  for (const host of ['127.0.0.1', 'localhost', '[::1]']) {
    const res = await ping(url, { host: `${host}:${port}`, origin: `http://${host}:${port}` })
    t.equal(res.status, 200, `Host and Origin ${host}:${port}`)
    t.same(JSON.parse(res.body), { jsonrpc: '2.0', id: 1, result: {} })
  }
  t.equal((await ping(url, { origin: `http://localhost:${port}` })).status, 200, 'Host 127.0.0.1, Origin localhost: a loopback spelling of the same origin')
})

t.test('PUBLIC_BASE_URL unset: foreign origins stay refused, even when they match the Host header', async t => {
  const { url } = await listen(t, { PUBLIC_BASE_URL: '' }, manifest)
  const port = Number(new URL(url).port)
  const cases: Array<[Record<string, string>, string]> = [
    [{ host: 'evil.example.com', origin: 'http://evil.example.com' }, 'the rebinding attack: Host and Origin both the attacker\'s'],
    [{ host: `evil.example.com:${port}`, origin: `http://evil.example.com:${port}` }, 'attacker name on our port'],
    [{ origin: `http://127.0.0.1:${port + 1}` }, 'loopback on another port'],
    [{ origin: `https://127.0.0.1:${port}` }, 'https on a plain-HTTP port'],
    [{ host: '127.0.0.2', origin: 'http://127.0.0.2' }, 'Host chosen to equal the Origin'],
    [{ origin: 'null' }, 'opaque origin']
  ]
  for (const [headers, why] of cases) {
    const res = await ping(url, headers)
    t.equal(res.status, 403, why)
    t.match(JSON.parse(res.body), { error: 'forbidden' })
  }
})

t.test('PUBLIC_BASE_URL on loopback: its other loopback spellings are the same origin', async t => {
  const { url } = await listen(t, { PUBLIC_BASE_URL: 'http://localhost:18081' }, manifest)
  const port = new URL(url).port
  t.equal((await ping(url, { origin: 'http://127.0.0.1:18081' })).status, 200)
  t.equal((await ping(url, { origin: 'http://[::1]:18081' })).status, 200)
  t.equal((await ping(url, { origin: 'http://localhost:18082' })).status, 403, 'another port')
  t.equal((await ping(url, { origin: `http://127.0.0.1:${port}` })).status, 403, 'the listening port counts only while PUBLIC_BASE_URL is unset')
})

t.test('PUBLIC_BASE_URL elsewhere: loopback origins are foreign unless listed', async t => {
  const { url } = await listen(t, { PUBLIC_BASE_URL: 'https://cu.example.com', ALLOWED_ORIGINS: 'http://localhost:6274' }, manifest)
  const port = new URL(url).port
  t.equal((await ping(url, { host: `127.0.0.1:${port}`, origin: `http://127.0.0.1:${port}` })).status, 403)
  t.equal((await ping(url, { origin: 'https://cu.example.com' })).status, 200)
  t.equal((await ping(url, { origin: 'http://localhost:6274' })).status, 200)
  t.equal((await ping(url, {})).status, 200, 'no Origin: server-to-server clients are not affected')
})

t.test('an SDK client whose requests carry the server\'s loopback Origin works end to end', async t => {
  const { url } = await listen(t, { PUBLIC_BASE_URL: '' }, manifest)
  const client = await connect(t, url, { Origin: url, 'X-Chat-Id': 'browserish' })
  t.match(textOf(await client.callTool({ name: 'whoami', arguments: {} })), /"chatId":"browserish"/)
})
