import t from 'tap'
import { parseTargets, parseVersion, publicSocketUrl, TARGET_ID } from '../../../plugins/cdp-bridge/targets.js'
import { viewerCode } from '../../../plugins/cdp-bridge/socket-relay.js'

t.test('relay URLs follow PUBLIC_BASE_URL: scheme, host, path prefix, encoded chat and token', async t => {
  t.equal(publicSocketUrl('http://cubicle.test', 'c1', 'ABC'), 'ws://cubicle.test/browser/c1/devtools/page/ABC')
  t.equal(publicSocketUrl('https://x.example:8443/cu/', 'local:a', 'ABC', 'v1.c.1.s+/'), 'wss://x.example:8443/cu/browser/local%3Aa/devtools/page/ABC?t=v1.c.1.s%2B%2F')
})

t.test('target ids must match the docs/contract.md#browser pattern', async t => {
  for (const ok of ['A', 'a_b-C9', 'x'.repeat(64)]) t.ok(TARGET_ID.test(ok), ok)
  for (const bad of ['', 'a.b', 'a/b', '../x', 'x'.repeat(65), 'a b', 'é']) t.notOk(TARGET_ID.test(bad), bad)
})

t.test('parseTargets keeps known fields of valid targets, at most max', async t => {
  const raw = [
    { id: 'p1', type: 'page', title: 't', url: 'u', webSocketDebuggerUrl: 'ws://10.0.0.1/x', devtoolsFrontendUrl: '/x', parentId: 'bad/id', attached: true },
    { id: 'p2', type: 'Page!', title: 't', url: 'u' },
    { id: 'p3', type: 'iframe', title: 't', url: 'u', parentId: 'p1' },
    { id: 'p4', type: 'page', title: 't', url: 'u' }
  ]
  t.same(parseTargets(raw, 2), [
    { id: 'p1', type: 'page', title: 't', url: 'u', attached: true },
    { id: 'p3', type: 'iframe', title: 't', url: 'u', parentId: 'p1' }
  ])
  t.throws(() => parseTargets({ length: 1 }, 10), /not an array/)
})

t.test('parseVersion keeps only the descriptive fields', async t => {
  t.same(parseVersion({ Browser: 'B', 'Protocol-Version': '1.3', webSocketDebuggerUrl: 'ws://x', Extra: 'y', 'User-Agent': 5 }), { Browser: 'B', 'Protocol-Version': '1.3' })
  t.throws(() => parseVersion([]), /not an object/)
})

t.test('close codes of the browser reach the viewer only when they may be sent', async t => {
  t.same([1000, 1001, 1009, 1011, 4001].map(viewerCode), [1000, 1001, 1009, 1011, 4001])
  t.same([1005, 1006, 1015, 999, 2000, 5000].map(viewerCode), [1011, 1011, 1011, 1011, 1011, 1011])
})
