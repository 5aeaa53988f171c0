import t from 'tap'
import type { CallToolResult, Progress } from '@modelcontextprotocol/sdk/types.js'
import { dockerOrSkip } from '../integration/docker.js'
import { pollUntil } from '../fixtures/poll.js'
import { bash, client, textOf, toolsApp } from '../plugins/workspace-tools/integration-app.js'

const gate = await dockerOrSkip()

t.test('bash_tool over MCP on real Docker', gate, async t => {
  // The agent stream's byte budget (SANDBOX_AGENT_MAX_BYTES_PER_SECOND, 8 MiB/s by default, held by
  // sandbox-agent-hardening.test.ts) would make the 1 GB flood below last two minutes; read as fast as
  // the sandbox writes it (about 15 s), it is the harder case for the server's memory.
  const { url } = await toolsApp(t, { SANDBOX_AGENT_MAX_BYTES_PER_SECOND: '1g' })
  const c = await client(t, url, 'wt-bash')

  t.test('tools/list shows the four tools in order with their schemas', async t => {
    const { tools } = await c.listTools()
    t.same(tools.map(x => x.name), ['bash_tool', 'view', 'create_file', 'str_replace'])
    t.same(Object.keys(tools[0]?.inputSchema.properties ?? {}), ['command', 'description'])
    t.equal(tools[1]?.annotations?.readOnlyHint, true)
    for (const tool of tools) t.notOk('outputSchema' in tool && tool.outputSchema !== undefined)
  })

  t.test('echo hello returns exactly hello\\n', async t => {
    const r = await bash(c, 'echo hello')
    t.same(r.content, [{ type: 'text', text: 'hello\n' }])
    t.notOk(r.isError)
  })

  t.test('runs as assistant (uid 1000) in /home/assistant with empty stdin and merged stderr', async t => {
    t.equal(textOf(await bash(c, 'pwd; id -u; id -un; cat; echo done')), '/home/assistant\n1000\nassistant\ndone\n')
    const merged = textOf(await bash(c, 'echo out; echo err >&2'))
    t.match(merged, /out\n/)
    t.match(merged, /err\n/)
  })

  t.test('exit codes: blank, with output, and semantic status 1', async t => {
    t.equal(textOf(await bash(c, 'true')), '[No output]')
    t.equal(textOf(await bash(c, 'exit 3')), '[Exit code: 3]')
    t.equal(textOf(await bash(c, 'echo oops; exit 2')), 'oops\n\n[Exit code: 2]')
    t.equal(textOf(await bash(c, 'grep nomatch-xyz /etc/hostname')), 'No matches found')
    t.equal(textOf(await bash(c, 'FOO=1 /usr/bin/grep -q nomatch /etc/hostname')), 'No matches found')
    t.equal(textOf(await bash(c, 'test -f /no/such/file')), 'Condition is false')
    t.equal(textOf(await bash(c, '[ 1 = 2 ]')), 'Condition is false')
    await bash(c, 'echo a > /tmp/a; echo b > /tmp/b')
    t.equal(textOf(await bash(c, 'diff -q /tmp/a /tmp/b >/dev/null')), 'Files differ')
    t.equal(textOf(await bash(c, 'echo x; diff /tmp/a /tmp/b >/dev/null')), 'x\n\n[Exit code: 1]', 'only the first command counts')
    t.equal(textOf(await bash(c, 'grep -r x /no/such/dir')), 'grep: /no/such/dir: No such file or directory\n\n[Exit code: 2]')
    t.equal(textOf(await bash(c, 'false')), '[Exit code: 1]', 'status 1 of other commands keeps its code')
  })

  t.test('a command printing 1 GB returns a truncated result and the server memory stays bounded', async t => {
    global.gc?.()
    const before = process.memoryUsage().rss
    let peak = before
    const sampler = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss) }, 100)
    const started = Date.now()
    const r = await c.callTool({ name: 'bash_tool', arguments: { command: "head -c 1000000000 /dev/zero | tr '\\0' a", description: 'big output' } }, undefined, { timeout: 300_000 }) as CallToolResult
    clearInterval(sampler)
    const text = textOf(r)
    t.comment(`1 GB: ${Date.now() - started} ms, rss before ${Math.round(before / 1e6)} MB, peak ${Math.round(peak / 1e6)} MB`)
    t.match(text, /output truncated: 1000000000 characters in total, showing the first 15000 and the last 15000/)
    t.ok(text.startsWith('a'.repeat(15000) + '\n\n[...'))
    t.ok(text.endsWith(']\n\n' + 'a'.repeat(15000)))
    t.ok(text.length <= 32000, `result ${text.length} chars`)
    t.ok(peak - before < 300 * 1024 * 1024, `rss grew by ${Math.round((peak - before) / 1e6)} MB`)
  })

  t.test('calls of one chat run concurrently', async t => {
    const started = Date.now()
    const results = await Promise.all([1, 2, 3, 4, 5].map(async i => textOf(await bash(c, `sleep 1; echo ${i}`))))
    t.same(results, ['1\n', '2\n', '3\n', '4\n', '5\n'])
    t.ok(Date.now() - started < 4000, `took ${Date.now() - started} ms`)
  })

  t.test('cancelling a call kills its processes in the sandbox', async t => {
    const controller = new AbortController()
    const pending = c.callTool({ name: 'bash_tool', arguments: { command: 'sleep 97; echo never', description: 'to cancel' } }, undefined, { signal: controller.signal })
    const count = async (): Promise<string> => textOf(await bash(c, 'pgrep -fc "^sleep 97$" || true'))
    // Asked until the call runs (at most 30 s): a fixed wait before one look missed it on a busy host.
    t.equal(await pollUntil(count, n => n === '1\n', 30_000, 250), '1\n', 'running before the cancel')
    controller.abort()
    await t.rejects(pending)
    t.equal(await pollUntil(count, n => n === '0\n', 30_000, 250), '0\n', 'no sleep 97 left')
  })

  t.test('files written to outputs are listed with their public URLs', async t => {
    const r = await bash(c, 'mkdir -p /mnt/user-data/outputs/rep && echo hi > "/mnt/user-data/outputs/rep/my report.txt" && echo ok')
    t.match(textOf(r), /^ok\n\n\n\[Files created or modified in \/mnt\/user-data\/outputs: rep\/my report\.txt: http:\/\/cubicle\.test\/files\/wt-bash\/rep\/my%20report\.txt\]$/)
    t.equal(textOf(await bash(c, 'stat -c %u "/mnt/user-data/outputs/rep/my report.txt"')), '1000\n', 'owned by uid 1000')
    t.equal(textOf(await bash(c, 'cat "/mnt/user-data/outputs/rep/my report.txt"')), 'hi\n', 'unchanged files are not listed again')
    // From the chat's second call on, the files are told by the change clock (docs/architecture.md): its edges.
    const links = (text: string): string => /\[Files created or modified in \/mnt\/user-data\/outputs: (.*)\]$/.exec(text)?.[1]?.replace(/: http:\/\/cubicle\.test\/files\/wt-bash\/[^,]*/g, '') ?? ''
    const o = '/mnt/user-data/outputs'
    t.equal(links(textOf(await bash(c, `echo 1 > ${o}/first.txt; sleep 0.2`))), 'first.txt', 'written in the first moment of the command')
    t.equal(links(textOf(await bash(c, `touch -d 2001-01-01 "${o}/rep/my report.txt"; echo done`))), 'rep/my report.txt', 'touched with an old mtime')
    t.equal(links(textOf(await bash(c, `rm ${o}/first.txt && ln -s /etc/passwd ${o}/first.txt && echo done`))), '', 'replaced by a symlink: not listed, not followed')
    t.equal(links(textOf(await bash(c, `mv ${o}/rep ${o}/moved && echo done`))), 'moved/my report.txt', 'a renamed directory')
    t.equal(links(textOf(await bash(c, `chmod 600 "${o}/moved/my report.txt" && echo done`))), '', 'a mode change is no change')
  })
})

