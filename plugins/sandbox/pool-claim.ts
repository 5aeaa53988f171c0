import { lstat, mkdir, readdir, rename, rm, unlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { chatPaths } from '../../core/chat-paths.js'
import type { RequestUser } from '../../core/identity.js'
import type { SpecMount } from './engine-types.js'
import type { ExecSpec, SandboxEngine } from './engine-types.js'
import { chatEnv, toEnvList } from './env.js'
import { chatLabels, ownerFilter, rfc3339 } from './names.js'
import { claimable, discardSlot, poolNames, poolOf, refill, slotDirs, takeSlot, type PoolSlot } from './pool.js'
import { readIdentity, readRecord, RECORD, type BindingRecord, type SandboxRecord } from './pool-record.js'
import { sleep, type Entry, type Registry } from './registry.js'
import { giveAgent } from './agent-client.js'

/*
 * Claiming a warm sandbox for a new chat (docs/contract.md#warm-pool; design in plugins/sandbox/README.md, "Warm pool"). Under the
 * chat's lock: take a ready slot (synchronous, so never twice), write the journal and the chat's record,
 * claim the sandbox through the engine (named `{prefix}-sbx-{K}`, labelled where the engine can; a
 * conflict means the name is taken: the slot goes back and the create path adopts the other sandbox),
 * then move the slot's data dirs into the chat's place. The chat keeps the slot's home volume for good
 * (Entry.pool, the record); the per-chat environment a sandbox gets at create is given to every exec of
 * a claimed sandbox instead.
 */

/** A chat whose home volume came from the pool (Entry.pool; null: none; undefined: record not read yet). */
export interface PoolBinding {
  slot: string
  volume: string
  /** who claimed it (the git identity and GitLab host a fresh container would have been created with) */
  user?: RequestUser
  record: BindingRecord
}

/** After a claim, the refill waits this long (the chat's hooks and first command run meanwhile). */
const QUIET_MS = 2000

type Claimed = { container: { id: string, labels: Record<string, string>, running: boolean }, ids: { uid: number, gid: number } | null }

export function bindEntry (entry: Entry, b: PoolBinding | null): void {
  entry.pool = b
  if (b !== null) entry.names.volume = b.volume
}

/** A record names only the volume of its own slot under our prefix. */
export const ownVolume = (reg: Registry, r: BindingRecord): boolean => r.home_volume === poolNames(reg.opts.prefix, r.slot).volume

const recordPath = (reg: Registry, chatId: string): string => join(chatPaths(reg.opts.dataDir, chatId).dir, RECORD)

/** Before a chat's sandbox is created: its record (chat id, home volume), unless it has one (a claimed home). */
export async function recordCreated (reg: Registry, entry: Entry): Promise<void> {
  if (entry.pool != null) return
  const record: SandboxRecord = { chat_id: entry.names.chatId, home_volume: entry.names.volume }
  await writeJson(recordPath(reg, entry.names.chatId), record)
}

/** Reads the chat's pool record once: from then on its home volume is the claimed one (create, drift, removal, purge). */
export async function loadBinding (reg: Registry, entry: Entry): Promise<void> {
  if (entry.pool !== undefined) return
  const r = await readRecord(recordPath(reg, entry.names.chatId))
  bindEntry(entry, r !== null && r.chat_id === entry.names.chatId && ownVolume(reg, r) ? { slot: r.slot, volume: r.home_volume, record: r } : null)
}

/** The environment a fresh container of this chat carries and a claimed one lacks: given to each of its execs. */
export function chatExecEnv (reg: Registry, sandboxId: string): string[] | undefined {
  const entry = poolOf(reg).bound.get(sandboxId)
  const b = entry?.pool
  if (entry === undefined || b === undefined || b === null) return undefined
  const r = b.record
  const user: RequestUser = b.user ?? {
    emailRejected: false,
    mcpServers: [],
    ...(r.user_name !== null && { name: r.user_name }),
    ...(r.user_email !== null && { email: r.user_email }),
    credentials: { ...(r.gitlab_host !== null && { gitlabHost: r.gitlab_host }), ...(entry.user?.credentials.gitlabToken !== undefined && { gitlabToken: entry.user.credentials.gitlabToken }) }
  }
  return toEnvList(chatEnv(entry.names.chatId, reg.opts.subagentCli, user))
}

/** The adapter with the chat env in front of each exec's own (later entries win, as over a container's env). */
export function withChatEnv (docker: SandboxEngine, envOf: (sandboxId: string) => string[] | undefined): SandboxEngine {
  return {
    ...docker,
    exec: async (sandboxId: string, spec: ExecSpec) => {
      const extra = envOf(sandboxId)
      return await docker.exec(sandboxId, extra === undefined ? spec : { ...spec, env: [...extra, ...(spec.env ?? [])] })
    }
  }
}

export async function writeJson (path: string, value: unknown): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`
  await writeFile(tmp, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o644 })
  await rename(tmp, path)
}

/**
 * A new chat (no pool record, no home volume of its own) with no extra mounts takes a ready pool
 * sandbox that still matches the settings; null: create one as usual.
 */
export async function claim (reg: Registry, entry: Entry, user: RequestUser | undefined, extra: SpecMount[]): Promise<Claimed | null> {
  if (reg.opts.poolSize <= 0) return null
  await loadBinding(reg, entry)
  // Per-user mounts are fixed at create: such chats get a fresh sandbox. A chat claimed before keeps its volume.
  if (extra.length > 0 || entry.pool !== null || poolOf(reg).ready.length === 0) { refill(reg); return null }
  // A chat that had a sandbox has a record (or, made by an earlier version, a volume labelled with its key).
  const [record, own, imageId] = await Promise.all([
    readIdentity(recordPath(reg, entry.names.chatId)),
    reg.engine.listVolumes([...ownerFilter(reg.opts.prefix), `cu.chat-key=${entry.names.key}`]),
    reg.engine.imageId(reg.opts.image).catch(() => null)
  ])
  if (record !== null || own.length > 0) return null
  let slot: PoolSlot | undefined
  while ((slot = takeSlot(reg)) !== undefined) {
    const why = claimable(reg, slot, imageId)
    if (why === null) break
    reg.log.info({ slot: slot.slot, reason: why }, 'warm pool: replacing a sandbox that no longer matches')
    void discardSlot(reg, slot)
  }
  if (slot === undefined) { refill(reg); return null }
  const pool = poolOf(reg)
  pool.claiming.add(slot.id)
  try {
    return await bind(reg, entry, slot, user)
  } finally {
    pool.claiming.delete(slot.id)
    // The new chat's hooks and first command go first: the refill waits a moment.
    pool.quietUntil = Date.now() + QUIET_MS
    refill(reg)
  }
}

async function bind (reg: Registry, entry: Entry, slot: PoolSlot, user: RequestUser | undefined): Promise<Claimed | null> {
  const dirs = slotDirs(reg.opts.dataDir, slot.slot)
  const record: BindingRecord = {
    chat_id: entry.names.chatId,
    slot: slot.slot,
    home_volume: poolNames(reg.opts.prefix, slot.slot).volume,
    sandbox_id: slot.id,
    claimed_at: rfc3339(new Date(reg.opts.now())),
    user_name: user?.name ?? null,
    user_email: user?.email ?? null,
    gitlab_host: user?.credentials.gitlabHost ?? null
  }
  // Journal first (a restart before the claim rolls back), then the chat's record (a restart after it finishes).
  await writeJson(dirs.journal, { chat_id: entry.names.chatId })
  await writeJson(recordPath(reg, entry.names.chatId), record)
  const labels = chatLabels(reg.engine.labelsAtClaim, entry.names.chatId)
  const renamed = await reg.engine.claim(slot.id, { name: entry.names.container, labels }).catch(err => err as Error)
  if (renamed !== true) {
    await unlink(recordPath(reg, entry.names.chatId)).catch(() => {})
    await unlink(dirs.journal).catch(() => {})
    if (renamed === 'conflict') poolOf(reg).ready.unshift(slot)
    else void discardSlot(reg, slot)
    reg.log.info({ chat: entry.names.key, slot: slot.slot, ...(renamed instanceof Error ? { err: renamed } : { result: String(renamed) }) }, 'warm pool: claim not possible; creating instead')
    if (renamed instanceof Error) throw renamed
    return null
  }
  bindEntry(entry, { slot: slot.slot, volume: record.home_volume, record, ...(user !== undefined && { user }) })
  // Its agent, opened while it waited, now serves the chat (requests carry the chat's env: agent-exec.ts).
  if (slot.agent !== undefined) giveAgent(entry, slot.agent)
  poolOf(reg).bound.set(slot.id, entry)
  await finishClaim(reg, entry.names.chatId, slot.slot)
  reg.log.info({ chat: entry.names.key, slot: slot.slot, container: entry.names.container }, 'warm pool: sandbox claimed')
  return { container: { id: slot.id, labels: { ...slot.details.labels, ...labels }, running: true }, ids: slot.uid > 0 ? { uid: slot.uid, gid: slot.gid } : null }
}

/** After the engine's claim: the slot's uploads and outputs become the chat's (idempotent: a restart finishes it). */
export async function finishClaim (reg: Registry, chatId: string, slot: string): Promise<void> {
  const dirs = slotDirs(reg.opts.dataDir, slot)
  const paths = chatPaths(reg.opts.dataDir, chatId)
  await mkdir(paths.dir, { recursive: true, mode: 0o755 })
  await adoptDir(dirs.uploads, paths.uploads)
  await adoptDir(dirs.outputs, paths.outputs)
  await rm(dirs.dir, { recursive: true, force: true })
}

export const exists = async (p: string): Promise<boolean> => await lstat(p).then(() => true, () => false)
const isPart = (name: string): boolean => name.startsWith('.upload-') && name.endsWith('.part')

/** An upload is being written somewhere below `dir` (bounded scan, links not followed). */
async function uploading (dir: string, budget = { left: 2000 }): Promise<boolean> {
  let list
  try { list = await readdir(dir, { withFileTypes: true }) } catch { return false }
  for (const d of list) {
    if (--budget.left < 0) return false
    if (isPart(d.name)) return true
    if (d.isDirectory() && await uploading(join(dir, d.name), budget)) return true
  }
  return false
}

/**
 * Makes `from` (the directory the running sandbox has bind-mounted) the directory at `to`: what `to`
 * holds already (uploads sent before the first tool call) moves into `from` entry by entry, then `from`
 * replaces the then empty `to` with one rename. Waits up to 5 s for uploads being written to land.
 */
async function adoptDir (from: string, to: string): Promise<void> {
  if (!await exists(from)) return
  for (let round = 0; ; round++) {
    if (round < 100 && await uploading(to)) { await sleep(50); continue }
    let names: string[] = []
    try { names = await readdir(to) } catch (err) { if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err }
    for (const name of names) {
      await rename(join(to, name), join(from, name)).catch((err: NodeJS.ErrnoException) => { if (err.code !== 'ENOENT') throw err })
    }
    try {
      await rename(from, to)
      return
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if ((code !== 'ENOTEMPTY' && code !== 'EEXIST') || round > 200) throw err
    }
  }
}
