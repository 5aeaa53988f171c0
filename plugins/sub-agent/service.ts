import type { FastifyBaseLogger } from 'fastify'
import QuickLRU from 'quick-lru'
import type { SubagentCli } from '../../core/config.js'
import type { SandboxService } from '../sandbox/types.js'
import { isCliCommand } from './cli.js'
import { SUB_AGENT_BAD_PID, SUB_AGENT_SANDBOX_NOT_RUNNING } from './errors.js'
import type { Probe } from '../../core/sandbox-probe.js'
import { cliProcesses, killArgv, parsePs, PS_ARGV, validPid } from './processes.js'
import { parseSessions, sessionsArgv } from './sessions.js'
import type { ActiveRun, CliProcess, SubAgentService } from './types.js'

export interface ServiceDeps {
  sandbox: SandboxService
  probe: Probe
  log: FastifyBaseLogger
}

export interface ServiceOptions {
  cli: SubagentCli
  maxRunsPerChat: number
  processesCacheMs: number
  probeTimeoutMs: number
}

/** The per-chat run registry behind the cap of concurrent runs (excess calls fail at once). */
export interface RunRegistry {
  /** Registers a run, or returns undefined when the chat is at its cap. The function releases it. */
  start (chatId: string, run: ActiveRun): (() => void) | undefined
  list (chatId: string): ActiveRun[]
}

export function createRunRegistry (maxPerChat: number): RunRegistry {
  const runs = new Map<string, Map<string, ActiveRun>>()
  return {
    start (chatId, run) {
      let mine = runs.get(chatId)
      if ((mine?.size ?? 0) >= maxPerChat) return undefined
      if (mine === undefined) runs.set(chatId, mine = new Map())
      mine.set(run.runId, run)
      return () => {
        mine.delete(run.runId)
        if (mine.size === 0 && runs.get(chatId) === mine) runs.delete(chatId)
      }
    },
    list: chatId => [...(runs.get(chatId)?.values() ?? [])]
  }
}

type Listed = CliProcess & { args: string }

export function createSubAgentService (deps: ServiceDeps, opts: ServiceOptions, runs: RunRegistry): SubAgentService {
  const { sandbox, probe, log } = deps
  const cache = new QuickLRU<string, Promise<Listed[]>>({ maxSize: 1000, maxAge: Math.max(1, opts.processesCacheMs) })

  const running = async (chatId: string): Promise<boolean> => (await sandbox.status(chatId)).state === 'running'
  /** A probe whose failure because the sandbox stopped meanwhile reads as "nothing there". */
  const tryProbe = async (chatId: string, argv: string[], maxBytes: number, timeoutMs = opts.probeTimeoutMs): Promise<string | null> => {
    try {
      return (await probe(chatId, argv, { timeoutMs, maxBytes })).toString('utf8')
    } catch (err) {
      if ((err as { code?: unknown }).code === 'SANDBOX_NOT_RUNNING') return null
      throw err
    }
  }
  const listProcesses = async (chatId: string): Promise<Listed[]> => {
    if (!await running(chatId)) return []
    const out = await tryProbe(chatId, PS_ARGV, 1024 * 1024)
    return out === null ? [] : cliProcesses(opts.cli, parsePs(out))
  }
  const cachedProcesses = async (chatId: string): Promise<Listed[]> => {
    let hit = cache.get(chatId)
    if (hit === undefined) {
      hit = listProcesses(chatId)
      cache.set(chatId, hit)
      hit.catch(() => cache.delete(chatId))
    }
    return await hit
  }

  return {
    cli: opts.cli,
    async sessions (chatId) {
      if (!await running(chatId)) return []
      const out = await tryProbe(chatId, sessionsArgv(opts.cli), 512 * 1024)
      return out === null ? [] : parseSessions(out)
    },
    async processes (chatId) {
      return (await cachedProcesses(chatId)).map(({ args: _args, ...p }) => p)
    },
    isCliProcess: cmdline => isCliCommand(opts.cli, cmdline),
    async kill (chatId, pid, killOpts = {}) {
      if (!validPid(pid)) throw new SUB_AGENT_BAD_PID('pid must be an integer from 2 to 4194304 (PID 1 is the sandbox\'s init and is never killed)')
      if (!await running(chatId)) throw new SUB_AGENT_SANDBOX_NOT_RUNNING()
      cache.delete(chatId)
      const target = (await cachedProcesses(chatId)).find(p => p.pid === pid)
      if (target === undefined) throw new SUB_AGENT_BAD_PID(`pid ${pid} is not a running ${opts.cli} process of this sandbox`)
      const graceMs = killOpts.graceMs ?? 2000
      const out = await tryProbe(chatId, killArgv(pid, target.args, graceMs), 256, graceMs + opts.probeTimeoutMs)
      cache.delete(chatId)
      if (out === null) throw new SUB_AGENT_SANDBOX_NOT_RUNNING()
      const word = out.trim()
      if (word !== 'term' && word !== 'kill') throw new SUB_AGENT_BAD_PID(`pid ${pid} is no longer a running ${opts.cli} process`)
      log.info({ chatId, pid, signal: word === 'kill' ? 'KILL' : 'TERM' }, 'sub-agent CLI process killed')
      return { killed: true, pid, signal: word === 'kill' ? 'KILL' : 'TERM' }
    },
    runs: chatId => runs.list(chatId)
  }
}
