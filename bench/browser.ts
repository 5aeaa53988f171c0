/*
 * (f) CDP Runtime.evaluate through the bridge ÷ a direct CDP connection inside the sandbox (goal ≤ 1.5);
 * screencast frames per second delivered to a viewer for an animating page (goal ≥ 10).
 */
import WebSocket from 'ws'
import { PassThrough } from 'node:stream'
import type { Duplex } from 'node:stream'
import { connectBackend, relayArgv, relayPipe } from '../plugins/cdp-bridge/cdp-client.js'
import { BASE, bash, chatContainer, client, docker, median, ms, now } from './common.js'

// An animating page (a box moving every frame) and a direct CDP client run inside the sandbox on the
// image's own Node and the WebSocket of its playwright-core.
const ANIM_PAGE = `<!doctype html><title>anim</title><body style="margin:0"><div id="b" style="position:absolute;width:80px;height:80px;background:#4f46e5"></div>
<script>let x = 0; (function f () { x = (x + 7) % 1100; document.getElementById('b').style.transform = 'translate(' + x + 'px,' + (x % 600) + 'px)'; requestAnimationFrame(f) })()</script>`
const DIRECT_CDP = `const WS = require('/opt/cubicle-browser/node_modules/playwright-core/lib/utilsBundle').ws
const ws = new WS('ws://127.0.0.1:9222/devtools/page/' + process.argv[2])
let id = 0
const once = () => new Promise(resolve => {
  const my = ++id; const t0 = performance.now()
  const h = d => { if (JSON.parse(d).id === my) { ws.off('message', h); resolve(performance.now() - t0) } }
  ws.on('message', h)
  ws.send(JSON.stringify({ id: my, method: 'Runtime.evaluate', params: { expression: '1+1' } }))
})
ws.on('open', async () => {
  if (process.argv[3] === 'fps') {
    let frames = 0; let counting = false
    ws.on('message', d => { const m = JSON.parse(d); if (m.method !== 'Page.screencastFrame') return; if (counting) frames++; ws.send(JSON.stringify({ id: ++id, method: 'Page.screencastFrameAck', params: { sessionId: m.params.sessionId } })) })
    ws.send(JSON.stringify({ id: ++id, method: 'Page.startScreencast', params: { format: 'jpeg', quality: 70, maxWidth: 1280, maxHeight: 800 } }))
    await new Promise(r => setTimeout(r, 1000)); counting = true; const t0 = performance.now()
    await new Promise(r => setTimeout(r, 5000))
    console.log('fps ' + (frames / ((performance.now() - t0) / 1000)))
    ws.close(); return
  }
  const times = []
  for (let i = 0; i < 220; i++) { const t = await once(); if (i >= 20) times.push(t) }
  times.sort((a, b) => a - b)
  console.log('median ' + times[times.length >> 1])
  ws.close()
})`

/** A CDP client to a relayed page: call(method) resolves with the result; frames counted by the caller. */
async function cdpSocket (url: string): Promise<{ ws: WebSocket, call: (method: string, params?: object) => Promise<unknown> }> {
  const ws = new WebSocket(url, { maxPayload: 64 << 20 })
  await new Promise<void>((resolve, reject) => { ws.once('open', () => { resolve() }); ws.once('error', reject) })
  let next = 0
  const waiting = new Map<number, (v: unknown) => void>()
  ws.on('message', data => { const m = JSON.parse(data.toString()) as { id?: number, result?: unknown }; if (m.id !== undefined) waiting.get(m.id)?.(m.result) })
  return { ws, call: async (method, params = {}) => await new Promise(resolve => { const id = ++next; waiting.set(id, resolve); ws.send(JSON.stringify({ id, method, params })) }) }
}

/**
 * The same relay the bridge uses (socat in a Docker exec), opened by this process with dockerode and
 * without the server: separates Docker's exec plumbing from the server's own cost.
 */
