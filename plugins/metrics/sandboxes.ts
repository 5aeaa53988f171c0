import type { FastifyBaseLogger } from 'fastify'
import type { SandboxService, StopReason } from '../sandbox/types.js'
import type { Collectors } from './collectors.js'

type TrackedState = 'running' | 'paused' | 'stopped' | 'removed'

/** What a stop reason leaves behind: a paused sandbox, a container that can start again, or none (data kept). */
function stateAfter (reason: StopReason | string): TrackedState | undefined {
  if (reason === 'purged') return undefined
  if (reason === 'paused') return 'paused'
  return reason === 'removed' || reason === 'max-age' ? 'removed' : 'stopped'
}

/**
 * Sandboxes by state, read through the sandbox service's hooks: every ensure (a tool call, a wake) marks the
 * chat running, every pause, stop or removal records its reason. Sandboxes re-adopted at boot appear once
 * they are used or stopped (the service offers no listing).
 */
export function observeSandboxes (sandbox: SandboxService, c: Collectors, log: FastifyBaseLogger): void {
  const states = new Map<string, TrackedState>()
  sandbox.onEnsure(async (box, event) => {
    states.set(box.chatId, 'running')
    if (event.started) c.sandboxStarts.inc()
  })
  if (sandbox.onStop === undefined) {
    log.warn('the sandbox driver reports no stops: the sandboxes gauge counts starts only')
  } else {
    sandbox.onStop((chatId, reason) => {
      c.sandboxStops.inc({ reason })
      const next = stateAfter(reason)
      if (next === undefined) states.delete(chatId)
      else states.set(chatId, next)
    })
  }
  if (sandbox.pooled !== undefined) c.census.pooled = sandbox.pooled.bind(sandbox)
  // Computed at scrape time from the map, so the gauge never drifts from it.
  c.census.read = () => {
    const counts: Record<TrackedState, number> = { running: 0, paused: 0, stopped: 0, removed: 0 }
    for (const state of states.values()) counts[state]++
    return counts
  }
}
