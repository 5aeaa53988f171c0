import t from 'tap'
import WebSocket from 'ws'
import type { Test } from 'tap'
import { fakeSandbox, terminalApp, type FakeSandbox, type FakeTty } from './fakes.js'

/** Opens a terminal socket; resolves with the socket or the refused handshake's HTTP status. */
async function connect (url: string, opts: { origin?: string, protocols?: string[] } = {}): Promise<WebSocket | number> {
  const ws = new WebSocket(url.replace(/^http/, 'ws'), opts.protocols ?? ['tty'], opts.origin === undefined ? {} : { origin: opts.origin })
  return await new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws))
    ws.once('unexpected-response', (_req, res) => { resolve(res.statusCode ?? 0); ws.terminate() })
    ws.once('error', reject)
  })
}

interface Frames { all: Buffer[], text: () => string, next: (pred: (f: Buffer) => boolean) => Promise<Buffer> }
function frames (ws: WebSocket): Frames {
  const all: Buffer[] = []
  const waiters: Array<{ pred: (f: Buffer) => boolean, resolve: (f: Buffer) => void }> = []
  ws.on('message', (data: Buffer) => {
    all.push(data)
    for (const w of [...waiters]) if (w.pred(data)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(data) }
  })
  return {
    all,
    text: () => all.filter(f => f[0] === 0x30).map(f => f.subarray(1).toString()).join(''),
    next: async pred => await new Promise(resolve => {
      const hit = all.find(pred)
      if (hit !== undefined) resolve(hit)
      else waiters.push({ pred, resolve })
    })
  }
}

const closed = async (ws: WebSocket): Promise<{ code: number, reason: string }> =>
  await new Promise(resolve => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })))

async function until (check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not met in time')
    await new Promise(resolve => setTimeout(resolve, 10))
  }
}

async function open (t: Test, fake: FakeSandbox, url: string, token: string, size = { columns: 100, rows: 30 }): Promise<{ ws: WebSocket, f: Frames, tty: FakeTty }> {
  const before = fake.ttys.length
  const ws = await connect(`${url}/terminal/c1/ws?t=${token}`)
  if (typeof ws === 'number') throw new Error(`handshake refused: ${ws}`)
  t.teardown(() => { ws.terminate() })
  const f = frames(ws)
  ws.send(JSON.stringify({ AuthToken: 'ignored', ...size }))
  await until(() => fake.ttys.length > before)
  const tty = fake.ttys[fake.ttys.length - 1] as FakeTty
  tty.output('\x1b[H\x1b[2J$ ') // tmux draws as soon as it attaches
  return { ws, f, tty }
}

t.test('the handshake is refused with HTTP statuses before any upgrade', async t => {
  const fake = fakeSandbox()
  const { url, token } = await terminalApp(t, fake, { maxViewers: 2 })
  const ws = (chat: string, tok?: string): string => `${url}/terminal/${chat}/ws${tok === undefined ? '' : `?t=${tok}`}`
  fake.setState('c1', 'running')
  t.equal(await connect(ws('c1')), 401, 'no token')
  t.equal(await connect(ws('c1', token('c2'))), 403, 'another chat\'s token')
  t.equal(await connect(ws('c1', token('c1', 'f'))), 403, 'a files token')
  t.equal(await connect(ws('c1', token('c1')), { origin: 'https://evil.example' }), 403, 'a foreign Origin')
  t.equal(await connect(ws('c1', token('c1')), { protocols: ['mqtt'] }), 400, 'not the tty subprotocol')
  t.equal(await connect(ws('n0', token('n0'))), 404, 'no running sandbox')
  t.equal(await connect(ws('Bad..Id', token('c1'))), 400, 'malformed chat id')
  t.same(fake.calls.filter(c => c.startsWith('ensure')), [], 'never starts a sandbox')
  for (const origin of ['null', 'http://cubicle.test', 'https://chat.example', undefined]) {
    const sock = await connect(ws('c1', token('c1')), origin === undefined ? {} : { origin })
    t.type(sock, WebSocket, `Origin ${origin ?? '(none)'} is allowed`)
    if (typeof sock !== 'number') { t.equal(sock.protocol, 'tty'); sock.close(); await closed(sock) }
  }
  t.equal(await connect(ws('c1'), { origin: 'null' }), 403, 'Origin null without a token')
  const res = await fetch(`${url}/terminal/c1/ws?t=${token('c1')}`)
  t.equal(res.status, 426, 'a plain GET is told to upgrade')
})

