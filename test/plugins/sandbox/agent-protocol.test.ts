import t, { type Test } from 'tap'
import { duplexPair, PassThrough } from 'node:stream'
import pino from 'pino'
import { parseOptions } from '../../../core/config.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'
import { createMemoryEngine } from '../../../plugins/sandbox-memory/memory-engine.js'
import { AgentConnection } from '../../../plugins/sandbox/agent-connection.js'
import { agentRequest } from '../../../plugins/sandbox/agent-exec.js'
import {
  CHUNK, decodeJson, encodeFrame, encodeJson, FrameParser, MAX_FRAME, MAX_JSON, parseExit, parseFailure, ProtocolError,
  T_DATA, T_EXEC, T_EXIT, T_FAIL, T_HELLO, T_OUT, T_RESULT, T_SPAWNED
} from '../../../plugins/sandbox/agent-protocol.js'
import { SandboxOptions } from '../../../plugins/sandbox/schemas.js'
import { createSandboxService, type CoreSandboxService } from '../../../plugins/sandbox/service.js'
import type { CommandResult } from '../../../plugins/sandbox/types.js'
import { tempDir } from '../../fixtures/temp-dir.js'

// The agent's frames are untrusted input: the parser is strict and bounded, and the connection
// accepts frames only for the ids it has in flight.

function collect (): { frames: Array<[number, number, string]>, errors: string[], parser: FrameParser } {
  const frames: Array<[number, number, string]> = []
  const errors: string[] = []
  const parser = new FrameParser((id, type, payload) => frames.push([id, type, payload.toString('latin1')]), r => errors.push(r))
  return { frames, errors, parser }
}

t.test('frames split at every byte boundary and interleaved ids arrive whole and in order', async t => {
  const wire = Buffer.concat([encodeFrame(1, T_OUT, Buffer.from('one')), encodeFrame(2, T_OUT, Buffer.from('two')),
    encodeFrame(1, T_OUT, Buffer.alloc(0)), encodeJson(2, T_EXIT, { code: 3 })])
  for (let step = 1; step <= wire.length; step++) {
    const { frames, errors, parser } = collect()
    for (let at = 0; at < wire.length; at += step) parser.push(wire.subarray(at, at + step))
    parser.end()
    t.same(errors, [], `step ${step}`)
    t.same(frames.map(f => [f[0], f[1]]), [[1, T_OUT], [2, T_OUT], [1, T_OUT], [2, T_EXIT]])
    if (step === 1) t.equal(frames[1]?.[2], 'two')
  }
})

t.test('oversize, undersize and unknown frames end the stream once; nothing after is delivered', async t => {
  const big = Buffer.alloc(9)
  big.writeUInt32BE(MAX_FRAME + 6, 0)
  big.writeUInt8(T_OUT, 8)
  for (const [name, bad] of [['oversize', big], ['length < 5', Buffer.from([0, 0, 0, 4, 0, 0, 0, 1, T_OUT])],
    ['server type from the agent', encodeFrame(1, T_EXEC)], ['type 0', encodeFrame(1, 0)]] as Array<[string, Buffer]>) {
    const { frames, errors, parser } = collect()
    parser.push(Buffer.concat([encodeFrame(1, T_OUT, Buffer.from('ok')), bad, encodeFrame(1, T_OUT, Buffer.from('after'))]))
    t.equal(errors.length, 1, name)
    t.same(frames.map(f => f[2]), ['ok'], `${name}: nothing after the violation`)
    parser.push(encodeFrame(1, T_OUT, Buffer.from('more')))
    t.equal(frames.length, 1)
    t.equal(errors.length, 1, 'reported once')
  }
  const max = collect()
  max.parser.push(encodeFrame(1, T_OUT, Buffer.alloc(MAX_FRAME)))
  t.same(max.errors, [], 'a frame of exactly MAX_FRAME is fine')
})

t.test('a frame announced but never finished: bounded, reported at end', async t => {
  const { frames, errors, parser } = collect()
  const head = Buffer.alloc(9)
  head.writeUInt32BE(MAX_FRAME, 0)
  head.writeUInt8(T_OUT, 8)
  parser.push(head)
  parser.push(Buffer.alloc(100))
  t.equal(frames.length, 0)
  parser.end()
  t.same(errors, ['stream ended inside a frame'])
  const clean = collect()
  clean.parser.push(encodeFrame(0, T_HELLO, Buffer.alloc(0)))
  clean.parser.end()
  t.same(clean.errors, [], 'a clean end is not an error')
})

