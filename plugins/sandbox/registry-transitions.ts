import { dropAddress } from './addresses.js'
import { isEngineFailure } from './engine-error.js'
import { SANDBOX_ENGINE_BUSY, SANDBOX_ENGINE_UNAVAILABLE, SANDBOX_FAILED, SANDBOX_IMAGE_MISSING, SANDBOX_NOT_RUNNING, SandboxSetupRefused } from './errors.js'
import { changed, entryOf, withLock, type Entry, type Registry } from './registry.js'
import type { SandboxInfo, StopReason } from './types.js'

/*
 * The transitions of the driver's state (registry.ts) that every other file uses, and the mapping
 * of adapter errors to the sandbox contract's coded errors. None of them talks to Docker except
 * stopEntry().
 */

export const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))
/** setTimeout fires at once beyond 2^31-1 ms: clamp (about 24.8 days). */
export const clampMs = (ms: number): number => Math.max(0, Math.min(ms, 2_147_483_647))

/** Arms an exec's timeout and abort signal (an already aborted signal fires at once); returns the disarm function. */
export function armDeadline (timeoutMs: number, signal: AbortSignal | undefined, onTimeout: () => void, onAbort: () => void): () => void {
  const timer = setTimeout(onTimeout, clampMs(timeoutMs))
  if (signal !== undefined) {
    if (signal.aborted) onAbort()
    else signal.addEventListener('abort', onAbort, { once: true })
  }
  return () => { clearTimeout(timer); signal?.removeEventListener('abort', onAbort) }
}

/** SANDBOX_ENGINE_UNAVAILABLE in the engine's own words ("the Docker engine is not reachable; …"). */
export function engineUnavailable (reg: Registry): Error {
  return new SANDBOX_ENGINE_UNAVAILABLE(reg.engine.label.engine)
}

/** SANDBOX_IMAGE_MISSING naming the image and the engine's host ("… missing on the Docker host; …"). */
export function imageMissing (reg: Registry): Error {
  return new SANDBOX_IMAGE_MISSING(reg.opts.image, reg.engine.label.host)
}

/** An error's message, for text built from it (a log line takes the error itself: `{ err }`, pino's serializer). */
export function describe (err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

export function infoOf (entry: Entry): SandboxInfo {
  return {
    chatId: entry.names.chatId,
    chatKey: entry.names.key,
    sandboxId: entry.sandboxId ?? '',
    name: entry.names.container,
    createdAt: entry.createdAt ?? ''
  }
}

export function requireRunning (reg: Registry, chatId: string): Entry {
  const entry = entryOf(reg, chatId)
  if (entry.state !== 'running' || entry.sandboxId === undefined) throw new SANDBOX_NOT_RUNNING()
  return entry
}

export function tooOld (reg: Registry, createdAt: string | undefined): boolean {
  if (createdAt === undefined) return false
  const t = Date.parse(createdAt)
  return Number.isFinite(t) && reg.opts.now() - t > reg.opts.maxAgeHours * 3600_000
}

export function notifyStop (reg: Registry, entry: Entry, reason: StopReason): void {
  dropAddress(reg, entry)
  for (const hook of reg.stopHooks) {
    try { hook(entry.names.chatId, reason) } catch (err) { reg.log.warn({ err }, 'an onStop hook failed') }
  }
}

/** docker stop under the chat's lock (explicit stop, idle reaper, capacity). */
export async function stopEntry (reg: Registry, entry: Entry, reason: StopReason): Promise<void> {
  entry.stopping = true
  try {
    await withLock(entry, async () => {
      try {
        await reg.engine.stop(entry.sandboxId ?? entry.names.container, reg.opts.stopGraceS)
      } catch (err) { throw mapError(reg, err) }
      entry.state = entry.state === 'absent' ? 'absent' : 'stopped'
      entry.recoverable = false
      changed(reg, entry)
      reg.log.info({ chat: entry.names.key, reason }, 'sandbox stopped')
    })
  } finally { entry.stopping = false }
  notifyStop(reg, entry, reason)
}

/**
 * An adapter error as the contract's coded error: the engine gone (unavailable), the engine alive but
 * too busy to answer in time (retriable, engine-neutral), or a failure logged in full and
 * reported by reference.
 */
export function mapError (reg: Registry, err: unknown): Error {
  if (err instanceof SandboxSetupRefused) return new SANDBOX_FAILED('this server refused its sandbox setup; the server log says why')
  if (isEngineFailure(err)) {
    if (err.busy) {
      reg.log.warn({ err }, 'the engine is busy; the call was refused for the caller to retry')
      return new SANDBOX_ENGINE_BUSY()
    }
    if (err.unavailable) {
      reg.engineUp = false
      return engineUnavailable(reg)
    }
    reg.log.error({ err }, 'engine request failed')
    return new SANDBOX_FAILED('see the server log')
  }
  return err instanceof Error ? err : new Error(String(err))
}

/**
 * An exec failed to start: a 404/409 means the container is gone or stopped behind our back (cache
 * invalidated, and the chat marked for recovery: recovery.ts starts it again).
 */
export function execStartError (reg: Registry, entry: Entry, err: unknown): Error {
  const reason = isEngineFailure(err) ? err.reason : undefined
  if (reason === 'no-such-sandbox' || reason === 'conflict' || reason === 'not-running') {
    if (entry.locked === 0 && entry.ensuring === null) { entry.state = 'unknown'; entry.recoverable = true; changed(reg, entry); dropAddress(reg, entry) }
    return new SANDBOX_NOT_RUNNING()
  }
  return mapError(reg, err)
}