t.test('the Origin rule is core/origin.ts\'s (the one of /mcp), plus null with a token in protected mode', async t => {
  const fake = fakeSandbox()
  fake.setState('c1', 'running')
  const allowed = async (url: string, tok: string, origin: string): Promise<boolean> => {
    const sock = await connect(`${url}/terminal/c1/ws${tok === '' ? '' : `?t=${tok}`}`, { origin })
    if (typeof sock === 'number') return false
    sock.close()
    await closed(sock)
    return true
  }
  // PUBLIC_BASE_URL set: its loopback spellings are the same origin; another loopback port is not.
  const set = await terminalApp(t, fake, { env: { PUBLIC_BASE_URL: 'http://localhost:8081' } })
  for (const origin of ['http://localhost:8081', 'http://127.0.0.1:8081', 'http://[::1]:8081', 'https://chat.example', 'null']) {
    t.ok(await allowed(set.url, set.token('c1'), origin), `${origin} is allowed`)
  }
  const port = Number(new URL(set.url).port)
  for (const origin of [`http://127.0.0.1:${port}`, 'http://localhost:8082', 'https://localhost:8081', 'http://cubicle.test.evil.example', 'http://localhost:8081/path', 'garbage']) {
    t.notOk(await allowed(set.url, set.token('c1'), origin), `${origin} is refused`)
  }
  // PUBLIC_BASE_URL unset: the server's own http loopback origin on the port the socket arrived on.
  const unset = await terminalApp(t, fake, { env: { PUBLIC_BASE_URL: '' } })
  const own = Number(new URL(unset.url).port)
  t.ok(await allowed(unset.url, unset.token('c1'), `http://127.0.0.1:${own}`), 'own loopback origin while PUBLIC_BASE_URL is unset')
  t.ok(await allowed(unset.url, unset.token('c1'), `http://localhost:${own}`), 'its localhost spelling')
  t.notOk(await allowed(unset.url, unset.token('c1'), `http://127.0.0.1:${own + 1}`), 'another port')
  t.notOk(await allowed(unset.url, unset.token('c1'), `https://127.0.0.1:${own}`), 'https on that port is another origin')
  // Open mode: no token exists, so an opaque origin (any site's sandboxed iframe) never opens a shell.
  const open = await terminalApp(t, fake, { open: true, env: { PUBLIC_BASE_URL: '' } })
  const openPort = Number(new URL(open.url).port)
  t.notOk(await allowed(open.url, '', 'null'), 'open mode: null is refused')
  t.notOk(await allowed(open.url, '', 'https://evil.example'), 'open mode: a foreign origin is refused')
  t.ok(await allowed(open.url, '', `http://localhost:${openPort}`), 'open mode: the server\'s own loopback origin')
  const cli = await connect(`${open.url}/terminal/c1/ws`)
  t.type(cli, WebSocket, 'open mode: a client without Origin')
  if (typeof cli !== 'number') { cli.close(); await closed(cli) }
})

t.test('viewer cap: the ninth viewer of a chat is refused with 429', async t => {
  const fake = fakeSandbox()
  const { url, token } = await terminalApp(t, fake)
  fake.setState('c1', 'running')
  const open8 = []
  for (let i = 0; i < 8; i++) {
    const sock = await connect(`${url}/terminal/c1/ws?t=${token('c1')}`)
    if (typeof sock === 'number') throw new Error(`viewer ${i} refused with ${sock}`)
    t.teardown(() => { sock.terminate() })
    open8.push(sock)
  }
  t.equal(await connect(`${url}/terminal/c1/ws?t=${token('c1')}`), 429)
  open8[0]?.close()
  await until(() => fake.calls.filter(c => c === 'release c1').length === 1)
  t.type(await connect(`${url}/terminal/c1/ws?t=${token('c1')}`), WebSocket, 'a slot frees when a viewer leaves')
})