t.test('JSON payloads: objects only, length-checked, capped', async t => {
  const ok = encodeJson(1, T_EXIT, { code: 0, pids: 7 }).subarray(9)
  t.same(parseExit(ok), { code: 0, pids: 7 })
  const bad = (v: unknown): Buffer => encodeJson(1, T_EXIT, v).subarray(9)
  for (const v of [{ code: 256 }, { code: -1 }, { code: 1.5 }, { code: '0' }]) t.throws(() => parseExit(bad(v)), { name: 'ProtocolError' }, JSON.stringify(v))
  t.same(parseExit(bad({ code: null, pids: -4 })), { code: null }, 'a bad pids hint is dropped')
  // The listening sockets after the JSON (docs/performance.md): only with `listening`, which must say `more`.
  const records = Buffer.alloc(40, 0)
  const withRecords = (v: unknown): Buffer => encodeJson(1, T_EXIT, v, records).subarray(9)
  t.same(parseExit(withRecords({ code: 0, listening: { more: true } })), { code: 0, listening: { more: true, records } })
  t.same(parseExit(bad({ code: 0, listening: { more: false } })), { code: 0, listening: { more: false, records: Buffer.alloc(0) } }, 'none listening')
  t.throws(() => parseExit(withRecords({ code: 0 })), { name: 'ProtocolError' }, 'bytes without listening')
  for (const v of [{ code: 0, listening: true }, { code: 0, listening: null }, { code: 0, listening: {} }]) t.throws(() => parseExit(withRecords(v)), { name: 'ProtocolError' }, JSON.stringify(v))
  for (const v of [[1], 'x', 3, null]) t.throws(() => decodeJson(bad(v)), { name: 'ProtocolError' }, `not an object: ${JSON.stringify(v)}`)
  t.throws(() => decodeJson(Buffer.from([0, 0])), { name: 'ProtocolError' }, 'short')
  const lying = Buffer.from([0, 0, 0, 50, 0x7b, 0x7d])
  t.throws(() => decodeJson(lying), { name: 'ProtocolError' }, 'length beyond the payload')
  t.throws(() => decodeJson(bad({ s: 'x'.repeat(MAX_JSON) })), { name: 'ProtocolError' }, 'JSON over the cap')
  t.throws(() => decodeJson(Buffer.concat([Buffer.from([0, 0, 0, 3]), Buffer.from('{x}')])), { name: 'ProtocolError' }, 'invalid JSON')
  t.same(parseFailure({ errno: 11, error: 'x'.repeat(1000) }).error.length, 300)
  t.same(parseFailure({ errno: 1e9, error: 5 }), { errno: 0, error: 'unknown error' })
})

t.test('connection: a closed connection loses every request once, finish sends CLOSE', async t => {
  const socket = new PassThrough()
  const written: Buffer[] = []
  socket.on('data', (c: Buffer) => written.push(c))
  let closed = 0
  const conn = new AgentConnection(socket, () => { closed++ })
  const seen: string[] = []
  let lost = 0
  const id = conn.request(i => encodeFrame(i, T_EXEC), { frame: (_type, p) => seen.push(p.toString()), lost: () => { lost++ } })
  const id2 = conn.request(i => encodeFrame(i, T_EXEC), { frame: () => {}, lost: () => { lost++ } })
  t.not(id, id2)
  conn.dispatch(id, T_OUT, Buffer.from('mine'))
  t.same(seen, ['mine'])
  conn.finish(id2)
  conn.dispatch(id2, T_OUT, Buffer.from('late'))
  conn.close('test')
  conn.close('again')
  t.equal(lost, 1, 'only the pending request is lost, once')
  t.equal(closed, 1)
  t.equal(conn.failed, 'test')
  let lostAfter = false
  conn.request(i => encodeFrame(i, T_EXEC), { frame: () => {}, lost: () => { lostAfter = true } })
  await new Promise(resolve => setImmediate(resolve))
  t.ok(lostAfter, 'a request on a closed connection is lost at once')
  t.ok(written.length >= 3, 'EXEC, EXEC and CLOSE were written')
})

