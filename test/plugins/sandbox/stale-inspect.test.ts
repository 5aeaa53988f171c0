/*
 * A state check (after an exec ended with a signal status) whose inspect was answered before a stop()
 * that ended while it was in flight must not bring the old "running" back: the next exec would then find
 * the sandbox stopped, take it for stopped behind the server's back and start it again, although it was
 * stopped on purpose (docs/engine.md#the-core-inside). Over the in-memory engine.
 */
import t from 'tap'
import pino from 'pino'
import { parseOptions } from '../../../core/config.js'
import { createMemoryEngine } from '../../../plugins/sandbox-memory/memory-engine.js'
import { SandboxOptions } from '../../../plugins/sandbox/schemas.js'
import { createSandboxService } from '../../../plugins/sandbox/service.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'
import { tempDir } from '../../fixtures/temp-dir.js'

const IMAGE = 'cubicle-memory-test:latest'

t.test('a stop that ends while a state check is in flight wins over the check\'s stale answer', async t => {
  const dir = await tempDir(t, 'tstale')
  const engine = createMemoryEngine({ images: [IMAGE] })
  // When armed, the next inspect reads the sandbox running, then lets a stop() run to its end before it
  // answers. (Wrapped before the service is built: the core wraps the engine it is given.)
  const inspect = engine.inspect.bind(engine)
  let interpose = false
  let stopped = false
  engine.inspect = async idOrName => {
    const answer = await inspect(idOrName)
    if (interpose) {
      interpose = false
      await service.stop('stale-chat')
      stopped = true
    }
    return answer
  }
  const opts = parseOptions(SandboxOptions, { prefix: 'tstale', image: IMAGE, dataDir: dir, enableNetwork: false, agent: false, poolSize: 0 }, 'sandbox')
  const service = createSandboxService({ ...opts, storage: createChatStorage({ dataDir: dir }) }, engine, pino({ level: 'silent' }))
  t.teardown(async () => { await service.close() })
  await service.start()
  await service.ensure('stale-chat')

  interpose = true
  const r = await service.exec('stale-chat', ['sh', '-c', 'exit 137'])
  t.ok(stopped, 'the stop ran while the state check was in flight')
  t.equal(r.exitCode, null, 'a signal status of a sandbox that is not running any more is reported as null')
  t.equal((await service.status('stale-chat')).state, 'stopped', 'the stop is what the status says')
  await t.rejects(service.exec('stale-chat', ['true']), { code: 'SANDBOX_NOT_RUNNING' }, 'a sandbox stopped on purpose is not started by the next exec')
  await service.ensure('stale-chat')
  t.equal((await service.exec('stale-chat', ['sh', '-c', 'echo back'])).stdout.toString(), 'back\n')
})