t.test('ttyd framing: size, title, preferences, input, output, resize, pause and resume', async t => {
  const fake = fakeSandbox()
  const { url, token } = await terminalApp(t, fake)
  fake.setState('c1', 'running')
  const { ws, f, tty } = await open(t, fake, url, token('c1'))
  t.equal((await f.next(b => b[0] === 0x31)).subarray(1).toString(), 'c1 · tmux main', 'title frame')
  t.equal((await f.next(b => b[0] === 0x32)).subarray(1).toString(), '{}', 'preferences frame')
  await until(() => tty.resizes.length > 0)
  t.same(tty.resizes[0], [100, 30], 'the first message sizes the TTY')
  t.same(tty.argv, ['tmux', '-u', 'new-session', '-A', '-s', 'main'])
  const viewerId = tty.opts.env?.CUBICLE_VIEWER
  t.match(viewerId, /^[0-9a-f]{24}$/, 'the exec carries the viewer id')
  t.equal(tty.opts.tty, true)
  t.equal(tty.opts.user, 'assistant')
  t.equal(tty.opts.cwd, '/home/assistant')
  t.ok(fake.calls.includes('lease c1 socket'), 'an open terminal holds a socket lease')

  await f.next(b => b[0] === 0x30)
  tty.output('hello ü\r\n')
  const out = await f.next(b => b[0] === 0x30 && b.includes('hello'))
  t.equal(out.subarray(1).toString(), 'hello ü\r\n', 'output frame')

  ws.send(Buffer.from('0echo hi\r'))
  ws.send('1{"columns":120,"rows":40}')
  await until(() => tty.input.length > 0 && tty.resizes.length > 1)
  t.equal(Buffer.concat(tty.input).toString(), 'echo hi\r')
  t.same(tty.resizes.at(-1), [120, 40])
  ws.send('1{"columns":1e9,"rows":-3}')
  await until(() => tty.resizes.length > 2)
  t.same(tty.resizes.at(-1), [1000, 1], 'sizes are clamped')
  ws.send('2')
  await until(() => tty.paused())
  t.ok(tty.paused(), 'pause stops reading the sandbox output')
  ws.send('3')
  await until(() => !tty.paused())
  t.notOk(tty.paused(), 'resume reads again')
  ws.send('9what')
  ws.send('1{not json')
  ws.send('0')
  const ended = closed(ws)
  ws.close()
  await ended
  await until(() => fake.calls.includes('release c1'))
  const detach = fake.probes.find(p => p.argv[3] === 'cubicle-detach')
  t.same(detach?.argv.slice(4), [viewerId], 'closing detaches exactly this viewer\'s tmux client')
  t.ok(fake.calls.includes('stream close'))
  t.same(fake.calls.filter(c => c.startsWith('ensure') || c.startsWith('touch')), [])
})

