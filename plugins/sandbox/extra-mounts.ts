/*
 * Extension (docs/contract.md#skills): extra read-only mounts (the storage request's `extra`, docs/engine.md#storage) asked of the registered MountProviders when a
 * sandbox is created or a stopped one is about to start (user skills at /mnt/skills/user/<name>).
 * The answer becomes part of the desired config, so a stopped sandbox whose mounts changed is
 * recreated by the drift check (docs/contract.md#creation) with its volume and data. A call without an email uses
 * the chat's last known user from meta.json, so one anonymous call does not strip a user's mounts.
 */
import { posix } from 'node:path'
import { SANDBOX_HOME, SANDBOX_OUTPUTS, SANDBOX_SKILLS, SANDBOX_UPLOADS } from '../../core/chat-paths.js'
import type { RequestUser } from '../../core/identity.js'
import type { ExtraStorage } from './engine-types.js'
import { loadMeta } from './data-dirs.js'
import type { Entry } from './chats.js'
import type { CoreBase } from './context.js'
import type { MountProvider } from './types.js'

const RESERVED = [SANDBOX_HOME, SANDBOX_UPLOADS, SANDBOX_OUTPUTS, SANDBOX_SKILLS]

function acceptable (m: { source: unknown, target: unknown }): m is { source: string, target: string } {
  if (typeof m.source !== 'string' || typeof m.target !== 'string') return false
  const clean = (p: string): boolean => p.startsWith('/') && posix.normalize(p) === p && !p.includes('\u0000') && !p.endsWith('/')
  return clean(m.source) && clean(m.target) && m.target.startsWith('/mnt/') && !RESERVED.includes(m.target)
}

/** The addMounts extension: providers registered at boot, asked when a sandbox is created or started. */
export interface ExtraMounts {
  addProvider: (provider: MountProvider) => void
  extraMounts: (entry: Entry, user: RequestUser | undefined) => Promise<ExtraStorage[]>
}

export function createMounts (base: Pick<CoreBase, 'log' | 'opts'>): ExtraMounts {
  const { log } = base
  const providers: MountProvider[] = []

  async function emailOf (entry: Entry, user: RequestUser | undefined): Promise<string | undefined> {
    if (user?.email !== undefined) return user.email
    if (!entry.metaLoaded) {
      entry.metaLoaded = true
      entry.meta = await loadMeta(base.opts.storage, entry.names.chatId) ?? undefined
    }
    return entry.meta?.user_email ?? undefined
  }

  /** The providers' mounts, checked (absolute, normalised, below /mnt/, not a core mount, no duplicate target), sorted by target. */
  async function extraMounts (entry: Entry, user: RequestUser | undefined): Promise<ExtraStorage[]> {
    if (providers.length === 0) return []
    const email = await emailOf(entry, user)
    const out = new Map<string, ExtraStorage>()
    for (const provider of providers) {
      try {
        const mounts = await provider({ chatId: entry.names.chatId, ...(email !== undefined && { email }), ...(user !== undefined && { user }) })
        for (const m of mounts) {
          if (!acceptable(m)) { log.warn({ chat: entry.names.key }, 'an extra mount was refused (not an absolute, normalised path below /mnt/)'); continue }
          if (!out.has(m.target)) out.set(m.target, { source: m.source, target: m.target })
        }
      } catch (err) {
        log.warn({ chat: entry.names.key, err }, 'a mount provider failed; the sandbox starts without its mounts')
      }
    }
    return [...out.values()].sort((a, b) => a.target < b.target ? -1 : 1)
  }

  return { addProvider: provider => { providers.push(provider) }, extraMounts }
}
