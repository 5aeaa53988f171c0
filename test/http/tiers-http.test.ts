import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { listen, TEST_API_KEY } from '../helper.js'
import { tiersManifest } from '../fixtures/tiers-app.js'

const KEY = TEST_API_KEY

async function serve (t: Test, env: Record<string, string> = {}): Promise<{ url: string, app: Awaited<ReturnType<typeof listen>>['app'] }> {
  const dataDir = await mkdtemp(join(tmpdir(), 'tiers-http-'))
  t.teardown(async () => { await rm(dataDir, { recursive: true, force: true }) })
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
  t.same(lines.map(l => /^- ([a-z0-9-]+): /.exec(l)?.[1]), ['browser', 'describe-image', 'doc-coauthoring', 'docx', 'file-reading', 'file-sharing', 'frontend-design', 'pdf', 'pdf-reading', 'pptx', 'skill-creator', 'webapp-testing', 'xlsx'])
  t.match(lines[3], /^- docx: \/mnt\/skills\/public\/docx\/SKILL\.md - Create, read and edit Word documents/)
  for (const line of lines) t.ok(line.split(' - ').slice(1).join(' - ').length <= 120, 'description cut to 120 chars')
  const mounts = await get(url, '/skill-mounts?user_email=a%40b.c', { authorization: `Bearer ${KEY}` })
  t.equal(mounts.status, 200)
  t.same(JSON.parse(mounts.text), {})
})
