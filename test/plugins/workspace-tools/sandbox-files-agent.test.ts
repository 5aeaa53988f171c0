/*
 * The workspace tools' file I/O over the in-sandbox agent's file operations (docs/contract.md#in-sandbox-agent): the agent
 * answers the happy path without a process; "nothing there" is answered directly; any other failure,
 * a directory to list, a file too big for one agent read and an agent that cannot serve the call run
 * the command instead, so results and error texts are those of the exec path.
 */
import t from 'tap'
import type { SandboxFileOp, SandboxFileResult } from '../../../plugins/sandbox/types.js'
import { createSandboxFiles } from '../../../plugins/workspace-tools/sandbox-files.js'
import { fileRequest, parseFileResult } from '../../../plugins/sandbox/agent-files.js'
import { fakeSandbox } from './fakes.js'

const MiB = 1024 * 1024
const answer = (over: Partial<SandboxFileResult>): SandboxFileResult =>
  ({ ok: true, errno: 0, error: '', data: Buffer.alloc(0), timedOut: false, cancelled: false, ...over })

function setup (agent: (op: SandboxFileOp) => SandboxFileResult | undefined, exec: (argv: string[]) => { stdout?: Buffer, exitCode?: number, stderr?: Buffer } = () => ({})) {
  const ops: SandboxFileOp[] = []
  const fake = fakeSandbox({ exec: argv => exec(argv) })
  fake.sandbox.fileOp = async (_chat, op) => { ops.push(op); return agent(op) }
  const files = createSandboxFiles({ sandbox: fake.sandbox, chatId: 'c', signal: new AbortController().signal, timeoutS: 5 })
  return { files, ops, execs: fake.execs }
}

t.test('open: a regular file is one agent read, no exec; a large one keeps its first part', async t => {
  const small = setup(() => answer({ kind: 'file', size: 5, data: Buffer.from('hello') }))
  const o = await small.files.open('/a', { readBytes: 16 * MiB, partBytes: 256 * 1024, list: true })
  t.same([o?.kind, o?.size, o?.content.toString()], ['file', 5, 'hello'])
  t.same(small.ops, [{ op: 'read', path: '/a', max: 8 * MiB }], 'capped at what one agent read returns')
  t.equal(small.execs.length, 0)

  const big = setup(() => answer({ kind: 'file', size: 20 * MiB, data: Buffer.alloc(8 * MiB, 0x61) }))
  const b = await big.files.open('/b', { readBytes: 16 * MiB, partBytes: 256 * 1024 })
  t.same([b?.size, b?.content.length, big.execs.length], [20 * MiB, 256 * 1024, 0], 'beyond readBytes: the first partBytes')

  const middle = setup(() => answer({ kind: 'file', size: 12 * MiB, data: Buffer.alloc(8 * MiB) }), () => ({ stdout: Buffer.from('8000 3\nabc') }))
  const m = await middle.files.open('/m', { readBytes: 16 * MiB, partBytes: 256 * 1024 })
  t.same([m?.content.toString(), middle.execs.length], ['abc', 1], 'a file between 8 MiB and readBytes is read the exec way')
})

t.test('open: missing answers undefined; a FIFO is stat\'ed for its kind; a directory to list is listed by exec', async t => {
  const missing = setup(() => answer({ ok: false, errno: 2, error: 'No such file or directory' }))
  t.equal(await missing.files.open('/x', { readBytes: 10 }), undefined)
  t.equal(missing.execs.length, 0)

  const fifo = setup(op => op.op === 'read' ? answer({ ok: false, kind: 'fifo', error: 'not a regular file' }) : answer({ kind: 'fifo', size: 0 }))
  const f = await fifo.files.open('/p', { readBytes: 10 })
  t.same([f?.kind, fifo.ops.map(o => o.op), fifo.execs.length], ['fifo', ['read', 'stat'], 0])

  const dir = setup(op => op.op === 'read' ? answer({ ok: false, kind: 'dir', error: 'not a regular file' }) : answer({ kind: 'dir', size: 4096 }),
    () => ({ stdout: Buffer.from('4000 4096\nlisting') }))
  const d = await dir.files.open('/d', { readBytes: 10, list: true })
  t.same([d?.kind, d?.listing?.out, dir.execs.length], ['dir', 'listing', 1])

  const stat = setup(() => answer({ kind: 'dir', size: 4096 }))
  t.same((await stat.files.open('/d', { readBytes: 0 }))?.kind, 'dir', 'readBytes 0 is a stat')
  t.same(stat.ops, [{ op: 'stat', path: '/d' }])
})

