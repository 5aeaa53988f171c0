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

t.test('the ready probe through an agent that said its ids: one process (the stale file\'s rm), the ids from the HELLO', async t => { // docs/performance.md
  const { AgentConnection } = await import('../../../plugins/sandbox/agent-connection.js')
  const { decodeJson, encodeJson, T_EXIT, T_OUT, T_SPAWNED } = await import('../../../plugins/sandbox/agent-protocol.js')
  const argvs: unknown[] = []
  const connection = (ids: { uid: number, gid: number } | undefined, code: number): InstanceType<typeof AgentConnection> => {
    const conn = new AgentConnection({
      write: (frame: Buffer) => {
        argvs.push(decodeJson(frame.subarray(9)).argv)
        const id = frame.readUInt32BE(4)
        queueMicrotask(() => {
          conn.dispatch(id, T_SPAWNED, Buffer.alloc(0))
          if (ids === undefined) conn.dispatch(id, T_OUT, Buffer.from('1001\n1002\n'))
          conn.dispatch(id, T_EXIT, encodeJson(id, T_EXIT, { code }).subarray(9))
        })
        return true
      },
      destroy: () => {}
    } as never, () => {})
    conn.acksSpawn = true
    if (ids !== undefined) conn.ids = ids
    return conn
  }
  const probe = async (conn: InstanceType<typeof AgentConnection>): Promise<unknown> => {
    const reg = registry({ exec: async () => { throw new Error('no engine exec expected') } })
    const entry = entryOf(reg, 'chat-agent')
    entry.sandboxId = 'cid-1'
    return await createReadiness(reg, { openAgent: async () => conn }).waitReady(entry)
  }
  t.same(await probe(connection({ uid: 1000, gid: 1000 }, 0)), { uid: 1000, gid: 1000 })
  t.same(argvs.pop(), ['rm', '-f', '/home/assistant/.local/share/opencode/auth.json'], 'only the rm')
  t.same(await probe(connection({ uid: 1000, gid: 1000 }, 1)), { uid: 1000, gid: 1000 }, 'a failed rm is ignored, as in the shell probe')
  t.same(await probe(connection(undefined, 0)), { uid: 1001, gid: 1002 }, 'an older agent: the shell probe and its output')
  t.match(argvs.pop(), ['/bin/sh', '-c', /id -u; id -g$/])
})
