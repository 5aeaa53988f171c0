import type { EngineErrorReason, EngineFailure } from './engine-types.js'

/*
 * Engine failures as the core sees them (engine-types.ts EngineFailure). Engines throw their own
 * error classes; the core recognises them by shape, and raises EngineError itself where it decides
 * that the engine is busy (a name taken by a sandbox that does not show up yet).
 */

export class EngineError extends Error implements EngineFailure {
  readonly statusCode: number | undefined
  readonly unavailable: boolean
  readonly busy: boolean
  readonly reason: EngineErrorReason | undefined
  constructor (message: string, o: { statusCode?: number, unavailable?: boolean, busy?: boolean, reason?: EngineErrorReason } = {}) {
    super(message)
    this.name = 'EngineError'
    this.statusCode = o.statusCode
    this.unavailable = o.unavailable === true
    this.busy = o.busy === true && !this.unavailable
    this.reason = o.reason
  }
}

/** An error thrown by an engine (or EngineError): it says whether the engine was reachable and busy. */
export function isEngineFailure (err: unknown): err is EngineFailure {
  const e = err as Partial<EngineFailure> | null
  return err instanceof Error && typeof e?.unavailable === 'boolean' && typeof e.busy === 'boolean'
}

/** A failure that says nothing about the request itself: retry it later (engine busy or gone). */
export function transient (err: unknown): boolean {
  return isEngineFailure(err) && (err.unavailable || err.busy)
}