t.test('failures other than "nothing there" run the command, so the error text is the exec path\'s', async t => {
  const denied = setup(() => answer({ ok: false, errno: 13, error: 'Permission denied' }), () => ({ exitCode: 1, stdout: Buffer.from('8000 3\n'), stderr: Buffer.from('head: cannot open \'/s\' for reading: Permission denied') }))
  await t.rejects(denied.files.open('/s', { readBytes: 10 }), { message: 'cannot read /s: Permission denied' })
  t.same(denied.ops.map(o => o.op), ['read'], 'no second agent call for a regular file it could not read')

  const w = setup(() => answer({ ok: false, errno: 13, error: 'Permission denied' }), () => ({ exitCode: 5, stderr: Buffer.from('mktemp: failed: Permission denied') }))
  await t.rejects(w.files.write('/etc/x', Buffer.from('no')), { message: 'cannot write /etc/x: Permission denied' })
  t.equal(w.execs.length, 1)

  const none = setup(() => undefined, () => ({ stdout: Buffer.from('1\n') }))
  t.equal(await none.files.write('/a', Buffer.from('x')), true, 'no agent: the write script')
  t.equal(none.execs.length, 1)
})

t.test('write and readTail through the agent; timeouts and cancels are the tools\' errors', async t => {
  const ok = setup(op => op.op === 'write' ? answer({ existed: false }) : answer({ kind: 'file', size: 9, data: Buffer.from('end') }))
  t.equal(await ok.files.write('/n', Buffer.from('new')), false)
  t.equal((await ok.files.readTail('/n', 3)).toString(), 'end')
  t.same(ok.ops[1], { op: 'read', path: '/n', max: 3, offset: -3 })
  t.equal(ok.execs.length, 0)

  const slow = setup(() => answer({ ok: false, timedOut: true }))
  await t.rejects(slow.files.write('/n', Buffer.from('x')), { code: 'WORKSPACE_EXEC_TIMEOUT' })
  const gone = setup(() => answer({ ok: false, cancelled: true }))
  await t.rejects(gone.files.open('/n', { readBytes: 1 }), { message: 'read was cancelled' })
})

t.test('the agent\'s RESULT is checked: unknown kinds, bad numbers and messages are contained', async t => {
  const r = parseFileResult({ ok: true, kind: '<script>', size: -1, mode: 0o100644, link: 'yes', existed: true }, Buffer.alloc(0))
  t.same([r.kind, r.size, r.mode, r.link, r.existed], ['other', undefined, undefined, undefined, true])
  const f = parseFileResult({ ok: false, errno: 99999, error: 'x'.repeat(5000) }, Buffer.alloc(0))
  t.same([f.ok, f.errno, f.error.length], [false, 0, 300])
  t.equal(parseFileResult({ ok: 1 }, Buffer.alloc(0)).ok, false, 'only true is success')
  t.equal(parseFileResult({ ok: true, size: 2 ** 60 }, Buffer.alloc(0)).size, undefined, 'unsafe integers dropped')
})

t.test('a hostile agent: DATA beyond what was asked, or a frame of another kind, ends the stream; the call falls back', async t => { // docs/contract.md#in-sandbox-agent
  const { PassThrough } = await import('node:stream')
  const { AgentConnection } = await import('../../../plugins/sandbox/agent-connection.js')
  const { encodeJson, T_DATA, T_EXIT, T_RESULT } = await import('../../../plugins/sandbox/agent-protocol.js')
  const sent: Buffer[] = []
  const socket = new PassThrough()
  socket.on('data', (b: Buffer) => sent.push(b))
  const conn = new AgentConnection(socket, () => {})
  const reading = fileRequest(conn, { op: 'read', path: '/x', max: 4 }, { timeoutMs: 5000 })
  t.equal(sent.length, 1, 'one FILE frame sent')
  const id = Buffer.concat(sent).readUInt32BE(4)
  t.throws(() => { conn.dispatch(id, T_DATA, Buffer.alloc(5)) }, { name: 'ProtocolError' }, 'five bytes for a read of four')
  conn.close('protocol: file data beyond what was asked') // what agent-client does with that throw
  t.equal(await reading, undefined, 'the call is lost, so the caller runs the command instead')

  const conn2 = new AgentConnection(new PassThrough(), () => {})
  const stat = fileRequest(conn2, { op: 'stat', path: '/x' }, { timeoutMs: 5000 })
  t.throws(() => { conn2.dispatch(1, T_EXIT, encodeJson(0, T_EXIT, { code: 0 }).subarray(9)) }, { name: 'ProtocolError' }, 'an EXIT in a file operation')
  conn2.close()
  t.equal(await stat, undefined)

  const conn3 = new AgentConnection(new PassThrough(), () => {})
  const ok = fileRequest(conn3, { op: 'read', path: '/x', max: 4 }, { timeoutMs: 5000 })
  conn3.dispatch(1, T_DATA, Buffer.from('abcd'))
  conn3.dispatch(1, T_RESULT, encodeJson(0, T_RESULT, { ok: true, kind: 'file', size: 4 }).subarray(9))
  t.same([(await ok)?.data.toString(), (await ok)?.size], ['abcd', 4], 'exactly what was asked is accepted')
  conn3.close()
})

