/*
 * the Open WebUI tool and filter of integrations/open-webui, called by Python harnesses
 * (test/fixtures/open-webui/*.py, standard library only) exactly as Open WebUI calls them — Tools()
 * and Filter() instances with Valves, `await tools.bash_tool(command=…, __user__=…, __metadata__=…,
 * __files__=…, __event_emitter__=…)`, `await filter.inlet(body, …)` / `outlet(body, …)` — against
 * the real server with real sandboxes. Skips loudly without python3; fails under REQUIRE_DOCKER=1.
 */
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chatKey } from '../../core/chat-id.js'
import { entries } from '../../fastify.config.js'
import { build, TEST_API_KEY as KEY } from '../helper.js'
import { dockerOrSkip, removeByPrefix } from './docker.js'

const root = fileURLToPath(new URL('../..', import.meta.url))
const TOOL = join(root, 'integrations/open-webui/cubicle_tool.py')
const FILTER = join(root, 'integrations/open-webui/cubicle_filter.py')
const BEGIN = '<!-- cubicle:sandbox-guide:begin -->'
const BUTTONS = '<!-- cubicle:buttons -->'

const gate = await dockerOrSkip()
let skip: string | false = gate.skip
if (skip === false && spawnSync('python3', ['--version']).status !== 0) {
  if (process.env.REQUIRE_DOCKER === '1') throw new Error('REQUIRE_DOCKER=1: python3 is missing (bash .ci/run installs it)')
  skip = 'SKIPPED: python3 is not installed; the Open WebUI tool and filter are Python'
}
if (skip !== false) t.comment(`open-webui: ${skip}`)

interface Event { type: string, data: { description: string, done: boolean } }
interface ToolRun { result: string, events: Event[] }
interface FilterRun { body: { messages: Array<{ role: string, content: string }> }, events: Event[] }

/** Runs a harness with one JSON job on stdin; resolves its JSON answer. */
async function py<T> (script: string, job: object): Promise<T> {
  const child = spawn('python3', [join(root, 'test/fixtures/open-webui', script)], { stdio: ['pipe', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '', PYTHONDONTWRITEBYTECODE: '1' } })
  let out = ''
  let err = ''
  child.stdout.on('data', (c: Buffer) => { out += c.toString('utf8') })
  child.stderr.on('data', (c: Buffer) => { err += c.toString('utf8') })
  child.stdin.end(JSON.stringify(job))
  const code = await new Promise<number | null>(resolve => child.on('close', resolve))
  if (code !== 0) throw new Error(`${script} exited ${code}: ${err.slice(-2000)}`)
  return JSON.parse(out) as T
}

async function freePort (): Promise<number> {
  const srv = createServer()
  await new Promise<void>(resolve => srv.listen(0, '127.0.0.1', resolve))
  const port = (srv.address() as { port: number }).port
  await new Promise(resolve => srv.close(resolve))
  return port
}

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
const descriptions = (run: { events: Event[] }): string[] => run.events.map(e => e.data.description)
const content = (run: FilterRun, i: number): string => {
  const message = run.body.messages[i]
  if (message === undefined) throw new Error(`no message ${i} in ${JSON.stringify(run.body)}`)
  return message.content
}

const pythonSkip = spawnSync('python3', ['--version']).status === 0 ? false : 'SKIPPED: python3 is not installed'

t.test('every key and token valve of the tool and the filter is a password input in Open WebUI\'s forms', { skip: pythonSkip }, async t => {
  interface Field { cls: string, name: string, input: { type?: string } | null }
  for (const module of [TOOL, FILTER]) {
    const { pydantic, fields } = await py<{ pydantic: boolean, fields: Field[] }>('valve_schema.py', { module })
    t.comment(`${module}: valves read from ${pydantic ? 'the pydantic JSON schema Open WebUI renders' : 'the Field declarations (no pydantic here)'}`)
    const secrets = fields.filter(f => /KEY|TOKEN|SECRET|PASSWORD/.test(f.name))
    t.ok(secrets.some(f => f.name === 'API_KEY' && f.cls.endsWith('.Valves')), `${module}: has an API_KEY valve`)
    for (const f of secrets) t.equal(f.input?.type, 'password', `${f.cls}.${f.name} is masked`)
    for (const f of fields.filter(f => !secrets.includes(f))) t.not(f.input?.type, 'password', `${f.cls}.${f.name} stays readable`)
  }
})

