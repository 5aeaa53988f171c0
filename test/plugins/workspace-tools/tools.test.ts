import t from 'tap'
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { createError } from '@fastify/error'
import type { CallToolResult } from '@modelcontextprotocol/server'
import { fakeContext, fakeLinks, fakeSandbox, SETTINGS, textOf, tools } from './fakes.js'
import type { ExecOptions } from '../../../plugins/sandbox/types.js'
import { createWorkspaceTools } from '../../../plugins/workspace-tools/service.js'
import type { ResultNote } from '../../../plugins/workspace-tools/types.js'
import { walkTree, type WalkOptions } from '../../../core/tree-walk.js'
import { tempDir } from '../../fixtures/temp-dir.js'

const REG = (size: number): string => `81a4 ${size}\n`
const DIR = '41ed 4096\n'
const missing = { exitCode: 2, stderr: Buffer.from("stat: cannot statx '/x': No such file or directory\n") }
/** The open script's argv: sh -c SCRIPT sh path readBytes list|- partBytes. */
const isOpen = (argv: string[]): boolean => argv[0] === 'sh' && argv.length === 8
const opened = (header: string, body: string | Buffer = ''): { stdout: Buffer } => ({ stdout: Buffer.concat([Buffer.from(header), Buffer.from(body)]) })

/** A tiny in-memory file system answering the argv the tools send. */
function fileSystem (files: Record<string, string | Buffer>) {
  return (argv: string[], opts?: ExecOptions) => {
    if (isOpen(argv)) {
      const content = files[argv[4] as string]
      if (content === undefined) return missing
      const bytes = Buffer.from(content)
      return opened(REG(bytes.length), Number(argv[5]) > 0 ? bytes : '')
    }
    if (argv[0] === 'sh') {
      const target = argv[4] as string
      const existed = files[target] !== undefined
      files[target] = Buffer.from(opts?.stdin ?? '')
      return { stdout: Buffer.from(existed ? '1\n' : '0\n') }
    }
    return { exitCode: 127, stderr: Buffer.from('unexpected') }
  }
}

t.test('tools/list order, names and schemas of docs/contract.md#input-schemas', async t => {
  const { defs } = tools(fakeSandbox().sandbox)
  t.same(defs.map(d => [d.name, d.order]), [['bash_tool', 10], ['view', 20], ['create_file', 30], ['str_replace', 40]])
  const props = (i: number): string[] => Object.keys((defs[i]?.inputSchema as unknown as { properties: object }).properties)
  t.same(props(0), ['command', 'description'])
  t.same(props(1), ['description', 'path', 'view_range'])
  t.same(props(2), ['description', 'file_text', 'path'])
  t.same(props(3), ['description', 'old_str', 'path', 'new_str'])
  const req = (i: number): string[] => (defs[i]?.inputSchema as unknown as { required: string[] }).required
  t.same(req(0), ['command', 'description'])
  t.same(req(1), ['description', 'path'])
  t.same(req(2), ['description', 'file_text', 'path'])
  t.same(req(3), ['description', 'old_str', 'path'])
  for (const def of defs) {
    for (const [name, schema] of Object.entries((def.inputSchema as unknown as { properties: Record<string, { description?: string }> }).properties)) {
      t.ok((schema.description ?? '').length > 10, `${def.name}.${name} has a description`)
    }
    t.notOk('outputSchema' in def)
  }
  const vr = (defs[1]?.inputSchema as unknown as { properties: { view_range: { default: unknown } } }).properties.view_range
  t.equal(vr.default, null)
  const ns = (defs[3]?.inputSchema as unknown as { properties: { new_str: { default: unknown } } }).properties.new_str
  t.equal(ns.default, '')
  t.equal(defs[1]?.annotations?.readOnlyHint, true)
  t.match(defs[2]?.description, /description first.*file_text last/s)
  t.match(defs[3]?.description, /description first.*new_str last/s)
  t.match(defs[0]?.description, /120 seconds/)
})

