import { Duplex } from 'node:stream'
import t from 'tap'
import { createProbe, type OpenProbeStream } from '../../core/sandbox-probe.js'

/** A stream that prints `chunks` (then ends unless `hang`), recording what was opened and closed. */
function fakeOpen (chunks: Buffer[], hang = false) {
  const opened: Array<{ argv: string[], opts: Parameters<OpenProbeStream>[2] }> = []
  let closed = 0
  let running = 0
  let peak = 0
  const open: OpenProbeStream = async (_chatId, argv, opts) => {
    opened.push({ argv, opts })
    running++
    peak = Math.max(peak, running)
    let sent = false
    const socket = new Duplex({
      read () {
        if (sent) return
        sent = true
        setTimeout(() => {
          for (const c of chunks) this.push(c)
          if (!hang) this.push(null)
        }, 5)
      },
      write (_chunk, _enc, cb) { cb() }
    })
    return { socket, demux: cb => { socket.on('data', cb) }, close: () => { if (!socket.destroyed) { closed++; running-- } socket.destroy() } }
  }
  return { open, opened, closed: () => closed, peak: () => peak }
}

const timeout = (): Error => Object.assign(new Error('timed out'), { code: 'X_TIMEOUT' })

t.test('stdout is kept up to maxBytes, the stream is closed, the sandbox user runs it with EOF on stdin', async t => {
  const fake = fakeOpen([Buffer.alloc(3000, 'a'), Buffer.alloc(3000, 'b')])
  const probe = createProbe(fake.open, 2, 'test', timeout)
  const out = await probe('c1', ['ps'], { timeoutMs: 1000, maxBytes: 4096 })
  t.equal(out.length, 4096, 'cut at maxBytes')
  t.equal(out.subarray(2999, 3001).toString(), 'ab')
  t.equal(fake.closed(), 1)
  t.same(fake.opened[0]?.opts, { user: 'assistant', cwd: '/', tty: false })
  const env = await createProbe(fake.open, 1, 'test', timeout)('c1', ['x'], { timeoutMs: 1000, maxBytes: 10, user: 'root', env: { A: 'b' } })
  t.equal(env.toString(), 'aaaaaaaaaa')
  t.same(fake.opened[1]?.opts, { user: 'root', cwd: '/', tty: false, env: { A: 'b' } })
})

t.test('a stuck command is abandoned with the caller\'s error and its stream closed', async t => {
  const fake = fakeOpen([Buffer.from('partial')], true)
  const probe = createProbe(fake.open, 1, 'test', timeout)
  await t.rejects(probe('c1', ['sleep'], { timeoutMs: 50, maxBytes: 100 }), { code: 'X_TIMEOUT' })
  t.equal(fake.closed(), 1)
})

t.test('the semaphore bounds probes running at once', async t => {
  const fake = fakeOpen([Buffer.from('ok')])
  const probe = createProbe(fake.open, 3, 'test', timeout)
  const all = await Promise.all(Array.from({ length: 10 }, async () => (await probe('c1', ['true'], { timeoutMs: 1000, maxBytes: 10 })).toString()))
  t.same(all, Array(10).fill('ok'))
  t.equal(fake.peak(), 3, 'never more than 3 at once')
})

t.test('a driver without openStream fails at registration', async t => {
  t.throws(() => createProbe(undefined, 1, 'sub-agent', timeout), { message: 'sub-agent: the sandbox driver has no openStream()' })
})
