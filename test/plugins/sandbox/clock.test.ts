/*
 * The sandbox core reads one clock, the one it is built with (plugins/sandbox/clock.ts,
 * docs/engine.md#the-core-inside): the prefix lease, a sandbox's creation label, meta.json, the idle
 * reaper and the maximum age all follow a clock that the test moves, over the in-memory engine, without
 * waiting on real time; the deadlines handed to the engine stay on real time, which the engine compares
 * them with.
 */
import t from 'tap'
import { readFile } from 'node:fs/promises'
import pino from 'pino'
import { parseOptions } from '../../../core/config.js'
import { chatPaths } from '../../../core/chat-paths.js'
import { createMemoryEngine } from '../../../plugins/sandbox-memory/memory-engine.js'
import { clockWith } from '../../../plugins/sandbox/clock.js'
import { leaseName } from '../../../plugins/sandbox/prefix-lease.js'
import { SandboxOptions } from '../../../plugins/sandbox/schemas.js'
import { createSandboxService } from '../../../plugins/sandbox/service.js'
import type { StopReason } from '../../../plugins/sandbox/types.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'
import { tempDir } from '../../fixtures/temp-dir.js'

const IMAGE = 'cubicle-memory-test:latest'
/** Years away from the real clock: anything stamped with Date.now() would show. */
const START = Date.parse('2031-03-04T05:06:07Z')

t.test('lease, creation label, meta.json, idle pause and stop and max age follow the clock the core is given', async t => {
  const dir = await tempDir(t, 'tclock')
  let now = START
  const engine = createMemoryEngine({ images: [IMAGE] })
  /** what each exec's deadline left, measured on real time when the engine got it */
  const left: number[] = []
  const exec = engine.exec.bind(engine)
  engine.exec = async (id, spec) => {
    if (spec.deadline !== undefined) left.push(spec.deadline - Date.now())
    return await exec(id, spec)
  }
  const opts = parseOptions(SandboxOptions, {
    prefix: 'tclock', image: IMAGE, dataDir: dir, enableNetwork: false, agent: false, poolSize: 0, idleTimeoutS: 60, pausedTimeoutS: 120, maxAgeHours: 2
  }, 'sandbox')
  const service = createSandboxService({ ...opts, storage: createChatStorage({ dataDir: dir }) }, engine, pino({ level: 'silent' }), clockWith(() => now))
  t.teardown(async () => { await service.close() })
  const stops: StopReason[] = []
  service.onStop((_chat, reason) => { stops.push(reason) })
  await service.start()

  const other = await engine.acquireLease(leaseName('tclock'), { id: 'other', host: 'elsewhere', pid: 1, startedAt: '' }, { labels: {}, image: IMAGE, now })
  t.match(other, { acquired: false, current: { renewedAt: START, holder: { startedAt: '2031-03-04T05:06:07Z' } } }, 'the prefix lease is taken at the clock\'s time')

  await service.ensure('clock-chat')
  const { sandboxId } = await service.status('clock-chat')
  const details = await engine.inspect(sandboxId ?? '')
  t.equal(details?.labels['cu.created-at'], '20310304T050607Z', 'the creation label')
  const meta = JSON.parse(await readFile(chatPaths(dir, 'clock-chat').meta, 'utf8')) as Record<string, unknown>
  t.match(meta, { created_at: '2031-03-04T05:06:07.000Z', last_active_at: '2031-03-04T05:06:07.000Z' }, 'meta.json')

  const r = await service.exec('clock-chat', ['echo', 'hi'], { timeoutMs: 30_000 })
  t.equal(r.stdout.toString(), 'hi\n')
  t.ok(left.length > 0 && left.every(ms => ms > 0 && ms <= 30_000), `the engine's deadlines are on real time (${left.join(', ')} ms left), not in 2031`)

  now += 59_000
  await service.reap()
  t.same(stops, [], 'idle for 59 s of the clock: kept')
  now += 2_000
  await service.reap()
  t.same(stops, ['paused'], 'idle for 61 s of the clock: paused, with no real time spent')
  t.match(await service.status('clock-chat'), { state: 'running', paused: true })
  now += 119_000
  await service.reap()
  t.same(stops, ['paused'], 'paused for 119 s of the clock: kept')
  now += 2_000
  await service.reap()
  t.same(stops, ['paused', 'idle'], 'paused for 121 s of the clock (CONTAINER_PAUSED_TIMEOUT 120): stopped')
  t.equal((await service.status('clock-chat')).state, 'stopped')

  await service.ensure('clock-chat')
  t.equal((await service.status('clock-chat')).state, 'running', 'started again at the next call')
  now += 2 * 3600_000
  await service.reap()
  t.same(stops, ['paused', 'idle', 'max-age'], 'older than SANDBOX_MAX_AGE_HOURS by the clock: removed')
  t.equal((await service.status('clock-chat')).state, 'absent')
})