t.test('str_replace with identical strings answers before touching Docker', async t => {
  const fake = fakeSandbox()
  const r = await tools(fake.sandbox).call('str_replace', { description: 'd', path: 'a.txt', old_str: 'same', new_str: 'same' })
  t.equal(r.isError, true)
  t.match(textOf(r), /^Error: old_str and new_str are identical/)
  t.same(fake.log, [], 'no lease, no ensure, no exec')
  const r2 = await tools(fake.sandbox).call('str_replace', { description: 'd', path: 'a.txt', old_str: '', new_str: 'x' })
  t.match(textOf(r2), /^Error: old_str must not be empty/)
  t.same(fake.log, [])
})

t.test('every call leases, ensures with CONTAINER_CREATE_TIMEOUT and the user, and releases even on failure', async t => {
  const fake = fakeSandbox({ exec: () => missing })
  const r = await tools(fake.sandbox).call('view', { description: 'd', path: '/nope' })
  t.match(textOf(r), /^Error: path not found: \/nope$/)
  t.equal(r.isError, true)
  t.same(fake.log.slice(0, 2), ['lease chat-a', 'ensure chat-a 60000'])
  t.equal(fake.log[fake.log.length - 1], 'release chat-a')
  t.equal(fake.leases(), 0)
})

t.test('a coded sandbox error is rethrown for the transport to shape, and the lease is released', async t => {
  const SANDBOX_CREATE_TIMEOUT = createError('SANDBOX_CREATE_TIMEOUT', 'sandbox creation timed out (%ds)', 504)
  const fake = fakeSandbox({ ensure: async () => { throw new SANDBOX_CREATE_TIMEOUT(60) } })
  await t.rejects(tools(fake.sandbox).call('bash_tool', { command: 'true', description: 'd' }), { code: 'SANDBOX_CREATE_TIMEOUT' })
  t.equal(fake.leases(), 0)
})

t.test('exec timeouts and a stopped sandbox become Error results', async t => {
  const stopped = fakeSandbox({ exec: () => ({ exitCode: null }) })
  const r = await tools(stopped.sandbox).call('view', { description: 'd', path: '/x' })
  t.equal(r.isError, true)
  t.match(textOf(r), /^Error: the sandbox stopped while the read was running/)
  const slow = fakeSandbox({ exec: () => ({ exitCode: null, timedOut: true }) })
  const r2 = await tools(slow.sandbox).call('create_file', { description: 'd', path: '/x', file_text: 'y' })
  t.match(textOf(r2), /^Error: write did not finish within 120 seconds/)
})

t.test('create_file passes the path as argv and the content as stdin, never as shell text', async t => {
  const files: Record<string, string | Buffer> = {}
  const fake = fakeSandbox({ exec: fileSystem(files) })
  const evil = "notes $(touch pwned) `id` 'q'.txt"
  const r = await tools(fake.sandbox).call('create_file', { description: 'd', path: evil, file_text: 'hello\n' })
  t.equal(textOf(r), `Successfully created /home/assistant/${evil} (6 bytes)`)
  const write = fake.execs.find(e => e.argv[0] === 'sh')
  t.ok(write)
  t.equal(write?.argv[1], '-c')
  t.notOk(write?.argv[2]?.includes('pwned'), 'the script is constant')
  t.equal(write?.argv[4], `/home/assistant/${evil}`)
  t.equal(String(write?.opts?.stdin), 'hello\n')
  t.equal(write?.opts?.timeoutMs, 120_000)
  const again = await tools(fake.sandbox).call('create_file', { description: 'd', path: evil, file_text: 'bye' })
  t.match(textOf(again), /^Successfully created .* \(3 bytes, replacing the previous file\)$/)
})

t.test('create_file under outputs adds the public URL', async t => {
  const fake = fakeSandbox({ exec: fileSystem({}) })
  const r = await tools(fake.sandbox).call('create_file', { description: 'd', path: '/mnt/user-data/outputs/my report.md', file_text: '# hi' })
  t.equal(textOf(r), 'Successfully created /mnt/user-data/outputs/my report.md (4 bytes)\nPublic URL: http://cubicle.test/files/chat-a/my%20report.md')
})

