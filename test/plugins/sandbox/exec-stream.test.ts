import t from 'tap'
import { PassThrough } from 'node:stream'
import { ByteBudget, commandArgv, EOF_MARKER, EofFilter, killArgv, readWithin, SentinelParser } from '../../../plugins/sandbox/exec-stream.js'
import { Demuxer } from '../../../plugins/sandbox-docker/docker-stream.js'

function frame (stream: number, payload: string | Buffer): Buffer {
  const body = Buffer.isBuffer(payload) ? payload : Buffer.from(payload)
  const h = Buffer.alloc(8)
  h[0] = stream
  h.writeUInt32BE(body.length, 4)
  return Buffer.concat([h, body])
}

t.test('demuxer splits frames whatever the chunking', async t => {
  const wire = Buffer.concat([frame(1, 'hello '), frame(2, 'oops'), frame(1, ''), frame(1, 'world'), frame(0, 'ignored'), frame(2, '!')])
  for (const size of [1, 2, 3, 7, 8, 9, 13, wire.length]) {
    const got: Array<[number, string]> = []
    const d = new Demuxer((s, data) => got.push([s, data.toString()]))
    for (let i = 0; i < wire.length; i += size) d.push(wire.subarray(i, i + size))
    const out = got.filter(([s]) => s === 1).map(([, v]) => v).join('')
    const err = got.filter(([s]) => s === 2).map(([, v]) => v).join('')
    t.equal(out, 'hello world', `stdout, chunks of ${size}`)
    t.equal(err, 'oops!', `stderr, chunks of ${size}`)
  }
})

t.test('demuxer hands on slices without accumulating', async t => {
  const big = Buffer.alloc(1 << 20, 0x61)
  const d = new Demuxer((_s, data) => { t.ok(data.length <= 65536, 'slice bounded by the chunk'); seen += data.length })
  let seen = 0
  const wire = frame(1, big)
  for (let i = 0; i < wire.length; i += 65536) d.push(wire.subarray(i, i + 65536))
  t.equal(seen, big.length)
})

t.test('sentinel parser finds the exit line and passes everything else on', async t => {
  const other: string[] = []
  let code: number | undefined
  const p = new SentinelParser(s => other.push(s), c => { code = c })
  p.push(Buffer.from('sh: 1: bash: not fo'))
  p.push(Buffer.from('und\n__cubicle_ex'))
  t.equal(code, undefined)
  p.push(Buffer.from('it:127\n'))
  p.end()
  t.equal(code, 127)
  t.equal(p.exitCode, 127)
  t.equal(other.join(''), 'sh: 1: bash: not found\n')
  t.equal(p.pids, undefined, 'no process count without one on the line')
})

t.test('sentinel parser reads the process count the wrapper appends (a hint)', async t => {
  let code: number | undefined
  const p = new SentinelParser(() => {}, c => { code = c })
  p.push(Buffer.from('__cubicle_exit:0 513\n'))
  t.equal(code, 0)
  t.equal(p.pids, 513)
  const other: string[] = []
  const q = new SentinelParser(s => other.push(s), () => t.fail('not a sentinel'))
  q.push(Buffer.from('__cubicle_exit:0 x\n'))
  q.end()
  t.same(other, ['__cubicle_exit:0 x\n'], 'a malformed line is ordinary text')
})

t.test('sentinel parser: no sentinel, multi-byte text split across chunks', async t => {
  const other: string[] = []
  const p = new SentinelParser(s => other.push(s), () => t.fail('no exit'))
  const text = Buffer.from('héllo €\nrest')
  for (const b of text) p.push(Buffer.from([b]))
  p.end()
  t.equal(other.join(''), 'héllo €\nrest')
  t.equal(p.exitCode, null)
})

t.test('end-of-output marker: removed from stdout and reported once, whatever the chunking', async t => {
  const wire = Buffer.from(`out\0put 1\n\0__cub${EOF_MARKER}after\n${EOF_MARKER}`)
  for (let size = 1; size <= wire.length; size++) {
    const chunks: Buffer[] = []
    let eofAt = -1
    const f = new EofFilter(d => chunks.push(Buffer.from(d)), () => { eofAt = Buffer.concat(chunks).length })
    for (let i = 0; i < wire.length; i += size) f.push(wire.subarray(i, i + size))
    f.end()
    t.equal(Buffer.concat(chunks).toString(), `out\0put 1\n\0__cubafter\n${EOF_MARKER}`, `chunks of ${size}`)
    t.equal(eofAt, 'out\0put 1\n\0__cub'.length, `reported after the output before it, chunks of ${size}`)
  }
})