/** A connection over a PassThrough with one request in flight; frames the handler saw, types only. */
function inFlight (): { conn: AgentConnection, id: number, seen: number[], lost: () => number } {
  const conn = new AgentConnection(new PassThrough(), () => {})
  const seen: number[] = []
  let lost = 0
  const id = conn.request(i => encodeFrame(i, T_EXEC), { frame: type => seen.push(type), lost: () => { lost++ } })
  return { conn, id, seen, lost: () => lost }
}

t.test('forged ids: a frame for an id not in flight is a protocol violation', async t => {
  for (const [name, forged] of [['never issued', 0x7ffffff0], ['the next id, not yet issued', 2], ['id 0 after the hello', 0]] as Array<[string, number]>) {
    const { conn, id, seen } = inFlight()
    t.throws(() => { conn.dispatch(forged, T_OUT, Buffer.from('forged')) }, { name: 'ProtocolError', message: /not in flight/ }, name)
    conn.dispatch(id, T_OUT, Buffer.from('real'))
    t.same(seen, [T_OUT], `${name}: the request in flight saw only its own frame`)
  }
  const done = inFlight()
  done.conn.dispatch(done.id, T_EXIT, encodeJson(0, T_EXIT, { code: 0 }).subarray(9))
  t.equal(done.conn.pending, 0, 'the last frame (EXIT) ends the request')
  t.throws(() => { done.conn.dispatch(done.id, T_OUT, Buffer.from('after the end')) }, { name: 'ProtocolError' }, 'a frame after EXIT')
  // As agent-exec does: the handler calls finish() on EXIT. No CLOSE goes out, and the id is done.
  const socket = new PassThrough()
  const written: Buffer[] = []
  socket.on('data', (c: Buffer) => written.push(c))
  const conn = new AgentConnection(socket, () => {})
  const rid = conn.request(i => encodeFrame(i, T_EXEC), { frame: () => { conn.finish(rid) }, lost: () => {} })
  conn.dispatch(rid, T_EXIT, encodeJson(0, T_EXIT, { code: 0 }).subarray(9))
  t.equal(written.length, 1, 'only the EXEC was written, no CLOSE after the EXIT')
  t.throws(() => { conn.dispatch(rid, T_OUT, Buffer.alloc(0)) }, { name: 'ProtocolError' }, 'a frame after an EXIT the handler finished on')
  let lost = 0
  const bad = conn.request(i => encodeFrame(i, T_EXEC), { frame: () => { throw new ProtocolError('bad exit') }, lost: () => { lost++ } })
  t.throws(() => { conn.dispatch(bad, T_EXIT, Buffer.alloc(0)) }, { name: 'ProtocolError' })
  conn.close('protocol: bad exit')
  t.equal(lost, 1, 'a handler that threw on its last frame is told the call was lost')
  for (const last of [T_FAIL, T_RESULT]) {
    const c = inFlight()
    c.conn.dispatch(c.id, last, Buffer.alloc(0))
    t.throws(() => { c.conn.dispatch(c.id, T_OUT, Buffer.alloc(0)) }, { name: 'ProtocolError' }, `a frame after type ${last}`)
  }
})

t.test('forged ids: a request the server gave up on takes frames until its last one, then none', async t => {
  const { conn, id, seen } = inFlight()
  conn.finish(id)
  conn.dispatch(id, T_OUT, Buffer.from('output in flight after CLOSE'))
  conn.dispatch(id, T_DATA, Buffer.from('any type until the end'))
  conn.dispatch(id, T_EXIT, encodeJson(0, T_EXIT, { code: null }).subarray(9))
  t.same(seen, [], 'dropped, not handed to the caller')
  t.throws(() => { conn.dispatch(id, T_OUT, Buffer.alloc(0)) }, { name: 'ProtocolError' }, 'after its EXIT the id is not in flight')
  const many = new AgentConnection(new PassThrough(), () => {})
  const ids: number[] = []
  for (let i = 0; i < 1100; i++) ids.push(many.request(n => encodeFrame(n, T_EXEC), { frame: () => {}, lost: () => {} }))
  for (const i of ids) many.finish(i)
  t.throws(() => { many.dispatch(ids[0] as number, T_OUT, Buffer.alloc(0)) }, { name: 'ProtocolError' }, 'the oldest of more than 1024 given-up ids is forgotten (bounded)')
  many.dispatch(ids[1099] as number, T_OUT, Buffer.alloc(0))
  t.pass('the newest is still accepted')
})