t.test('create_file refuses more than 10 MiB without touching Docker', async t => {
  const fake = fakeSandbox()
  const r = await tools(fake.sandbox).call('create_file', { description: 'd', path: 'big', file_text: 'x'.repeat(10 * 1024 * 1024 + 1) })
  t.equal(r.isError, true)
  t.match(textOf(r), /^Error: file_text is 10485761 bytes; create_file writes at most 10 MiB/)
  t.same(fake.log, [])
})

t.test('create_file write failures name the reason', async t => {
  const fake = fakeSandbox({ exec: () => ({ exitCode: 5, stderr: Buffer.from("mktemp: failed to create file via template '/mnt/user-data/uploads/.cubicle-write.XXXXXXXX': Read-only file system\n") }) })
  const r = await tools(fake.sandbox).call('create_file', { description: 'd', path: '/mnt/user-data/uploads/x.txt', file_text: 'y' })
  t.equal(r.isError, true)
  t.equal(textOf(r), 'Error: cannot write /mnt/user-data/uploads/x.txt: Read-only file system')
  const dir = fakeSandbox({ exec: () => ({ exitCode: 3, stderr: Buffer.from('cubicle: is a directory') }) })
  const r2 = await tools(dir.sandbox).call('create_file', { description: 'd', path: '/tmp', file_text: 'y' })
  t.equal(textOf(r2), 'Error: /tmp is a directory; give a file path')
})

t.test('str_replace checks in order: missing path, non-UTF-8, 0 and N occurrences; success writes once', async t => {
  const files: Record<string, string | Buffer> = {
    '/home/assistant/a.txt': 'alpha\nbeta\nalpha\n',
    '/home/assistant/bin.dat': Buffer.from([0x61, 0xff, 0x00])
  }
  const fake = fakeSandbox({ exec: fileSystem(files) })
  const { call } = tools(fake.sandbox)
  t.match(textOf(await call('str_replace', { description: 'd', path: 'none.txt', old_str: 'a', new_str: 'b' })), /^Error: path not found: \/home\/assistant\/none\.txt/)
  t.match(textOf(await call('str_replace', { description: 'd', path: 'bin.dat', old_str: 'a', new_str: 'b' })), /^Error: cannot edit binary or non-UTF-8 file/)
  t.match(textOf(await call('str_replace', { description: 'd', path: 'a.txt', old_str: 'gamma', new_str: 'b' })), /^Error: old_str not found in \/home\/assistant\/a\.txt/)
  t.match(textOf(await call('str_replace', { description: 'd', path: 'a.txt', old_str: 'alpha', new_str: 'b' })), /^Error: Found 2 occurrences of old_str in \/home\/assistant\/a\.txt/)
  t.equal(fake.execs.filter(e => e.argv[0] === 'sh' && !isOpen(e.argv)).length, 0, 'failures leave the file untouched')
  const ok = await call('str_replace', { description: 'd', path: 'a.txt', old_str: 'beta\n' })
  t.equal(textOf(ok), 'Successfully replaced text in /home/assistant/a.txt (at line 2). The edited region now reads:\n     1\talpha\n     2\talpha')
  t.equal(String(files['/home/assistant/a.txt']), 'alpha\nalpha\n')
})

t.test('str_replace on a directory is refused as not a regular text file', async t => {
  const fake = fakeSandbox({ exec: () => opened(DIR) })
  const r = await tools(fake.sandbox).call('str_replace', { description: 'd', path: '/tmp', old_str: 'a', new_str: 'b' })
  t.match(textOf(r), /^Error: cannot edit binary or non-UTF-8 file: \/tmp is not a regular file/)
})

