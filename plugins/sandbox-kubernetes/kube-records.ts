import { randomBytes } from 'node:crypto'
import type { SandboxSpec } from '../sandbox/types.js'
import type { KubeClient } from './kube-client.js'
import { isNotFound, KubeError } from './kube-error.js'
import { ID_LABEL, PAUSED_ANNOTATION, ROLE_LABEL, validName, type ConfigMap, type ListOf } from './kube-objects.js'

/*
 * A sandbox's record (kube-engine.ts): a ConfigMap named by the sandbox's name that holds its spec and id
 * (its pod is named by the id). Found by name, or by id through the record's name this engine saw for it
 * (one GET) or, for an id it never saw, a list by the id's label. The paused mark is the record's
 * annotation, mirrored here so an exec is refused without a request.
 */

const ID_PREFIX = 'cu-'
export const newId = (): string => ID_PREFIX + randomBytes(10).toString('hex')
export const isId = (s: string): boolean => s.startsWith(ID_PREFIX) && s.length === ID_PREFIX.length + 20 && /^[0-9a-f]+$/.test(s.slice(ID_PREFIX.length))

export interface Sandbox { record: ConfigMap, spec: SandboxSpec, id: string }

export interface Records {
  /** the sandboxes this engine marked paused, by id */
  paused: Set<string>
  /** a record as read: its spec parsed, its paused mark and name noted */
  parse: (record: ConfigMap) => Sandbox
  /** the sandbox by name or id; undefined when it does not exist */
  find: (idOrName: string) => Promise<Sandbox | undefined>
  /** find, or the contract's no-such-sandbox */
  mustFind: (id: string) => Promise<Sandbox>
  /** every object of a collection with these labels, page by page */
  listAll: <T>(path: string, labelSelector: string) => Promise<T[]>
  setPaused: (s: Sandbox, on: boolean) => Promise<void>
  /** the record of sandbox `id` is named `name` now (created, renamed by a claim) */
  named: (id: string, name: string) => void
  /** the sandbox is gone */
  forget: (id: string) => void
}

export function recordCalls (client: KubeClient): Records {
  const paused = new Set<string>()
  /** The record's name of each sandbox id this engine saw: a look-up by id is one GET, not a GET and a list. */
  const names = new Map<string, string>()

  function parse (record: ConfigMap): Sandbox {
    const id = record.data?.id ?? ''
    let spec: SandboxSpec
    try { spec = JSON.parse(record.data?.spec ?? '') as SandboxSpec } catch { throw new KubeError(`the record ${record.metadata.name} of a sandbox is damaged (its spec is not JSON)`) }
    if (record.metadata.annotations?.[PAUSED_ANNOTATION] === 'true') paused.add(id)
    else paused.delete(id)
    if (isId(id)) names.set(id, record.metadata.name)
    return { record, spec, id }
  }

  async function getRecord (name: string): Promise<ConfigMap | undefined> {
    try {
      const record = await client.request<ConfigMap>('GET', client.path('configmaps', name))
      return record.metadata.labels?.[ROLE_LABEL] === 'sandbox' ? record : undefined
    } catch (err) { if (!isNotFound(err)) throw err; return undefined }
  }

  async function listAll<T> (path: string, labelSelector: string): Promise<T[]> {
    const items: T[] = []
    let cont: string | undefined
    do {
      const page = await client.request<ListOf<T>>('GET', path, { query: { labelSelector, limit: '500', continue: cont } })
      items.push(...page.items)
      cont = page.metadata?.continue !== undefined && page.metadata.continue !== '' ? page.metadata.continue : undefined
    } while (cont !== undefined)
    return items
  }

  async function find (idOrName: string): Promise<Sandbox | undefined> {
    // An id whose record this engine saw: that record, if it still is the sandbox's (renamed, removed: looked up again).
    const known = isId(idOrName) ? names.get(idOrName) : undefined
    if (known !== undefined) {
      const record = await getRecord(known)
      if (record !== undefined && record.data?.id === idOrName) return parse(record)
      names.delete(idOrName)
    }
    if (validName(idOrName)) {
      const record = await getRecord(idOrName)
      if (record !== undefined) return parse(record)
    }
    if (!isId(idOrName)) return undefined
    const byId = await client.request<ListOf<ConfigMap>>('GET', client.path('configmaps'), { query: { labelSelector: `${ROLE_LABEL}=sandbox,${ID_LABEL}=${idOrName}` } })
    return byId.items[0] === undefined ? undefined : parse({ ...byId.items[0], apiVersion: 'v1', kind: 'ConfigMap' })
  }

  return {
    paused,
    parse,
    find,
    async mustFind (id) {
      const s = await find(id)
      if (s === undefined) throw new KubeError(`no sandbox ${id.slice(0, 100)}`, { reason: 'no-such-sandbox', statusCode: 404 })
      return s
    },
    listAll,
    async setPaused (s, on) {
      await client.request('PATCH', client.path('configmaps', s.record.metadata.name), {
        contentType: 'application/merge-patch+json',
        body: { metadata: { annotations: { [PAUSED_ANNOTATION]: on ? 'true' : null } } }
      })
      if (on) paused.add(s.id)
      else paused.delete(s.id)
    },
    named (id, name) { names.set(id, name) },
    forget (id) { names.delete(id); paused.delete(id) }
  }
}