t.test('a flood of forged frames stops at the first one: nothing after it is parsed', async t => {
  const { conn, id, seen } = inFlight()
  let closedWith = ''
  let parsed = 0
  const parser = new FrameParser((fid, type, payload) => { parsed++; conn.dispatch(fid, type, payload) }, r => { closedWith = r })
  const one = encodeFrame(0x7ffffff0, T_OUT, Buffer.alloc(CHUNK))
  const wire = Buffer.concat([encodeFrame(id, T_OUT, Buffer.from('ok')), ...Array.from({ length: 64 }, () => one)])
  const t0 = performance.now()
  // As agent-client's reader does: a throw out of push() closes the stream, nothing more is pushed.
  t.throws(() => { parser.push(wire) }, { name: 'ProtocolError' })
  t.equal(parsed, 2, 'the real frame and the first forged one; the other 63 (16 MiB) were never looked at')
  t.same(seen, [T_OUT])
  t.equal(closedWith, '')
  t.ok(performance.now() - t0 < 200)
})

/*
 * The spawn acknowledgement (docs/engine.md#the-agent-socket) over the in-memory engine: a fake agent on the
 * engine's agent channel that loses its stream at a chosen point of the first EXEC. Before SPAWNED nothing
 * ran, so the call runs once more (in the sandbox started again when it was killed, which the result says);
 * after SPAWNED, or with an agent that never offered SPAWNED, the call was cut off and says so.
 */
type Loss = 'before' | 'after' | 'old'

async function spawnService (t: Test, loss: Loss, kill: boolean | 'stop'): Promise<{ service: CoreSandboxService, execs: () => number }> {
  const dir = await tempDir(t, 'tspawn')
  const engine = createMemoryEngine({ images: ['cubicle-memory-test:latest'] })
  let served = false
  engine.agentChannel = async id => {
    // One agent connection; after it is lost the calls go to the engine's exec (the memory engine has no agent program).
    if (served) return null
    served = true
    const [server, agent] = duplexPair()
    agent.on('error', () => {})
    agent.write(encodeJson(0, T_HELLO, loss === 'old' ? { v: 1, connect: true } : { v: 1, connect: true, spawned: true }))
    let buf = Buffer.alloc(0)
    agent.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c])
      while (buf.length >= 9 && buf.length >= 4 + buf.readUInt32BE(0)) {
        const rid = buf.readUInt32BE(4)
        const type = buf.readUInt8(8)
        const frame = buf.subarray(9, 4 + buf.readUInt32BE(0))
        buf = buf.subarray(4 + buf.readUInt32BE(0))
        if (type !== T_EXEC) continue
        // Anything but the command (the ready probe) cannot be spawned here: the core takes the engine's exec.
        if (!frame.includes('marker')) { agent.write(encodeJson(rid, T_FAIL, { errno: 2, error: 'not here' })); continue }
        if (loss === 'after') agent.write(encodeFrame(rid, T_SPAWNED))
        // 'stop': the server stops the sandbox on purpose while the request is in flight.
        void (kill === 'stop' ? service.stop('spawn-chat') : kill ? engine.kill(id) : Promise.resolve()).then(() => { agent.end() })
      }
    })
    return server
  }
  const exec = engine.exec.bind(engine)
  let execs = 0
  engine.exec = async (id, spec) => { if (spec.argv.join(' ').includes('marker')) execs++; return await exec(id, spec) }
  const opts = parseOptions(SandboxOptions, { prefix: 'tspawn', image: 'cubicle-memory-test:latest', dataDir: dir, enableNetwork: false, agent: true, poolSize: 0 }, 'sandbox')
  const service = createSandboxService({ ...opts, storage: createChatStorage({ dataDir: dir }) }, engine, pino({ level: 'silent' }))
  t.teardown(async () => { await service.close() })
  await service.start()
  await service.ensure('spawn-chat')
  return { service, execs: () => execs }
}

async function command (service: CoreSandboxService): Promise<{ r: CommandResult, out: string }> {
  let out = ''
  const r = await service.runCommand('spawn-chat', 'echo marker', { timeoutMs: 10_000, onOutput: s => { out += s }, onReset: () => { out = '' } })
  return { r, out }
}

