import { randomBytes } from 'node:crypto'
import type { Duplex } from 'node:stream'
import { holdLease } from './activity.js'
import { SANDBOX_USER } from './container-config.js'
import type { ExecHandle } from './docker-client.js'
import { toEnvList } from './env.js'
import { checkAlive, RESULT_GRACE_MS, terminate } from './exec.js'
import { commandArgv, Demuxer, SentinelParser, STDOUT } from './exec-stream.js'
import { armDeadline, describe, execStartError, requireRunning, type Entry, type Registry } from './registry.js'
import type { CommandOptions, CommandResult } from './types.js'

/*
 * runCommand(), the bash_tool path (surface.md §3.3): `bash -c` inside a wrapper that reports bash's
 * status on stderr (exec-stream.ts), so the call returns as soon as bash exits even while background
 * children hold stdout open.
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
    const armQuiet = (): void => {
      clearTimeout(quiet)
      quiet = setTimeout(finish, QUIET_MS)
    }
    const output = mergedOutput(reg, opts.onOutput, armQuiet, code => {
      if (timedOut || cancelled) return
      exitCode = code
      // bash has exited: drain what is in flight, at most DRAIN_MS, then return even if
      // background children still hold the output open.
      timers.push(setTimeout(finish, DRAIN_MS))
      armQuiet()
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
 * stdout decoded as UTF-8 (sequences never split) for onOutput; stderr carries the wrapper's exit
 * sentinel. `onLateOutput` runs for stdout that arrives after bash's status.
 */
function mergedOutput (reg: Registry, onOutput: (text: string) => void, onLateOutput: () => void, onExit: (code: number) => void):
  { push: (chunk: Buffer) => void, exited: () => boolean, end: () => void } {
  const decoder = new TextDecoder('utf-8')
  const emit = (text: string): void => {
    if (text === '') return
    try { onOutput(text) } catch (err) { reg.log.warn({ err: describe(err) }, 'onOutput threw') }
  }
  const parser = new SentinelParser(emit, onExit)
  const demux = new Demuxer((stream, data) => {
    if (stream === STDOUT) {
      emit(decoder.decode(data, { stream: true }))
      if (parser.exitCode !== null) onLateOutput()
    } else parser.push(data)
  })
  return {
    push: (chunk: Buffer) => demux.push(chunk),
    exited: () => parser.exitCode !== null,
    end: () => { parser.end(); emit(decoder.decode()) }
  }
}
