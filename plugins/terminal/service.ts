import { randomBytes } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { SubagentCli } from '../../core/config.js'
import { isNamedFailure } from '../../core/errors.js'
import type { SandboxService } from '../sandbox/types.js'
import type { ChatStorageService } from '../chat-storage/types.js'
import {
  TERMINAL_CONTAINER_EXISTS, TERMINAL_NO_META, TERMINAL_NO_STOPPED_CONTAINER,
  TERMINAL_SANDBOX_NOT_RUNNING, TERMINAL_SANDBOX_TIMEOUT, TERMINAL_START_FAILED
} from './errors.js'
import { readMetaUser } from './meta.js'
import { createProbe, type Probe, type ProbeOptions } from '../../core/sandbox-probe.js'
import { ATTACH_ARGV, VIEWER_ENV, detachArgv } from './protocol.js'
import type { TerminalService, TerminalStatus } from './types.js'
import { openViewer, type EndReason, type Viewer } from './viewer.js'

export interface TerminalServiceOptions {
  cli: SubagentCli
  sessionEnv: Record<string, string>
  maxViewers: number
  highWaterBytes: number
  lowWaterBytes: number
  maxMessageBytes: number
  initTimeoutMs: number
  probeTimeoutMs: number
  maxProbes: number
}

/** What the plugin drives besides the public contract. */
export interface TerminalServiceInternals extends TerminalService {
  /** preClose: every viewer closes with 1001 and its tmux client is detached (bounded wait). */
  closeAll: (reason: string) => Promise<void>
}

const SESSION_SCRIPT = (create: string): string[] => ['/bin/sh', '-c',
  `tmux has-session -t =main 2>/dev/null && { echo exists; exit 0; }; ${create} && echo created`, 'cubicle-terminal']
const HAS_SESSION = ['/bin/sh', '-c', 'tmux has-session -t =main 2>/dev/null && echo yes || echo no']
const KILL_SESSION = ['/bin/sh', '-c', 'tmux kill-session -t =main 2>/dev/null; echo done']