t.test('view: text with a JSON-string view_range, special files, binaries and hints', async t => {
  const files: Record<string, string | Buffer> = {
    '/home/assistant/t.txt': 'a\nb\nc\nd\n',
    '/home/assistant/b.bin': Buffer.from([1, 2, 0, 3]),
    '/home/assistant/e.txt': ''
  }
  const fs = fileSystem(files)
  const fake = fakeSandbox({ exec: (argv, opts) => argv[4] === '/dev/null' ? opened('21b6 0\n') : fs(argv, opts) })
  const { call } = tools(fake.sandbox)
  t.equal(textOf(await call('view', { description: 'd', path: 't.txt', view_range: '[2, 3]' })), '     2\tb\n     3\tc')
  t.equal(textOf(await call('view', { description: 'd', path: 't.txt', view_range: ['3', '-1'] })), '     3\tc\n     4\td')
  t.equal(textOf(await call('view', { description: 'd', path: 't.txt', view_range: null })), '     1\ta\n     2\tb\n     3\tc\n     4\td')
  t.match(textOf(await call('view', { description: 'd', path: 't.txt', view_range: [9, -1] })), /which has 4 lines/)
  t.equal(textOf(await call('view', { description: 'd', path: 'e.txt' })), '[Empty file]')
  const bin = await call('view', { description: 'd', path: 'b.bin' })
  t.equal(bin.isError, true)
  t.match(textOf(bin), /^Error: Cannot view binary file \/home\/assistant\/b\.bin \(4, 4 bytes\)\. Inspect it with: file \/home\/assistant\/b\.bin/)
  const dev = await call('view', { description: 'd', path: '/dev/null' })
  t.equal(dev.isError, true)
  t.match(textOf(dev), /character device/)
  const before = fake.execs.length
  const bad = await call('view', { description: 'd', path: 't.txt', view_range: [0, 2] })
  t.match(textOf(bad), /^Error: invalid view_range \[0, 2\]/)
  t.equal(fake.execs.length, before, 'a malformed range is rejected before any exec')
})

t.test('view of an office file by extension never reads it', async t => {
  const fake = fakeSandbox({ exec: argv => isOpen(argv) ? opened(REG(1000)) : { exitCode: 99 } })
  const r = await tools(fake.sandbox).call('view', { description: 'd', path: '/mnt/user-data/uploads/q.xlsx' })
  t.match(textOf(r), /Cannot view binary file.*\/mnt\/skills\/public\/xlsx\/SKILL\.md/)
  t.equal(fake.execs.length, 1)
  t.equal(fake.execs[0]?.argv[5], '0', 'asked to read nothing')
})

t.test('view of an image runs the constant python script with the path as argv and returns text + image blocks', async t => {
  const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3])
  const fake = fakeSandbox({
    exec: argv => isOpen(argv)
      ? opened(REG(5000))
      : { stdout: jpeg, stderr: Buffer.from('\n{"width": 3000, "height": 1000, "outWidth": 1280, "outHeight": 427}\n') }
  })
  const r = await tools(fake.sandbox).call('view', { description: 'd', path: '/mnt/user-data/outputs/chart $(x).PNG' })
  t.equal(fake.execs[0]?.argv[5], '0', 'the image is not read by the server')
  const py = fake.execs[1]
  t.same(py?.argv.slice(0, 2), ['python3', '-c'])
  t.notOk(py?.argv[2]?.includes('chart'))
  t.equal(py?.argv[3], '/mnt/user-data/outputs/chart $(x).PNG')
  t.equal(r.content.length, 2)
  t.equal(textOf(r), 'Image: /mnt/user-data/outputs/chart $(x).PNG (original 3000x1000 px, delivered as 1280x427 px JPEG)\n' +
    'Public URL: http://cubicle.test/files/chat-a/chart%20%24(x).PNG')
  t.same(r.content[1], { type: 'image', mimeType: 'image/jpeg', data: jpeg.toString('base64') })
})

t.test('view of an oversized image explains how to resize', async t => {
  const fake = fakeSandbox({ exec: () => opened(REG(60 * 1024 * 1024)) })
  const r = await tools(fake.sandbox).call('view', { description: 'd', path: '/x/huge.png' })
  t.equal(r.isError, true)
  t.match(textOf(r), /too large to view .*50 MiB.*thumbnail/)
  const px = fakeSandbox({ exec: argv => isOpen(argv) ? opened(REG(1000)) : { exitCode: 3, stderr: Buffer.from('{"error": "pixels", "detail": "20000x20000"}') } })
  const r2 = await tools(px.sandbox).call('view', { description: 'd', path: '/x/huge.png' })
  t.match(textOf(r2), /^Error: image \/x\/huge\.png is too large to view \(20000x20000 pixels; the limit is 100 megapixels\)/)
})

