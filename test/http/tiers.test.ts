// The tier plugins over HTTP and MCP, and switching them on and off, one group per part, all in one test process (docs/testing.md#the-unit-tiers-time).
import { symlink } from 'node:fs/promises'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { listen, TEST_API_KEY } from '../helper.js'
import { tiersManifest, memorySandboxes, uploadFile, type MemorySandboxes, TIERS, type TierName } from '../fixtures/tiers-app.js'
import { randomBytes } from 'node:crypto'
import { ErrorCode, McpError, ResourceListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { chatPaths } from '../../core/chat-paths.js'
import { connect } from '../fixtures/mcp-probe.js'
import { tempDir } from '../fixtures/temp-dir.js'

t.test('tiers-http', async t => {
  const KEY = TEST_API_KEY

  async function serve (t: Test, env: Record<string, string> = {}): Promise<{ url: string, app: Awaited<ReturnType<typeof listen>>['app'] }> {
    const dataDir = await tempDir(t, 'tiers-http')
    const { app, url } = await listen(t, { DATA_DIR: dataDir, ...env }, tiersManifest())
    return { app, url }
  }

  async function get (url: string, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<{ status: number, text: string, headers: Headers }> {
    const res = await fetch(`${url}${path}`, { method, headers })
    return { status: res.status, text: await res.text(), headers: res.headers }
  }

  const chatOf = (text: string): string | undefined => /Chat id: `([^`]+)`/.exec(text)?.[1]

  t.test('chat id precedence: X-Chat-Id > X-OpenWebUI-Chat-Id > chat_id > file_base_url', async t => {
    const { url } = await serve(t)
    const all = '/system-prompt?chat_id=from-query&file_base_url=' + encodeURIComponent('https://elsewhere.example/files/from-url')
    t.equal(chatOf((await get(url, all, { 'X-Chat-Id': 'from-header', 'X-OpenWebUI-Chat-Id': 'from-alias' })).text), 'from-header')
    t.equal(chatOf((await get(url, all, { 'X-OpenWebUI-Chat-Id': 'from-alias' })).text), 'from-alias')
    t.equal(chatOf((await get(url, all, { 'X-Chat-Id': '   ' })).text), 'from-query', 'an empty header counts as absent')
    t.equal(chatOf((await get(url, all)).text), 'from-query')
    const legacy = await get(url, '/system-prompt?file_base_url=' + encodeURIComponent('https://elsewhere.example/files/From-Url/'))
    t.equal(chatOf(legacy.text), 'from-url', 'last non-empty segment, normalised')
    t.match(legacy.text, 'http://cubicle.test/files/from-url')
    t.notMatch(legacy.text, 'elsewhere.example', 'URLs always use PUBLIC_BASE_URL')
  })

  t.test('file_base_url ending in a capability token names the chat before it', async t => {
    const { url, app } = await serve(t, { MCP_API_KEY: KEY })
    const base = app.links.filesBase('tok-chat')
    t.match(base, /~v1\.f\./)
    const res = await get(url, `/system-prompt?file_base_url=${encodeURIComponent(base)}`, { authorization: `Bearer ${KEY}` })
    t.equal(chatOf(res.text), 'tok-chat')
  })

  t.test('no chat at all returns the template with its three placeholders, as text/plain', async t => {
    const { url } = await serve(t)
    const res = await get(url, '/system-prompt?archive_url=ignored')
    t.equal(res.status, 200)
    t.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8')
    t.equal(res.headers.get('cache-control'), 'no-store')
    t.equal(res.headers.get('x-public-base-url'), 'http://cubicle.test')
    t.equal(res.headers.get('x-files-base-url'), null)
    for (const p of ['{file_base_url}', '{archive_url}', '{chat_id}']) t.match(res.text, p)
  })

  t.test('a resolved chat gets the link headers', async t => {
    const { url } = await serve(t, { PUBLIC_BASE_URL: 'https://cubicle.example.com/' })
    const res = await get(url, '/system-prompt?chat_id=chat-a')
    t.equal(res.headers.get('x-public-base-url'), 'https://cubicle.example.com')
    t.equal(res.headers.get('x-files-base-url'), 'https://cubicle.example.com/files/chat-a')
    t.equal(res.headers.get('x-archive-url'), 'https://cubicle.example.com/files/chat-a/archive')
    t.equal(res.headers.get('x-preview-url'), 'https://cubicle.example.com/preview/chat-a')
  })

  t.test('invalid chat ids from header, query or file_base_url are 400 invalid_chat_id', async t => {
    const { url } = await serve(t)
    for (const [path, headers] of [
      ['/system-prompt', { 'X-Chat-Id': 'a b' }],
      ['/system-prompt?chat_id=..x', {}],
      [`/system-prompt?file_base_url=${encodeURIComponent('https://x.example/files/a.b')}`, {}]
    ] as Array<[string, Record<string, string>]>) {
      const res = await get(url, path, headers)
      t.equal(res.status, 400, path)
      t.equal(JSON.parse(res.text).error, 'invalid_chat_id')
    }
  })

  t.test('protected mode: a chat needs the bearer key, the legacy template does not', async t => {
    const { url, app } = await serve(t, { MCP_API_KEY: KEY })
    const anon = await get(url, '/system-prompt?chat_id=chat-a')
    t.equal(anon.status, 401)
    t.equal(anon.headers.get('www-authenticate'), 'Bearer')
    const token = await get(url, '/system-prompt?chat_id=chat-a', { authorization: `Bearer ${app.links.token('chat-a', 'c') as string}` })
    t.equal(token.status, 401, 'capability tokens are not accepted here')
    t.equal((await get(url, '/system-prompt?chat_id=bad.chat')).status, 400, 'invalid chat before auth')
    const ok = await get(url, '/system-prompt?chat_id=chat-a', { authorization: `Bearer ${KEY}` })
    t.equal(ok.status, 200)
    t.match(ok.headers.get('x-files-base-url'), /\/files\/chat-a\/~v1\.f\./)
    t.match(ok.headers.get('x-preview-url'), /\/preview\/chat-a\?t=v1\.c\./, 'the preview header carries a control token')
    t.match(ok.text, /files\/chat-a\/~v1\.f\./, 'the prompt carries the files token')
    t.equal((await get(url, '/system-prompt')).status, 200)
  })

  t.test('user email from headers or query changes the render; invalid ones are ignored', async t => {
    const { url } = await serve(t)
    t.match((await get(url, '/system-prompt?chat_id=c1&user_email=q%40example.com')).text, 'User: q@example.com')
    t.match((await get(url, '/system-prompt?chat_id=c1&user_email=q%40example.com', { 'X-OpenWebUI-User-Email': 'h@example.com' })).text, 'User: h@example.com')
    t.notMatch((await get(url, '/system-prompt?chat_id=c1&user_email=not-an-email')).text, 'User:')
  })

  t.test('SINGLE_USER_MODE=true renders default for any chat given', async t => {
    const { url } = await serve(t, { SINGLE_USER_MODE: 'true' })
    const res = await get(url, '/system-prompt?chat_id=other')
    t.equal(chatOf(res.text), 'default')
    t.equal(res.headers.get('x-files-base-url'), 'http://cubicle.test/files/default')
  })

  t.test('HEAD works, other methods are 405 with Allow', async t => {
    const { url } = await serve(t)
    const head = await get(url, '/system-prompt?chat_id=c1', {}, 'HEAD')
    t.equal(head.status, 200)
    t.equal(head.headers.get('x-files-base-url'), 'http://cubicle.test/files/c1')
    const post = await get(url, '/system-prompt', {}, 'POST')
    t.equal(post.status, 405)
    t.match(post.headers.get('allow'), /GET/)
  })

  t.test('/skill-list lists one line per built-in skill; /skill-mounts is {} ; both need the key', async t => {
    const { url } = await serve(t, { MCP_API_KEY: KEY })
    t.equal((await get(url, '/skill-list')).status, 401)
    t.equal((await get(url, '/skill-mounts?user_email=a%40b.c')).status, 401)
    const list = await get(url, '/skill-list?user_email=a%40b.c&format=claude', { authorization: `Bearer ${KEY}` })
    t.equal(list.status, 200)
    t.equal(list.headers.get('content-type'), 'text/plain; charset=utf-8')
    const lines = list.text.trimEnd().split('\n')
    t.same(lines.map(l => /^- ([a-z0-9-]+): /.exec(l)?.[1]), ['browser', 'describe-image', 'doc-coauthoring', 'docx', 'file-reading', 'file-sharing', 'frontend-design', 'job', 'pdf', 'pdf-reading', 'pptx', 'skill-creator', 'webapp-testing', 'xlsx'])
    t.match(lines[3], /^- docx: \/mnt\/skills\/public\/docx\/SKILL\.md - Create, read and edit Word documents/)
    for (const line of lines) t.ok(line.split(' - ').slice(1).join(' - ').length <= 120, 'description cut to 120 chars')
    const mounts = await get(url, '/skill-mounts?user_email=a%40b.c', { authorization: `Bearer ${KEY}` })
    t.equal(mounts.status, 200)
    t.same(JSON.parse(mounts.text), {})
  })
})

t.test('tiers-mcp', async t => {
  async function serve (t: Test, env: Record<string, string> = {}, log: MemorySandboxes = memorySandboxes()): Promise<{ url: string, dataDir: string, app: Awaited<ReturnType<typeof listen>>['app'] }> {
    const dataDir = await tempDir(t, 'tiers')
    const { app, url } = await listen(t, { DATA_DIR: dataDir, ...env }, tiersManifest({ sandboxes: log }))
    return { app, url, dataDir }
  }

  /** Upload resources only: the list also carries the user's skills (skill://…, user-skills.test.ts). */
  const files = <R extends { uri: string }>(list: { resources: R[] }): R[] => list.resources.filter(r => r.uri.startsWith('file://'))

  /** The text or blob of a resources/read content item. */
  const field = (item: unknown, key: 'text' | 'blob'): string | undefined => (item as Record<string, string | undefined> | undefined)?.[key]

  async function mcpError (p: Promise<unknown>): Promise<{ code?: number, message?: string } | 'resolved'> {
    return await p.then(() => 'resolved' as const, (err: unknown) => ({ code: (err as McpError).code, message: (err as Error).message }))
  }

  t.test('tier 1: tools/list shows the README hint on bash_tool and view', async t => {
    const { url } = await serve(t)
    const client = await connect(t, url, { 'X-Chat-Id': 'chat-a' })
    const { tools } = await client.listTools()
    const bash = tools.find(x => x.name === 'bash_tool')
    const view = tools.find(x => x.name === 'view')
    t.match(bash?.description, /README\.md/)
    t.match(bash?.description, /\/home\/assistant/)
    t.match(view?.description, /README\.md/)
    t.match(bash?.description, /^Fake bash_tool for the tier tests\./, 'the original description stays first')
  })

  t.test('tier 4: instructions are the chat\'s rendered prompt, differ by chat and are stable in the window', async t => {
    const { url } = await serve(t)
    const a1 = (await connect(t, url, { 'X-Chat-Id': 'chat-a', 'X-User-Email': 'ann@example.com' })).getInstructions()
    const a2 = (await connect(t, url, { 'X-OpenWebUI-Chat-Id': 'CHAT-A', 'X-OpenWebUI-User-Email': 'ann@example.com' })).getInstructions()
    const b = (await connect(t, url, { 'X-Chat-Id': 'chat-b' })).getInstructions()
    t.match(a1, /^<!--.*This is the contents of \/home\/assistant\/README\.md/)
    t.match(a1, 'http://cubicle.test/files/chat-a')
    t.match(a1, 'ann@example.com')
    t.equal(a1, a2, 'byte-identical for the same chat and user (aliases, case)')
    t.match(b, 'http://cubicle.test/files/chat-b')
    t.not(a1, b)
    t.ok(Buffer.byteLength(a1 ?? '') < 32768)
  })

  t.test('tier 4 in lenient mode without a header renders for default', async t => {
    const { url } = await serve(t)
    t.match((await connect(t, url)).getInstructions(), 'Chat id: `default`')
  })

  t.test('tier 3 answers in strict mode without a chat and for an invalid chat id', async t => {
    const { url } = await serve(t, { SINGLE_USER_MODE: 'false' })
    for (const headers of [{}, { 'X-Chat-Id': 'bad/chat' }] as Array<Record<string, string>>) {
      const text = (await connect(t, url, headers)).getInstructions() ?? ''
      t.match(text, 'README.md')
      t.match(text, 'resources/list')
      t.notMatch(text, 'prompts/get')
      t.notMatch(text, 'This is the contents of')
    }
  })

  t.test('SINGLE_USER_MODE=true: instructions point at default whatever the header says', async t => {
    const { url } = await serve(t, { SINGLE_USER_MODE: 'true' })
    const text = (await connect(t, url, { 'X-Chat-Id': 'chat-z' })).getInstructions()
    t.match(text, 'http://cubicle.test/files/default')
    t.notMatch(text, 'chat-z')
  })

  t.test('tier 5: each chat lists and reads only its own uploads', async t => {
    const { url, dataDir } = await serve(t)
    const binary = randomBytes(2048)
    t.equal(await uploadFile(url, 'chat-a', 'notes.txt', 'hello ü'), 200)
    t.equal(await uploadFile(url, 'chat-a', 'sub/nested.json', '{"a":1}'), 200)
    t.equal(await uploadFile(url, 'chat-a', 'img/pic one.png', binary), 200)
    t.equal(await uploadFile(url, 'chat-b', 'secret.txt', 'B only'), 200)
    await symlink('/etc/passwd', join(chatPaths(dataDir, 'chat-a').uploads, 'passwd'))
    const a = await connect(t, url, { 'X-Chat-Id': 'chat-a' })
    const b = await connect(t, url, { 'X-Chat-Id': 'chat-b' })
    const resources = files(await a.listResources())
    t.same(resources.map(r => r.uri), [
      'file://uploads/chat-a/img%2Fpic%20one.png', 'file://uploads/chat-a/notes.txt', 'file://uploads/chat-a/sub%2Fnested.json'
    ], 'only chat-a\'s regular files, symlink skipped')
    t.match(resources.find(r => r.name === 'sub/nested.json'), { mimeType: 'application/json', size: 7, description: /7 bytes.*application\/json/ })
    t.same(files(await b.listResources()).map(r => r.name), ['secret.txt'])

    const text = await a.readResource({ uri: 'file://uploads/chat-a/notes.txt' })
    t.same(text.contents, [{ uri: 'file://uploads/chat-a/notes.txt', mimeType: 'text/plain', text: 'hello ü' }])
    const json = await a.readResource({ uri: 'file://uploads/chat-a/sub%2Fnested.json' })
    t.equal(field(json.contents[0], 'text'), '{"a":1}')
    const png = await a.readResource({ uri: 'file://uploads/chat-a/img%2Fpic%20one.png' })
    t.equal(png.contents[0]?.mimeType, 'image/png')
    t.equal(field(png.contents[0], 'text'), undefined)
    t.ok(Buffer.from(field(png.contents[0], 'blob') ?? '', 'base64').equals(binary), 'binary comes back as base64 blob')

    const across = await mcpError(a.readResource({ uri: 'file://uploads/chat-b/secret.txt' }))
    const missing = await mcpError(a.readResource({ uri: 'file://uploads/chat-a/nope.txt' }))
    t.match(across, { code: -32602 }, 'another chat\'s existing file is not found')
    t.same(across, { ...missing as object, message: (missing as { message: string }).message.replace('nope.txt', 'secret.txt').replace('chat-a', 'chat-b') }, 'indistinguishable from a missing file')
    t.match(await mcpError(a.readResource({ uri: 'file://uploads/chat-a/passwd' })), { code: -32602 }, 'a symlink is never read')
    t.match(await mcpError(a.readResource({ uri: 'file://uploads/chat-a/..%2F..%2F..%2Fetc%2Fpasswd' })), { code: -32602 })
  })

  t.test('tier 5: no chat in strict mode lists nothing and reads nothing', async t => {
    const { url } = await serve(t, { SINGLE_USER_MODE: 'false' })
    t.equal(await uploadFile(url, 'chat-a', 'a.txt', 'x'), 200)
    const client = await connect(t, url)
    t.same((await client.listResources()).resources, [])
    t.match(await mcpError(client.readResource({ uri: 'file://uploads/chat-a/a.txt' })), { code: -32602 })
  })

  t.test('tier 5: a file over RESOURCE_READ_MAX_BYTES is -32603 suggesting view or bash_tool', async t => {
    const { url } = await serve(t, { RESOURCE_READ_MAX_BYTES: '1k' })
    t.equal(await uploadFile(url, 'chat-a', 'big.log', 'x'.repeat(2048)), 200)
    const client = await connect(t, url, { 'X-Chat-Id': 'chat-a' })
    const err = await mcpError(client.readResource({ uri: 'file://uploads/chat-a/big.log' }))
    t.match(err, { code: ErrorCode.InternalError, message: /view.*bash_tool|bash_tool.*view/ })
    t.notMatch(err, { message: /MCP error.*MCP error/ }, 'the wire message is the text as written: the client adds its prefix once')
  })

  t.test('tier 5: an upload sends resources/list_changed on the chat\'s GET stream only', async t => {
    const { url } = await serve(t)
    const a = await connect(t, url, { 'X-Chat-Id': 'chat-a' })
    const b = await connect(t, url, { 'X-Chat-Id': 'chat-b' })
    let gotA = 0
    let gotB = 0
    a.setNotificationHandler(ResourceListChangedNotificationSchema, async () => { gotA++ })
    b.setNotificationHandler(ResourceListChangedNotificationSchema, async () => { gotB++ })
    // The SDK client opens its GET stream right after initialize; give it a moment to be subscribed.
    await new Promise(resolve => setTimeout(resolve, 300))
    t.equal(await uploadFile(url, 'chat-a', 'new.txt', 'n'), 200)
    const deadline = Date.now() + 3000
    while (gotA === 0 && Date.now() < deadline) await new Promise(resolve => setTimeout(resolve, 25))
    t.equal(gotA, 1, 'chat-a was told its resources changed')
    t.equal(gotB, 0, 'chat-b heard nothing')
    t.same(files(await a.listResources()).map(r => r.name), ['new.txt'])
  })

  t.test('tier 5 under load: 20 concurrent uploads and resources/list calls', async t => {
    const { url } = await serve(t)
    const client = await connect(t, url, { 'X-Chat-Id': 'chat-a' })
    const results = await Promise.all([
      ...Array.from({ length: 20 }, async (_, i) => await uploadFile(url, 'chat-a', `load/f${String(i).padStart(2, '0')}.txt`, `file ${i}`)),
      ...Array.from({ length: 20 }, async () => files(await client.listResources()).length)
    ])
    t.same(results.slice(0, 20), Array(20).fill(200))
    for (const n of results.slice(20)) t.ok(n >= 0 && n <= 20, 'every list is a consistent subset')
    const resources = files(await client.listResources())
    t.equal(resources.length, 20)
    const read = await Promise.all(resources.map(async r => await client.readResource({ uri: r.uri })))
    t.same(read.map(r => field(r.contents[0], 'text')), Array.from({ length: 20 }, (_, i) => `file ${i}`))
  })
})

t.test('tiers-toggle', async t => {
/** What each tier's consumer can observe, measured from the outside. */
  async function observe (t: Test, without?: TierName): Promise<Record<TierName, boolean>> {
    const dataDir = await tempDir(t, 'tiers-toggle')
    const log = memorySandboxes()
    const { url } = await listen(t, { DATA_DIR: dataDir }, tiersManifest({ sandboxes: log, ...(without !== undefined && { without }) }))
    const chat = await connect(t, url, { 'X-Chat-Id': 'chat-a' })
    const invalid = await connect(t, url, { 'X-Chat-Id': 'not/valid' })
    const { tools } = await chat.listTools()
    await chat.callTool({ name: 'bash_tool', arguments: { description: 'touch the sandbox' } })
    t.equal(await uploadFile(url, 'chat-a', 'u.txt', 'u'), 200, 'uploads work regardless')
    const prompt = await fetch(`${url}/system-prompt?chat_id=chat-a`)
    await prompt.arrayBuffer()
    return {
      'tier-tool-descriptions': (tools.find(x => x.name === 'bash_tool')?.description ?? '').includes('README.md'),
      'tier-readme': (await log.file('chat-a', '/home/assistant/README.md') ?? '').includes('This is the contents of /home/assistant/README.md'),
      'tier-static-instructions': (invalid.getInstructions() ?? '').includes('resources/list'),
      'tier-dynamic-instructions': (chat.getInstructions() ?? '').includes('This is the contents of'),
      'tier-resources': (await chat.listResources()).resources.some(r => r.uri === 'file://uploads/chat-a/u.txt'),
      'tier-http': prompt.status === 200
    }
  }

  const allOn = Object.fromEntries(TIERS.map(name => [name, true])) as Record<TierName, boolean>

  t.test('with all six tiers every channel carries the prompt', async t => {
    t.same(await observe(t), allOn)
  })

  for (const tier of TIERS) {
    t.test(`removing ${tier} silences only that channel`, async t => {
      t.same(await observe(t, tier), { ...allOn, [tier]: false })
    })
  }
})
