import t from 'tap'
import Fastify from 'fastify'
import { chatKey } from '../../../core/chat-id.js'
import { createReadmeHooks } from '../../../plugins/tier-readme/service.js'
import type { PromptService, RenderRequest } from '../../../plugins/prompt-render/types.js'
import type { SandboxInfo, SandboxService } from '../../../plugins/sandbox/types.js'

const PATH = '/home/assistant/README.md'

/** A renderer whose text the test controls, counting renders. */
function fakePrompts (): { prompts: PromptService, set: (text: string) => void, renders: () => number } {
  let text = 'v1'
  let n = 0
  const prompts = {
    async render (req: RenderRequest) { n++; return `${text} for ${req.chatId ?? '-'} ${req.email ?? ''}` }
  } as unknown as PromptService
  return { prompts, set: v => { text = v }, renders: () => n }
}

/** Records putFile calls; `fail` makes them reject. */
function fakeSandbox (): { sandbox: SandboxService, writes: Array<{ chatId: string, path: string, content: string, opts: unknown }>, fail: (on: boolean) => void } {
  const writes: Array<{ chatId: string, path: string, content: string, opts: unknown }> = []
  let failing = false
  const sandbox = {
    async putFile (chatId: string, path: string, content: Buffer | string, opts: unknown) {
      await new Promise(resolve => setTimeout(resolve, 5))
      if (failing) throw new Error('docker archive API said no')
      writes.push({ chatId, path, content: content.toString(), opts })
    }
  } as unknown as SandboxService
  return { sandbox, writes, fail: on => { failing = on } }
}

const box = (chatId: string): SandboxInfo => ({ chatId, chatKey: chatKey(chatId), sandboxId: 'x', name: 'x', createdAt: '' })
const user = (email?: string) => ({ ...(email !== undefined && { email }), emailRejected: false, mcpServers: [], credentials: {} })

function setup (checkIntervalMs = 60000) {
  let clock = 1_000_000
  const p = fakePrompts()
  const s = fakeSandbox()
  const lines: Array<Record<string, unknown>> = []
  const log = Fastify({ logger: { level: 'warn', stream: { write: (l: string) => { lines.push(JSON.parse(l) as Record<string, unknown>) } } } }).log
  const hooks = createReadmeHooks({ sandbox: s.sandbox, prompts: p.prompts, log, now: () => clock }, { path: PATH, checkIntervalMs, maxChats: 100 })
  return { hook: hooks.ensure, start: hooks.start, p, s, lines, tick: (ms: number) => { clock += ms } }
}

t.test('a started sandbox gets the README as root:root 0644', async t => {
  const { hook, s } = setup()
  await hook(box('c1'), { started: true, user: user('a@b.c') })
  t.same(s.writes, [{ chatId: 'c1', path: PATH, content: 'v1 for c1 a@b.c', opts: { mode: 0o644, uid: 0, gid: 0 } }])
})

t.test('every start writes again, even when the text is unchanged', async t => {
  const { hook, s } = setup()
  await hook(box('c1'), { started: true })
  await hook(box('c1'), { started: true })
  t.equal(s.writes.length, 2)
})

t.test('calls within the window neither render nor write; after it, only a changed text is written', async t => {
  const { hook, p, s, tick } = setup(60000)
  await hook(box('c1'), { started: true })
  const renders = p.renders()
  for (let i = 0; i < 5; i++) await hook(box('c1'), { started: false })
  t.equal(p.renders(), renders, 'no render inside the window')
  t.equal(s.writes.length, 1)
  tick(61000)
  await hook(box('c1'), { started: false })
  t.equal(p.renders(), renders + 1, 'checked once after the window')
  t.equal(s.writes.length, 1, 'same text: not rewritten')
  p.set('v2')
  await hook(box('c1'), { started: false })
  t.equal(s.writes.length, 1, 'still inside the new window')
  tick(61000)
  await hook(box('c1'), { started: false })
  t.equal(s.writes.length, 2)
  t.equal(s.writes[1]?.content, 'v2 for c1 ')
})

