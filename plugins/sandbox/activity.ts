import type { RequestUser } from '../../core/identity.js'
import { loadMeta, type ChatMeta } from './data-dirs.js'
import type { Entry } from './chats.js'
import type { CoreBase } from './context.js'

/*
 * Activity and leases (docs/contract.md#idle-stop-max-age-and-purge) and the chat's meta.json (docs/contract.md#creation), cached on
 * its Entry: read once, rewritten on creation, when the caller changes, and at most once a minute
 * for last_active_at.
 */

export function metaUserChanged (entry: Entry, user: RequestUser): boolean {
  const m = entry.meta
  if (m === undefined) return true
  return (user.email !== undefined && user.email !== m.user_email) ||
    (user.name !== undefined && user.name !== m.user_name) ||
    (user.mcpServers.length > 0 && user.mcpServers.join(',') !== m.mcp_servers.join(','))
}

const META_INTERVAL_MS = 60_000

/** Activity (the idle clock), leases and meta.json of a chat. */
export interface Activity {
  activity: (entry: Entry) => void
  holdLease: (entry: Entry, kind?: 'call' | 'socket') => () => void
  saveMeta: (entry: Entry, user?: RequestUser, force?: boolean) => Promise<void>
}

export function createActivity (base: Pick<CoreBase, 'opts' | 'log' | 'clock' | 'bootTime'>): Activity {
  const { opts, log, clock } = base

  /** Records activity (idle reaper) and flushes last_active_at to meta.json at most once a minute. */
  function activity (entry: Entry): void {
    const now = clock.now()
    entry.lastActive = Math.max(entry.lastActive, now)
    if (now - entry.metaWrittenAt >= META_INTERVAL_MS && (entry.meta !== undefined || !entry.metaLoaded)) {
      entry.metaWrittenAt = now
      void saveMeta(entry).catch(() => {})
    }
  }

  /** Holds the sandbox against the idle reaper (`socket`: against the idle stop only) until released. */
  function holdLease (entry: Entry, kind: 'call' | 'socket' = 'call'): () => void {
    const socket = kind === 'socket'
    if (socket) entry.socketLeases++
    else entry.callLeases++
    activity(entry)
    let released = false
    return () => {
      if (released) return
      released = true
      if (socket) entry.socketLeases--
      else entry.callLeases--
      activity(entry)
    }
  }

  /** Writes meta.json; without `force` only when the chat already has one. Never throws on a write failure. */
  async function saveMeta (entry: Entry, user?: RequestUser, force = false): Promise<void> {
    if (!entry.metaLoaded || (entry.meta === undefined && force)) {
      entry.metaLoaded = true
      entry.meta = await loadMeta(opts.storage, entry.names.chatId) ?? undefined
    }
    if (entry.meta === undefined && !force) return
    const now = new Date(clock.now()).toISOString()
    const previous = entry.meta
    const meta: ChatMeta = {
      chat_id: entry.names.chatId,
      user_email: user?.email ?? previous?.user_email ?? null,
      user_name: user?.name ?? previous?.user_name ?? null,
      mcp_servers: user !== undefined && user.mcpServers.length > 0 ? user.mcpServers : previous?.mcp_servers ?? [],
      created_at: previous?.created_at ?? now,
      last_active_at: new Date(Math.max(entry.lastActive, base.bootTime)).toISOString(),
      image: opts.image
    }
    entry.meta = meta
    entry.metaWrittenAt = clock.now()
    try {
      await opts.storage.writeMeta(entry.names.chatId, meta)
    } catch (err) {
      log.warn({ chat: entry.names.key, err }, 'could not write meta.json')
    }
  }

  return { activity, holdLease, saveMeta }
}
