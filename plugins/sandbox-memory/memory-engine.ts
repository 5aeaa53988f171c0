import { createHash, randomBytes } from 'node:crypto'
import type {
  EngineErrorReason, EngineFailure, EngineNetwork, LeaseRecord, SandboxDetails, SandboxEngine, SandboxSpec, SandboxSummary
} from '../sandbox/types.js'
import { SANDBOX_HOME, SANDBOX_OUTPUTS, SANDBOX_SKILLS, SANDBOX_UPLOADS } from '../../core/chat-paths.js'
import { hostMounts, storageAsSeen } from '../../core/storage-layout.js'
import { FileTree, FsError, MemoryFs, type Mount } from './memory-fs.js'
import { MemoryProcess } from './memory-process.js'
import { programFor, type ProgramHost } from './memory-programs.js'

/*
 * The in-memory engine: the engine contract (plugins/sandbox/engine-types.ts) without a container
 * runtime, for unit tests and for trying the server without Docker. Sandboxes, volumes, networks
 * and leases are records in this process; a sandbox's files are trees in memory (its data areas are
 * host directories below `dataDir` when given, in the layout chat-storage reads, else trees kept per chat
 * or pool slot); processes are programs of a small shell (memory-programs.ts) that cover
 * what the sandbox core runs. Limits are kept as given; the pids limit is enforced (an exec beyond
 * it never starts, as in a saturated sandbox). It passes the same contract suite as Docker
 * (test/fixtures/engine-contract.ts).
 */

export class MemoryEngineError extends Error implements EngineFailure {
  constructor (message: string, readonly statusCode: number | undefined, readonly unavailable = false, readonly reason?: EngineErrorReason, readonly busy = false) {
    super(message)
    this.name = 'MemoryEngineError'
  }
}

export interface MemoryEngineOptions {
  /** images present (never pulled) */
  images?: string[]
  /** false: the engine cannot be reached (every call fails as an outage) */
  reachable?: boolean
  /**
   * DATA_DIR: the chats' and pool slots' uploads and outputs are host directories below it (core/storage-layout.ts,
   * what chat-storage reads); without it they are trees in memory
   */
  dataDir?: string
  /** the server's skills (a host directory) mounted read-only at /mnt/skills; none without it */
  skillsDir?: string
}

interface Proc { process: MemoryProcess, argv: string[], env: Record<string, string> }

/** A sandbox of the in-memory engine. */
export interface MemorySandbox {
  id: string
  name: string
  spec: SandboxSpec
  running: boolean
  /** frozen by pause(): no exec until unpause() */
  paused: boolean
  layer: FileTree
  tmpfs: Map<string, FileTree>
  procs: Set<Proc>
  address: string | null
}

interface Volume { labels: Record<string, string>, tree: FileTree, createdAt: string }

const imageIdOf = (image: string): string => `sha256:${createHash('sha256').update(image).digest('hex')}`
const matches = (labels: Record<string, string>, filters: string[]): boolean =>
  filters.every(f => { const at = f.indexOf('='); return at === -1 ? f in labels : labels[f.slice(0, at)] === f.slice(at + 1) })
const envObject = (list: string[]): Record<string, string> =>
  Object.fromEntries(list.filter(kv => kv.indexOf('=') > 0).map(kv => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]))

/** How long the runtime keeps trying to start a process in a sandbox with no pid left before it gives up. */
const START_GIVE_UP_MS = 200

