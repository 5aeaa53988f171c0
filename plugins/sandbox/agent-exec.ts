import { randomBytes } from 'node:crypto'
import { envObject, type Agents } from './agent-client.js'
import { LISTENING_MAX, LISTENING_RECORD, parseListening } from './agent-files.js'
import type { AgentConnection } from './agent-connection.js'
import { CHUNK, decodeJson, encodeFrame, encodeJson, parseExit, parseFailure, ProtocolError, T_ERR, T_EXEC, T_EXIT, T_FAIL, T_OUT, T_SPAWNED, T_STDIN, T_STDIN_END } from './agent-protocol.js'
import { SANDBOX_USER } from './sandbox-spec.js'
import { toEnvList } from './env.js'
import type { Entry } from './chats.js'
import type { CoreBase } from './context.js'
import type { RawExecResult } from './exec-collect.js'
import { resultGrace, watchUntil } from './exec-watch.js'
import { outputSink, restartedSince, type Outcome } from './exec-outcome.js'
import type { Kill } from './kill.js'
import type { CommandOptions, CommandResult, ExecOptions, ListeningSocket, SandboxNotice } from './types.js'

/*
 * runCommand and the collecting exec through cubicle-agent (agent-client.ts) instead of one docker
 * exec each, with the exec path's semantics: the agent spawns the process as assistant in its own
 * session with the CUBICLE_EXEC_ID marker, so timeouts and cancels use the same kill path (kill.ts);
 * in command mode it merges output into one pipe and ends the request when bash exited and the
 * output went quiet (200 ms, 1 s at most), as command.ts does. Both answer `undefined` when the
 * agent cannot serve the call before anything ran (no agent, backoff, the process could not be
 * spawned: e.g. no pid left): the caller then takes the docker exec path, which also handles
 * saturation. A stream lost mid-call ends like a lost exec stream, except before the agent's SPAWNED
 * (agents whose HELLO offers it, docs/engine.md#the-agent-socket): the command never started, the
 * result says `unstarted`, and the caller runs it once more after recovering the sandbox
 * (command.ts, exec.ts), as when a docker exec could not start.
 */

const DEFAULT_MAX_BYTES = 32 * 1024 * 1024
/** After a timeout/abort in command mode: return this long after the SIGTERM at the latest. */
const TERM_WAIT_MS = 2000
const COMMAND_ENV = { PAGER: 'cat', GIT_PAGER: 'cat', DEBIAN_FRONTEND: 'noninteractive' }

export interface Run {
  /** EXIT's code (null: not waited for), undefined: no EXIT (lost or given up) */
  code?: number | null
  pids?: number
  /** the listening sockets EXIT carried (RunSpec.listening asked) */
  listening?: ListeningSocket[]
  timedOut: boolean
  cancelled: boolean
  /** the agent could not spawn the process (nothing ran) */
  spawnFailed: boolean
  /** the stream was lost before the agent said the process exists (SPAWNED): nothing ran */
  unstarted: boolean
}

export interface RunSpec {
  argv: string[]
  env: Record<string, string>
  merged: boolean
  cwd: string
  stdin?: Buffer
  timeoutMs: number
  signal?: AbortSignal
  killGraceMs?: number
  /** EXIT also carries up to this many listening sockets (command mode); an agent that predates it leaves them out */
  listening?: number
  onData: (type: number, data: Buffer) => void
}

/**
 * One request on an agent stream until EXIT, FAIL, loss, or the grace after a timeout/abort: `stop`
 * starts the caller's kill path and says how long to wait for the end (null: at once).
 */