t.test('view of a directory lists it in the same exec as the stat', async t => {
  const listing = 'f\x0012\x00\x00a.txt\x00d\x004096\x00\x00sub\x00f\x003\x00\x00sub/b.txt\x00'
  const fake = fakeSandbox({ exec: () => opened(DIR, listing) })
  const r = await tools(fake.sandbox).call('view', { description: 'd', path: '.' })
  t.equal(fake.execs.length, 1, 'stat and listing in one exec')
  t.equal(fake.execs[0]?.argv[4], '/home/assistant')
  t.equal(fake.execs[0]?.argv[6], 'list')
  t.notOk(fake.execs[0]?.argv[2]?.includes('/home/assistant'), 'the path is not in the script')
  t.match(textOf(r), /^Directory \/home\/assistant\/ .*\nf {5}12 {2}a\.txt\nd {6}- {2}sub\/\nf {6}3 {2}sub\/b\.txt$/s)
})

t.test('bash_tool streams through the capper and reports the exit code', async t => {
  const fake = fakeSandbox({
    run: async (command, opts) => {
      t.equal(opts.timeoutMs, 120_000)
      t.ok(opts.signal)
      t.equal(opts.env?.PAGER, 'cat')
      for (let i = 0; i < 100; i++) opts.onOutput('x'.repeat(1000))
      return { exitCode: 3, timedOut: false, cancelled: false }
    }
  })
  const r = await tools(fake.sandbox).call('bash_tool', { command: 'yes', description: 'd' })
  const text = textOf(r)
  t.match(text, /output truncated: 100000 characters in total/)
  t.ok(text.endsWith('\n[Exit code: 3]'))
  t.notOk(r.isError)
})

t.test('bash_tool echo hello gives exactly hello\\n', async t => {
  const fake = fakeSandbox({ run: async (c, o) => { o.onOutput('hello\n'); return { exitCode: 0, timedOut: false, cancelled: false } } })
  t.same(await tools(fake.sandbox).call('bash_tool', { command: 'echo hello', description: 'd' }), { content: [{ type: 'text', text: 'hello\n' }] })
})

t.test('bash_tool sends progress within ~1 s, then on the interval, strictly increasing, only when asked', async t => {
  const run = async (c: string, o: { onOutput: (s: string) => void }) => {
    o.onOutput('\u001b[1mstep 1\u001b[0m\n')
    await new Promise(resolve => setTimeout(resolve, 2600))
    return { exitCode: 0, timedOut: false, cancelled: false }
  }
  const fake = fakeSandbox({ run })
  const { ctx, progress } = fakeContext({ wantsProgress: true })
  await tools(fake.sandbox, undefined, { ...SETTINGS, progressIntervalS: 1 }).call('bash_tool', { command: 'sleep 3', description: 'Waiting' }, ctx)
  t.ok(progress.length >= 2, `got ${progress.length} notifications`)
  t.ok((progress[0]?.at ?? 99999) < 1300, 'first one within ~1 s')
  t.equal(progress[0]?.progress, 1)
  t.equal(progress[0]?.total, 120)
  t.equal(progress[0]?.message, 'Running: Waiting (1s)\n→ step 1')
  for (let i = 1; i < progress.length; i++) t.ok((progress[i]?.progress ?? 0) > (progress[i - 1]?.progress ?? 0), 'strictly increasing')
  const quiet = fakeContext({ wantsProgress: false })
  await tools(fakeSandbox({ run }).sandbox).call('bash_tool', { command: 'sleep 3', description: 'Waiting' }, quiet.ctx)
  t.equal(quiet.progress.length, 0, 'no progress without a progress token')
})

