/*
 * The Kubernetes client (plugins/sandbox-kubernetes/kube-client.ts) on a kept-alive connection the API
 * server closed while it was idle: the request meets a reset before any answer and goes again on a fresh
 * connection; a reset on a fresh connection is final. A local HTTP server plays the API server and resets
 * chosen requests.
 */
import http from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import t from 'tap'
import { KubeClient } from '../../../plugins/sandbox-kubernetes/kube-client.js'

interface Fake { url: string, requests: Array<{ method: string, reused: boolean }>, close: () => Promise<void> }

/** Answers `{ n }`; `reset(i, reused)` says whether request i (0-based) has its connection destroyed unanswered. */
async function fakeApi (reset: (i: number, reused: boolean) => boolean): Promise<Fake> {
  const requests: Fake['requests'] = []
  const seen = new WeakSet<Socket>()
  const server = http.createServer((req, res) => {
    const reused = seen.has(req.socket)
    seen.add(req.socket)
    const i = requests.length
    requests.push({ method: req.method ?? '', reused })
    req.resume()
    req.on('end', () => {
      if (reset(i, reused)) { req.socket.destroy(); return }
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ n: i }))
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: async () => { server.closeAllConnections(); await new Promise(resolve => server.close(resolve)) }
  }
}

const client = (url: string): KubeClient => new KubeClient({ server: url, namespace: 'ns', token: () => undefined, insecureSkipTlsVerify: false, source: 'test' })

t.test('a reused connection reset before any answer: the request goes again on a fresh one', async t => {
  const api = await fakeApi((i, reused) => reused && i === 1)
  const c = client(api.url)
  t.teardown(async () => { c.close(); await api.close() })
  t.same(await c.request('GET', '/api/v1/namespaces/ns/pods'), { n: 0 })
  t.same(await c.request('POST', '/api/v1/namespaces/ns/pods', { body: { kind: 'Pod' } }), { n: 2 }, 'answered by the second try')
  t.same(api.requests.map(r => r.method), ['GET', 'POST', 'POST'])
  t.same(api.requests.map(r => r.reused), [false, true, false], 'the second try on a new connection')
})

t.test('a reset on a new connection is not tried again', async t => {
  const api = await fakeApi(i => i === 0)
  const c = client(api.url)
  t.teardown(async () => { c.close(); await api.close() })
  await t.rejects(c.request('GET', '/api/v1/namespaces/ns/pods'), { name: 'KubeError', busy: true })
  t.equal(api.requests.length, 1)
})

t.test('a retry that resets on its fresh connection is the failure', async t => {
  const api = await fakeApi(i => i > 0)
  const c = client(api.url)
  t.teardown(async () => { c.close(); await api.close() })
  await c.request('GET', '/api/v1/namespaces/ns/pods')
  await t.rejects(c.request('GET', '/api/v1/namespaces/ns/pods'), { name: 'KubeError' })
  // The first reset was on the kept-alive connection; the retry's, on a fresh one, is final.
  t.equal(api.requests.length, 3)
})
