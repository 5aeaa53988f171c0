import { randomBytes } from 'node:crypto'
import type { Duplex } from 'node:stream'
import { SANDBOX_USER } from './container-config.js'
import type { DockerError, ExecHandle } from './docker-client.js'
import { toEnvList } from './env.js'
import { Demuxer, killArgv, STDERR, STDOUT } from './exec-stream.js'
import { SANDBOX_PUT_FAILED } from './errors.js'
import { holdLease } from './activity.js'
import {
  armDeadline, changed, clampMs, describe, execStartError, notifyStop, requireRunning, sleep, type Entry, type Registry
} from './registry.js'
import type { ExecOptions, ExecResult, SandboxStream, StreamOptions } from './types.js'

/*
 * Reaching into a running sandbox: collecting execs (exec(), the ready probe, the kill exec), the
 * kill path shared with runCommand (every exec of a chat carries CUBICLE_EXEC_ID=<hex>; on timeout
 * or abort a second exec signals the processes carrying that marker), putFile and openStream.
 */

/** Result deadline after a SIGTERM (at least SIGKILL + 5 s). */
export const RESULT_GRACE_MS = 10_000
const DEFAULT_MAX_BYTES = 32 * 1024 * 1024

interface Ended { timedOut: boolean, cancelled: boolean, lost: boolean }

/** Holds one lease for the call; a status ≥ 128 or unknown is checked against the container's state. */
export async function exec (reg: Registry, chatId: string, argv: string[], opts: ExecOptions = {}): Promise<ExecResult> {
  const entry = requireRunning(reg, chatId)
  const release = holdLease(reg, entry)
  try {
    const result = await rawExec(reg, entry.containerId ?? '', argv, opts, entry)
    if (result.exitCode === null || result.exitCode >= 128) await checkAlive(reg, entry)
    if (result.exitCode !== null && result.exitCode >= 128 && entry.state !== 'running') result.exitCode = null
    return result
  } finally { release() }
}

/** Collecting exec with timeout/abort kill. `entry` enables the kill path (marker); internal probes skip the exit code. */
export async function rawExec (reg: Registry, containerId: string, argv: string[], opts: ExecOptions, entry?: Entry, wantExitCode = true): Promise<ExecResult> {
  const execId = randomBytes(12).toString('hex')
  const user = opts.user ?? SANDBOX_USER
  const env = toEnvList(opts.env, entry === undefined ? undefined : { CUBICLE_EXEC_ID: execId })
  const stdin = opts.stdin === undefined ? undefined : Buffer.isBuffer(opts.stdin) ? opts.stdin : Buffer.from(opts.stdin, 'utf8')
  let handle: ExecHandle
  try {
    handle = await reg.docker.exec(containerId, { argv, user, cwd: opts.cwd ?? '/home/assistant', env, stdin: stdin !== undefined })
  } catch (err) {
    throw entry === undefined ? err : execStartError(reg, entry, err)
  }
  const out = collector(opts.maxBytes ?? DEFAULT_MAX_BYTES)
  const kill = (): number | null => entry === undefined ? null : terminate(reg, entry, execId, user, opts.killGraceMs)
  const ended = await awaitEnd(reg, handle.socket, opts, out.push, kill, stdin)
  let exitCode: number | null = null
  if (wantExitCode && (!ended.lost || ended.timedOut || ended.cancelled)) exitCode = await pollExitCode(reg, handle.id, ended)
  return { exitCode, ...out.result(), timedOut: ended.timedOut, cancelled: ended.cancelled }
}

