import { ByteBudget, readWithin } from './exec-stream.js'
import { execLink, socketLink, type AgentLink } from './agent-link.js'
import { AgentConnection, dropAgent, newAgentState, type AgentState } from './agent-connection.js'
import { decodeJson, FrameParser, ProtocolError, PROTOCOL_VERSION, T_HELLO } from './agent-protocol.js'
import type { Entry } from './chats.js'
import { describe, type CoreBase } from './context.js'

export { AGENT_ARGV, type AgentPipe } from './agent-link.js'

/*
 * The server's end of cubicle-agent: one long-lived stream per running sandbox, the engine's agent socket
 * when it has one (docs/engine.md#the-agent-socket), else an exec of AGENT_ARGV as assistant with stdin
 * attached (agent-link.ts); opened lazily by the first call that wants it and shared by every concurrent call
 * of the chat (requests are multiplexed by id). What the agent says is untrusted: frames are parsed
 * strictly (agent-protocol.ts); a frame for an id not in flight, or any other violation, closes the
 * stream; the stream is read within a byte budget (SANDBOX_AGENT_MAX_BYTES_PER_SECOND), so a flood meets
 * backpressure instead of server CPU. Calls in flight then end as if their exec stream was lost, and
 * later calls use plain docker exec until the agent is opened again (backoff). A sandbox whose image
 * has no agent is remembered per container and never asked again.
 */

/** A uid or gid as the kernel has them (the agent's HELLO is untrusted). */
const isId = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0 && (v as number) < 0xffffffff

/** How long a new agent may take to say hello (python start in a busy sandbox). */
const HELLO_TIMEOUT_MS = 10_000
/** A connection that ends sooner than this counts as a failure (backoff before the next one). */
const STABLE_MS = 10_000
const BACKOFF_MAX_MS = 60_000
const STDERR_KEEP = 512
/**
 * Seconds' worth of the byte budget (ServiceOptions.agentBytesPerSecond, 8 MiB/s by default) saved up
 * while a stream is quiet: a 16 MiB image or two full file reads go at once. Beyond the budget the
 * stream is paused, so a flood slows only its own sandbox's stream (measured: the server spends about
 * 6 ms of CPU per MiB of frames through the engine).
 */
export const AGENT_BURST_SECONDS = 2

/** The chat's agent state for this sandbox (a new one, the old dropped, when the sandbox changed). */
export function agentOf (entry: Entry, sandboxId: string): AgentState {
  const st = entry.agent
  return st !== undefined && st.sandboxId === sandboxId ? st : giveAgent(entry, newAgentState(sandboxId, entry.names.key))
}

/** `st` now serves the chat (a claimed pool sandbox's, opened while it waited); the chat's former one is dropped. */
export function giveAgent (entry: Entry, st: AgentState): AgentState {
  if (entry.agent !== st) dropAgent(entry.agent)
  st.owner = entry.names.key
  entry.agent = st
  return st
}

/** `KEY=value` list (toEnvList, already filtered) as the agent's env object. */
export function envObject (list: string[]): Record<string, string> {
  const env: Record<string, string> = {}
  for (const kv of list) {
    const at = kv.indexOf('=')
    if (at > 0) env[kv.slice(0, at)] = kv.slice(at + 1)
  }
  return env
}

/** The agent connections of every sandbox (chats' and the warm pool's). */
export interface Agents {
  agentFor: (entry: Entry) => Promise<AgentConnection | null>
  openAgent: (st: AgentState) => Promise<AgentConnection | null>
}

