import { createHash } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { AdapterPayload } from 'oidc-provider'
import type { StateFiles } from '../chat-storage/types.js'

/*
 * Where the authorization server's durable state lives, through chat storage's state files (read
 * by descriptor without following symlinks, bounded; written to a fresh temporary file, fsynced,
 * renamed). Two layouts:
 * - whole-model files, `oauth/state/<Model>.json`, rewritten (coalesced) when the model changes:
 *   grants, tokens and accounts, which only a signed-in user creates;
 * - one file per entry, `<dir>/<sha256(id)[0:32]>.json`: clients, which anyone may register without
 *   a credential, so that a registration costs one small write however many clients exist.
 * A whole-model file of an earlier version is moved into per-entry files on load, then removed.
 */

export interface Entry { p: AdapterPayload, e: number | null }

export interface StoreDiskOptions {
  /** `oauth/state`: the whole-model files. */
  state: StateFiles
  /** Models kept one file per entry, each with its directory (e.g. Client → `oauth/clients`). */
  perEntry: Readonly<Record<string, StateFiles>>
  log: FastifyBaseLogger
  /** Largest entry as JSON (bytes); bounds every read. */
  maxEntryBytes: number
  /** Entry cap of a model; bounds a whole-model file and a directory listing. */
  limit: (model: string) => number
  now: () => number
}

export interface StoreDisk {
  /** The entries kept for `model`, in either layout. An unreadable file is set aside for the operator and logged. */
  load: (model: string) => Promise<Array<[string, Entry]>>
  /** Replaces the whole-model file of `model` with these entries. */
  writeModel: (model: string, entries: Array<[string, Entry]>) => Promise<void>
  /** Writes one entry of a per-entry model, or removes its file when `entry` is undefined. */
  writeEntry: (model: string, id: string, entry: Entry | undefined) => Promise<void>
  isPerEntry: (model: string) => boolean
}

const FORMAT = 1
const ENTRY_FILE = /^[0-9a-f]{32}\.json$/
const MAX_ID = 256
// A JSON string longer than this cannot be read back anyway (V8's string limit is about 512 MiB).
const MAX_MODEL_FILE = 512 * 1024 * 1024
const PARALLEL = 8

/** The file of an entry: a hash, so any id (oidc-provider's may start with '-') gives a plain name. */
export const entryFile = (id: string): string => `${createHash('sha256').update(id).digest('hex').slice(0, 32)}.json`

const isEntry = (value: unknown): value is Entry => {
  const e = value as Entry | null
  return e !== null && typeof e === 'object' && e.p !== null && typeof e.p === 'object' && (e.e === null || typeof e.e === 'number')
}

/** Runs `work` over `items`, `PARALLEL` at a time. */
async function inBatches<T> (items: T[], work: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += PARALLEL) await Promise.all(items.slice(i, i + PARALLEL).map(work))
}

export function createStoreDisk (opts: StoreDiskOptions): StoreDisk {
  const { log, state } = opts
  const entryBound = opts.maxEntryBytes + MAX_ID + 256
  const files = (model: string): StateFiles => {
    const dir = opts.perEntry[model]
    if (dir === undefined) throw new TypeError(`oauth model ${model} is not kept one file per entry`)
    return dir
  }

  /** Reads and parses a file; on any failure sets it aside (never overwritten later) and answers undefined. */
  async function readJson (where: StateFiles, name: string, maxBytes: number, model: string): Promise<unknown> {
    try {
      const text = await where.read(name, maxBytes)
      return text === null ? null : JSON.parse(text) as unknown
    } catch (err) {
      log.error({ err, model, file: name }, 'oauth state file is unreadable; moved aside, users of it sign in again')
      await where.quarantine(name, String(opts.now())).catch((e: unknown) => { log.error({ err: e, model }, 'could not move an oauth state file aside') })
      return undefined
    }
  }

  async function loadModelFile (model: string): Promise<Array<[string, Entry]> | null> {
    const name = `${model}.json`
    const bound = Math.min(opts.limit(model) * entryBound + 64, MAX_MODEL_FILE)
    const parsed = await readJson(state, name, bound, model) as { version?: number, entries?: unknown } | null | undefined
    if (parsed === null) return null
    if (parsed === undefined) return []
    if (parsed.version !== FORMAT || !Array.isArray(parsed.entries)) {
      log.error({ model }, 'oauth state file has an unknown format; moved aside, users of it sign in again')
      await state.quarantine(name, String(opts.now())).catch((err: unknown) => { log.error({ err, model }, 'could not move an oauth state file aside') })
      return []
    }
    return (parsed.entries as unknown[]).filter((pair): pair is [string, Entry] =>
      Array.isArray(pair) && typeof pair[0] === 'string' && pair[0].length <= MAX_ID && isEntry(pair[1]))
  }

  async function writeEntry (model: string, id: string, entry: Entry | undefined): Promise<void> {
    const dir = files(model)
    if (entry === undefined) { await dir.remove(entryFile(id)); return }
    await dir.write(entryFile(id), JSON.stringify({ version: FORMAT, id, entry }), { maxBytes: entryBound, mode: 0o600 })
  }

  /** Moves the whole-model file an earlier version wrote into one file per entry, then removes it. */
  async function migrate (model: string): Promise<void> {
    const old = await loadModelFile(model)
    if (old === null) return
    await inBatches(old, async ([id, entry]) => { await writeEntry(model, id, entry) })
    await state.remove(`${model}.json`)
    log.info({ model, entries: old.length }, 'oauth state moved to one file per entry')
  }

  async function loadEntries (model: string): Promise<Array<[string, Entry]>> {
    await migrate(model)
    const dir = files(model)
    const limit = opts.limit(model) * 2 + 64
    const names = await dir.list(limit)
    if (names.length >= limit) log.warn({ model, files: names.length }, 'oauth state directory holds more files than expected; only the first are read')
    const loaded: Array<[string, Entry]> = []
    await inBatches(names, async name => {
      // A temporary file a crash left behind: never renamed into place, so never valid.
      if (name.endsWith('.tmp')) { await dir.remove(name); return }
      if (!ENTRY_FILE.test(name)) return
      const parsed = await readJson(dir, name, entryBound, model) as { version?: number, id?: unknown, entry?: unknown } | null | undefined
      if (parsed === null || parsed === undefined) return
      if (parsed.version === FORMAT && typeof parsed.id === 'string' && entryFile(parsed.id) === name && isEntry(parsed.entry)) {
        loaded.push([parsed.id, parsed.entry])
        return
      }
      log.error({ model, file: name }, 'oauth state file does not hold an entry of its name; moved aside')
      await dir.quarantine(name, String(opts.now()))
    })
    // Oldest first, as a whole-model file kept them: eviction takes the oldest unused entry.
    const issued = (e: Entry): number => typeof e.p.client_id_issued_at === 'number' ? e.p.client_id_issued_at : 0
    return loaded.sort((a, b) => issued(a[1]) - issued(b[1]))
  }

  return {
    isPerEntry: model => opts.perEntry[model] !== undefined,
    async load (model) {
      if (opts.perEntry[model] !== undefined) return await loadEntries(model)
      return await loadModelFile(model) ?? []
    },
    async writeModel (model, entries) {
      await state.write(`${model}.json`, JSON.stringify({ version: FORMAT, entries }), { maxBytes: MAX_MODEL_FILE, mode: 0o600 })
    },
    writeEntry
  }
}