/** Keeps at most `maxBytes` of stdout and of stderr; the rest only sets `truncated`. */
function collector (maxBytes: number): { push: (chunk: Buffer) => void, result: () => { stdout: Buffer, stderr: Buffer, truncated: boolean } } {
  const kept = { [STDOUT]: [] as Buffer[], [STDERR]: [] as Buffer[] }
  const len = { [STDOUT]: 0, [STDERR]: 0 }
  let truncated = false
  const demux = new Demuxer((stream, data) => {
    if (stream !== STDOUT && stream !== STDERR) return
    if (len[stream] + data.length <= maxBytes) { kept[stream].push(Buffer.from(data)); len[stream] += data.length; return }
    const room = maxBytes - len[stream]
    if (room > 0) { kept[stream].push(Buffer.from(data.subarray(0, room))); len[stream] += room }
    truncated = true
  })
  return {
    push: chunk => demux.push(chunk),
    result: () => ({ stdout: Buffer.concat(kept[STDOUT], len[STDOUT]), stderr: Buffer.concat(kept[STDERR], len[STDERR]), truncated })
  }
}

/**
 * Waits for the exec's stream to end. On timeout or abort `kill()` starts the kill path and returns
 * its SIGKILL delay (the result then comes at the latest RESULT_GRACE_MS later), or null to give up at once.
 */
async function awaitEnd (reg: Registry, socket: Duplex, opts: ExecOptions, onData: (chunk: Buffer) => void, kill: () => number | null, stdin?: Buffer): Promise<Ended> {
  reg.streams.add(socket)
  return await new Promise<Ended>(resolve => {
    let timedOut = false
    let cancelled = false
    let done = false
    const timers: NodeJS.Timeout[] = []
    let disarm = (): void => {}
    const finish = (lost: boolean): void => {
      if (done) return
      done = true
      for (const t of timers) clearTimeout(t)
      disarm()
      reg.streams.delete(socket)
      socket.destroy()
      resolve({ timedOut, cancelled, lost })
    }
    socket.on('data', onData)
    socket.on('end', () => finish(false))
    socket.on('close', () => finish(false))
    socket.on('error', () => finish(true))
    const terminate = (): void => {
      const grace = kill()
      if (grace === null) { finish(true); return }
      timers.push(setTimeout(() => finish(true), Math.max(RESULT_GRACE_MS, grace + 5000)))
    }
    disarm = armDeadline(opts.timeoutMs ?? reg.opts.commandTimeoutS * 1000, opts.signal,
      () => { if (!cancelled) { timedOut = true; terminate() } },
      () => { if (!timedOut && !cancelled) { cancelled = true; terminate() } })
    if (stdin !== undefined) {
      socket.write(stdin)
      socket.end()
    }
  })
}

/** Docker may report the exec as running for a moment after its stream ended: poll briefly. */
async function pollExitCode (reg: Registry, execId: string, ended: Ended): Promise<number | null> {
  for (let i = 0; i < 20; i++) {
    try {
      const state = await reg.docker.execInspect(execId)
      if (!state.running) return state.exitCode
    } catch { return null }
    if (ended.timedOut || ended.cancelled) return null
    await sleep(i < 5 ? 5 : 25)
  }
  return null
}

/**
 * Timeout/abort of an exec: SIGTERM to its marked processes now, SIGKILL after killGraceMs. The
 * SIGKILL pass runs even when the call has already returned (its output may have closed while
 * processes that redirected theirs live on).
 */
export function terminate (reg: Registry, entry: Entry, execId: string, user: string, killGraceMs = reg.opts.killGraceMs): number {
  void killMarked(reg, entry, execId, 'TERM', user)
  setTimeout(() => { void killMarked(reg, entry, execId, 'KILL', user) }, clampMs(killGraceMs)).unref()
  return killGraceMs
}

/**
 * Signals every process carrying the exec's marker (second exec as the same user). When SIGKILL
 * cannot be delivered (no exec possible, e.g. the pids limit is exhausted by a fork bomb) or marked
 * processes survive it, the container is killed: the next ensure() starts it again with its data.
 */
