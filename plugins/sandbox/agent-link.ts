import type { Duplex, Readable } from 'node:stream'
import { SANDBOX_USER } from './sandbox-spec.js'
import type { CoreBase } from './context.js'

/*
 * Where the agent's frames come from: the engine's connection to an agent its sandbox started itself
 * (SandboxEngine.agentChannel, docs/engine.md#the-agent-socket), or the agent started through a
 * long-lived exec with stdin attached (the fallback, and engines without a channel). agent-client.ts
 * reads either the same way: strict parsing, the same byte budget.
 */

/**
 * The agent's command line. The interpreter is a root-owned copy of python3 that `assistant` may run
 * but not read (mode 0711, sandbox-image/Dockerfile): the kernel makes a process that executes an
 * unreadable file non-dumpable from its first instruction, so no other `assistant` process can
 * ptrace it or open its /proc/<pid>/fd or mem, not even while python starts. -I -S: no PYTHON*
 * variable, no user or site directory, no .pth file, no script directory on sys.path; every module
 * comes from the root-owned standard library. An image without this interpreter is treated as one
 * without the agent (docker exec).
 */
export const AGENT_ARGV = ['/usr/lib/cubicle-agent/python3', '-I', '-S', '/opt/cubicle-agent/cubicle-agent.py']

/** What a connection writes frames to and closes: the socket, or the agent process's stdin. */
export interface AgentPipe { write: (frame: Buffer) => unknown, destroy: () => unknown }

export interface AgentLink {
  stdout: Readable
  /** the exec's stderr (an engine's error about the command, python's traceback); none on a socket */
  stderr: Readable | null
  pipe: AgentPipe
  /** settles when the link is gone */
  ended: Promise<unknown>
  /** the exec stream: an image without the agent is recognised by its errors */
  exec: boolean
}

/** The engine's connection to the sandbox's own agent, or null (none now: the caller execs the agent). */
export async function socketLink (base: Pick<CoreBase, 'engine' | 'log'>, sandboxId: string, owner: string): Promise<AgentLink | null> {
  if (base.engine.agentChannel === undefined) return null
  let sock: Duplex | null
  try { sock = await base.engine.agentChannel(sandboxId) } catch (err) {
    base.log.debug({ chat: owner, err }, 'no agent socket; starting the agent over exec')
    return null
  }
  if (sock === null) return null
  const s = sock
  s.on('error', () => { s.destroy() })
  return {
    stdout: s,
    stderr: null,
    pipe: { write: frame => s.write(frame), destroy: () => { s.destroy() } },
    ended: new Promise(resolve => { s.once('close', resolve) }),
    exec: false
  }
}

/** The agent started through exec; throws when the engine could not start it. */
export async function execLink (base: Pick<CoreBase, 'engine'>, sandboxId: string): Promise<AgentLink> {
  const proc = await base.engine.exec(sandboxId, { argv: AGENT_ARGV, user: SANDBOX_USER, cwd: '/', env: [], stdin: true })
  const stdin = proc.stdin
  stdin?.on('error', () => { proc.close() })
  return {
    stdout: proc.stdout,
    stderr: proc.stderr,
    pipe: { write: frame => stdin?.write(frame), destroy: () => { proc.close() } },
    ended: proc.exit,
    exec: true
  }
}
