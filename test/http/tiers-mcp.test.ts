import { randomBytes } from 'node:crypto'
import { mkdtemp, rm, symlink } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { ErrorCode, McpError, ResourceListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { chatPaths } from '../../core/chat-paths.js'
import { listen } from '../helper.js'
import { connect } from '../fixtures/mcp-probe.js'
import { memorySandboxes, tiersManifest, uploadFile, type MemorySandboxes } from '../fixtures/tiers-app.js'

async function serve (t: Test, env: Record<string, string> = {}, log: MemorySandboxes = memorySandboxes()): Promise<{ url: string, dataDir: string, app: Awaited<ReturnType<typeof listen>>['app'] }> {
  const dataDir = await mkdtemp(join(tmpdir(), 'tiers-'))
  t.teardown(async () => { await rm(dataDir, { recursive: true, force: true }) })
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
