import type { FastifyBaseLogger } from 'fastify'
import type { Adapter, AdapterPayload } from 'oidc-provider'
import type { Entry, StoreDisk } from './store-disk.js'

/*
 * The authorization server's storage: oidc-provider's adapter interface over bounded in-memory maps,
 * one per model, of which the durable ones (clients, grants, refresh and access tokens, accounts) are
 * kept on disk (store-disk.ts) so a restart keeps users connected. Clients are written one file per
 * client, before the registration is answered; the other models as one file each, coalesced: a burst
 * of token issues costs one write per model. Every model has an entry cap, and an entry a size cap,
 * because clients register without any credential (RFC 7591): nobody can grow the state (or its
 * files) without bound.
 */

export interface StoreOptions {
  /** Where durable models live. */
  disk: StoreDisk
  log: FastifyBaseLogger
  /** Models written to disk; the others (sessions, interactions, codes) live in memory only. */
  persisted: readonly string[]
  /** Entry caps per model; models not listed get `defaultLimit`. */
  limits: Readonly<Record<string, number>>
  defaultLimit: number
  /** Largest accepted entry as JSON (bytes). */
  maxEntryBytes: number
  now?: () => number
}

export interface OAuthStore {
  /** Reads the state files (missing files are an empty state; a corrupt one is logged and set aside). */
  load: () => Promise<void>
  /** The adapter oidc-provider instantiates per model (`configuration.adapter`). */
  adapterFor: (model: string) => Adapter
  /** The live payload of one entry. */
  get: (model: string, id: string) => AdapterPayload | undefined
  /** Live payloads of one model (expired entries skipped). */
  list: (model: string) => Array<[string, AdapterPayload]>
  /** Removes an entry of any model, with its grant index. */
  remove: (model: string, id: string) => void
  /** Waits until every change so far is on disk. */
  flush: () => Promise<void>
}

const GRANTABLE = new Set(['AccessToken', 'AuthorizationCode', 'RefreshToken', 'DeviceCode', 'BackchannelAuthenticationRequest'])