t.test('timeouts and progress', gate, async t => {
  const { url } = await toolsApp(t, { COMMAND_TIMEOUT: '3', PROGRESS_INTERVAL_SECONDS: '1' })
  const c = await client(t, url, 'wt-timeout')

  t.test('a command past COMMAND_TIMEOUT reports the timeout with its output, within T+10 s', async t => {
    const started = Date.now()
    const r = await bash(c, 'echo started; sleep 60; echo never')
    const took = Date.now() - started
    t.equal(textOf(r), 'started\n\n[Command timed out after 3 seconds]')
    t.notOk(r.isError)
    t.ok(took < 13_000, `took ${took} ms`)
  })

  t.test('a background child keeping the output open does not hold the result', async t => {
    const started = Date.now()
    t.equal(textOf(await bash(c, 'sleep 30 & echo bg')), 'bg\n')
    t.ok(Date.now() - started < 3000)
  })

  t.test('the SDK client receives progress: first within ~1 s, strictly increasing, with the last output line', async t => {
    const seen: Array<Progress & { at: number }> = []
    const started = Date.now()
    const r = await c.callTool({ name: 'bash_tool', arguments: { command: 'for i in 1 2; do echo "step $i"; sleep 1; done', description: 'Counting' } },
      undefined, { onprogress: p => { seen.push({ ...p, at: Date.now() - started }) }, resetTimeoutOnProgress: true }) as CallToolResult
    t.equal(textOf(r), 'step 1\nstep 2\n')
    t.ok(seen.length >= 1, `${seen.length} notifications`)
    t.equal(seen[0]?.progress, 1)
    t.equal(seen[0]?.total, 3)
    t.ok((seen[0]?.at ?? 1e9) < 2000, `first at ${seen[0]?.at} ms`)
    // The last line printed when the first tick went out: step 2 comes at 1 s too, so a loaded machine may show it.
    t.match(seen[0]?.message, /^Running: Counting \(1s\)\n→ step [12]$/)
    for (let i = 1; i < seen.length; i++) t.ok((seen[i]?.progress ?? 0) > (seen[i - 1]?.progress ?? 0))
  })

  t.test('no progress is sent without a progress token', async t => {
    let count = 0
    c.fallbackNotificationHandler = async () => { count++ }
    await bash(c, 'sleep 2')
    t.equal(count, 0)
  })
})
