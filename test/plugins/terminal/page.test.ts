import t from 'tap'
import type { Test } from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { entry } from '../../../core/app.js'
import capabilities from '../../../plugins/capabilities/index.js'
import preview from '../../../plugins/preview/index.js'
import { pageCsp } from '../../../plugins/preview/page.js'
import { build, TEST_API_KEY } from '../../helper.js'

const KEY = TEST_API_KEY

async function app (t: Test, key = KEY) {
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-term-page-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  return await build(t, { DATA_DIR: dataDir, MCP_API_KEY: key }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
    entry(preview, { frameAncestors: 'https://chat.example' })
  ])
}

const configOf = (html: string): Record<string, unknown> =>
  JSON.parse(/<script type="application\/json" id="config">(.*?)<\/script>/s.exec(html)?.[1] ?? 'null') as Record<string, unknown>

t.test('GET /terminal/{chat} serves the full-window terminal to a control token only', async t => {
  const a = await app(t)
  const control = a.links.token('chat-1', 'c') as string
  const res = await a.inject({ url: `/terminal/chat-1?t=${control}` })
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^text\/html/)
  const nonce = /script-src 'nonce-([A-Za-z0-9+/]{22}==)' /.exec(String(res.headers['content-security-policy']))?.[1] ?? ''
  t.equal(res.headers['content-security-policy'], pageCsp('https://chat.example', nonce), 'the preview page\'s CSP, with its own nonce')
  t.equal(res.headers['cache-control'], 'no-cache, no-store, must-revalidate')
  t.same(configOf(res.body), { chatId: 'chat-1', token: control })
  t.notMatch(res.body.replace(/<script type="application\/json"[^]*?<\/script>|<script type="module" nonce="[^"]+" src="[^"]+"><\/script>/g, ''), /<script/, 'no inline script')
  t.ok(nonce !== '' && res.body.includes(`<script type="module" nonce="${nonce}" src="../static/preview/terminal-page.js">`), 'the page\'s one module carries the nonce')
  const again = await a.inject({ url: `/terminal/chat-1?t=${control}` })
  t.not(again.headers['content-security-policy'], res.headers['content-security-policy'], 'a fresh nonce per response')
  t.equal((await a.inject({ url: `/terminal/chat-1?t=${a.links.token('chat-1', 'f') as string}` })).statusCode, 403, 'a files token never opens a shell')
  t.equal((await a.inject({ url: `/terminal/chat-1?t=${a.links.token('chat-2', 'c') as string}` })).statusCode, 403, 'another chat\'s token')
  t.equal((await a.inject({ url: '/terminal/chat-1' })).statusCode, 401)
  t.equal((await a.inject({ url: '/terminal/a..b' })).statusCode, 400)
  const byKey = await a.inject({ url: '/terminal/chat-1', headers: { authorization: `Bearer ${KEY}` } })
  t.same(configOf(byKey.body), { chatId: 'chat-1', token: control }, 'an API-key opener gets a control token, never the key')
  t.notMatch(byKey.body, new RegExp(KEY))
})

t.test('in open mode the page carries no token', async t => {
  const a = await app(t, '')
  const res = await a.inject({ url: '/terminal/chat-1' })
  t.same(configOf(res.body), { chatId: 'chat-1', token: null })
})

t.test('the preview page offers the Browser and Terminal views in full scope only', async t => {
  const a = await app(t)
  const full = await a.inject({ url: `/preview/chat-1?t=${a.links.token('chat-1', 'c') as string}` })
  t.match(full.body, /data-view="outputs"/)
  t.match(full.body, /data-view="browser"/)
  t.match(full.body, /data-view="terminal"/)
  t.match(full.body, /id="terminal-pane"/)
  t.equal(configOf(full.body).scope, 'full')
  const files = await a.inject({ url: `/preview/chat-1?t=${a.links.token('chat-1', 'f') as string}` })
  t.equal(configOf(files.body).scope, 'files', 'the app keeps the view switcher hidden for a files token')
})

t.test('xterm.js and its fit addon are vendored from npm; only the listed files are reachable', async t => {
  const a = await app(t)
  for (const path of ['/static/vendor/xterm/lib/xterm.mjs', '/static/vendor/xterm-fit/lib/addon-fit.mjs', '/static/preview/terminal-view.js', '/static/preview/terminal-client.js', '/static/preview/terminal-page.js']) {
    const res = await a.inject({ url: path })
    t.equal(res.statusCode, 200, path)
    t.match(res.headers['content-type'], /javascript/, `${path} is served as a module script`)
    t.equal(res.headers['x-content-type-options'], 'nosniff')
  }
  const css = await a.inject({ url: '/static/vendor/xterm/css/xterm.css' })
  t.equal(css.statusCode, 200)
  t.match(css.headers['content-type'], /text\/css/)
  for (const path of ['/static/vendor/xterm/package.json', '/static/vendor/xterm/lib/xterm.js', '/static/vendor/xterm/src/browser/Terminal.ts', '/static/vendor/xterm-fit/package.json']) {
    const res = await a.inject({ url: path })
    t.not(res.statusCode, 200, `${path} is not served`)
    t.notMatch(res.body, /xterm\.js authors|"name": "@xterm/, 'nothing of the package leaks')
  }
  const view = await a.inject({ url: '/static/preview/terminal-view.js' })
  t.match(view.body, /from '\.\.\/vendor\/xterm\/lib\/xterm\.mjs'/, 'the view imports the vendored copy, never a CDN')
  t.notMatch(view.body, /https?:\/\//)
})
