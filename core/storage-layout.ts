import { join } from 'node:path'
import { SANDBOX_HOME, SANDBOX_OUTPUTS, SANDBOX_SKILLS, SANDBOX_UPLOADS } from './chat-paths.js'

/*
 * A sandbox's storage in neutral words (docs/engine.md#storage): what the sandbox core asks an engine for
 * (its contract re-exports these types from plugins/sandbox/engine-storage.ts), and the one layout of it on
 * a host directory tree, shared by the engines whose data areas are host directories (Docker's bind
 * mounts below DATA_DIR_HOST, the in-memory engine's) and by chat-storage, which reads the same
 * directories from the server's side. An engine without host directories (Kubernetes: volumes) maps
 * the same request its own way and never calls the path functions here.
 */

/** Whose uploads and outputs: a chat (its key K, 32 hex digits) or a warm pool slot (12 or 32 hex digits). */
export type StorageOwner = { chat: string } | { slot: string }

/** A read-only mount an extension asked for (user skills at /mnt/skills/user/<name>). */
export interface ExtraStorage {
  /** the extension's location as the engine's host sees it (user-skills: its content-addressed cache) */
  source: string
  /** absolute path inside the sandbox, below /mnt/ */
  target: string
}

/**
 * The storage a sandbox is created with, by name, never a host path of a chat: the engine decides where it
 * lives. Targets are fixed by docs/contract.md#sandbox-layout.
 */
export interface SandboxStorage {
  /**
   * The home at /home/assistant (writable): a volume named by the core (`{prefix}-home-{K}`, or the pool
   * slot's a chat claimed), made on first use with `labels`, kept when the sandbox is removed.
   */
  home: { volume: string, labels: Record<string, string> }
  /** whose data areas: uploads read-only at /mnt/user-data/uploads, outputs writable at /mnt/user-data/outputs */
  data: StorageOwner
  /** the server's skills read-only at /mnt/skills, where the engine has them (Docker: SKILLS_DIR_HOST) */
  skills: boolean
  /** extension mounts, read-only, sorted by target */
  extra: ExtraStorage[]
}

/**
 * A sandbox's storage as the engine reads it back (inspect): what drift detection compares with the
 * request. `home` null: no volume at the home; `data` null: its data areas are not one owner's as the
 * engine maps them now (another DATA_DIR_HOST, a mode changed); `skills`: it has the engine's skills as
 * configured now (null when the engine has none: it cannot tell, and any mount at /mnt/skills is in
 * `extra`); `extra`: every other mount, unrecognised ones described in `source`, so that any change shows.
 */
export interface StorageSeen {
  home: string | null
  data: StorageOwner | null
  skills: boolean | null
  extra: ExtraStorage[]
}

const KEY = /^[0-9a-f]{32}$/
const SLOT = /^[0-9a-f]{12}(?:[0-9a-f]{20})?$/

/** Whether `owner` is well formed (a chat key or a slot id): nothing else ever becomes a path. */
export function validOwner (owner: unknown): owner is StorageOwner {
  if (typeof owner !== 'object' || owner === null) return false
  const o = owner as Record<string, unknown>
  if ('chat' in o) return typeof o.chat === 'string' && KEY.test(o.chat) && !('slot' in o)
  return typeof o.slot === 'string' && SLOT.test(o.slot)
}

/** `{root}/chats/{K}` or `{root}/pool/{slot}`; a malformed owner throws (a programming error). */
export function ownerDir (root: string, owner: StorageOwner): string {
  if (!validOwner(owner)) throw new TypeError(`not a storage owner: ${JSON.stringify(owner).slice(0, 80)}`)
  return 'chat' in owner ? join(root, 'chats', owner.chat) : join(root, 'pool', owner.slot)
}

/** The owner's uploads and outputs directories below `root`. */
export function areaDirs (root: string, owner: StorageOwner): { uploads: string, outputs: string } {
  const dir = ownerDir(root, owner)
  return { uploads: join(dir, 'uploads'), outputs: join(dir, 'outputs') }
}

/** A mount on an engine whose areas are host directories. */
export interface HostMount {
  type: 'bind' | 'volume'
  /** the volume's name, or the host path as the engine sees it */
  source: string
  target: string
  readOnly: boolean
}

/** Where an engine's host keeps the areas: `data` (DATA_DIR_HOST) and `skills` (SKILLS_DIR_HOST; '' = none). */
export interface HostRoots { data: string, skills: string }

