// the CDP bridge on real Docker and real Chromium: status, /json, a CDP client through
// /browser/{chat}/devtools/page/{id}, refused handshakes, and chat isolation.
import t from 'tap'
import WebSocket from 'ws'
import { pollUntil } from '../fixtures/poll.js'
import { dockerOrSkip } from './docker.js'
import { bash, browserApp, cdpClient, mcpClient, SITE } from './browser-app.js'

const gate = await dockerOrSkip()

/** The HTTP status that refused a handshake, or 101 when it was accepted. */
async function handshake (url: string, headers: Record<string, string> = {}): Promise<number> {
  return await new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers })
    ws.once('open', () => { ws.terminate(); resolve(101) })
    ws.once('unexpected-response', (_req, res) => { res.resume(); resolve(res.statusCode ?? 0) })
    ws.once('error', reject)
  })
}

t.test('a CDP client reaches the chat\'s browser through the bridge and nothing else does', gate, async t => {
  const { app, url } = await browserApp(t)
  const a = await mcpClient(t, url, 'bridge-a')
  const b = await mcpClient(t, url, 'bridge-b')
  const tokenA = app.links.token('bridge-a', 'c') as string
  const tokenB = app.links.token('bridge-b', 'c') as string

  const before = await (await fetch(`${url}/browser/bridge-a/status?t=${tokenA}`)).json()
  t.same(before, { active: false, pages: [] }, 'no sandbox yet: inactive, and nothing was started')

  await bash(a, SITE)
  await bash(b, 'browser open "data:text/html,<title>Chat B page</title>"')

  const status = await (await fetch(`${url}/browser/bridge-a/status?t=${tokenA}`)).json() as { active: boolean, pages: Array<{ id: string, title: string, url: string }> }
  t.equal(status.active, true)
  const page = status.pages.find(p => p.url === 'http://127.0.0.1:8000/index.html')
  t.ok(page, 'status lists the page the model opened')
  const idA = page?.id ?? 'missing'

  const list = await (await fetch(`${url}/browser/bridge-a/json?t=${tokenA}`)).json() as Array<{ id: string, webSocketDebuggerUrl: string }>
  const target = list.find(x => x.id === idA)
  t.equal(target?.webSocketDebuggerUrl, `${url.replace('http:', 'ws:')}/browser/bridge-a/devtools/page/${idA}?t=${encodeURIComponent(tokenA)}`)
  t.notMatch(JSON.stringify(list), /:9222|devtoolsFrontendUrl/, 'no internal address or frontend URL')
  const version = await (await fetch(`${url}/browser/bridge-a/json/version?t=${tokenA}`)).json() as Record<string, string>
  t.match(version.Browser, /Chrome\//)
  t.notOk('webSocketDebuggerUrl' in version)

  const cdp = await cdpClient(t, target?.webSocketDebuggerUrl ?? '')
  const title = await cdp.send('Runtime.evaluate', { expression: 'document.title', returnByValue: true })
  t.equal(title.result.value, 'Agent page', 'Runtime.evaluate runs in the model\'s page')
  t.equal(app.cdp.viewers('bridge-a'), 1)

  const socketA = `${url.replace('http:', 'ws:')}/browser/bridge-a/devtools/page/${idA}`
  t.equal(await handshake(socketA), 401, 'no token')
  t.equal(await handshake(`${socketA}?t=${tokenB}`), 403, 'chat B\'s token on chat A')
  t.equal(await handshake(`${socketA}?t=${tokenA}`, { Origin: 'https://evil.example' }), 403, 'bad Origin')
  t.equal(await handshake(`${socketA}?t=${tokenA}`, { Origin: url }), 101, 'the public origin')

  // Chat B's token with chat B's route and chat A's target id reaches chat B's browser, where that
  // target does not exist: the relay closes instead of finding chat A's page.
  const crossed = new WebSocket(`${url.replace('http:', 'ws:')}/browser/bridge-b/devtools/page/${idA}?t=${tokenB}`)
  const code = await new Promise<number>(resolve => { crossed.once('close', c => { resolve(c) }); crossed.once('error', () => {}) })
  t.equal(code, 1011, 'chat B never reaches chat A\'s page')
  const listB = await (await fetch(`${url}/browser/bridge-b/json?t=${tokenB}`)).json() as Array<{ id: string, title: string }>
  t.notOk(listB.some(x => x.id === idA), 'chat B\'s browser does not list chat A\'s page')
  t.ok(listB.some(x => x.title === 'Chat B page'))

  cdp.ws.close()
  await new Promise(resolve => cdp.ws.once('close', resolve))
  t.equal(await pollUntil(() => app.cdp.viewers('bridge-a'), n => n === 0), 0, 'closing the client closes the relay')
})