export function createMemoryEngine (o: MemoryEngineOptions = {}): SandboxEngine & { readonly sandboxes: ReadonlyMap<string, MemorySandbox> } {
  const images = new Set(o.images ?? [])
  const boxes = new Map<string, MemorySandbox>()
  const volumes = new Map<string, Volume>()
  const networks = new Map<string, { id: string, labels: Record<string, string> }>()
  const leases = new Map<string, LeaseRecord>()
  /** data areas kept in memory (no dataDir): per owner, they outlive the sandboxes as a chat's directories do */
  const areas = new Map<string, { uploads: FileTree, outputs: FileTree }>()
  let nextAddress = 2

  const up = (): void => { if (o.reachable === false) throw new MemoryEngineError('the in-memory engine is switched off', undefined, true) }
  const find = (idOrName: string): MemorySandbox | undefined => boxes.get(idOrName) ?? [...boxes.values()].find(b => b.name === idOrName)
  const need = (id: string): MemorySandbox => {
    const b = find(id)
    if (b === undefined) throw new MemoryEngineError(`no such sandbox: ${id}`, 404, false, 'no-such-sandbox')
    return b
  }

  /** The sandbox's storage as mounts: host directories below dataDir, or the owner's trees and the home volume's. */
  const storageMounts = (spec: SandboxSpec): Mount[] => {
    const { storage } = spec
    if (o.dataDir !== undefined) {
      return hostMounts(storage, { data: o.dataDir, skills: o.skillsDir ?? '' }).map((m): Mount => m.type === 'bind'
        ? { kind: 'host', source: m.source, target: m.target, readOnly: m.readOnly }
        : { kind: 'tree', tree: volumes.get(m.source)?.tree ?? new FileTree(), target: m.target, readOnly: m.readOnly })
    }
    const owner = JSON.stringify(storage.data)
    let area = areas.get(owner)
    if (area === undefined) areas.set(owner, area = { uploads: new FileTree(), outputs: new FileTree() })
    return [
      { kind: 'tree', tree: volumes.get(storage.home.volume)?.tree ?? new FileTree(), target: SANDBOX_HOME, readOnly: false },
      { kind: 'tree', tree: area.uploads, target: SANDBOX_UPLOADS, readOnly: true },
      { kind: 'tree', tree: area.outputs, target: SANDBOX_OUTPUTS, readOnly: false },
      ...(storage.skills && o.skillsDir !== undefined ? [{ kind: 'host' as const, source: o.skillsDir, target: SANDBOX_SKILLS, readOnly: true }] : []),
      ...storage.extra.map((m): Mount => ({ kind: 'host', source: m.source, target: m.target, readOnly: true }))
    ]
  }

  const fsOf = (b: MemorySandbox): MemoryFs => new MemoryFs(b.layer, [
    ...storageMounts(b.spec),
    ...[...b.tmpfs].map(([target, tree]): Mount => ({ kind: 'tree', tree, target, readOnly: false }))
  ], { '/sys/fs/cgroup/pids.current': () => `${b.procs.size + 1}\n` })

  const host = (b: MemorySandbox): ProgramHost => ({
    hostname: b.spec.hostname,
    fs: fsOf(b),
    processes: () => [...b.procs].map(p => ({ commandLine: p.argv.join(' '), env: p.env, signal: async s => { await p.process.signal(s) } })),
    marked: (name, value) => [...b.procs].filter(p => p.env[name] === value).map(p => ({ signal: async s => { await p.process.signal(s) } }))
  })

  const halt = (b: MemorySandbox): void => {
    b.running = false
    b.paused = false
    b.address = null
    b.tmpfs.clear()
    for (const p of [...b.procs]) p.process.lost()
  }

  const summary = (b: MemorySandbox): SandboxSummary => ({
    id: b.id, name: b.name, running: b.running && !b.paused, paused: b.paused, labels: { ...b.spec.labels }, addresses: b.address === null ? {} : { [b.spec.network]: b.address }
  })

  const network = (name: string): EngineNetwork => {
    const n = networks.get(name) as { id: string, labels: Record<string, string> }
    return { id: n.id, internal: true, isolated: true, isolationSetting: 'always isolated', labels: n.labels, gateway: null, subnet: null }
  }

  return {
    name: 'memory',
    label: { engine: 'the in-memory engine', host: 'memory' },
    sandboxes: boxes,
    async ping () { up() },
    async imageId (image) { up(); return images.has(image) ? imageIdOf(image) : null },

    async ensureNetwork (name, labels) {
      up()
      const exists = networks.has(name)
      if (!exists) networks.set(name, { id: randomBytes(32).toString('hex'), labels })
      return { ...network(name), result: exists ? 'exists' : 'created' }
    },
    async listNetworks (filters) { up(); return [...networks].filter(([, n]) => matches(n.labels, filters)).map(([name, n]) => ({ id: n.id, name })) },
    async removeNetwork (idOrName) { up(); for (const [name, n] of networks) if (name === idOrName || n.id === idOrName) networks.delete(name) },

    async create (spec) {
      up()
      if (!images.has(spec.image)) throw new MemoryEngineError(`no such image: ${spec.image}`, 404, false, 'image-missing')
      if (spec.network !== 'none' && !networks.has(spec.network)) throw new MemoryEngineError(`network ${spec.network} not found`, 404, false, 'network-missing')
      if (find(spec.name) !== undefined) return 'conflict'
      const home = spec.storage.home
      if (!volumes.has(home.volume)) volumes.set(home.volume, { labels: home.labels, tree: new FileTree(), createdAt: new Date().toISOString() })
      const id = randomBytes(32).toString('hex')
      boxes.set(id, { id, name: spec.name, spec: structuredClone(spec), running: false, paused: false, layer: new FileTree(), tmpfs: new Map(), procs: new Set(), address: null })
      return { id }
    },
    async start (id) {
      up()
      const b = need(id)
      if (b.running) { b.paused = false; return }
      b.running = true
      for (const target of Object.keys(b.spec.tmpfs)) b.tmpfs.set(target, new FileTree())
      if (b.spec.network !== 'none') b.address = `10.88.${Math.floor(nextAddress / 250)}.${(nextAddress++ % 250) + 2}`
    },
    async pause (id) {
      up()
      const b = need(id)
      if (!b.running) throw new MemoryEngineError(`sandbox ${id} is not running`, 409, false, 'not-running')
      b.paused = true
    },
    async unpause (id) {
      up()
      const b = need(id)
      if (!b.running) throw new MemoryEngineError(`sandbox ${id} is not running`, 409, false, 'not-running')
      b.paused = false
    },
    async stop (id) { up(); const b = find(id); if (b === undefined) return false; halt(b); return true },
    async kill (id) { up(); const b = find(id); if (b !== undefined) halt(b) },
    async remove (id) { up(); const b = find(id); if (b !== undefined) { halt(b); boxes.delete(b.id) } },
    async inspect (idOrName): Promise<SandboxDetails | null> {
      up()
      const b = find(idOrName)
      if (b === undefined) return null
      const { spec } = b
      return {
        ...summary(b),
        addresses: summary(b).addresses ?? {},
        imageId: imageIdOf(spec.image),
        env: [...spec.env],
        storage: storageAsSeen(spec.storage, o.skillsDir === undefined ? null : spec.storage.skills),
        network: spec.network,
        memory: spec.limits.memory,
        cpus: spec.limits.cpus,
        pids: spec.limits.pids,
        tmpfs: { ...spec.tmpfs },
        diskQuota: spec.limits.disk,
        oomKilled: false
      }
    },
    async list (filters) { up(); return [...boxes.values()].filter(b => matches(b.spec.labels, filters)).map(summary) },
    labelsAtClaim: true,
    async claim (id, identity) {
      up()
      const b = find(id)
      if (b === undefined) return false
      const other = find(identity.name)
      if (other !== undefined && other !== b) return 'conflict'
      b.name = identity.name
      b.spec.labels = { ...b.spec.labels, ...identity.labels }
      return true
    },

    async createVolume (name, labels) { up(); if (!volumes.has(name)) volumes.set(name, { labels, tree: new FileTree(), createdAt: new Date().toISOString() }) },
    async listVolumes (filters) { up(); return [...volumes].filter(([, v]) => matches(v.labels, filters)).map(([name, v]) => ({ name, labels: v.labels, createdAt: v.createdAt })) },
    async removeVolume (name) {
      up()
      const user = [...boxes.values()].find(b => b.spec.storage.home.volume === name)
      if (user !== undefined) throw new MemoryEngineError(`volume ${name} is in use by ${user.id}`, 409, false, 'conflict')
      volumes.delete(name)
    },

    async exec (id, spec) {
      up()
      if (spec.signal?.aborted === true) throw new MemoryEngineError('the call was cancelled while it waited for the engine', undefined, false, undefined, true)
      const b = need(id)
      if (!b.running || b.paused) throw new MemoryEngineError(`sandbox ${id} is ${b.paused ? 'paused' : 'not running'}`, 409, false, 'not-running')
      const env = envObject([...b.spec.env, ...(spec.env ?? [])])
      const startable = b.spec.limits.pids <= 0 || b.procs.size + 1 < b.spec.limits.pids
      const entry: Proc = { argv: spec.argv, env, process: undefined as unknown as MemoryProcess }
      entry.process = new MemoryProcess({
        argv: spec.argv, env, cwd: spec.cwd ?? b.spec.workdir, user: spec.user ?? b.spec.user, tty: spec.tty === true, stdin: spec.stdin === true, startable
      }, programFor(spec.argv, host(b)), () => { b.procs.delete(entry) })
      if (startable) b.procs.add(entry)
      else setTimeout(() => { entry.process.giveUp() }, START_GIVE_UP_MS).unref()
      return entry.process
    },

    async putFile (id, path, content, mode, uid, gid) {
      up()
      const b = need(id)
      // Files can be written while paused (as Docker writes an archive into a frozen container).
      if (!b.running) throw new MemoryEngineError(`sandbox ${id} is not running`, 409, false, 'not-running')
      try { await fsOf(b).write(path, content, { append: false, mode, uid, gid }) } catch (err) {
        if (!(err instanceof FsError)) throw err
        throw new MemoryEngineError(err.message, err.reason === 'no-such-path' ? 404 : 403, false, err.reason === 'no-such-path' ? 'no-such-path' : 'not-permitted')
      }
    },

    async stats (id) {
      up()
      const b = need(id)
      return { pids: { current: b.running ? b.procs.size + 1 : 0, limit: b.spec.limits.pids }, memory: { usage: 0, limit: b.spec.limits.memory } }
    },
    async oomKills () { up(); return 0 },
    async diskUsage () {
      up()
      return {
        sandboxes: [...boxes.values()].map(b => ({ id: b.id, name: b.name, labels: { ...b.spec.labels }, writable: b.layer.size })),
        volumes: [...volumes].map(([name, v]) => ({ name, labels: v.labels, size: v.tree.size }))
      }
    },
    async storageInfo () { up(); return { driver: 'memory', backingFs: '', quota: false } },

    async acquireLease (name, holder, { now }) {
      up()
      const current = leases.get(name)
      if (current !== undefined) return { acquired: false, current: structuredClone(current) }
      const token = `${name}:${randomBytes(8).toString('hex')}`
      leases.set(name, { holder: { ...holder }, renewedAt: now, token })
      return { acquired: true, token }
    },
    async renewLease (token, at) {
      up()
      const l = [...leases.values()].find(x => x.token === token)
      if (l === undefined) return false
      l.renewedAt = at
      return true
    },
    async breakLease (token) { up(); for (const [name, l] of leases) if (l.token === token) leases.delete(name) },

    close () {}
  }
}