t.test('a client that stops reading pauses the sandbox output instead of buffering it', async t => {
  const fake = fakeSandbox()
  const { url, token } = await terminalApp(t, fake, { highWaterBytes: 256 * 1024, lowWaterBytes: 64 * 1024 })
  fake.setState('c1', 'running')
  const { ws, f, tty } = await open(t, fake, url, token('c1'))
  await f.next(b => b[0] === 0x32)
  // Stop reading at the TCP level: the server's send queue grows until the viewer pauses the stream.
  ;(ws as unknown as { _socket: { pause: () => void, resume: () => void } })._socket.pause()
  tty.flood(Buffer.alloc(64 * 1024, 'y'))
  // Docker's side keeps producing until the kernel's socket buffers and the high-water mark are
  // full; from then on nothing more is read.
  let plateau = -1
  for (let i = 0; i < 60 && tty.produced() < 64 * 1024 * 1024 && !(tty.paused() && tty.produced() === plateau); i++) {
    plateau = tty.produced()
    await new Promise(resolve => setTimeout(resolve, 300))
  }
  await new Promise(resolve => setTimeout(resolve, 1000))
  t.ok(tty.paused(), 'the stream stays paused')
  t.equal(tty.produced(), plateau, 'no more output is read while the client is not reading')
  t.ok(plateau < 16 * 1024 * 1024, `at most the socket buffers plus the high-water mark were read (${Math.round(plateau / 1024)} KiB)`)
  const later = plateau
  ;(ws as unknown as { _socket: { resume: () => void } })._socket.resume()
  await until(() => tty.produced() > later + 1024 * 1024, 20000)
  t.pass('reading again resumes the flood')
  ws.terminate()
})

t.test('sandbox stop closes viewers with 1001; a session that ends closes them with 1000', async t => {
  const fake = fakeSandbox(argv => (argv[2] ?? '').includes('has-session') ? 'no\n' : '')
  const { url, token } = await terminalApp(t, fake)
  fake.setState('c1', 'running')
  const a = await open(t, fake, url, token('c1'))
  const gone = closed(a.ws)
  fake.fireStop('c1')
  t.same(await gone, { code: 1001, reason: 'sandbox stopped' })
  const b = await open(t, fake, url, token('c1'))
  const ended = closed(b.ws)
  b.tty.output('\x1b[?1049l\x1b[23;0;0t[exited]\r\n')
  b.tty.end()
  t.same(await ended, { code: 1000, reason: 'session ended' }, 'tmux said [exited]')
  const d = await open(t, fake, url, token('c1'))
  const detached = closed(d.ws)
  d.tty.output('[detached (from session main)]\r\n')
  d.tty.end()
  t.same(await detached, { code: 1000, reason: 'detached' })
  const c = await open(t, fake, url, token('c1'))
  const stopped = closed(c.ws)
  fake.setState('c1', 'stopped')
  c.tty.end()
  t.same(await stopped, { code: 1001, reason: 'sandbox stopped' }, 'a stream lost with its sandbox')
  await until(() => fake.leases() === 0)
  t.equal(fake.probes.filter(p => p.argv[3] === 'cubicle-detach').length, 0, 'no detach when the client is already gone')
})

t.test('oversized messages close with 1009; without a size message the terminal opens at 80x24', async t => {
  const fake = fakeSandbox()
  const { url, token } = await terminalApp(t, fake, { maxMessageBytes: 4096, initTimeoutMs: 100 })
  fake.setState('c1', 'running')
  const sock = await connect(`${url}/terminal/c1/ws?t=${token('c1')}`)
  if (typeof sock === 'number') throw new Error('refused')
  await until(() => fake.ttys.length === 1)
  await until(() => (fake.ttys[0]?.resizes.length ?? 0) > 0)
  t.same(fake.ttys[0]?.resizes[0], [80, 24])
  const end = closed(sock)
  sock.send(Buffer.alloc(5000, 0x30))
  t.equal((await end).code, 1009)
})

t.test('input before the stream is attached is delivered in order', async t => {
  const fake = fakeSandbox()
  const { url, token } = await terminalApp(t, fake)
  fake.setState('c1', 'running')
  const sock = await connect(`${url}/terminal/c1/ws?t=${token('c1')}`)
  if (typeof sock === 'number') throw new Error('refused')
  t.teardown(() => { sock.terminate() })
  sock.send('{"columns":90,"rows":20}')
  sock.send('0a')
  sock.send('0b')
  await until(() => fake.ttys.length === 1 && (fake.ttys[0]?.input.length ?? 0) >= 2)
  t.equal(Buffer.concat(fake.ttys[0]?.input ?? []).toString(), 'ab')
})
