/*
 * Every engine call is logged at debug level with its duration (plugins/sandbox/engine-log.ts), through
 * the real sandbox core over the in-memory engine: targets and timings, never a command line, an
 * environment or file content.
 */
import t from 'tap'
import pino from 'pino'
import { parseOptions } from '../../../core/config.js'
import { createMemoryEngine } from '../../../plugins/sandbox-memory/memory-engine.js'
import { loggedEngine } from '../../../plugins/sandbox/engine-log.js'
import { SandboxOptions } from '../../../plugins/sandbox/schemas.js'
import { createSandboxService } from '../../../plugins/sandbox/service.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'
import { tempDir } from '../../fixtures/temp-dir.js'

const IMAGE = 'cubicle-memory-test:latest'

function capture (): { log: pino.Logger, lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = []
  const log = pino({ level: 'debug' }, { write: (l: string) => { lines.push(JSON.parse(l) as Record<string, unknown>) } })
  return { log, lines }
}

t.test('the core\'s engine calls are logged with their duration, target and outcome', async t => {
  const dir = await tempDir(t, 'tenglog')
  const { log, lines } = capture()
  const opts = parseOptions(SandboxOptions, { prefix: 'tenglog', image: IMAGE, dataDir: dir, enableNetwork: false, agent: false }, 'sandbox')
  const service = createSandboxService({ ...opts, storage: createChatStorage({ dataDir: dir }) }, createMemoryEngine({ images: [IMAGE] }), log)
  t.teardown(async () => { await service.close() })
  await service.ensure('log-chat')
  const r = await service.exec('log-chat', ['sh', '-c', 'echo "$SECRET_WORD"'], { env: { SECRET_WORD: 'hush-1234' } })
  t.equal(r.stdout.toString(), 'hush-1234\n', 'the command ran in the in-memory sandbox')
  const calls = lines.filter(l => l.msg === 'engine call')
  for (const name of ['create', 'start', 'exec']) {
    const hit = calls.find(l => l.call === name)
    t.ok(hit !== undefined, `${name} is logged`)
    t.type(hit?.ms, 'number', `${name}: with its duration in ms`)
  }
  t.ok(lines.some(l => l.msg === 'engine process ended' && l.code === 0), 'a process is logged when it ended, with its status')
  t.equal(lines.filter(l => String(l.msg).startsWith('engine ')).every(l => l.level === 20), true, 'all at debug level')
  const text = JSON.stringify(lines)
  t.notOk(text.includes('hush-1234') || text.includes('SECRET_WORD'), 'no environment or command line in the log')
})

t.test('a failing call is logged with its kind and still fails', async t => {
  const { log, lines } = capture()
  const engine = loggedEngine(createMemoryEngine({ reachable: false }), log)
  await t.rejects(engine.ping(), { name: 'MemoryEngineError', message: 'the in-memory engine is switched off' })
  t.match(lines, [{ msg: 'engine call failed', call: 'ping', unavailable: true, busy: false }])
  t.equal(engine.name, 'memory', 'plain fields pass through')
  const quiet = capture()
  const off = loggedEngine(createMemoryEngine(), pino({ level: 'info' }, { write: (l: string) => { quiet.lines.push(JSON.parse(l) as Record<string, unknown>) } }))
  await off.ping()
  t.same(quiet.lines, [], 'nothing above debug')
})