t.test('end-of-output marker: output ending like its beginning is held back, then handed on by end()', async t => {
  const chunks: string[] = []
  const f = new EofFilter(d => chunks.push(d.toString()), () => t.fail('no marker'))
  f.push(Buffer.from('abc\0__cu'))
  t.same(chunks, ['abc'])
  f.end()
  t.equal(chunks.join(''), 'abc\0__cu')
  t.equal(f.seen, false)
})

t.test('wrapper and kill argv', async t => {
  const argv = commandArgv('echo "$HOME" && exit 3')
  t.equal(argv[0], '/bin/sh')
  t.equal(argv[4], 'echo "$HOME" && exit 3', 'the command is an argument, never interpolated')
  t.match(argv[2], /^bash -c "\$1" <\/dev\/null 2>&1; s=\$\?; /)
  t.match(argv[2], /read -r p <\/sys\/fs\/cgroup\/pids\.current \|\| read -r p <\/sys\/fs\/cgroup\/pids\/pids\.current; \} 2>\/dev\/null; /, 'the process count is read with builtins (cgroup v2, then v1)')
  t.match(argv[2], /echo "__cubicle_exit:\$s\$\{p:\+ \$p\}" >&2/)
  t.match(argv[2], /; printf '\\000__cubicle_eof\\n'$/, 'then the end of bash\'s output is marked on stdout')
  t.same(killArgv('TERM', 'abcdef012345').slice(3), ['cubicle-kill', 'TERM', 'abcdef012345'])
  t.throws(() => killArgv('KILL', 'abc; rm -rf /'))
})

t.test('byte budget: a burst, then the rate; a quiet stream saves up at most the burst', async t => {
  let now = 0
  const b = new ByteBudget(1000, 2000, () => now)
  t.equal(b.charge(2000), 0, 'the burst goes at once')
  t.equal(b.charge(500), 500, 'beyond it: wait until the debt is repaid at the rate')
  now += 500
  t.equal(b.charge(0), 0, 'repaid')
  now += 60_000
  t.equal(b.charge(2500), 500, 'a long quiet saves up the burst, not more')
  now -= 10_000
  t.equal(b.charge(0), 500, 'a clock going backwards earns nothing')
  t.throws(() => new ByteBudget(0, 1), RangeError)
})

t.test('readWithin: a writer flooding as fast as it can gets the rate and backpressure, not a buffer', async t => {
  // 2 MiB/s with 1 MiB saved up; the writer pushes 256 KiB chunks whenever write() lets it.
  const MiB = 1024 * 1024
  const stream = new PassThrough({ highWaterMark: 64 * 1024 })
  let read = 0
  let written = 0
  const stop = readWithin(stream, new ByteBudget(2 * MiB, MiB), c => { read += c.length })
  const chunk = Buffer.alloc(256 * 1024)
  const t0 = performance.now()
  let flooding = true
  const writer = (async () => {
    while (flooding) {
      written += chunk.length
      if (!stream.write(chunk)) await new Promise(resolve => stream.once('drain', resolve))
    }
  })()
  await new Promise(resolve => setTimeout(resolve, 2000))
  const s = (performance.now() - t0) / 1000
  const [gotIn, sentIn] = [read, written]
  flooding = false
  stop()
  stream.resume()
  await writer
  stream.destroy()
  read = gotIn
  written = sentIn
  t.ok(read <= MiB + 2 * MiB * s + chunk.length, `read ${(read / MiB).toFixed(1)} MiB in ${s.toFixed(2)} s (budget ${(1 + 2 * s).toFixed(1)} MiB)`)
  t.ok(read >= 2 * MiB * s * 0.7, 'and about the rate')
  t.ok(written - read <= 4 * chunk.length, `the writer was held back: ${((written - read) / 1024).toFixed(0)} KiB written beyond what was read`)
})

t.test('readWithin: bytes reported exempt (flow-controlled elsewhere) are not charged to the budget', async t => {
  // 1 MiB/s with 256 KiB saved up; 8 MiB arrive at once, all of it exempt but the first chunk.
  const KiB = 1024
  const stream = new PassThrough()
  let read = 0
  let exempt = 0
  const stop = readWithin(stream, new ByteBudget(1024 * KiB, 256 * KiB), c => { read += c.length; if (read > 64 * KiB) exempt += c.length }, () => { const n = exempt; exempt = 0; return n })
  const t0 = performance.now()
  for (let i = 0; i < 128; i++) stream.write(Buffer.alloc(64 * KiB))
  while (read < 128 * 64 * KiB) {
    if (performance.now() - t0 > 3000) break
    await new Promise(resolve => setTimeout(resolve, 10))
  }
  stop()
  stream.destroy()
  t.equal(read, 128 * 64 * KiB, `8 MiB read in ${(performance.now() - t0).toFixed(0)} ms: a budget of 1 MiB/s would have taken 8 s`)
})
