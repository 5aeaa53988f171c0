/*
 * The internal-error paths the 100-chat load found, on a fake engine above the adapter:
 * a ready probe that runs out of time on a loaded engine, and a create conflict whose container is
 * not visible yet (a create the engine finished after our request gave up). Both answered
 * "internal error (ref …)"; a busy engine now means waiting, or a clear retriable error.
 */
import t from 'tap'
import pino from 'pino'
import { parseOptions } from '../../../core/config.js'
import type { ExecSpec, SandboxDetails, SandboxEngine } from '../../../plugins/sandbox/engine-types.js'
import { DockerError } from '../../../plugins/sandbox-docker/docker-error.js'
import { MemoryProcess } from '../../../plugins/sandbox-memory/memory-process.js'
import { Chats } from '../../../plugins/sandbox/chats.js'
import { systemClock } from '../../../plugins/sandbox/clock.js'
import { createBase, mapError, type CoreBase } from '../../../plugins/sandbox/context.js'
import { adoptable } from '../../../plugins/sandbox/sandbox-start.js'
import { createReadiness } from '../../../plugins/sandbox/readiness.js'
import { SandboxOptions } from '../../../plugins/sandbox/schemas.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'

const details = (name: string): SandboxDetails => ({
  ...{ id: 'cid-1', name, running: true, labels: {}, imageId: 'sha256:x', env: [], storage: { home: null, data: null, skills: null, extra: [] }, network: 'none' },
  ...{ addresses: {}, memory: 0, cpus: 0, pids: 0, tmpfs: {}, diskQuota: 0, oomKilled: false }
})

function registry (client: Partial<SandboxEngine>, extra: Record<string, unknown> = {}): CoreBase {
  const opts = parseOptions(SandboxOptions, { prefix: 'cu', dataDir: '/nonexistent', ...extra }, 'sandbox')
  return createBase({ ...opts, storage: createChatStorage({ dataDir: '/nonexistent' }) }, client as SandboxEngine, pino({ level: 'silent' }), systemClock)
}
const entryOf = (_reg: CoreBase, chatId: string): ReturnType<Chats['entryOf']> => new Chats('cu').entryOf(chatId)
const waitReady = async (reg: CoreBase, entry: ReturnType<Chats['entryOf']>): ReturnType<ReturnType<typeof createReadiness>['waitReady']> => await createReadiness(reg, { openAgent: async () => null }).waitReady(entry)

t.test('a ready probe that times out on a loaded engine is slow, not failed', async t => {
  let probes = 0
  const client: Partial<SandboxEngine> = {
    async exec (_id: string, spec: ExecSpec) {
      // The first probe hangs past its 5 s bound (a loaded engine); the second answers.
      const answers = ++probes > 1
      return new MemoryProcess({ argv: spec.argv, env: {}, cwd: '/', user: 'assistant', tty: false, stdin: false }, async io => {
        if (!answers) await io.killed
        io.out('1000\n1000\n')
        return 0
      })
    }
  }
  // readyTimeoutMs 1 s: before, the probe's 5 s time-out ended the wait with "did not become ready" (internal error).
  const reg = registry(client, { readyTimeoutMs: 1000, createTimeoutS: 30 })
  const entry = entryOf(reg, 'chat-ready')
  entry.sandboxId = 'cid-1'
  const ids = await waitReady(reg, entry)
  t.same(ids, { uid: 1000, gid: 1000 }, 'ready after the slow probe')
  t.equal(probes, 2)
})

t.test('a ready probe on a busy engine waits; the extension is capped by the create timeout', async t => {
  let probes = 0
  const client: Partial<SandboxEngine> = {
    async exec () { probes++; throw new DockerError('engine exec queue: waited 0.2 s behind 9 engine requests', undefined, false, undefined, true) }
  }
  const reg = registry(client, { readyTimeoutMs: 100, createTimeoutS: 1 })
  const entry = entryOf(reg, 'chat-busy')
  entry.sandboxId = 'cid-1'
  const t0 = Date.now()
  const err = await waitReady(reg, entry).then(() => null, (e: unknown) => e)
  t.ok(err instanceof DockerError && err.busy, 'a busy engine stays busy: never "did not become ready"')
  t.ok(Date.now() - t0 >= 900, 'it kept trying up to the create timeout')
  t.ok(probes > 1)
  const mapped = mapError(reg, err) as Error & { code: string }
  t.equal(mapped.code, 'SANDBOX_ENGINE_BUSY', 'the tool sees a retriable busy error, not an internal error')
})

t.test('a create conflict whose container is not visible yet is waited for and adopted', async t => {
  let inspects = 0
  const client: Partial<SandboxEngine> = {
    async inspect (name: string) { return ++inspects < 4 ? null : details(name) }
  }
  const reg = registry(client)
  const entry = entryOf(reg, 'chat-conflict')
  const c = await adoptable(reg, entry)
  t.equal(c.id, 'cid-1', 'adopted once the engine shows it')
  t.equal(inspects, 4)
})