export async function agentRequest (log: CoreBase['log'], owner: string, conn: AgentConnection, spec: Omit<RunSpec, 'killGraceMs'>,
  stop: () => number | null): Promise<Run> {
  const r: Run = { timedOut: false, cancelled: false, spawnFailed: false, unstarted: false }
  // Without SPAWNED from this agent (an older image) a lost stream may have cut the command off.
  let spawned = !conn.acksSpawn
  let lost = false
  let id = 0
  const want = spec.listening === undefined ? undefined : Math.max(0, Math.min(LISTENING_MAX, Math.floor(spec.listening)))
  const end = await watchUntil({
    timeoutMs: spec.timeoutMs,
    signal: spec.signal,
    stop,
    onFinish: () => { conn.finish(id) }
  }, w => {
    id = conn.request(i => encodeJson(i, T_EXEC, { argv: spec.argv, cwd: spec.cwd, env: spec.env, merged: spec.merged, stdin: spec.stdin !== undefined, ...(want !== undefined && want > 0 && { listening: want }) }), {
      frame: (type, payload) => {
        if (w.done) return
        if (type === T_SPAWNED) {
          if (spawned || payload.length !== 0) throw new ProtocolError('SPAWNED twice, unoffered or with a payload')
          spawned = true
          return
        }
        // Output or an exit of a process the agent has not said exists: the agent lies.
        if (!spawned && type !== T_FAIL) throw new ProtocolError(`frame type ${type} before SPAWNED`)
        if (type === T_OUT || type === T_ERR) { spec.onData(type, payload); return }
        if (type === T_EXIT) {
          const e = parseExit(payload)
          if (e.listening !== undefined) {
            // Only what was asked for: records unasked or beyond the count are a violation.
            if (want === undefined || want === 0 || e.listening.records.length > want * LISTENING_RECORD) throw new ProtocolError('listening sockets not asked for')
            r.listening = parseListening(e.listening.records)
          }
          r.code = e.code
          if (e.pids !== undefined) r.pids = e.pids
          w.finish()
          return
        }
        if (type === T_FAIL) {
          const failure = parseFailure(decodeJson(payload))
          // After SPAWNED the process existed: it ends like a lost one, never run again.
          log.debug({ chat: owner, ...failure, spawned: conn.acksSpawn && spawned }, 'agent could not spawn')
          r.spawnFailed = !conn.acksSpawn || !spawned
          w.finish()
          return
        }
        throw new ProtocolError(`frame type ${type} in an exec`)
      },
      lost: () => { lost = true; w.finish() }
    })
    if (spec.stdin !== undefined) {
      for (let at = 0; at < spec.stdin.length; at += CHUNK) conn.send(encodeFrame(id, T_STDIN, spec.stdin.subarray(at, at + CHUNK)))
      conn.send(encodeFrame(id, T_STDIN_END))
    }
  })
  r.unstarted = lost && !spawned && !end.timedOut && !end.cancelled
  return { ...r, ...end }
}

/** runCommand and the collecting exec through the agent; `undefined`: the caller takes the engine's exec. */
export interface AgentExec {
  agentExec: (entry: Entry, argv: string[], opts: ExecOptions) => Promise<RawExecResult | undefined>
  /** 'unstarted': the stream was lost before bash existed (nothing ran; the caller may run it once more) */
  agentCommand: (entry: Entry, command: string, opts: CommandOptions, own: SandboxNotice[], t0: number) => Promise<CommandResult | 'unstarted' | undefined>
}