export function createOAuthStore (opts: StoreOptions): OAuthStore {
  const now = opts.now ?? Date.now
  const models = new Map<string, Map<string, Entry>>()
  const byGrant = new Map<string, Set<string>>() // grantId → "Model\0id"
  const sessionByUid = new Map<string, string>()
  const persisted = new Set(opts.persisted)
  const { disk } = opts
  const dirty = new Set<string>()
  let writing: Promise<void> | undefined
  // Per-entry writes in flight, one chain per entry so that its writes land in order.
  const entryWrites = new Map<string, Promise<void>>()

  const table = (model: string): Map<string, Entry> => {
    let map = models.get(model)
    if (map === undefined) { map = new Map(); models.set(model, map) }
    return map
  }
  const live = (entry: Entry | undefined): entry is Entry => entry !== undefined && (entry.e === null || entry.e > now())

  function index (model: string, id: string, payload: AdapterPayload, add: boolean): void {
    if (GRANTABLE.has(model) && typeof payload.grantId === 'string') {
      const members = byGrant.get(payload.grantId) ?? new Set()
      if (add) members.add(`${model}\0${id}`); else members.delete(`${model}\0${id}`)
      if (members.size === 0) byGrant.delete(payload.grantId); else byGrant.set(payload.grantId, members)
    }
    if (model === 'Session' && typeof payload.uid === 'string') {
      if (add) sessionByUid.set(payload.uid, id); else if (sessionByUid.get(payload.uid) === id) sessionByUid.delete(payload.uid)
    }
  }

  function remove (model: string, id: string): void {
    const map = table(model)
    const entry = map.get(id)
    if (entry === undefined) return
    map.delete(id)
    index(model, id, entry.p, false)
    void changed(model, id)
  }

  /** Makes room for one more entry: expired ones go first, then (clients: unused ones first) the oldest. */
  function makeRoom (model: string, map: Map<string, Entry>): void {
    const limit = opts.limits[model] ?? opts.defaultLimit
    if (map.size < limit) return
    for (const [id, entry] of map) if (!live(entry)) remove(model, id)
    if (map.size < limit) return
    let victim = map.keys().next().value as string
    if (model === 'Client') {
      const used = new Set([...table('Grant').values()].map(g => g.p.clientId))
      victim = [...map.keys()].find(id => !used.has(id)) ?? victim
    }
    opts.log.warn({ model, limit }, 'oauth state is full: dropping the oldest entry')
    remove(model, victim)
  }

  /** Schedules the write of a change; for a per-entry model, resolves once that entry's file is written (never rejects). */
  async function changed (model: string, id: string): Promise<void> {
    if (!persisted.has(model)) return
    if (disk.isPerEntry(model)) { await writeEntry(model, id); return }
    dirty.add(model)
    writing ??= new Promise<void>(resolve => setImmediate(resolve)).then(writeDirty).finally(() => { writing = undefined })
  }

  /** Writes the entry as it is when the write starts (or removes its file when it is gone). */
  async function writeEntry (model: string, id: string): Promise<void> {
    const key = `${model}\0${id}`
    const run = (entryWrites.get(key) ?? Promise.resolve()).then(async () => {
      const entry = table(model).get(id)
      await disk.writeEntry(model, id, live(entry) ? entry : undefined)
    }).catch((err: unknown) => { opts.log.error({ err, model }, 'could not write oauth state') })
    const next: Promise<void> = run.finally(() => { if (entryWrites.get(key) === next) entryWrites.delete(key) })
    entryWrites.set(key, next)
    await next
  }

  async function writeDirty (): Promise<void> {
    while (dirty.size > 0) {
      const [model] = dirty as unknown as [string]
      dirty.delete(model)
      try { await disk.writeModel(model, [...table(model)].filter(([, e]) => live(e))) } catch (err) { opts.log.error({ err, model }, 'could not write oauth state') }
    }
  }

  function adapterFor (model: string): Adapter {
    const map = table(model)
    const find = async (id: string): Promise<AdapterPayload | undefined> => {
      const entry = map.get(id)
      if (entry === undefined) return undefined
      if (live(entry)) return entry.p
      remove(model, id)
      return undefined
    }
    return {
      async upsert (id, payload, expiresIn) {
        if (JSON.stringify(payload).length > opts.maxEntryBytes) throw new Error(`oauth ${model} entry over ${opts.maxEntryBytes} bytes`)
        const previous = map.get(id)
        if (previous !== undefined) { map.delete(id); index(model, id, previous.p, false) } else makeRoom(model, map)
        map.set(id, { p: payload, e: typeof expiresIn === 'number' ? now() + expiresIn * 1000 : null })
        index(model, id, payload, true)
        // A client's registration is answered once its file is written.
        await changed(model, id)
      },
      find,
      async findByUid (uid) {
        const id = sessionByUid.get(uid)
        return id === undefined ? undefined : await find(id)
      },
      async findByUserCode () { return undefined }, // no device flow
      async consume (id) {
        const entry = map.get(id)
        if (entry === undefined) return
        entry.p.consumed = Math.floor(now() / 1000)
        await changed(model, id)
      },
      async destroy (id) { remove(model, id) },
      async revokeByGrantId (grantId) {
        for (const member of [...byGrant.get(grantId) ?? []]) {
          const [m, id] = member.split('\0') as [string, string]
          remove(m, id)
        }
      }
    }
  }

  return {
    async load () {
      for (const model of persisted) {
        const map = table(model)
        for (const [id, entry] of await disk.load(model)) {
          if (!live(entry)) continue
          makeRoom(model, map)
          map.set(id, entry)
          index(model, id, entry.p, true)
        }
      }
    },
    adapterFor,
    get (model, id) {
      const entry = table(model).get(id)
      return live(entry) ? entry.p : undefined
    },
    list (model) {
      return [...table(model)].filter(([, e]) => live(e)).map(([id, e]) => [id, e.p])
    },
    remove,
    async flush () {
      while (writing !== undefined || entryWrites.size > 0) {
        if (writing !== undefined) await writing
        await Promise.all(entryWrites.values())
      }
    }
  }
}