t.test('the agent\'s listening sockets: well-formed records only, addresses in the usual notation', async t => { // docs/performance.md
  const { PassThrough } = await import('node:stream')
  const { AgentConnection } = await import('../../../plugins/sandbox/agent-connection.js')
  const { encodeJson, T_DATA, T_RESULT } = await import('../../../plugins/sandbox/agent-protocol.js')
  const { formatIPv6, parseListening } = await import('../../../plugins/sandbox/agent-files.js')
  const record = (family: number, port: number, addr: number[], pad = 0): Buffer => {
    const b = Buffer.alloc(20)
    b[0] = family
    b[1] = pad
    b.writeUInt16BE(port, 2)
    Buffer.from(addr).copy(b, 4)
    return b
  }
  const v6 = (hex: string): number[] => [...Buffer.from(hex, 'hex')]
  t.same(parseListening(Buffer.concat([
    record(4, 3000, [0, 0, 0, 0]),
    record(4, 8000, [127, 0, 0, 1]),
    record(6, 5173, v6('00000000000000000000000000000000')),
    record(6, 5174, v6('00000000000000000000000000000001')),
    record(6, 5175, v6('00000000000000000000ffff7f000001')),
    record(6, 5176, v6('20010db8000000000001000000000001'))
  ])), [
    { family: 4, address: '0.0.0.0', port: 3000 },
    { family: 4, address: '127.0.0.1', port: 8000 },
    { family: 6, address: '::', port: 5173 },
    { family: 6, address: '::1', port: 5174 },
    { family: 6, address: '::ffff:127.0.0.1', port: 5175 },
    { family: 6, address: '2001:db8::1:0:0:1', port: 5176 }
  ])
  t.equal(formatIPv6(Buffer.from('20010db8000000000001000000000000', 'hex')), '2001:db8:0:0:1::', 'the longest run of zero groups')
  t.equal(formatIPv6(Buffer.from('20010db8000000000001000000000001', 'hex')), '2001:db8::1:0:0:1', 'the first of equal runs')
  t.equal(formatIPv6(Buffer.from('fe800000000000000000000000000000', 'hex')), 'fe80::', 'a run at the end')
  t.equal(formatIPv6(Buffer.from('20010db8000100020003000400050006', 'hex')), '2001:db8:1:2:3:4:5:6', 'no run of two')
  t.throws(() => parseListening(Buffer.alloc(19)), { name: 'ProtocolError' }, 'a partial record')
  t.throws(() => parseListening(record(5, 80, [])), { name: 'ProtocolError' }, 'an unknown family')
  t.throws(() => parseListening(record(4, 80, [1, 2, 3, 4, 5])), { name: 'ProtocolError' }, 'an IPv4 address with bytes beyond four')
  t.throws(() => parseListening(record(4, 80, [], 1)), { name: 'ProtocolError' }, 'a reserved byte set')

  // Over the stream: the records become `sockets`; more records than asked close the stream.
  const conn = new AgentConnection(new PassThrough(), () => {})
  const asked = fileRequest(conn, { op: 'listening', max: 2 }, { timeoutMs: 5000 })
  conn.dispatch(1, T_DATA, Buffer.concat([record(4, 3000, [0, 0, 0, 0]), record(6, 3001, v6('00000000000000000000000000000001'))]))
  conn.dispatch(1, T_RESULT, encodeJson(0, T_RESULT, { ok: true, more: true }).subarray(9))
  const r = await asked
  t.same([r?.sockets, r?.more, r?.data.length], [[{ family: 4, address: '0.0.0.0', port: 3000 }, { family: 6, address: '::1', port: 3001 }], true, 0])
  conn.close()
  const conn2 = new AgentConnection(new PassThrough(), () => {})
  const tooMany = fileRequest(conn2, { op: 'listening', max: 1 }, { timeoutMs: 5000 })
  t.throws(() => { conn2.dispatch(1, T_DATA, Buffer.alloc(40)) }, { name: 'ProtocolError' }, 'two records for one asked')
  conn2.close()
  t.equal(await tooMany, undefined)
  const conn3 = new AgentConnection(new PassThrough(), () => {})
  const old = fileRequest(conn3, { op: 'listening', max: 1 }, { timeoutMs: 5000 })
  conn3.dispatch(1, T_RESULT, encodeJson(0, T_RESULT, { ok: false, errno: 0, error: 'unknown operation' }).subarray(9))
  t.same([(await old)?.ok, (await old)?.sockets], [false, undefined], 'an agent without the op says so')
  conn3.close()
})