export function createAgentExec (base: Pick<CoreBase, 'log' | 'opts' | 'clock'>, agents: Pick<Agents, 'agentFor'>, kill: Kill, outcome: Outcome, chatEnv: (sandboxId: string) => string[] | undefined): AgentExec {
  const { log, clock } = base

  /**
   * The process's env over the agent's own: a claimed pool sandbox lacks the chat's env in its
   * container env (pool-claim.ts), so each request carries it in front of the call's own, exactly as
   * withChatEnv does for docker exec (the agent may have been opened before the claim was bound).
   */
  function requestEnv (entry: Entry, own: string[]): Record<string, string> {
    return envObject([...(chatEnv(entry.sandboxId ?? '') ?? []), ...own])
  }

  /** One request with the kill path of the chat's sandbox on timeout/abort. */
  async function run (entry: Entry, conn: AgentConnection, execId: string, spec: RunSpec): Promise<Run> {
    return await agentRequest(log, entry.names.key, conn, spec, () => {
      const wait = kill.terminate(entry, execId, SANDBOX_USER, spec.killGraceMs)
      // bash_tool's wrapper dies with the SIGTERM and the engine ends its stream about 2 s later even
      // when bash ignores it: the command mode returns as soon (the SIGKILL still follows).
      return spec.merged ? TERM_WAIT_MS : resultGrace(wait)
    })
  }

  /** The collecting exec (exec.ts) through the agent: as assistant only; undefined = use docker exec. */
  async function agentExec (entry: Entry, argv: string[], opts: ExecOptions): Promise<RawExecResult | undefined> {
    if ((opts.user !== undefined && opts.user !== SANDBOX_USER) || argv.length === 0) return undefined
    const conn = await agents.agentFor(entry)
    if (conn === null) return undefined
    const execId = randomBytes(12).toString('hex')
    const max = opts.maxBytes ?? DEFAULT_MAX_BYTES
    const kept: Record<number, Buffer[]> = { [T_OUT]: [], [T_ERR]: [] }
    const len: Record<number, number> = { [T_OUT]: 0, [T_ERR]: 0 }
    let truncated = false
    const stdin = opts.stdin === undefined ? undefined : Buffer.isBuffer(opts.stdin) ? opts.stdin : Buffer.from(opts.stdin, 'utf8')
    const r = await run(entry, conn, execId, {
      argv,
      env: requestEnv(entry, toEnvList(opts.env, { CUBICLE_EXEC_ID: execId })),
      merged: false,
      cwd: opts.cwd ?? '/home/assistant',
      stdin,
      timeoutMs: opts.timeoutMs ?? base.opts.commandTimeoutS * 1000,
      signal: opts.signal,
      killGraceMs: opts.killGraceMs,
      onData: (type, data) => {
        const room = max - (len[type] ?? 0)
        if (data.length > room) truncated = true
        if (room <= 0) return
        const part = data.length > room ? data.subarray(0, room) : data
        kept[type]?.push(part)
        len[type] = (len[type] ?? 0) + part.length
      }
    })
    if (r.spawnFailed && !r.timedOut && !r.cancelled) return undefined
    return {
      ...(r.unstarted ? { unstarted: true } : {}),
      exitCode: r.code ?? null,
      stdout: Buffer.concat(kept[T_OUT] ?? [], len[T_OUT]),
      stderr: Buffer.concat(kept[T_ERR] ?? [], len[T_ERR]),
      truncated,
      timedOut: r.timedOut,
      cancelled: r.cancelled,
      notStarted: false
    }
  }

  /**
   * runCommand's attempt (command.ts) through the agent; undefined = use docker exec, 'unstarted' = the
   * stream was lost before bash existed. Saturation hints (fork failures in the output, the pids count
   * after bash exited) are checked as on the exec path.
   */
  async function agentCommand (entry: Entry, command: string, opts: CommandOptions, own: SandboxNotice[], t0: number): Promise<CommandResult | 'unstarted' | undefined> {
    const conn = await agents.agentFor(entry)
    if (conn === null) return undefined
    const at = clock.real()
    const execId = randomBytes(12).toString('hex')
    const decoder = new TextDecoder('utf-8')
    let relieving: Promise<boolean> | undefined
    const sink = outputSink(log, opts.onOutput, () => {
      relieving ??= outcome.relieve(entry, true).catch(err => {
        log.warn({ chat: entry.names.key, err }, 'restarting a saturated sandbox failed')
        return false
      })
    })
    const r = await run(entry, conn, execId, {
      argv: ['bash', '-c', command],
      env: requestEnv(entry, toEnvList(opts.env, { ...COMMAND_ENV, CUBICLE_EXEC_ID: execId })),
      merged: true,
      cwd: '/home/assistant',
      timeoutMs: Math.max(1000, opts.timeoutMs - (at - t0)),
      signal: opts.signal,
      killGraceMs: opts.killGraceMs,
      ...(opts.listening !== undefined && { listening: opts.listening }),
      onData: (_type, data) => { sink.emit(decoder.decode(data, { stream: true })) }
    })
    sink.emit(decoder.decode())
    if (r.spawnFailed && !r.timedOut && !r.cancelled) return undefined
    if (r.unstarted) return 'unstarted'
    const relieved = relieving !== undefined && await relieving
    const exitCode = r.timedOut || r.cancelled ? null : r.code ?? null
    const result: CommandResult = { exitCode, timedOut: r.timedOut, cancelled: r.cancelled, ...(r.listening !== undefined && { listening: r.listening }) }
    if (r.code !== undefined || r.timedOut || r.cancelled) {
      await outcome.afterExit(entry, { exitCode, pids: r.pids, forkErrors: sink.hints.fork, killedJobs: sink.hints.killed }, at, own, relieved || restartedSince(entry, at))
      return result
    }
    await outcome.explainLoss(entry, at, own)
    return result
  }

  return { agentExec, agentCommand }
}
