import t from 'tap'
import { stat, readFile } from 'node:fs/promises'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { chatPaths } from '../../core/chat-paths.js'
import { dockerOrSkip } from './docker.js'
import { bash, client, textOf, toolsApp } from '../plugins/workspace-tools/integration-app.js'

const gate = await dockerOrSkip()

t.test('view, create_file and str_replace over MCP on real Docker', gate, async t => {
  const { app, url, dataDir } = await toolsApp(t)
  const chat = 'wt-files'
  const c = await client(t, url, chat)
  const call = async (name: string, args: Record<string, unknown>): Promise<CallToolResult> =>
    await c.callTool({ name, arguments: { description: 'test', ...args } }) as CallToolResult

  t.test('create_file with a bare name lands in /home/assistant, exact bytes, owned by uid 1000', async t => {
    const r = await call('create_file', { path: 'notes.txt', file_text: 'first line\nno newline at end' })
    t.equal(textOf(r), 'Successfully created /home/assistant/notes.txt (28 bytes)')
    t.equal(textOf(await bash(c, 'wc -c < notes.txt; tail -c 3 notes.txt | od -An -c; stat -c "%u %a" notes.txt')), '28\n   e   n   d\n1000 644\n')
  })

  t.test('create_file makes parent directories, overwrites atomically and keeps the mode', async t => {
    t.equal(textOf(await call('create_file', { path: '/home/assistant/a/b/c/run.sh', file_text: '#!/bin/sh\necho v1\n' })), 'Successfully created /home/assistant/a/b/c/run.sh (18 bytes)')
    await bash(c, 'chmod 750 a/b/c/run.sh')
    t.match(textOf(await call('create_file', { path: 'a/b/c/run.sh', file_text: '#!/bin/sh\necho v2\n' })), /replacing the previous file/)
    t.equal(textOf(await bash(c, 'a/b/c/run.sh; stat -c %a a/b/c/run.sh; ls -A a/b/c')), 'v2\n750\nrun.sh\n', 'mode kept, no temp file left')
  })

  t.test('with the in-sandbox agent, view, create_file and str_replace of a file spawn no process', async t => {
    const sandbox = app.sandbox
    const realExec = sandbox.exec.bind(sandbox)
    const realFileOp = sandbox.fileOp?.bind(sandbox)
    const calls = { exec: 0, fileOp: 0 }
    sandbox.exec = async (...a) => { calls.exec++; return await realExec(...a) }
    sandbox.fileOp = async (...a) => { calls.fileOp++; return await realFileOp?.(...a) }
    t.teardown(() => { sandbox.exec = realExec; sandbox.fileOp = realFileOp })
    t.equal(textOf(await call('create_file', { path: 'agent.txt', file_text: 'alpha\nbeta\n' })), 'Successfully created /home/assistant/agent.txt (11 bytes)')
    t.equal(textOf(await call('view', { path: 'agent.txt' })), '     1\talpha\n     2\tbeta')
    t.match(textOf(await call('str_replace', { path: 'agent.txt', old_str: 'beta', new_str: 'gamma' })), /agent\.txt/)
    t.equal(textOf(await call('view', { path: 'agent.txt' })), '     1\talpha\n     2\tgamma')
    t.same(calls.exec, 0, 'no exec: the agent served every file operation')
    t.ok(calls.fileOp >= 5, `file operations through the agent (${calls.fileOp})`)
  })

  t.test('create_file never lets a path reach a shell', async t => {
    const evil = '/home/assistant/x $(touch /tmp/pwned1) `touch /tmp/pwned2`; touch /tmp/pwned3 \'"q.txt'
    t.equal(textOf(await call('create_file', { path: evil, file_text: 'safe' })), `Successfully created ${evil} (4 bytes)`)
    t.equal(textOf(await bash(c, 'ls /tmp/pwned* 2>/dev/null | wc -l')), '0\n')
    t.match(textOf(await call('view', { path: evil })), /^ {5}1\tsafe$/)
  })

  t.test('create_file under outputs gives the public URL and the file appears on the host, owned by uid 1000', async t => {
    const r = await call('create_file', { path: '/mnt/user-data/outputs/site/index.html', file_text: '<h1>hi</h1>' })
    t.equal(textOf(r), 'Successfully created /mnt/user-data/outputs/site/index.html (11 bytes)\nPublic URL: http://cubicle.test/files/wt-files/site/index.html')
    const host = `${chatPaths(dataDir, chat).outputs}/site/index.html`
    t.equal(await readFile(host, 'utf8'), '<h1>hi</h1>')
    t.equal((await stat(host)).uid, 1000)
  })

  t.test('create_file into the read-only uploads mount or onto a directory is an error with the reason', async t => {
    const ro = await call('create_file', { path: '/mnt/user-data/uploads/x.txt', file_text: 'no' })
    t.equal(ro.isError, true)
    t.match(textOf(ro), /^Error: cannot write \/mnt\/user-data\/uploads\/x\.txt: (Read-only file system|Permission denied)$/)
    const dir = await call('create_file', { path: '/home/assistant/a', file_text: 'no' })
    t.equal(dir.isError, true)
    t.equal(textOf(dir), 'Error: /home/assistant/a is a directory; give a file path')
    const root = await call('create_file', { path: '/etc/cubicle-test', file_text: 'no' })
    t.match(textOf(root), /^Error: cannot write \/etc\/cubicle-test: Permission denied$/)
  })

  t.test('view shows real line numbers for a range, accepts a JSON-string range and validates it', async t => {
    await bash(c, 'seq 1 100 > nums.txt')
    t.equal(textOf(await call('view', { path: 'nums.txt', view_range: [10, 12] })), '    10\t10\n    11\t11\n    12\t12')
    t.equal(textOf(await call('view', { path: 'nums.txt', view_range: '[99, -1]' })), '    99\t99\n   100\t100')
    t.equal(textOf(await call('view', { path: 'nums.txt', view_range: [98, 500] })), '    98\t98\n    99\t99\n   100\t100')
    const beyond = await call('view', { path: 'nums.txt', view_range: [101, -1] })
    t.equal(beyond.isError, true)
    t.match(textOf(beyond), /which has 100 lines$/)
    const bad = await call('view', { path: 'nums.txt', view_range: [5, 2] })
    t.match(textOf(bad), /^Error: invalid view_range \[5, 2\]/)
    t.equal(textOf(await call('view', { path: '/home/assistant/nums.txt' })).split('\n').length, 100)
  })

  t.test('view of a missing path, an empty file, a FIFO and binaries', async t => {
    const missing = await call('view', { path: '/no/such/file' })
    t.equal(missing.isError, true)
    t.match(textOf(missing), /^Error: path not found: \/no\/such\/file$/)
    await bash(c, ': > empty.txt; mkfifo pipe; printf "a\\0b" > blob; echo x > arch.zip; echo x > doc.docx; echo x > logs.gz; echo x > "it is.tar.gz"')
    t.equal(textOf(await call('view', { path: 'empty.txt' })), '[Empty file]')
    const fifo = await call('view', { path: 'pipe' })
    t.equal(fifo.isError, true)
    t.match(textOf(fifo), /named pipe/)
    t.match(textOf(await call('view', { path: 'blob' })), /^Error: Cannot view binary file \/home\/assistant\/blob \(3, 3 bytes\)\. Inspect it with: file \/home\/assistant\/blob/)
    t.match(textOf(await call('view', { path: 'arch.zip' })), /Cannot view binary file.*unzip -l \/home\/assistant\/arch\.zip$/)
    t.match(textOf(await call('view', { path: 'doc.docx' })), /Cannot view binary file.*\/mnt\/skills\/public\/docx\/SKILL\.md/)
    t.match(textOf(await call('view', { path: 'logs.gz' })), /gunzip -c \/home\/assistant\/logs\.gz \| head -n 100$/)
    t.match(textOf(await call('view', { path: 'it is.tar.gz' })), /tar -tvf '\/home\/assistant\/it is\.tar\.gz'$/)
  })

  t.test('view of a directory lists two levels with markers and sizes, not descending hidden or bulky dirs', async t => {
    await bash(c, 'mkdir -p proj/src/deep/deeper proj/node_modules/pkg proj/.git/objects && printf 12345 > proj/src/a.ts && ' +
      'head -c 3000 /dev/zero > proj/big.bin && echo x > proj/src/deep/deeper/hidden.txt && echo x > proj/.env && ln -s /etc proj/etc-link')
    const text = textOf(await call('view', { path: 'proj' }))
    const lines = text.split('\n')
    t.match(lines[0], /^Directory \/home\/assistant\/proj\//)
    t.same(lines.slice(1), [
      'f      2  .env',
      'd      -  .git/  (not expanded)',
      'f   2.9K  big.bin',
      'l      4  etc-link -> /etc',
      'd      -  node_modules/  (not expanded)',
      'd      -  src/',
      'f      5  src/a.ts',
      'd      -  src/deep/'
    ])
  })

  t.test('view of a large file truncates at line boundaries with real numbers; files above 16 MiB read head and tail', async t => {
    await bash(c, 'seq 1 100000 > many.txt; seq 1 3000000 > huge.txt; ls -l huge.txt')
    const many = textOf(await call('view', { path: 'many.txt' }))
    t.match(many, /\n\[\.\.\. File truncated \(588895 bytes, 100000 lines, \d+ characters with line numbers\): showing lines 1–\d+ and \d+–100000\. Use view_range/)
    t.ok(many.startsWith('     1\t1\n     2\t2\n'))
    t.ok(many.endsWith(' 99999\t99999\n100000\t100000'))
    t.ok(many.length <= 32000)
    const huge = textOf(await call('view', { path: 'huge.txt' }))
    t.match(huge, /File truncated \(22888896 bytes, 3000000 lines\)/)
    t.ok(huge.startsWith('     1\t1\n'))
    t.ok(huge.endsWith('2999999\t2999999\n3000000\t3000000'))
    t.equal(textOf(await call('view', { path: 'huge.txt', view_range: [2500000, 2500001] })), '2500000\t2500000\n2500001\t2500001')
    t.match(textOf(await call('view', { path: 'huge.txt', view_range: [3000001, -1] })), /which has 3000000 lines$/)
  })

  t.test('view replaces invalid UTF-8 instead of failing', async t => {
    await bash(c, 'printf "ok \\377\\376 end\\n" > latin.txt')
    t.equal(textOf(await call('view', { path: 'latin.txt' })), '     1\tok \uFFFD\uFFFD end')
  })

  t.test('str_replace: unique match edited in place with mode and owner kept, multiple and none refused', async t => {
    await call('create_file', { path: 'code.py', file_text: 'def f():\n    return 1\n\ndef g():\n    return 1\n' })
    await bash(c, 'chmod 700 code.py')
    const many = await call('str_replace', { path: 'code.py', old_str: 'return 1', new_str: 'return 2' })
    t.equal(many.isError, true)
    t.match(textOf(many), /^Error: Found 2 occurrences of old_str in \/home\/assistant\/code\.py \(at lines 2, 5\)/)
    const none = await call('str_replace', { path: 'code.py', old_str: 'def g():\n  return 1', new_str: 'x' })
    t.equal(none.isError, true)
    t.match(textOf(none), /^Error: old_str not found in \/home\/assistant\/code\.py\. .*line 4/)
    const ok = await call('str_replace', { path: 'code.py', old_str: 'def g():\n    return 1', new_str: 'def g():\n    return 42' })
    t.notOk(ok.isError)
    t.match(textOf(ok), /^Successfully replaced text in \/home\/assistant\/code\.py \(at line 4\)\. The edited region now reads:\n {5}1\tdef f\(\):\n/)
    t.match(textOf(ok), / {5}5\t {4}return 42$/)
    t.equal(textOf(await bash(c, 'cat code.py; stat -c "%a %u" code.py')), 'def f():\n    return 1\n\ndef g():\n    return 42\n700 1000\n')
    const del = await call('str_replace', { path: 'code.py', old_str: '\ndef g():\n    return 42' })
    t.notOk(del.isError)
    t.equal(textOf(await bash(c, 'cat code.py')), 'def f():\n    return 1\n\n')
  })

  t.test('str_replace refuses missing paths and binary files', async t => {
    t.match(textOf(await call('str_replace', { path: 'nope.txt', old_str: 'a', new_str: 'b' })), /^Error: path not found: \/home\/assistant\/nope\.txt$/)
    t.match(textOf(await call('str_replace', { path: 'blob', old_str: 'a', new_str: 'b' })), /^Error: cannot edit binary or non-UTF-8 file/)
    t.match(textOf(await call('str_replace', { path: 'latin.txt', old_str: 'ok', new_str: 'b' })), /^Error: cannot edit binary or non-UTF-8 file/)
  })
})
