import t from 'tap'
import { fakeSandbox, terminalApp, KEY } from './fakes.js'

// The browser Origin rule on the terminal's HTTP routes (core/route-kit.ts chatRoutes, docs/architecture.md#security-model).
const auth = { authorization: `Bearer ${KEY}` }

t.test('CORS follows the Origin rule: an accepted origin is echoed, never *; a foreign page cannot change anything', async t => {
  const fake = fakeSandbox()
  fake.setState('c1', 'running')
  const { app, token } = await terminalApp(t, fake)
  const cors = async (headers: Record<string, string>): Promise<string | undefined> =>
    (await app.inject({ url: '/terminal/c1/heartbeat', headers })).headers['access-control-allow-origin'] as string | undefined
  t.equal(await cors({ ...auth, origin: 'null' }), 'null', 'null with a Bearer token')
  t.equal(await cors({ origin: 'null' }), undefined, 'null without a credential')
  t.equal(await cors({ ...auth, origin: 'https://chat.example' }), 'https://chat.example', 'ALLOWED_ORIGINS')
  t.equal(await cors({ ...auth, origin: 'https://evil.example' }), undefined, 'a foreign origin, even with a token')
  fake.calls.length = 0
  fake.probes.length = 0
  const stop = await app.inject({ method: 'POST', url: `/terminal/c1/stop-ttyd?t=${token('c1')}`, headers: { origin: 'https://evil.example' } })
  t.equal(stop.statusCode, 403, 'a POST from a foreign page is refused')
  t.equal(stop.json().error, 'forbidden_origin')
  t.same([...fake.calls, ...fake.probes], [], 'before the sandbox was asked anything')

  const open = await terminalApp(t, fake, { open: true })
  t.equal((await open.app.inject({ url: '/terminal/c1/heartbeat', headers: { origin: 'null' } })).headers['access-control-allow-origin'], undefined, 'open mode: null never gets CORS')
  const pre = await open.app.inject({ method: 'OPTIONS', url: '/terminal/c1/start-ttyd', headers: { origin: 'null', 'access-control-request-method': 'POST' } })
  t.equal(pre.headers['access-control-allow-origin'], undefined, 'open mode: nor a preflight from null')
  const post = await open.app.inject({ method: 'POST', url: '/terminal/c1/restart-container', headers: { origin: 'null' } })
  t.equal(post.statusCode, 403, 'open mode: a form POST from a sandboxed iframe is refused')
})