t.test('Open WebUI tool and filter against a live server', { skip }, async t => {
  const prefix = `t-${randomBytes(4).toString('hex')}`
  const work = await mkdtemp(join(tmpdir(), 'owui-'))
  t.teardown(async () => { await removeByPrefix(prefix); await rm(work, { recursive: true, force: true }) })
  const dataDir = join(work, 'data')
  // PUBLIC_BASE_URL is the address the links are fetched from, so the server listens on a known port.
  const port = await freePort()
  const PUBLIC = `http://127.0.0.1:${port}`
  const app = await build(t, { MCP_API_KEY: KEY, SANDBOX_PREFIX: prefix, DATA_DIR: dataDir, PUBLIC_BASE_URL: PUBLIC, PROGRESS_INTERVAL_SECONDS: '1' },
    config => entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools', 'prompt-render', 'uploads', 'tier-http', 'files', 'preview']))
  await app.listen({ port, host: '127.0.0.1' })
  const valves = { CUBICLE_URL: PUBLIC, API_KEY: KEY }

  // A file as Open WebUI stores and describes it (reserved-args docs: __files__[i].file.path).
  const fileId = randomUUID()
  const stored = join(work, 'owui-data/uploads', `${fileId}_notes.txt`)
  await mkdir(join(work, 'owui-data/uploads'), { recursive: true })
  await writeFile(stored, 'first version\n')
  const files = [
    { type: 'file', id: fileId, url: `/api/v1/files/${fileId}`, name: 'notes.txt', status: 'uploaded', size: 14, itemId: randomUUID(), file: { id: fileId, filename: 'notes.txt', path: stored, meta: { name: 'notes.txt', content_type: 'text/plain', size: 14 } } },
    { type: 'collection', id: randomUUID(), name: 'Team docs', collection_names: ['x'] } // a knowledge base: not a file to sync
  ]
  const chatA = randomUUID()
  const chatB = randomUUID()
  const user = { id: randomUUID(), email: 'zoe@example.com', name: 'Zoë Müller', role: 'user' }
  const meta = (chat: string): object => ({ chat_id: chat, message_id: randomUUID(), session_id: 'sess-1', user_id: user.id })
  const hostFile = join(dataDir, 'chats', chatKey(chatA), 'uploads', 'notes.txt')
  const show = 'hostname; cat /mnt/user-data/uploads/notes.txt; printenv GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL'

  await t.test('a command runs in the chat\'s sandbox, with the attached file and the user\'s identity', async t => {
    const [run] = await py<[ToolRun]>('run_tool.py', { module: TOOL, valves, calls: [{ tool: 'bash_tool', args: { command: show, description: 'check' }, user, metadata: meta(chatA), files }] })
    t.match(run.result, /^sandbox\nfirst version\nZoë Müller\nzoe@example\.com\n/, 'ran in a sandbox; upload, X-User-Name (percent-encoded) and X-User-Email arrived')
    t.ok(descriptions(run).includes('Uploaded notes.txt to /mnt/user-data/uploads'), 'status event for the upload')
    t.same(run.events.at(-1)?.data, { description: 'bash_tool: done', done: true, hidden: false }, 'the last status event is done')
    t.equal(await readFile(hostFile, 'utf8'), 'first version\n', 'the upload is in the chat\'s uploads dir')
  })

  await t.test('an unchanged file is not uploaded again (manifest MD5, in a fresh Tools instance); a changed one is', async t => {
    const before = (await stat(hostFile)).ino
    const [same] = await py<[ToolRun]>('run_tool.py', { module: TOOL, valves, calls: [{ tool: 'bash_tool', args: { command: 'cat /mnt/user-data/uploads/notes.txt', description: 'read' }, user, metadata: meta(chatA), files }] })
    t.equal(same.result, 'first version\n')
    t.ok(descriptions(same).includes('Attached files are up to date in the sandbox'))
    t.equal((await stat(hostFile)).ino, before, 'the server file was not rewritten (uploads replace by rename)')
    await writeFile(stored, 'second version\n')
    const [changed] = await py<[ToolRun]>('run_tool.py', { module: TOOL, valves, calls: [{ tool: 'bash_tool', args: { command: 'cat /mnt/user-data/uploads/notes.txt', description: 'read' }, user, metadata: meta(chatA), files }] })
    t.equal(changed.result, 'second version\n')
    t.ok(descriptions(changed).includes('Uploaded notes.txt to /mnt/user-data/uploads'))
  })

  await t.test('two chat ids get two sandboxes', async t => {
    const runs = await py<[ToolRun, ToolRun, ToolRun]>('run_tool.py', {
      module: TOOL,
      valves,
      calls: [chatA, chatB, chatA].map(chat => ({ tool: 'bash_tool', args: { command: 'test -f ~/.who || od -An -N8 -tx1 /dev/urandom | tr -d " \\n" > ~/.who; printf "%s " "$CHAT_ID"; cat ~/.who', description: 'who' }, user, metadata: meta(chat) }))
    })
    const [a, b, a2] = runs.map(r => r.result.trim())
    t.equal(a?.split(' ')[0], chatA, 'chat A\'s sandbox')
    t.equal(b?.split(' ')[0], chatB, 'chat B\'s sandbox')
    t.not(a, b, 'another chat, another sandbox')
    t.equal(a2, a, 'the same chat comes back to its sandbox (its home kept what the first call wrote)')
  })

  await t.test('progress of a long command becomes status events; stopping the chat kills the command', async t => {
    const [slow, stopped, after] = await py<[ToolRun, ToolRun & { cancelled?: boolean }, ToolRun]>('run_tool.py', {
      module: TOOL,
      valves,
      calls: [
        { tool: 'bash_tool', args: { command: 'echo step one; sleep 3; echo finished', description: 'waiting' }, user, metadata: meta(chatB) },
        { tool: 'bash_tool', args: { command: 'sleep 47; touch /tmp/survived', description: 'long' }, user, metadata: meta(chatB), cancel_after: 3 },
        { tool: 'bash_tool', args: { command: 'sleep 1; pgrep -fx "sleep 47" || echo gone; ls /tmp/survived 2>&1 || true', description: 'check' }, user, metadata: meta(chatB) }
      ]
    })
    t.equal(slow.result, 'step one\nfinished\n')
    t.ok(descriptions(slow).some(d => /^Running: waiting \(\d+s\) → step one$/.test(d)), 'server progress (SSE) shown as a status')
    t.ok(stopped.cancelled, 'the cancelled call ends at once')
    t.match(after.result, /^gone\n.*No such file/s, 'notifications/cancelled made the server kill the command')
  })

  let filesBase = ''
  await t.test('create_file, str_replace and view work on the chat\'s files', async t => {
    const [created, replaced, viewed] = await py<[ToolRun, ToolRun, ToolRun]>('run_tool.py', {
      module: TOOL,
      valves,
      calls: [
        { tool: 'create_file', args: { description: 'report', path: '/mnt/user-data/outputs/report.md', file_text: '# Report\nstatus: draft\n' }, user, metadata: meta(chatA) },
        { tool: 'str_replace', args: { description: 'finish', path: '/mnt/user-data/outputs/report.md', old_str: 'draft', new_str: 'final' }, user, metadata: meta(chatA) },
        { tool: 'view', args: { description: 'check', path: '/mnt/user-data/outputs/report.md', view_range: [2, -1] }, user, metadata: meta(chatA) }
      ]
    })
    t.match(created.result, /^Successfully created \/mnt\/user-data\/outputs\/report\.md/)
    const link = new RegExp(`${escape(PUBLIC)}/files/${chatA}/~v1\\.f\\.[0-9]+\\.[A-Za-z0-9_-]{22}`).exec(created.result)
    t.ok(link, 'the result carries the public link')
    filesBase = link?.[0] ?? ''
    t.match(replaced.result, /^Successfully replaced text in \/mnt\/user-data\/outputs\/report\.md/)
    t.equal(viewed.result.split('\n')[0], '     2\tstatus: final', 'view_range reached the server as a list')
  })

  await t.test('errors are clear texts for the model, never exceptions', async t => {
    const [wrong] = await py<[ToolRun]>('run_tool.py', {
      module: TOOL,
      valves: { ...valves, API_KEY: 'wrong-key-0123456789abcdef-0123456789' },
      calls: [{ tool: 'bash_tool', args: { command: 'echo never', description: 'x' }, user, metadata: meta(chatA), files }]
    })
    t.match(wrong.result, /^Error: the Cubicle server refused the API key \(HTTP 401\)\. Set the tool's API_KEY valve/, 'wrong key')
    t.match(wrong.result, /Note: attached files were not synced: the Cubicle server refused the credentials \(HTTP 403: .*\)\. Check the tool's API_KEY valve\.\]$/, 'and the sync says why it did not happen')
    const [down] = await py<[ToolRun]>('run_tool.py', { module: TOOL, valves: { ...valves, CUBICLE_URL: `http://127.0.0.1:${await freePort()}` }, calls: [{ tool: 'bash_tool', args: { command: 'true' }, user, metadata: meta(chatA) }] })
    t.match(down.result, /^Error: cannot reach the Cubicle server at http:\/\/127\.0\.0\.1:\d+\/mcp/, 'server unreachable')
    const [nochat] = await py<[ToolRun]>('run_tool.py', { module: TOOL, valves, calls: [{ tool: 'bash_tool', args: { command: 'true' }, user, metadata: { chat_id: '' } }] })
    t.match(nochat.result, /^Error: no chat id/, 'a direct API call without a chat')
    const [bad] = await py<[ToolRun]>('run_tool.py', { module: TOOL, valves, calls: [{ tool: 'bash_tool', args: { command: 'true' }, user, metadata: { chat_id: 'a/b' } }] })
    t.match(bad.result, /^Error: invalid chat id/, 'the server\'s own error text comes through')
  })

  await t.test('the filter injects the chat\'s guide once, with working links, and adds the buttons once', async t => {
    const linked = `The report: ${filesBase}/report.md`
    const inletBody = { model: 'm', messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'hi' }], metadata: meta(chatA) }
    const outletBody = (messages: object[]): object => ({ model: 'm', chat_id: chatA, id: randomUUID(), session_id: 'sess-1', messages })
    const answer = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: linked }, { role: 'assistant', content: 'No files here.' }]
    const [first, again, fresh, out1] = await py<[FilterRun, FilterRun, FilterRun, FilterRun]>('run_filter.py', {
      module: FILTER,
      valves,
      steps: [
        { kind: 'inlet', body: inletBody, user, metadata: meta(chatA) },
        { kind: 'inlet', body: { ...inletBody, messages: [{ role: 'system', content: `You are terse.\n\n${BEGIN}\nold guide\n<!-- cubicle:sandbox-guide:end -->` }, { role: 'user', content: 'next' }] }, user, metadata: meta(chatA) },
        { kind: 'inlet', body: { ...inletBody, messages: [{ role: 'user', content: 'hi' }] }, user, metadata: meta(chatA) },
        { kind: 'outlet', body: outletBody(answer), user, metadata: meta(chatA) }
      ]
    })
    const system = content(first, 0)
    t.match(system, /^You are terse\.\n\n<!-- cubicle:sandbox-guide:begin -->\n<!-- This is the contents of \/home\/assistant\/README\.md/, 'the user\'s system prompt stays first')
    t.match(system, chatA)
    t.equal(content(again, 0).split(BEGIN).length, 2, 'an earlier block is replaced, not stacked')
    t.notMatch(content(again, 0), 'old guide')
    t.same(fresh.body.messages.map(m => m.role), ['system', 'user'], 'a system message is added when there was none')
    const base = new RegExp(`${escape(PUBLIC)}/files/${chatA}/~v1\\.f\\.[0-9]+\\.[A-Za-z0-9_-]{22}`).exec(system)?.[0] ?? ''
    t.equal(base, filesBase, 'the guide names the chat\'s files base')
    const file = await fetch(`${base}/report.md`)
    t.equal(await file.text(), '# Report\nstatus: final\n', 'a link built as the guide says downloads the file')

    const [withButtons, plain] = [content(out1, 1), content(out1, 2)]
    t.equal(plain, 'No files here.', 'answers without a file link are left alone')
    t.ok(withButtons.startsWith(linked) && withButtons.includes(BUTTONS))
    const preview = /\[🖥️ Open preview\]\(([^)]+)\)/.exec(withButtons)?.[1] ?? ''
    const archive = /\[📦 Download all files \(\.zip\)\]\(([^)]+)\)/.exec(withButtons)?.[1] ?? ''
    t.match(preview, new RegExp(`^${escape(PUBLIC)}/preview/${chatA}\\?t=v1\\.c\\.`), 'preview button with the control token')
    t.equal(archive, `${filesBase}/archive`)
    const page = await fetch(preview)
    t.equal(page.status, 200)
    t.match(await page.text(), /<html/i)
    const zip = await fetch(archive)
    t.equal(zip.status, 200)
    t.equal(zip.headers.get('content-type'), 'application/zip')
    t.equal(Buffer.from(await zip.arrayBuffer()).subarray(0, 2).toString('latin1'), 'PK')

    // A second outlet (Open WebUI may run it again, e.g. on regenerate) and a fresh instance that never saw an inlet.
    const [twice] = await py<[FilterRun]>('run_filter.py', { module: FILTER, valves, steps: [{ kind: 'outlet', body: outletBody(out1.body.messages), user, metadata: meta(chatA) }] })
    t.same(twice.body.messages, out1.body.messages, 'the buttons are added once')
    t.equal(content(twice, 1).split(BUTTONS).length, 2)
  })

  await t.test('the filter keeps the chat working when the server refuses it', async t => {
    const body = { messages: [{ role: 'system', content: `Mine.\n\n${BEGIN}\nstale\n<!-- cubicle:sandbox-guide:end -->` }, { role: 'user', content: 'hi' }] }
    const [run] = await py<[FilterRun]>('run_filter.py', { module: FILTER, valves: { ...valves, API_KEY: 'wrong' }, steps: [{ kind: 'inlet', body, user, metadata: meta(chatA) }] })
    t.equal(content(run, 0), 'Mine.', 'a stale guide is removed, the user\'s prompt kept')
    t.match(run.events[0]?.data.description, /^Cubicle: sandbox guide not loaded: GET \/system-prompt answered HTTP 401 \(check the filter's API_KEY valve\)/)
  })
})