t.test('a different user is checked at once and rewritten', async t => {
  const { hook, s } = setup()
  await hook(box('c1'), { started: true, user: user('ann@x.io') })
  await hook(box('c1'), { started: false, user: user('bob@x.io') })
  t.equal(s.writes.at(-1)?.content, 'v1 for c1 bob@x.io')
  await hook(box('c1'), { started: false, user: user('bob@x.io') })
  t.equal(s.writes.length, 2)
})

t.test('concurrent calls of one chat share one write', async t => {
  const { hook, s } = setup()
  await Promise.all(Array.from({ length: 10 }, async () => { await hook(box('c1'), { started: false }) }))
  t.equal(s.writes.length, 1)
})

t.test('a failed write is logged at warn, never thrown, and retried after the window', async t => {
  const { hook, s, lines, tick } = setup()
  s.fail(true)
  await t.resolves(hook(box('c1'), { started: true }))
  t.match(lines, [{ level: 40, chatId: 'c1', msg: /README failed/ }])
  s.fail(false)
  await hook(box('c1'), { started: false })
  t.equal(s.writes.length, 0, 'not retried on every call')
  tick(61000)
  await hook(box('c1'), { started: false })
  t.equal(s.writes.length, 1)
})

/** The start hook's file writer (the engine's, through the core): records like putFile. */
function startFiles (s: ReturnType<typeof fakeSandbox>, chatId: string) {
  return { put: async (path: string, content: Buffer | string, opts?: unknown) => { await s.sandbox.putFile(chatId, path, content, opts as undefined) } }
}

t.test('the start hook writes the README while the sandbox starts, and the onEnsure hook of that start does not write it again', async t => {
  const { hook, start, s, p } = setup()
  await start({ chatId: 'c1', sandboxId: 'x' }, { user: user('a@b.c') }, startFiles(s, 'c1'))
  t.same(s.writes, [{ chatId: 'c1', path: PATH, content: 'v1 for c1 a@b.c', opts: { mode: 0o644, uid: 0, gid: 0 } }])
  const renders = p.renders()
  await hook(box('c1'), { started: true, user: user('a@b.c') })
  t.equal(s.writes.length, 1, 'one write per start')
  t.equal(p.renders(), renders, 'and no second render')
  // The next start without a start hook's write (a service without onStart, or another sandbox) writes from onEnsure.
  await hook(box('c1'), { started: true, user: user('a@b.c') })
  t.equal(s.writes.length, 2, 'a start the start hook did not write for is written by onEnsure')
  await start({ chatId: 'c1', sandboxId: 'other' }, { user: user('a@b.c') }, startFiles(s, 'c1'))
  await hook(box('c1'), { started: true, user: user('a@b.c') })
  t.equal(s.writes.length, 4, 'the mark is per sandbox: written into "other", so "x" is written again')
})

t.test('a failed start write leaves the write to the onEnsure hook', async t => {
  const { hook, start, s } = setup()
  s.fail(true)
  await t.rejects(start({ chatId: 'c1', sandboxId: 'x' }, {}, startFiles(s, 'c1')), /archive API/, 'the core logs it')
  s.fail(false)
  await hook(box('c1'), { started: true })
  t.equal(s.writes.length, 1)
  // A restart of the same sandbox whose start write failed: the earlier start's mark is gone.
  await start({ chatId: 'c1', sandboxId: 'x' }, {}, startFiles(s, 'c1'))
  s.fail(true)
  await t.rejects(start({ chatId: 'c1', sandboxId: 'x' }, {}, startFiles(s, 'c1')))
  s.fail(false)
  await hook(box('c1'), { started: true })
  t.equal(s.writes.length, 3, 'written again by onEnsure')
})