t.test('bash_tool appends links to files created or modified under outputs', async t => {
  const dir = await tempDir(t, 'wt-out')
  await writeFile(join(dir, 'old.txt'), 'same')
  await writeFile(join(dir, 'changed.txt'), 'v1')
  const fake = fakeSandbox({
    run: async (c, o) => {
      await mkdir(join(dir, 'sub dir'))
      await writeFile(join(dir, 'sub dir', 'new file.csv'), 'a,b')
      await writeFile(join(dir, 'changed.txt'), 'v2 longer')
      o.onOutput('done\n')
      return { exitCode: 0, timedOut: false, cancelled: false }
    }
  })
  const r = await tools(fake.sandbox, dir).call('bash_tool', { command: 'make', description: 'd' })
  t.equal(textOf(r), 'done\n\n\n[Files created or modified in /mnt/user-data/outputs: changed.txt: http://cubicle.test/files/chat-a/changed.txt, ' +
    'sub dir/new file.csv: http://cubicle.test/files/chat-a/sub%20dir/new%20file.csv]')
})

t.test('bash_tool: an unknown exit status is an isError result', async t => {
  const fake = fakeSandbox({ run: async () => ({ exitCode: null, timedOut: false, cancelled: false }) })
  const r = await tools(fake.sandbox).call('bash_tool', { command: 'x', description: 'd' })
  // without a cause from the driver, the text says only what is known
  t.same(r, { isError: true, content: [{ type: 'text', text: 'Error: the command ended without an exit status: the sandbox stopped or the connection to it was lost, and its state could not be checked' }] })
  const told = fakeSandbox({ run: async () => ({ exitCode: null, timedOut: false, cancelled: false, notices: [{ kind: 'sandbox-stopped', action: 'stopped', removed: false, by: 'outside' }] }) })
  const why = await tools(told.sandbox).call('bash_tool', { command: 'x', description: 'd' })
  t.equal(why.isError, true)
  t.match(why.content, [{ type: 'text', text: /^Error: the sandbox was stopped while the command was running\. The exit status of the command is unknown\. The sandbox was stopped outside this server/ }])
})

t.test('a note that wants the listening sockets gets them from the command\'s exit, asked for with the command', async t => { // docs/performance.md
  const asked: Array<number | undefined> = []
  const sockets = [{ family: 4 as const, address: '0.0.0.0', port: 3000 }]
  const fake = fakeSandbox({ run: async (_command, opts) => { asked.push(opts.listening); return { exitCode: 0, timedOut: false, cancelled: false, listening: sockets } } })
  const seen: unknown[] = []
  const note: ResultNote = async (_chatId, facts) => { seen.push(facts.listening); return facts.listening === undefined ? 'asked' : `ports ${facts.listening.map(s => s.port).join(',')}` }
  const storage = { walk: (_chatId: string, _area: string, opts: WalkOptions = {}) => walkTree('/nonexistent-outputs', opts), changeClock: async () => undefined }
  const bash = createWorkspaceTools({ sandbox: fake.sandbox, links: fakeLinks, storage, notes: [note], noteNeeds: { listening: 4096 } }, SETTINGS).find(d => d.name === 'bash_tool')
  const r = await bash?.handler({ command: 'echo hi', description: 'd' } as never, fakeContext().ctx) as CallToolResult
  t.same(asked, [4096], 'the command asks for them')
  t.same(seen, [sockets], 'the note gets what the exit said')
  t.match(textOf(r), /ports 3000$/)
  const plain = createWorkspaceTools({ sandbox: fakeSandbox({ run: async (_command, opts) => { asked.push(opts.listening); return { exitCode: 0, timedOut: false, cancelled: false } } }).sandbox, links: fakeLinks, storage, notes: [note] }, SETTINGS).find(d => d.name === 'bash_tool')
  t.match(textOf(await plain?.handler({ command: 'echo hi', description: 'd' } as never, fakeContext().ctx) as CallToolResult), /asked$/, 'no note wants them: the command asks for none and the note asks the sandbox itself')
  t.same(asked, [4096, undefined])
})
