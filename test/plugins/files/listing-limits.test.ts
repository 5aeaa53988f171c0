/*
 * listing amplification. Parallel listings of a chat share one walk, walks across chats are
 * limited (429 with Retry-After when no slot frees up), and a walk is bounded by files examined and by time.
 */
import t from 'tap'
import type { Test } from 'tap'
import { mkdirSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { entry } from '../../../core/app.js'
import capabilities from '../../../plugins/capabilities/index.js'
import files from '../../../plugins/files/index.js'
import chatStorage from '../../../plugins/chat-storage/index.js'
import type { FilesOptions } from '../../../plugins/files/schemas.js'
import { build } from '../../helper.js'
import { bearer, filesApp, KEY, type FilesApp } from './setup.js'

/** filesApp with extra plugin options (the env-driven helper cannot pass them). */
async function appWith (t: Test, options: Partial<FilesOptions>): Promise<FilesApp> {
  const first = await filesApp(t)
  await first.app.close()
  const app = await build(t, { DATA_DIR: first.dataDir, MCP_API_KEY: KEY }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: 86400, publicBaseUrl: config.publicBaseUrl }),
    entry(chatStorage, { dataDir: config.DATA_DIR }),
    entry(files, { ...options })
  ])
  return { ...first, app }
}

function manyFiles (dir: string, count: number): void {
  mkdirSync(dir, { recursive: true })
  for (let i = 0; i < count; i++) writeFileSync(join(dir, `f${i}.txt`), '')
}

const list = async (app: FilesApp['app'], chat: string) => await app.inject({ url: `/api/outputs/${chat}`, headers: bearer(KEY) })

t.test('parallel listings of one chat share one walk; a later one sees new files after the cache time', async t => {
  // A cache time long enough that, at load 15+ (a full run), 30 parallel listings and the next one fit in it.
  const { app, put } = await appWith(t, { listingCacheMs: 2000 })
  put('chat-a', 'first.txt', '1')
  const answers = await Promise.all(Array.from({ length: 30 }, async () => await list(app, 'chat-a')))
  t.ok(answers.every(r => r.statusCode === 200))
  t.equal(new Set(answers.map(r => r.body)).size, 1, 'one body (same walk timestamp) for all 30')
  t.equal(answers[0]?.headers['content-type'], 'application/json; charset=utf-8')
  const firstTimestamp = answers[0]?.json().timestamp as number
  put('chat-a', 'second.txt', '2')
  const cached = (await list(app, 'chat-a')).json()
  t.equal(cached.timestamp, firstTimestamp, 'within the cache time the walk is reused')
  t.same(cached.files.map((f: { path: string }) => f.path), ['first.txt'])
  // After the cache time a listing walks again; on a loaded machine the first walk may finish (and its
  // cache time start) late, so the test asks again for a while instead of once after a fixed pause.
  await sleep(2050)
  let fresh = (await list(app, 'chat-a')).json()
  for (const until = Date.now() + 5000; fresh.timestamp === firstTimestamp && Date.now() < until;) {
    await sleep(100)
    fresh = (await list(app, 'chat-a')).json()
  }
  t.ok(fresh.timestamp > firstTimestamp)
  t.same(fresh.files.map((f: { path: string }) => f.path).sort(), ['first.txt', 'second.txt'], 'the new file shows up after the cache time')
})

t.test('a walk examines at most listingScanLimit files and says so; the result is the newest of those', async t => {
  const { app, put } = await appWith(t, { listingScanLimit: 10, listingMaxEntries: 4 })
  for (let i = 0; i < 30; i++) put('chat-a', `d/f${String(i).padStart(2, '0')}.txt`, 'x', 1_700_000_000 + ((i * 7) % 30))
  const body = (await list(app, 'chat-a')).json()
  t.equal(body.truncated, true)
  t.equal(body.total, 4)
  const mtimes = body.files.map((f: { modified: number }) => f.modified)
  t.same(mtimes, [...mtimes].sort((a, b) => b - a), 'newest first')
})

t.test('walks are limited across chats: no slot within listingWaitMs answers 429 server_busy with Retry-After', async t => {
  const { app, put, outputs } = await appWith(t, { listingMaxWalks: 1, listingWaitMs: 0, listingCacheMs: 0 })
  manyFiles(outputs('big'), 10_000)
  put('small', 'a.txt', 'a')
  let bigDone = false
  const big = list(app, 'big').then(r => { bigDone = true; return r })
  await sleep(30)
  const busy = await list(app, 'small')
  t.notOk(bigDone, 'the big walk was still running when the small listing asked (else this test proves nothing)')
  t.equal(busy.statusCode, 429)
  t.equal(busy.headers['retry-after'], '2')
  t.same(busy.json(), { error: 'server_busy', detail: 'the server is busy with other listings; retry in 2 s', retry_after: 2 })
  t.equal((await big).statusCode, 200)
  t.equal((await list(app, 'small')).statusCode, 200, 'the slot is free once the walk has finished')
})

t.test('a walk past walkBudgetMs answers with what it found, truncated', async t => {
  const { app, outputs } = await appWith(t, { walkBudgetMs: 1, listingMaxEntries: 50_000 })
  manyFiles(outputs('big'), 5_000)
  const body = (await list(app, 'big')).json()
  t.equal(body.truncated, true)
  t.ok(body.total < 5_000, `cut short after ${body.total} files`)
})

t.test('an archive whose walk outlasts walkBudgetMs is a 413, and its slot comes back', async t => {
  const { app, outputs } = await appWith(t, { walkBudgetMs: 1 })
  manyFiles(outputs('big'), 5_000)
  const res = await app.inject({ url: '/files/big/archive', headers: bearer(KEY) })
  t.equal(res.statusCode, 413)
  t.same(res.json(), { error: 'archive_too_large', detail: 'the outputs exceed the archive limit: listing the outputs took longer than 0.001 s' })
  await sleep(100)
  t.equal((await app.inject({ url: '/files/big/archive', headers: bearer(KEY) })).statusCode, 413, 'not 429: the slot was released')
})

t.test('mtime ties and sub-second mtimes keep a stable newest-first order', async t => {
  const { app, put, outputs } = await appWith(t, { listingMaxEntries: 3 })
  for (const name of ['c.txt', 'a.txt', 'b.txt', 'd.txt']) put('chat-a', name, 'x', 1_700_000_000)
  utimesSync(join(outputs('chat-a'), 'd.txt'), 1_700_000_000.5, 1_700_000_000.5)
  const body = (await list(app, 'chat-a')).json()
  t.same(body.files.map((f: { path: string }) => f.path), ['d.txt', 'a.txt', 'b.txt'])
  t.equal(body.truncated, true)
})