async function killMarked (reg: Registry, entry: Entry, execId: string, signal: 'TERM' | 'KILL', user: string): Promise<void> {
  const containerId = entry.containerId
  if (containerId === undefined || reg.closed) return
  let ok = false
  try {
    const r = await rawExec(reg, containerId, killArgv(signal, execId), { user, timeoutMs: 4000, cwd: '/' }, undefined, false)
    const m = /^done (\d+) (\d+)/m.exec(r.stdout.toString('utf8'))
    ok = m !== null && m[2] === '0'
    if (!ok && !reg.closed) reg.log.warn({ chat: entry.names.key, signal, result: r.stdout.toString('utf8').slice(0, 100), stderr: r.stderr.toString('utf8').slice(0, 200) }, 'kill exec did not complete')
  } catch (err) {
    if (!reg.closed) reg.log.warn({ chat: entry.names.key, signal, err: describe(err) }, 'kill exec failed')
  }
  if (!ok && signal === 'KILL' && !reg.closed) {
    reg.log.warn({ chat: entry.names.key }, 'processes of a timed-out command cannot be killed from inside; killing the sandbox (data kept)')
    try {
      await reg.docker.killContainer(containerId)
    } catch (err) {
      reg.log.error({ chat: entry.names.key, err: describe(err) }, 'killing the sandbox failed')
    }
    if (entry.locked === 0) { entry.state = 'stopped'; changed(reg, entry) }
    notifyStop(reg, entry, 'killed')
  }
}

/** After an exec lost its stream: refresh the cached state (one inspect). */
export async function checkAlive (reg: Registry, entry: Entry): Promise<void> {
  try {
    const c = await reg.docker.inspectContainer(entry.names.container)
    if (entry.locked === 0 && entry.ensuring === null) { entry.state = c === null ? 'absent' : c.running ? 'running' : 'stopped'; changed(reg, entry) }
  } catch (err) {
    if (entry.locked === 0 && entry.ensuring === null) { entry.state = 'unknown'; changed(reg, entry) }
    reg.log.debug({ err: describe(err) }, 'state check failed')
  }
}

/** Writes a file through the archive API (owner and mode as given; default root:root 0644). */
export async function putFile (reg: Registry, chatId: string, path: string, content: Buffer | string, opts: { mode?: number, uid?: number, gid?: number } = {}): Promise<void> {
  const entry = requireRunning(reg, chatId)
  if (!path.startsWith('/') || path.endsWith('/')) throw new TypeError('putFile needs an absolute file path')
  const data = Buffer.isBuffer(content) ? content : Buffer.from(content, 'utf8')
  try {
    await reg.docker.putFile(entry.containerId ?? '', path, data, opts.mode ?? 0o644, opts.uid ?? 0, opts.gid ?? 0)
  } catch (err) {
    const e = err as DockerError
    if (!e.unavailable && (e.statusCode === 404 || e.statusCode === 400 || e.statusCode === 403) && !/no such container/i.test(e.message)) {
      throw new SANDBOX_PUT_FAILED(path, e.statusCode === 404 ? 'the parent directory does not exist' : 'not permitted')
    }
    throw execStartError(reg, entry, err)
  }
}

/** A long-lived exec with a raw byte stream (terminal TTY, CDP relay). See types.ts. */
export async function openStream (reg: Registry, chatId: string, argv: string[], opts: StreamOptions = {}): Promise<SandboxStream> {
  const entry = requireRunning(reg, chatId)
  const tty = opts.tty === true
  let handle: ExecHandle
  try {
    handle = await reg.docker.exec(entry.containerId ?? '', {
      argv, user: opts.user ?? SANDBOX_USER, cwd: opts.cwd ?? '/home/assistant', env: toEnvList(opts.env), stdin: true, tty
    })
  } catch (err) { throw execStartError(reg, entry, err) }
  const { socket } = handle
  reg.streams.add(socket)
  socket.once('close', () => reg.streams.delete(socket))
  const docker = reg.docker
  return {
    socket,
    demux: (onStdout, onStderr) => {
      if (tty) { socket.on('data', (c: Buffer) => onStdout(c)); return }
      const d = new Demuxer((s, data) => { if (s === STDOUT) onStdout(data); else onStderr?.(data) })
      socket.on('data', (c: Buffer) => d.push(c))
    },
    resize: async (cols, rows) => { if (tty) await docker.execResize(handle.id, cols, rows) },
    exitCode: async () => {
      try { return (await docker.execInspect(handle.id)).exitCode } catch { return null }
    },
    close: () => { reg.streams.delete(socket); socket.destroy() }
  }
}