t.test('spawn acknowledgement: a stream lost before SPAWNED runs the command once more; after it, the command was cut off', async t => {
  const before = await spawnService(t, 'before', false)
  const b = await command(before.service)
  t.same([b.r.exitCode, b.out, before.execs()], [0, 'marker\n', 1], 'lost before SPAWNED: run once more (over the engine), once')
  t.same(b.r.notices ?? [], [], 'the sandbox kept running: nothing to say')

  const killed = await spawnService(t, 'before', true)
  const k = await command(killed.service)
  t.same([k.r.exitCode, k.out, killed.execs()], [0, 'marker\n', 1], 'killed before SPAWNED: started again, run once more')
  t.match(k.r.notices, [{ kind: 'sandbox-stopped', action: 'restarted', removed: false, by: 'outside' }], 'the result says the sandbox was started again')

  for (const [loss, kill] of [['after', false], ['after', true], ['old', true]] as Array<[Loss, boolean]>) {
    const s = await spawnService(t, loss, kill)
    const c = await command(s.service)
    t.same([c.r.exitCode, s.execs()], [null, 0], `${loss}${kill ? ', killed' : ''}: cut off, not run again`)
    t.match(c.r.notices, [kill ? { kind: 'sandbox-stopped', action: 'stopped', by: 'outside' } : { kind: 'stream-lost' }], `${loss}: the loss is explained`)
  }

  const stopped = await spawnService(t, 'before', 'stop')
  const st = await command(stopped.service)
  t.same([st.r.exitCode, stopped.execs()], [null, 0], 'stopped on purpose before SPAWNED: not run again, not started again')
  t.match(st.r.notices, [{ kind: 'sandbox-stopped', by: 'server' }])
  t.equal((await stopped.service.status('spawn-chat')).state, 'stopped')

  const exec = await spawnService(t, 'before', true)
  const e = await exec.service.exec('spawn-chat', ['sh', '-c', 'echo marker'])
  t.same([e.exitCode, e.stdout.toString(), exec.execs()], [0, 'marker\n', 1], 'the collecting exec: started again, run once more')
  t.match(exec.service.takeNotices('spawn-chat'), [{ kind: 'sandbox-stopped', action: 'restarted', by: 'outside' }])
})

t.test('spawn acknowledgement: SPAWNED twice, with a payload or unoffered, and output before it, are violations', async t => {
  const owner = 'c'
  const log = pino({ level: 'silent' })
  const spec = { argv: ['true'], env: {}, merged: true, cwd: '/', timeoutMs: 5000, onData: () => {} }
  for (const [name, offered, frames] of [
    ['twice', true, [[T_SPAWNED, Buffer.alloc(0)], [T_SPAWNED, Buffer.alloc(0)]]],
    ['with a payload', true, [[T_SPAWNED, Buffer.from('x')]]],
    ['unoffered', false, [[T_SPAWNED, Buffer.alloc(0)]]],
    ['output before it', true, [[T_OUT, Buffer.from('x')]]],
    ['an exit before it', true, [[T_EXIT, encodeJson(0, T_EXIT, { code: 0 }).subarray(9)]]]
  ] as Array<[string, boolean, Array<[number, Buffer]>]>) {
    const conn = new AgentConnection(new PassThrough(), () => {})
    conn.acksSpawn = offered
    const run = agentRequest(log, owner, conn, spec, () => null)
    t.throws(() => { for (const [type, payload] of frames) conn.dispatch(1, type, payload) }, { name: 'ProtocolError' }, name)
    conn.close('protocol') // what agent-client does with that throw
    const r = await run
    t.equal(r.code, undefined, `${name}: no exit`)
  }
  const ok = new AgentConnection(new PassThrough(), () => {})
  ok.acksSpawn = true
  const run = agentRequest(log, owner, ok, spec, () => null)
  ok.dispatch(1, T_SPAWNED, Buffer.alloc(0))
  ok.dispatch(1, T_OUT, Buffer.from('x'))
  ok.dispatch(1, T_EXIT, encodeJson(0, T_EXIT, { code: 3 }).subarray(9))
  t.match(await run, { code: 3, unstarted: false, spawnFailed: false })
  const failed = new AgentConnection(new PassThrough(), () => {})
  failed.acksSpawn = true
  const f = agentRequest(log, owner, failed, spec, () => null)
  failed.dispatch(1, T_FAIL, encodeJson(0, T_FAIL, { errno: 11, error: 'EAGAIN' }).subarray(9))
  t.match(await f, { spawnFailed: true, unstarted: false }, 'FAIL before SPAWNED: the process could not be started (the caller takes the engine\'s exec)')
})
