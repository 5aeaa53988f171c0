import { randomBytes } from 'node:crypto'
import type { Duplex } from 'node:stream'
import { holdLease } from './activity.js'
import { SANDBOX_USER } from './container-config.js'
import type { ExecHandle } from './docker-client.js'
import { toEnvList } from './env.js'
import { checkAlive, RESULT_GRACE_MS, terminate } from './exec.js'
import { commandArgv, Demuxer, EofFilter, SentinelParser, STDOUT } from './exec-stream.js'
import { armDeadline, describe, execStartError, requireRunning, type Entry, type Registry } from './registry.js'
import type { CommandOptions, CommandResult } from './types.js'

/*
 * runCommand(), the bash_tool path (surface.md §3.3): `bash -c` inside a wrapper that reports bash's
 * status on stderr and marks the end of its output on stdout (exec-stream.ts), so the call returns as
 * soon as bash exits and its output is in, even while background children hold stdout open.
 */

const DRAIN_MS = 1000
const QUIET_MS = 200

type Watched = CommandResult & { sentinel: boolean }

export async function runCommand (reg: Registry, chatId: string, command: string, opts: CommandOptions): Promise<CommandResult> {
  const entry = requireRunning(reg, chatId)
  const release = holdLease(reg, entry)
  try {
    return await runWrapped(reg, entry, command, opts)
  } finally { release() }
}

async function runWrapped (reg: Registry, entry: Entry, command: string, opts: CommandOptions): Promise<CommandResult> {
  const execId = randomBytes(12).toString('hex')
  const env = toEnvList(opts.env, { PAGER: 'cat', GIT_PAGER: 'cat', DEBIAN_FRONTEND: 'noninteractive', CUBICLE_EXEC_ID: execId })
  let handle: ExecHandle
  try {
    handle = await reg.docker.exec(entry.containerId ?? '', { argv: commandArgv(command), user: SANDBOX_USER, cwd: '/home/assistant', env })
  } catch (err) {
    throw execStartError(reg, entry, err)
  }
  const result = await watchCommand(reg, handle.socket, opts, () => terminate(reg, entry, execId, SANDBOX_USER, opts.killGraceMs))
  if (!result.sentinel && !result.timedOut && !result.cancelled) {
    // The stream ended without bash's status: the sandbox probably stopped under us.
    await checkAlive(reg, entry)
  }
  return { exitCode: result.exitCode, timedOut: result.timedOut, cancelled: result.cancelled }
}

/** Streams the command's output until bash's status arrived and the output went quiet, or until timeout/abort. */
async function watchCommand (reg: Registry, socket: Duplex, opts: CommandOptions, kill: () => number): Promise<Watched> {
  reg.streams.add(socket)
  return await new Promise<Watched>(resolve => {
    let timedOut = false
    let cancelled = false
    let done = false
    let exitCode: number | null = null
    const timers: NodeJS.Timeout[] = []
    let quiet: NodeJS.Timeout | undefined
    let disarm = (): void => {}
    const finish = (): void => {
      if (done) return
      done = true
      for (const t of timers) clearTimeout(t)
      clearTimeout(quiet)
      disarm()
      output.end()
      reg.streams.delete(socket)
      socket.destroy()
      resolve({ exitCode, timedOut, cancelled, sentinel: output.exited() })
    }
    // Once bash's status and the end of its output are both in, wait for QUIET_MS without output
    // (background children may still print), then return even if they hold the output open.
    const settle = (): void => {
      if (!output.settled()) return
      clearTimeout(quiet)
      quiet = setTimeout(finish, QUIET_MS)
    }
    const output = mergedOutput(reg, opts.onOutput, settle, code => {
      if (timedOut || cancelled) return
      exitCode = code
      // bash has exited: return within DRAIN_MS whatever is still in flight.
      timers.push(setTimeout(finish, DRAIN_MS))
      settle()
    })
    socket.on('data', output.push)
    socket.on('end', finish)
    socket.on('close', finish)
    socket.on('error', finish)
    const stop = (): void => {
      clearTimeout(quiet)
      timers.push(setTimeout(finish, Math.max(RESULT_GRACE_MS, kill() + 5000)))
    }
    disarm = armDeadline(opts.timeoutMs, opts.signal,
      () => { if (!done && !cancelled && !output.exited()) { timedOut = true; stop() } },
      () => { if (!done && !timedOut && !cancelled) { cancelled = true; stop() } })
  })
}

/**
 * stdout decoded as UTF-8 (sequences never split) for onOutput, without the wrapper's end marker;
 * stderr carries the wrapper's exit sentinel. `onStdout` runs when the marker or later stdout arrives.
 */
function mergedOutput (reg: Registry, onOutput: (text: string) => void, onStdout: () => void, onExit: (code: number) => void):
  { push: (chunk: Buffer) => void, exited: () => boolean, settled: () => boolean, end: () => void } {
  const decoder = new TextDecoder('utf-8')
  const emit = (text: string): void => {
    if (text === '') return
    try { onOutput(text) } catch (err) { reg.log.warn({ err: describe(err) }, 'onOutput threw') }
  }
  const parser = new SentinelParser(emit, onExit)
  const eof = new EofFilter(data => {
    emit(decoder.decode(data, { stream: true }))
    if (eof.seen) onStdout()
  }, onStdout)
  const demux = new Demuxer((stream, data) => {
    if (stream === STDOUT) eof.push(data)
    else parser.push(data)
  })
  return {
    push: (chunk: Buffer) => demux.push(chunk),
    exited: () => parser.exitCode !== null,
    settled: () => parser.exitCode !== null && eof.seen,
    end: () => { eof.end(); parser.end(); emit(decoder.decode()) }
  }
}
