import t from 'tap'
import { createOutboundFetch, isPublicAddress, publicAddress, type ResolveHost } from '../../../plugins/oauth/outbound-fetch.js'
import { httpsServer, selfSignedCert } from '../../fixtures/tls.js'

// The authorization server's fetch of client metadata documents (docs/contract.md#oauth): public
// addresses only, the resolved address pinned, https, no redirects, bounded in size and time. The
// servers here are the test's own, on loopback; `docs.test` is a name no DNS knows, which the test's
// resolver maps to 127.0.0.1 (the production resolver would refuse that address).

const pair = await selfSignedCert(['docs.test'])
const toLoopback: ResolveHost = async host => {
  if (host !== 'docs.test') throw new Error(`unexpected host ${host}`)
  return { address: '127.0.0.1', family: 4 }
}
const fetchVia = (resolve: ResolveHost = toLoopback, extra: { maxBytes?: number, timeoutMs?: number, ca?: string } = {}): ReturnType<typeof createOutboundFetch> =>
  createOutboundFetch({ maxBytes: 1024, timeoutMs: 2500, resolve, ca: pair.cert, ...extra })

t.test('isPublicAddress: special-use ranges and IPv6 forms embedding them are refused', async t => {
  for (const a of ['8.8.8.8', '1.1.1.1', '2606:4700::1111', '2001:4860:4860::8888', '::ffff:8.8.8.8']) t.ok(isPublicAddress(a), `${a} is public`)
  for (const a of ['127.0.0.1', '127.1.2.3', '10.0.0.1', '172.16.0.1', '172.31.255.255', '192.168.1.1', '100.64.0.1', '169.254.169.254',
    '100.100.100.200', '0.0.0.0', '255.255.255.255', '224.0.0.1', '198.18.0.1', '192.0.2.1', '::', '::1', '::ffff:127.0.0.1',
    '::ffff:7f00:1', '::ffff:169.254.169.254', '::127.0.0.1', 'fd00:ec2::254', 'fc00::1', 'fe80::1', 'fec0::1', 'ff02::1',
    '64:ff9b::7f00:1', '2002:7f00:1::1', '2001::1', '2001:db8::1', '2::1', '4000::1', 'not-an-ip', 'localhost']) {
    t.notOk(isPublicAddress(a), `${a} is refused`)
  }
})

t.test('the default resolver refuses special-use literals before any connection', async t => {
  const signal = AbortSignal.timeout(5000)
  for (const host of ['127.0.0.1', '[::1]', '169.254.169.254', '[::ffff:127.0.0.1]', '10.1.2.3']) {
    await t.rejects(publicAddress(host, signal), /is not a public address/, host)
  }
  t.same(await publicAddress('8.8.8.8', signal), { address: '8.8.8.8', family: 4 }, 'a public literal is used as it is')
  const server = await httpsServer(t, pair, (_req, res) => { res.end('{}') })
  await t.rejects(createOutboundFetch({ maxBytes: 1024, timeoutMs: 2500, ca: pair.cert })(`https://127.0.0.1:${server.port}/doc`), /not a public address/)
  await t.rejects(createOutboundFetch({ maxBytes: 1024, timeoutMs: 2500, ca: pair.cert })(`https://[::ffff:127.0.0.1]:${server.port}/doc`), /not a public address/)
  t.equal(server.connections(), 0, 'nothing reached the loopback server')
})

t.test('a document is fetched from the resolved address, the name checked by TLS', async t => {
  const server = await httpsServer(t, pair, (req, res) => {
    res.setHeader('content-type', 'application/json')
    res.setHeader('cache-control', 'max-age=60')
    res.end(JSON.stringify({ path: req.url, host: req.headers.host, accept: req.headers.accept, ua: req.headers['user-agent'] ?? null }))
  })
  const res = await fetchVia()(`https://docs.test:${server.port}/client.json?x=1`, { headers: { accept: 'application/json', 'user-agent': '' } })
  t.equal(res.status, 200)
  t.equal(res.headers.get('cache-control'), 'max-age=60')
  t.same(await res.json(), { path: '/client.json?x=1', host: `docs.test:${server.port}`, accept: 'application/json', ua: null })
  let asked = 0
  const counting: ResolveHost = async host => { asked++; return await toLoopback(host, AbortSignal.timeout(1000)) }
  await fetchVia(counting)(`https://docs.test:${server.port}/a`)
  t.equal(asked, 1, 'one resolution per fetch; the socket connects to what it returned (no second lookup)')
  await t.rejects(fetchVia(toLoopback, { ca: (await selfSignedCert(['docs.test'])).cert })(`https://docs.test:${server.port}/a`), /self.signed|certificate/i, 'a certificate nobody vouched for is refused')
  const otherName: ResolveHost = async () => ({ address: '127.0.0.1', family: 4 })
  await t.rejects(fetchVia(otherName)(`https://other.test:${server.port}/a`), /altnames|does not match|ERR_TLS_CERT_ALTNAME/i, 'the certificate must name the host asked for')
})

t.test('only https GET without credentials; redirects are returned, never followed', async t => {
  const server = await httpsServer(t, pair, (req, res) => {
    if (req.url === '/moved') { res.writeHead(302, { location: '/target' }).end('moved'); return }
    res.end('{}')
  })
  const get = fetchVia()
  await t.rejects(get(`http://docs.test:${server.port}/a`), /only https URLs/)
  await t.rejects(get(`https://user:pw@docs.test:${server.port}/a`), /credentials/)
  await t.rejects(get(`https://docs.test:${server.port}/a`, { method: 'POST', body: '{}' }), /only GET/)
  const moved = await get(`https://docs.test:${server.port}/moved`, { redirect: 'follow' })
  t.equal(moved.status, 302)
  t.equal(moved.headers.get('location'), '/target')
  t.same(server.requests, ['/moved'], 'the redirect target was never requested')
})

t.test('bodies over maxBytes and answers over the deadline fail', async t => {
  const server = await httpsServer(t, pair, (req, res) => {
    if (req.url === '/declared') { res.writeHead(200, { 'content-length': '5000' }).end('x'.repeat(5000)); return }
    if (req.url === '/chunked') { res.write('x'.repeat(800)); res.write('x'.repeat(800)); res.end(); return }
    if (req.url === '/slow') { res.write('{'); return } // headers, then nothing
    res.end('x'.repeat(1024))
  })
  const get = fetchVia(toLoopback, { timeoutMs: 400 })
  await t.rejects(get(`https://docs.test:${server.port}/declared`), /5000 bytes, over 1024/)
  await t.rejects(get(`https://docs.test:${server.port}/chunked`), /over 1024 bytes/)
  t.equal((await (await get(`https://docs.test:${server.port}/exact`)).text()).length, 1024, 'exactly maxBytes is fine')
  const started = Date.now()
  await t.rejects(get(`https://docs.test:${server.port}/slow`))
  const took = Date.now() - started
  t.ok(took >= 350 && took < 5000, `a body that never ends fails at the deadline (${took} ms for 400)`)
  const stalled: ResolveHost = async () => await new Promise(() => {})
  await t.rejects(fetchVia(stalled, { timeoutMs: 300 })(`https://docs.test:${server.port}/a`), /no address within 300 ms/, 'a resolver that never answers is cut off by the deadline')
})
