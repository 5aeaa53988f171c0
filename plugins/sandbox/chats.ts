import { chatKey } from '../../core/chat-id.js'
import type { RequestUser } from '../../core/identity.js'
import type { AgentState } from './agent-connection.js'
import type { ChatMeta } from './data-dirs.js'
import type { DiskState } from './disk-quota.js'
import { sandboxNames, type SandboxNames } from './names.js'
import type { NoticeLog } from './notices.js'
import type { PoolBinding } from './pool-record.js'
import type { EnsureOptions, SandboxInfo } from './types.js'

/*
 * The core's per-chat state (docs/engine.md#the-core-inside): one Entry per chat (cached running state,
 * per-chat lock, leases, meta.json cache), the entries being started (capacity count) and the change
 * counter the reaper compares against. The roles that read and change entries are given this table.
 */

/** ensure() as the roles that start a sandbox again are given it (lifecycle.ts; bound in service.ts). */
export type Ensure = (chatId: string, opts?: EnsureOptions) => Promise<SandboxInfo>

/** paused: its processes are frozen (the engine's pause); any access wakes it (lifecycle.ts) */
export type EntryState = 'unknown' | 'running' | 'paused' | 'stopped' | 'absent'

/** In-memory view of one chat's sandbox. The running state is cached; failures invalidate it. */
export interface Entry {
  names: SandboxNames
  state: EntryState
  sandboxId?: string
  createdAt?: string
  lastActive: number
  callLeases: number
  socketLeases: number
  /** tail of the per-chat lock chain; `locked` > 0 while something holds or waits for it */
  tail: Promise<void>
  locked: number
  ensuring: Promise<{ info: SandboxInfo, started: boolean }> | null
  stopping: boolean
  meta?: ChatMeta
  /** address on the sandbox network of the current start (addresses.ts) */
  address?: { sandboxId: string, ip: string }
  /** meta.json was read (or found missing) once */
  metaLoaded: boolean
  metaWrittenAt: number
  /** value of the table's change counter at this entry's last state change (reaper races) */
  epoch: number
  /** the caller of the last ensure(): the driver starts the sandbox again on its behalf (recovery) */
  user?: RequestUser
  /**
   * The sandbox is not running because of the driver itself (saturation, disk limit, unkillable
   * processes) or something outside the server (docker rm/stop/kill): the next exec starts it again
   * instead of failing. Cleared by stop(), remove() and the reaper's own stops.
   */
  recoverable: boolean
  /** when the running container last became ready (ms, real time: compared with notices) */
  startedAt: number
  /** when the idle reaper paused it (ms, the service clock) */
  pausedAt: number
  /** a restart after saturation in flight (saturation.ts), joined by concurrent callers */
  restarting: Promise<void> | null
  /** notices for the model (notices.ts) */
  notices: NoticeLog
  /** the disk watchdog's view of this chat (disk-watchdog.ts) */
  disk: DiskState
  /** its home volume came from the warm pool (pool-claim.ts, pool-record.ts); null: no; undefined: not looked up yet */
  pool?: PoolBinding | null
  /** the in-sandbox agent's connection and backoff (agent-client.ts), created on first use */
  agent?: AgentState
}

export class Chats {
  /** by chat key */
  readonly entries = new Map<string, Entry>()
  /** entries between the capacity check (reaper.ts reserveSlot) and the end of their ensure */
  readonly starting = new Set<Entry>()
  /** bumped at every state change (changed()) */
  private epoch = 0

  constructor (private readonly prefix: string) {}

  /** The chat's entry, created on first use. */
  entryOf (chatId: string): Entry {
    const key = chatKey(chatId)
    let e = this.entries.get(key)
    if (e === undefined) {
      e = {
        names: sandboxNames(this.prefix, chatId),
        state: 'unknown',
        lastActive: 0,
        callLeases: 0,
        socketLeases: 0,
        tail: Promise.resolve(),
        locked: 0,
        ensuring: null,
        stopping: false,
        metaLoaded: false,
        metaWrittenAt: 0,
        epoch: 0,
        recoverable: false,
        startedAt: 0,
        pausedAt: 0,
        restarting: null,
        notices: { pending: [], actions: [] },
        disk: { over: null, stoppedAt: 0, stoppedTotal: 0 }
      }
      this.entries.set(key, e)
    }
    return e
  }

  /** Whether the chat's sandbox runs as far as this table knows (no entry is created; a stop or restart in progress does not count). */
  knownRunning (chatId: string): boolean {
    const e = this.entries.get(chatKey(chatId))
    return e !== undefined && e.state === 'running' && e.sandboxId !== undefined && !e.stopping && e.restarting === null
  }

  /** Stamps a state change of `entry` (the reaper leaves entries changed after its listing alone). */
  changed (entry: Entry): void {
    entry.epoch = ++this.epoch
  }

  /** The change counter now: entries with an epoch above it changed since. */
  mark (): number {
    return this.epoch
  }
}

/** Runs `fn` under the chat's lock (a promise chain per entry). */
export async function withLock<T> (entry: Entry, fn: () => Promise<T>): Promise<T> {
  const previous = entry.tail
  let release!: () => void
  entry.tail = new Promise<void>(resolve => { release = resolve })
  entry.locked++
  try {
    await previous
    return await fn()
  } finally {
    entry.locked--
    release()
  }
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