export function createAgents (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'clock' | 'status' | 'streams'>): Agents {
  const { log, opts, clock, status, streams } = base

  /**
   * The chat's agent connection, opened when needed; null when the agent cannot be used now (old
   * image, backoff after a failure, sandbox not running): the caller then uses docker exec.
   */
  async function agentFor (entry: Entry): Promise<AgentConnection | null> {
    const sandboxId = entry.sandboxId
    if (entry.state !== 'running' || sandboxId === undefined) return null
    return await openAgent(agentOf(entry, sandboxId))
  }

  /** The state's open connection, or the one being opened, or a new one (single flight, after the backoff). */
  async function openAgent (st: AgentState): Promise<AgentConnection | null> {
    if (status.closed || !opts.agent || st.dropped) return null
    if (st.conn !== null && !st.conn.closed) return st.conn
    if (st.missing || clock.real() < st.retryAt) return null
    st.opening ??= open(st).finally(() => { st.opening = null })
    return await st.opening
  }

  function failure (st: AgentState, why: string, err?: unknown): void {
    st.failures++
    const wait = Math.min(BACKOFF_MAX_MS, 1000 * 2 ** Math.min(st.failures - 1, 16))
    st.retryAt = clock.real() + wait
    log.warn({ chat: st.owner, why, err, retryInMs: wait },
      'sandbox agent unavailable; using docker exec')
  }

  async function open (st: AgentState): Promise<AgentConnection | null> {
    let link: AgentLink | null
    try {
      link = await socketLink(base, st.sandboxId, st.owner) ?? await execLink(base, st.sandboxId)
    } catch (err) {
      if (!st.dropped) failure(st, 'start', err)
      return null
    }
    if (status.closed || st.dropped) { link.pipe.destroy(); return null }
    const pipe = link.pipe
    const closer = { close: () => { pipe.destroy() } }
    streams.add(closer)
    return await new Promise<AgentConnection | null>(resolve => {
      let hello = false
      let stderr = ''
      /** the first output bytes before the hello, as text (an engine's error about the command) */
      let early = ''
      const openedAt = clock.real()
      const conn = new AgentConnection(pipe, c => {
        streams.delete(closer)
        clearTimeout(timer)
        if (st.conn === c) st.conn = null
        if (st.dropped) { resolve(null); return }
        if (!hello) {
          // Nothing answered: an image without the agent (no interpreter: the engine's own error text comes
          // in place of the output; no script: python cannot open the file) or a start that failed.
          if (link.exec && /can't open file|No such file/i.test(stderr + early)) {
            st.missing = true
            log.info({ chat: st.owner }, 'the sandbox image has no cubicle-agent; using docker exec')
          } else failure(st, c.failed ?? 'no hello', stderr === '' ? undefined : stderr.slice(0, 200))
          resolve(null)
          return
        }
        if (c.failed !== undefined || clock.real() - openedAt < STABLE_MS) failure(st, c.failed ?? 'ended')
        else st.failures = 0
      })
      const timer = setTimeout(() => { conn.close('no hello in time') }, HELLO_TIMEOUT_MS)
      const parser = new FrameParser((id, type, payload) => {
        if (!hello) {
          const said = id === 0 && type === T_HELLO ? decodeJson(payload) : undefined
          if (said?.v !== PROTOCOL_VERSION) throw new ProtocolError('bad hello')
          hello = true
          conn.canConnect = said.connect === true
          conn.acksSpawn = said.spawned === true
          if (isId(said.uid) && isId(said.gid)) conn.ids = { uid: said.uid, gid: said.gid }
          clearTimeout(timer)
          if (st.dropped) { conn.close(); return }
          st.conn = conn
          resolve(conn)
          return
        }
        conn.dispatch(id, type, payload)
      }, reason => { conn.close(`protocol: ${reason}`) })
      link.stderr?.on('data', (data: Buffer) => { if (stderr.length < STDERR_KEEP) stderr += data.toString('utf8', 0, STDERR_KEEP) })
      const rate = opts.agentBytesPerSecond
      const stopBudget = readWithin(link.stdout, new ByteBudget(rate, rate * AGENT_BURST_SECONDS), data => {
        if (conn.closed) return
        if (!hello && early.length < STDERR_KEEP) early += data.toString('latin1', 0, STDERR_KEEP)
        try { parser.push(data) } catch (err) {
          conn.close(err instanceof ProtocolError ? `protocol: ${err.message}` : `handler: ${describe(err)}`)
        }
      }, () => {
        // App connections' bytes come at their reader's pace (agent-connect.ts windows), not the budget's.
        const n = conn.exempt
        conn.exempt = 0
        return n
      })
      link.stdout.once('end', () => { parser.end(); conn.close() })
      // The output may end unread (paused by the budget): the process's end closes the connection all the same.
      void link.ended.then(() => { stopBudget(); conn.close() })
    })
  }

  return { agentFor, openAgent }
}
