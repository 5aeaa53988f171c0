import { setTimeout as sleep } from 'node:timers/promises'
import { performance } from 'node:perf_hooks'
import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp, entry } from '../../../core/app.js'
import { loadConfig } from '../../../core/config.js'
import capabilities from '../../../plugins/capabilities/index.js'
import promptRender from '../../../plugins/prompt-render/index.js'
import type { PromptRenderOptions } from '../../../plugins/prompt-render/schemas.js'

async function app (t: Test, opts: PromptRenderOptions = {}): Promise<FastifyInstance> {
  const config = loadConfig({ LOG_LEVEL: 'silent', PUBLIC_BASE_URL: 'http://cubicle.test' })
  const a = await buildApp(config, [
    entry(capabilities, { publicBaseUrl: config.publicBaseUrl }),
    entry(promptRender, opts)
  ], { logger: false })
  t.teardown(async () => { await a.close() })
  await a.ready()
  return a
}

t.test('a second render of the same (chat, email) is a cache hit', async t => {
  const a = await app(t)
  await a.prompts.render({ chatId: 'c1', email: 'a@b.c' })
  await a.prompts.render({ chatId: 'c1', email: 'a@b.c' })
  await a.prompts.render({ chatId: 'c1' })
  t.match(a.prompts.stats(), { hits: 1, misses: 2, renders: 2, entries: 2 })
})

t.test('20 concurrent misses for one key render once (single flight)', async t => {
  const a = await app(t)
  const texts = await Promise.all(Array.from({ length: 20 }, async () => await a.prompts.render({ chatId: 'c1' })))
  t.equal(new Set(texts).size, 1)
  t.match(a.prompts.stats(), { renders: 1, misses: 1, hits: 19 })
})

t.test('invalidate(chat) drops only that chat; invalidate() drops all', async t => {
  const a = await app(t)
  await a.prompts.render({ chatId: 'c1' })
  await a.prompts.render({ chatId: 'c1', email: 'x@y.z' })
  await a.prompts.render({ chatId: 'c2' })
  a.prompts.invalidate('c1')
  t.equal(a.prompts.stats().entries, 1)
  await a.prompts.render({ chatId: 'c2' })
  t.equal(a.prompts.stats().hits, 1, 'c2 still cached')
  await a.prompts.render({ chatId: 'c1' })
  t.equal(a.prompts.stats().misses, 4, 'c1 re-rendered')
  a.prompts.invalidate()
  t.equal(a.prompts.stats().entries, 0)
})

t.test('entries expire after the TTL', async t => {
  const a = await app(t, { ttlMs: 40 })
  await a.prompts.render({ chatId: 'c1' })
  await sleep(80)
  await a.prompts.render({ chatId: 'c1' })
  t.equal(a.prompts.stats().renders, 2)
})

t.test('the cache is bounded by maxEntries', async t => {
  const a = await app(t, { maxEntries: 10 })
  for (let i = 0; i < 100; i++) await a.prompts.render({ chatId: `c${i}` })
  // quick-lru keeps between maxSize and 2 × maxSize entries.
  t.ok(a.prompts.stats().entries <= 20, `entries ${a.prompts.stats().entries}`)
})

t.test('measured: render time and hit ratio under a realistic mix', async t => {
  const a = await app(t)
  const started = performance.now()
  // 50 chats × 2 users, each asked 20 times (tools/list, initialize, README checks …)
  for (let round = 0; round < 20; round++) {
    await Promise.all(Array.from({ length: 100 }, async (_, i) => await a.prompts.render({ chatId: `chat-${i % 50}`, email: `u${Math.floor(i / 50)}@example.com` })))
  }
  const elapsed = performance.now() - started
  const s = a.prompts.stats()
  t.comment(`renders=${s.renders} avgRenderMs=${s.avgRenderMs.toFixed(3)} maxRenderMs=${s.maxRenderMs.toFixed(3)} hitRatio=${s.hitRatio.toFixed(3)} total=${elapsed.toFixed(1)}ms for 2000 calls`)
  t.equal(s.renders, 100)
  t.equal(s.hitRatio, 0.95)
  t.ok(s.avgRenderMs < 20, 'a render takes well under 20 ms')
})