/** The request as a volume and bind mounts below `roots`. */
export function hostMounts (storage: SandboxStorage, roots: HostRoots): HostMount[] {
  const dirs = areaDirs(roots.data, storage.data)
  const mounts: HostMount[] = [
    { type: 'volume', source: storage.home.volume, target: SANDBOX_HOME, readOnly: false },
    { type: 'bind', source: dirs.uploads, target: SANDBOX_UPLOADS, readOnly: true },
    { type: 'bind', source: dirs.outputs, target: SANDBOX_OUTPUTS, readOnly: false }
  ]
  const skills = roots.skills.trim()
  if (storage.skills && skills !== '') mounts.push({ type: 'bind', source: skills, target: SANDBOX_SKILLS, readOnly: true })
  for (const m of storage.extra) mounts.push({ type: 'bind', source: m.source, target: m.target, readOnly: true })
  return mounts
}

/** The owner whose uploads (or outputs) directory below `root` is `path`, or null. */
function ownerOf (root: string, path: string, area: 'uploads' | 'outputs'): StorageOwner | null {
  const prefix = join(root, '/')
  if (!path.startsWith(prefix)) return null
  const parts = path.slice(prefix.length).split('/')
  if (parts.length !== 3 || parts[2] !== area) return null
  const [kind, id] = parts as [string, string]
  const owner = kind === 'chats' ? { chat: id } : kind === 'pool' ? { slot: id } : null
  return owner !== null && validOwner(owner) ? owner : null
}

const sameOwner = (a: StorageOwner | null, b: StorageOwner | null): boolean =>
  a !== null && b !== null && JSON.stringify(a) === JSON.stringify(b)

/**
 * A sandbox's mounts (as the engine reports them) read back into the neutral form by the current `roots`:
 * the inverse of hostMounts for every mount it made; anything else (another root, another mode) lands in
 * `extra` or leaves `data`/`home` null, so drift detection sees it.
 */
export function storageOfMounts (mounts: ReadonlyArray<{ type: string, source: string, target: string, readOnly: boolean }>, roots: HostRoots): StorageSeen {
  const seen: StorageSeen = { home: null, data: null, skills: false, extra: [] }
  let uploads: StorageOwner | null = null
  let outputs: StorageOwner | null = null
  const skills = roots.skills.trim()
  for (const m of mounts) {
    if (m.target === SANDBOX_HOME && m.type === 'volume' && !m.readOnly) { seen.home = m.source; continue }
    if (m.type === 'bind' && m.target === SANDBOX_UPLOADS && m.readOnly) { uploads = ownerOf(roots.data, m.source, 'uploads'); if (uploads !== null) continue }
    if (m.type === 'bind' && m.target === SANDBOX_OUTPUTS && !m.readOnly) { outputs = ownerOf(roots.data, m.source, 'outputs'); if (outputs !== null) continue }
    if (m.target === SANDBOX_SKILLS && m.type === 'bind' && m.readOnly && skills !== '' && m.source === skills) { seen.skills = true; continue }
    seen.extra.push({ source: `${m.type === 'bind' ? '' : `${m.type}:`}${m.source}${m.readOnly ? '' : ':rw'}`, target: m.target })
  }
  if (skills === '') seen.skills = null
  if (sameOwner(uploads, outputs)) seen.data = uploads
  seen.extra.sort((a, b) => a.target < b.target ? -1 : a.target > b.target ? 1 : 0)
  return seen
}

/** Why `seen` differs from `wanted`, or null (drift detection compares the neutral form). */
export function storageDrift (seen: StorageSeen, wanted: SandboxStorage): string | null {
  if (seen.home !== wanted.home.volume) return 'home volume changed'
  if (seen.data === null || !sameOwner(seen.data, wanted.data)) return 'data areas changed'
  if (seen.skills !== null && seen.skills !== wanted.skills) return 'skills changed'
  const key = (list: ExtraStorage[]): string => list.map(m => `${m.target}\u0000${m.source}`).sort().join('\n')
  if (key(seen.extra) !== key(wanted.extra)) return 'extra mounts changed'
  return null
}

/** What an engine that made `storage` exactly reports back; `skills` null for an engine without skills. */
export function storageAsSeen (storage: SandboxStorage, skills: boolean | null = storage.skills): StorageSeen {
  return { home: storage.home.volume, data: { ...storage.data }, skills, extra: storage.extra.map(m => ({ ...m })) }
}