async function rawRelayMedian (chatId: string, targetId: string): Promise<number> {
  const info = await chatContainer(chatId)
  if (info === undefined) throw new Error('no container')
  const exec = await docker.getContainer(info.Id).exec({ Cmd: relayArgv(9222), AttachStdin: true, AttachStdout: true, AttachStderr: true, User: 'assistant' })
  const socket = await exec.start({ hijack: true, stdin: true }) as unknown as Duplex
  const out = new PassThrough()
  docker.modem.demuxStream(socket, out, new PassThrough())
  const pipe = relayPipe({
    socket,
    demux: onStdout => { out.on('data', (c: Buffer) => { onStdout(c) }) },
    resize: async () => {},
    exitCode: async () => null,
    close: () => { socket.destroy() }
  })
  const ws = connectBackend(pipe, { port: 9222, targetId, maxPayload: 64 << 20, handshakeTimeout: 10_000 })
  await new Promise<void>((resolve, reject) => { ws.once('open', () => { resolve() }); ws.once('error', reject) })
  const times: number[] = []
  for (let i = 0; i < 220; i++) {
    const t0 = now()
    await new Promise<void>(resolve => {
      ws.once('message', () => { resolve() })
      ws.send(JSON.stringify({ id: i + 1, method: 'Runtime.evaluate', params: { expression: '1+1' } }))
    })
    if (i >= 20) times.push(now() - t0)
  }
  ws.close()
  pipe.destroy()
  return median(times)
}

/** (f): the live browser. */
export async function benchBrowser (): Promise<string[]> {
  const c = await client('bench-e')
  await bash(c, `mkdir -p ~/anim && cat > ~/anim/index.html <<'EOF'\n${ANIM_PAGE}\nEOF\ncat > ~/direct-cdp.js <<'EOF'\n${DIRECT_CDP}\nEOF\nbrowser open file:///home/assistant/anim/index.html`)
  const targets = await (await fetch(`${BASE}/browser/bench-e/json`)).json() as Array<{ id: string, type: string, url: string, webSocketDebuggerUrl: string }>
  const page = targets.find(x => x.type === 'page' && x.url.endsWith('/anim/index.html'))
  if (page === undefined) throw new Error('the animating page is not listed')
  const { ws, call } = await cdpSocket(page.webSocketDebuggerUrl)
  const bridged: number[] = []
  for (let i = 0; i < 220; i++) {
    const t0 = now(); await call('Runtime.evaluate', { expression: '1+1' }); if (i >= 20) bridged.push(now() - t0)
  }
  const direct = Number(/median ([\d.]+)/.exec(await bash(c, `node ~/direct-cdp.js ${page.id}`))?.[1] ?? NaN)
  const raw = await rawRelayMedian('bench-e', page.id)
  let frames = 0
  let counting = false
  ws.on('message', data => {
    const m = JSON.parse(data.toString()) as { method?: string, params?: { sessionId: number } }
    if (m.method !== 'Page.screencastFrame') return
    if (counting) frames++
    void call('Page.screencastFrameAck', { sessionId: m.params?.sessionId })
  })
  await call('Page.startScreencast', { format: 'jpeg', quality: 70, maxWidth: 1280, maxHeight: 800 })
  await new Promise(resolve => setTimeout(resolve, 1000))
  counting = true
  const t0 = now()
  await new Promise(resolve => setTimeout(resolve, 5000))
  const fps = frames / ((now() - t0) / 1000)
  ws.close()
  const directFps = Number(/fps ([\d.]+)/.exec(await bash(c, `node ~/direct-cdp.js ${page.id} fps`))?.[1] ?? NaN)
  await c.close()
  return [
    `(f) CDP Runtime.evaluate via the bridge ${ms(median(bridged))} ÷ direct in the sandbox ${ms(direct)} = ${(median(bridged) / direct).toFixed(2)} (goal ≤ 1.5); ` +
      `the bare exec relay without the server: ${ms(raw)} (bridge ÷ bare relay = ${(median(bridged) / raw).toFixed(2)})`,
    `(f) screencast to a viewer through the bridge: ${fps.toFixed(1)} frames/s for an animating page (goal ≥ 10); a direct client in the sandbox gets ${directFps.toFixed(1)}`
  ]
}
