import type { FastifyBaseLogger } from 'fastify'
import type { SandboxService } from '../sandbox/types.js'
import type { CliProcess, CliSession, SubAgentService } from '../sub-agent/types.js'
import { TERMINAL_NO_SUB_AGENT } from './errors.js'

/*
 * The active CLI's sessions and processes for the routes of docs/contract.md#terminal, through the sub-agent
 * plugin's `subAgent` service (which owns the CLI knowledge: stores, ps matching, the TERM → KILL
 * script, the 2 s cache, bounded probes). The sub-agent plugin is optional: without it there is no
 * CLI to list (empty lists) and nothing to kill (404 `no_sub_agent`). Its errors reach the client as
 * they are: each carries its own wire code (`bad_pid`, `sandbox_not_running`; docs/errors.md).
 */

export interface CliControl {
  sessions (chatId: string): Promise<CliSession[]>
  processes (chatId: string): Promise<CliProcess[]>
  /** TERM, then KILL after the grace; a successful kill is activity (a person acted). */
  kill (chatId: string, pid: number): Promise<void>
}

/** A pid from a URL: decimal digits without sign or leading zero, at most 7, never 1 (the service checks the range). */
export function parsePid (raw: string): number | null {
  return /^[1-9][0-9]{0,6}$/.test(raw) && raw !== '1' ? Number(raw) : null
}

export function createCliControl (
  subAgent: () => SubAgentService | undefined,
  sandbox: Pick<SandboxService, 'touch'>,
  opts: { killGraceMs: number },
  log: FastifyBaseLogger
): CliControl {
  return {
    sessions: async chatId => await subAgent()?.sessions(chatId) ?? [],
    processes: async chatId => await subAgent()?.processes(chatId) ?? [],
    async kill (chatId, pid) {
      const service = subAgent()
      if (service === undefined) throw new TERMINAL_NO_SUB_AGENT()
      const { signal } = await service.kill(chatId, pid, { graceMs: opts.killGraceMs })
      sandbox.touch(chatId)
      log.info({ chatId, pid, signal }, 'CLI process killed from the terminal')
    }
  }
}