export function createTerminalService (sandbox: SandboxService, storage: Pick<ChatStorageService, 'chatState'>, log: FastifyBaseLogger, opts: TerminalServiceOptions): TerminalServiceInternals {
  const { openStream } = sandbox
  if (openStream === undefined) throw new TypeError('terminal: the sandbox driver has no openStream()')
  const probe: Probe = createProbe(openStream, opts.maxProbes, 'terminal', () => new TERMINAL_SANDBOX_TIMEOUT())
  const viewers = new Map<string, Set<Viewer>>()
  const env = { ...opts.sessionEnv, SUBAGENT_CLI: opts.cli, TERM: 'xterm-256color', COLORTERM: 'truecolor', LANG: 'C.UTF-8' }
  const small = { timeoutMs: opts.probeTimeoutMs, maxBytes: 4096 }

  const running = async (chatId: string): Promise<boolean> => (await sandbox.status(chatId)).state === 'running'
  async function requireRunning (chatId: string): Promise<void> {
    if (!await running(chatId)) throw new TERMINAL_SANDBOX_NOT_RUNNING()
  }
  /** A probe that finds the sandbox gone reports "not running" instead of failing. */
  async function tryProbe (chatId: string, argv: string[], o: ProbeOptions = small): Promise<string | null> {
    try {
      return (await probe(chatId, argv, o)).toString('utf8')
    } catch (err) {
      if ((err as { code?: string }).code === 'SANDBOX_NOT_RUNNING') return null
      throw err
    }
  }
  /**
   * The tmux client was killed without a word: usually the sandbox is stopping (its processes die
   * before Docker reports the container as exited), so watch its state for a few seconds.
   */
  async function silentEnd (chatId: string): Promise<EndReason> {
    for (let i = 0; i < 12; i++) {
      if (!await running(chatId)) return 'stopped'
      await new Promise(resolve => setTimeout(resolve, 250))
    }
    return await hasSession(chatId) ? 'detached' : 'ended'
  }
  const hasSession = async (chatId: string): Promise<boolean> => (await tryProbe(chatId, HAS_SESSION))?.trim() === 'yes'

  async function startSandbox (chatId: string, user: Awaited<ReturnType<typeof readMetaUser>>): Promise<void> {
    try {
      await sandbox.ensure(chatId, user === null ? {} : { user })
    } catch (err) {
      // 5xx bodies carry no detail, so a failure a person can act on (capacity_reached, …) is answered as itself.
      if (isNamedFailure(err)) throw err
      const wrapped = new TERMINAL_START_FAILED((err as Error).message, { cause: err })
      const status = (err as { statusCode?: number }).statusCode ?? 500
      wrapped.statusCode = status >= 500 ? status : 500
      throw wrapped
    }
  }

  function attach (chatId: string, socket: Parameters<TerminalService['attach']>[1], viewerLog: FastifyBaseLogger): void {
    let set = viewers.get(chatId)
    if (set === undefined) { set = new Set(); viewers.set(chatId, set) }
    if (set.size >= opts.maxViewers) {
      // Lost a race with another handshake after the cap check: refuse on the socket instead.
      socket.close(1013, 'too many terminals open for this chat')
      return
    }
    const members = set
    const viewerId = randomBytes(12).toString('hex')
    const release = sandbox.lease(chatId, { kind: 'socket' })
    const viewer = openViewer(socket, {
      open: async () => await openStream!(chatId, ATTACH_ARGV, { tty: true, env: { ...env, [VIEWER_ENV]: viewerId }, user: 'assistant', cwd: '/home/assistant' }),
      detach: async () => { await probe(chatId, detachArgv(viewerId), small) },
      endReason: async () => await silentEnd(chatId),
      log: viewerLog,
      onGone: () => {
        release()
        members.delete(viewer)
        if (members.size === 0 && viewers.get(chatId) === members) viewers.delete(chatId)
      }
    }, {
      title: `${chatId} · tmux main`,
      highWaterBytes: opts.highWaterBytes,
      lowWaterBytes: opts.lowWaterBytes,
      maxMessageBytes: opts.maxMessageBytes,
      initTimeoutMs: opts.initTimeoutMs
    })
    members.add(viewer)
  }

  // A sandbox that goes away (max age, explicit stop, capacity) takes its terminals with it: 1001.
  sandbox.onStop?.((chatId, reason) => {
    for (const viewer of viewers.get(chatId) ?? []) void viewer.close(1001, 'sandbox stopped', { detach: false })
    if (viewers.has(chatId)) log.info({ chatId, reason }, 'terminals closed: the sandbox stopped')
  })

  const service: TerminalServiceInternals = {
    async status (chatId) {
      const s = await sandbox.status(chatId)
      const out: TerminalStatus = { active: false, running: s.state === 'running' }
      if (s.state === 'running') out.active = await hasSession(chatId)
      else if (s.state === 'stopped') out.container_stopped = true
      else if (s.metaExists) out.meta_exists = true
      return out
    },
    async start (chatId, { dangerousMode }) {
      await requireRunning(chatId)
      const create = `tmux -u new-session -d -s main -c /home/assistant${dangerousMode ? ' -e NO_AUTOSTART=1' : ''}`
      // This may start the tmux server, whose environment every later window inherits: the session env goes with it.
      const out = await tryProbe(chatId, SESSION_SCRIPT(create), { ...small, env })
      if (out === null) throw new TERMINAL_SANDBOX_NOT_RUNNING()
      sandbox.touch(chatId)
      return { started: out.trim() === 'created' }
    },
    async stop (chatId) {
      await requireRunning(chatId)
      if (await tryProbe(chatId, KILL_SESSION) === null) throw new TERMINAL_SANDBOX_NOT_RUNNING()
      sandbox.touch(chatId)
    },
    async restart (chatId) {
      if ((await sandbox.status(chatId)).state !== 'stopped') throw new TERMINAL_NO_STOPPED_CONTAINER()
      await startSandbox(chatId, await readMetaUser(storage, chatId))
    },
    async resurrect (chatId) {
      const s = await sandbox.status(chatId)
      if (s.state !== 'absent') throw new TERMINAL_CONTAINER_EXISTS()
      const user = s.metaExists ? await readMetaUser(storage, chatId) : null
      if (user === null) throw new TERMINAL_NO_META()
      await startSandbox(chatId, user)
      return { userEmail: user.email ?? null }
    },
    async heartbeat (chatId) {
      if (!await running(chatId)) return false
      sandbox.touch(chatId)
      return true
    },
    viewers: chatId => viewers.get(chatId)?.size ?? 0,
    attach,
    async closeAll (reason) {
      const all = [...viewers.values()].flatMap(set => [...set])
      await Promise.all(all.map(async v => { await v.close(1001, reason) }))
    }
  }
  return service
}
