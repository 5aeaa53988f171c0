import type { RequestUser } from '../../core/identity.js'

/*
 * The sandbox service's extension points, part of its contract (types.ts re-exports them; other plugins
 * import them from there): why a sandbox stopped, its address changes, extra read-only mounts, environment
 * contributors, files written while a sandbox starts.
 */

/**
 * Extension: why a sandbox stopped or went away (onStop). 'memory': a paused sandbox stopped before its
 * CONTAINER_PAUSED_TIMEOUT because the machine's memory ran short. 'paused' is no stop: the idle reaper froze it,
 * the next access wakes it (and runs the onEnsure hooks again).
 */
export type StopReason = 'idle' | 'max-age' | 'capacity' | 'stopped' | 'removed' | 'purged' | 'killed' | 'disk-limit' | 'paused' | 'memory'
export type StopHook = (chatId: string, reason: StopReason) => void
/** What a start hook may do to the sandbox being started: write a file as any owner through the engine (no command runs). */
export interface StartFiles {
  put: (path: string, content: Buffer | string, opts?: { mode?: number, uid?: number, gid?: number }) => Promise<void>
}
/**
 * Extension: runs whenever a chat's sandbox was created, started or claimed from the warm pool, under the
 * chat's lock, at the same time as the wait for the sandbox to become ready (its agent's start), before
 * ensure() resolves and before the onEnsure hooks. It may only write files through `files` (the engine's
 * own file write, e.g. Docker's archive API: it needs no agent and no exec). A rejection is logged and never
 * fails the ensure. The onEnsure hooks then run with `started: true` as before.
 */
export type StartHook = (sandbox: { chatId: string, sandboxId: string }, event: { user?: RequestUser }, files: StartFiles) => Promise<void>
/** A sandbox's address on the sandbox network (null: it has none any more: stopped, removed, gone). */
export type AddressHook = (chatId: string, address: string | null) => void

/** Extension (docs/contract.md#skills): a read-only bind mount a sandbox gets when it is created. */
export interface SandboxMount {
  /** Absolute path as the Docker daemon sees it. */
  source: string
  /** Absolute path inside the sandbox, below /mnt/ (e.g. /mnt/skills/user/<name>). */
  target: string
}

/**
 * Extension (docs/contract.md#skills): asked each time a sandbox is created or a stopped one is about to start, with
 * the caller's identity (`email` falls back to the chat's meta.json). A stopped sandbox whose answer
 * changed is recreated (volume and data kept). It runs under the chat's lock: answer promptly; a
 * rejection counts as no mounts and is logged.
 */
export type MountProvider = (req: { chatId: string, email?: string, user?: RequestUser }) => Promise<SandboxMount[]>

/**
 * Extension (docs/engine.md#environment): variables a plugin puts in every sandbox's own environment (the
 * egress plugin's proxy settings, the sub-agent's `SUBAGENT_CLI`), and names it keeps out of it. The core
 * asks every contributor when it builds a sandbox's spec (a chat's or a warm pool sandbox's: the answer
 * must not depend on the chat) and when it checks a stopped sandbox for drift.
 */
export interface EnvContributor {
  /**
   * The names this contributor manages: values outside them are ignored, and a stopped sandbox whose
   * value of one of them differs from the current answer (added, changed or gone) is recreated at its next start.
   */
  readonly names: readonly string[]
  /**
   * Names that never enter a sandbox's own environment, whatever any layer says (provider credentials:
   * the owner passes them only in the environment of the processes that need them). Also compared for
   * drift, so a sandbox created while one was still there is recreated.
   */
  readonly withheld?: readonly string[]
  /** The variables now; an empty value or a missing name leaves the name out. */
  env: () => Record<string, string>
}
