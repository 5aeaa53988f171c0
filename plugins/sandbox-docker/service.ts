import { randomBytes } from 'node:crypto'
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import type { Duplex } from 'node:stream'
import type { FastifyBaseLogger } from 'fastify'
import { chatKey } from '../../core/chat-id.js'
import { chatPaths } from '../../core/chat-paths.js'
import type { RequestUser } from '../../core/identity.js'
import { buildContainerConfig, configDrift, SANDBOX_USER, type ContainerSettings } from './container-config.js'
import { chownOutputs, exists, prepareChatDirs, probeWritable, readMeta, removeChatDir, writeMeta, type ChatMeta } from './data-dirs.js'
import { DockerError, type ContainerSummary, type DockerClient, type ExecHandle } from './docker-client.js'
import { toEnvList } from './env.js'
import { commandArgv, Demuxer, killArgv, SentinelParser, STDERR, STDOUT } from './exec-stream.js'
import { ownerFilter, readLabels, sandboxNames, type SandboxNames } from './names.js'
import { SANDBOX_CAPACITY, SANDBOX_CREATE_TIMEOUT, SANDBOX_DOCKER_UNAVAILABLE, SANDBOX_FAILED, SANDBOX_IMAGE_MISSING, SANDBOX_NOT_RUNNING, SANDBOX_PUT_FAILED } from './errors.js'
import type {
  CommandOptions, CommandResult, EnsureHook, EnsureOptions, ExecOptions, ExecResult, LeaseOptions, SandboxInfo,
  SandboxService, SandboxStatus, SandboxStream, StopHook, StopReason, StreamOptions
} from './types.js'

/** Resolved plugin options (schemas.ts after defaults). */
export interface ServiceOptions {
  image: string
  prefix: string
  network: string
  enableNetwork: boolean
  dataDir: string
  dataDirHost: string
  memLimit: number
  cpuLimit: number
  pidsLimit: number
  createTimeoutS: number
  idleTimeoutS: number
  maxAgeHours: number
  dataMaxAgeDays: number
  maxRunning: number
  commandTimeoutS: number
  uid: number
  gid: number
  skillsDirHost: string
  subagentCli: string
  sandboxEnv: Record<string, string>
  reaperIntervalMs: number
  purgeIntervalMs: number
  readyTimeoutMs: number
  killGraceMs: number
  stopGraceS: number
  now: () => number
}

type State = 'unknown' | 'running' | 'stopped' | 'absent'

/** In-memory view of one chat's sandbox. The running state is cached; failures invalidate it. */
interface Entry {
  names: SandboxNames
  state: State
  containerId?: string
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
  /** meta.json was read (or found missing) once */
  metaLoaded: boolean
  metaWrittenAt: number
  /** value of the service's change counter at this entry's last state change (reaper races) */
  epoch: number
}

const META_INTERVAL_MS = 60_000
const DRAIN_MS = 1000
const QUIET_MS = 200
const RESULT_GRACE_MS = 10_000
const DEFAULT_MAX_BYTES = 32 * 1024 * 1024
const AUTH_JSON = '/home/assistant/.local/share/opencode/auth.json'
const READY_PROBE = ['/bin/sh', '-c', `rm -f ${AUTH_JSON} 2>/dev/null; id -u; id -g`]

const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))
/** setTimeout fires at once beyond 2^31-1 ms: clamp (about 24.8 days). */
const clampMs = (ms: number): number => Math.max(0, Math.min(ms, 2_147_483_647))

export class DockerSandboxService implements SandboxService {
  private readonly entries = new Map<string, Entry>()
  private readonly hooks: EnsureHook[] = []
  private readonly stopHooks: StopHook[] = []
  private readonly streams = new Set<Duplex>()
  private readonly starting = new Set<Entry>()
  /** containers already reported as not adoptable (logged once each) */
  private readonly ignored = new Set<string>()
  private readonly settings: ContainerSettings
  private bootstrapped = false
  private bootstrapping: Promise<void> | null = null
  private dockerUp: boolean | null = null
  private ownerWarned = false
  private reaperTimer: NodeJS.Timeout | undefined
  private purgeTimer: NodeJS.Timeout | undefined
  private reaping: Promise<void> | null = null
  private epoch = 0
  private closed = false
  readonly bootTime: number

  constructor (private readonly opts: ServiceOptions, readonly docker: DockerClient, private readonly log: FastifyBaseLogger) {
    this.bootTime = opts.now()
    this.settings = {
      image: opts.image,
      prefix: opts.prefix,
      networkMode: opts.enableNetwork ? this.networkName : 'none',
      dataDirHost: opts.dataDirHost,
      memLimit: opts.memLimit,
      cpuLimit: opts.cpuLimit,
      pidsLimit: opts.pidsLimit,
      skillsDirHost: opts.skillsDirHost,
      subagentCli: opts.subagentCli,
      sandboxEnv: opts.sandboxEnv
    }
  }

  get networkName (): string { return this.opts.network.trim() || `${this.opts.prefix}-sandboxes` }

  // ---------------------------------------------------------------- boot, readiness, timers

  /** Boot: connect, ensure the network, re-adopt, start the reaper. Never throws when Docker is down. */
  async start (): Promise<void> {
    try {
      await this.bootstrap()
    } catch (err) {
      this.log.error({ err: describe(err) }, 'Docker is unavailable at boot; sandboxes will be created once it answers (/ready reports docker: unavailable)')
    }
    this.reaperTimer = setInterval(() => { void this.reap().catch(err => this.log.warn({ err: describe(err) }, 'reaper pass failed')) }, this.opts.reaperIntervalMs)
    this.reaperTimer.unref()
    this.purgeTimer = setInterval(() => { void this.purge().catch(err => this.log.warn({ err: describe(err) }, 'purge pass failed')) }, this.opts.purgeIntervalMs)
    this.purgeTimer.unref()
  }

  /** Single flight; retried by ensure() and the reaper until it succeeds once. */
  private async bootstrap (): Promise<void> {
    if (this.bootstrapped) return
    this.bootstrapping ??= (async () => {
      try {
        await this.docker.ping(3000)
      } catch (err) {
        this.dockerUp = false
        throw err
      }
      this.dockerUp = true
      if (this.opts.enableNetwork) {
        const result = await this.docker.ensureNetwork(this.networkName, { 'managed-by': 'computer-use-server', 'cu.prefix': this.opts.prefix })
        this.log.info({ network: this.networkName, result }, 'sandbox network ready (inter-container communication disabled)')
      }
      const imageId = await this.docker.imageId(this.opts.image)
      if (imageId === null) {
        this.log.error(`sandbox image '${this.opts.image}' is missing: build it with \`npm run sandbox:build\` (sandbox-image/build.sh); tool calls fail until it exists`)
      }
      await this.readopt()
      this.bootstrapped = true
    })().finally(() => { this.bootstrapping = null })
    await this.bootstrapping
  }

  /** §5.6 item 7: register every labelled container of our prefix; the boot time counts as activity. */
  private async readopt (): Promise<void> {
    const list = await this.docker.listContainers(ownerFilter(this.opts.prefix))
    let adopted = 0
    for (const c of list) {
      if (this.register(c, this.opts.now()) !== null) adopted++
    }
    const volumes = await this.docker.listVolumes(ownerFilter(this.opts.prefix)).catch(() => [])
    this.log.info({ containers: adopted, running: list.filter(c => c.running).length, volumes: volumes.length }, 're-adopted sandboxes')
  }

  /** Registers a listed container when its labels are consistent; mismatches are logged, never touched. */
  private register (c: ContainerSummary, activity: number, mark = Infinity): Entry | null {
    const labels = readLabels(this.opts.prefix, c.labels)
    if (!labels.ok || c.name !== sandboxNames(this.opts.prefix, labels.chatId).container) {
      if (!this.ignored.has(c.id)) {
        this.ignored.add(c.id)
        this.log.warn({ container: c.name, reason: labels.ok ? 'name does not match the chat key' : labels.reason },
          'ignoring a labelled container that is not a consistent sandbox of ours (left untouched)')
      }
      return null
    }
    const entry = this.entry(labels.chatId)
    if (entry.locked > 0 || entry.ensuring !== null || entry.epoch > mark) return entry
    const known = entry.state === 'running' || entry.state === 'stopped'
    entry.state = c.running ? 'running' : 'stopped'
    entry.containerId = c.id
    entry.createdAt = labels.createdAt
    if (!known) entry.lastActive = Math.max(entry.lastActive, activity)
    this.changed(entry)
    return entry
  }

  async readiness (): Promise<{ ok: boolean, fields: Record<string, string> }> {
    const [docker, writable] = await Promise.all([
      this.docker.ping(2000).then(() => true, () => false),
      probeWritable(this.opts.dataDir)
    ])
    this.dockerUp = docker
    let image: 'present' | 'missing' = 'missing'
    if (docker) {
      image = (await this.docker.imageId(this.opts.image).catch(() => null)) === null ? 'missing' : 'present'
      if (!this.bootstrapped) void this.bootstrap().catch(() => {})
    }
    return {
      ok: docker && image === 'present' && writable,
      fields: { docker: docker ? 'ok' : 'unavailable', image, data_dir: writable ? 'writable' : 'not_writable' }
    }
  }

  /** onClose: timers stop and open exec streams end; sandboxes keep running (re-adopted next boot). */
  async close (): Promise<void> {
    this.closed = true
    clearInterval(this.reaperTimer)
    clearInterval(this.purgeTimer)
    for (const s of this.streams) s.destroy()
    this.streams.clear()
    this.docker.close()
  }

  // ---------------------------------------------------------------- entries, locks, activity

  private entry (chatId: string): Entry {
    const key = chatKey(chatId)
    let e = this.entries.get(key)
    if (e === undefined) {
      e = {
        names: sandboxNames(this.opts.prefix, chatId),
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
        epoch: 0
      }
      this.entries.set(key, e)
    }
    return e
  }

  private async withLock<T> (entry: Entry, fn: () => Promise<T>): Promise<T> {
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

  private activity (entry: Entry): void {
    const now = this.opts.now()
    entry.lastActive = Math.max(entry.lastActive, now)
    if (now - entry.metaWrittenAt >= META_INTERVAL_MS && (entry.meta !== undefined || !entry.metaLoaded)) {
      entry.metaWrittenAt = now
      void this.saveMeta(entry).catch(() => {})
    }
  }

  private changed (entry: Entry): void {
    entry.epoch = ++this.epoch
  }

  private info (entry: Entry): SandboxInfo {
    return {
      chatId: entry.names.chatId,
      chatKey: entry.names.key,
      containerId: entry.containerId ?? '',
      containerName: entry.names.container,
      createdAt: entry.createdAt ?? ''
    }
  }

  // ---------------------------------------------------------------- ensure

  async ensure (chatId: string, opts: EnsureOptions = {}): Promise<SandboxInfo> {
    if (this.closed) throw new SANDBOX_DOCKER_UNAVAILABLE()
    const entry = this.entry(chatId)
    this.activity(entry)
    // Fast path: known running and nobody is changing it; no Docker call at all.
    if (entry.state === 'running' && entry.containerId !== undefined && entry.locked === 0 && !entry.stopping) {
      const info = this.info(entry)
      if (opts.user !== undefined && this.metaUserChanged(entry, opts.user)) void this.saveMeta(entry, opts.user).catch(() => {})
      await this.runHooks(info, false, opts.user)
      return info
    }
    if (entry.ensuring === null) {
      // Hooks run after the lock is released, so a hook may itself call ensure(), exec() or putFile().
      const op = this.withLock(entry, async () => await this.doEnsure(entry, opts.user)).then(async result => {
        await this.runHooks(result.info, result.started, opts.user)
        return result
      })
      entry.ensuring = op
      op.then(() => {}, () => {}).finally(() => { if (entry.ensuring === op) entry.ensuring = null })
    }
    const op = entry.ensuring
    const timeoutMs = opts.timeoutMs ?? this.opts.createTimeoutS * 1000
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new SANDBOX_CREATE_TIMEOUT(Math.max(1, Math.round(timeoutMs / 1000)))), timeoutMs)
    })
    try {
      const { info } = await Promise.race([op, timeout])
      return info
    } finally { clearTimeout(timer) }
  }

  private async doEnsure (entry: Entry, user: RequestUser | undefined): Promise<{ info: SandboxInfo, started: boolean }> {
    try {
      await this.bootstrap()
    } catch (err) {
      throw this.mapError(err)
    }
    const { names } = entry
    try {
      const paths = await prepareChatDirs(this.opts.dataDir, names.chatId)
      let started = false
      let container: { id: string, labels: Record<string, string>, running: boolean } | null = null
      const existing = await this.docker.inspectContainer(names.container)
      container = existing
      if (existing !== null && !existing.running) {
        const desired = buildContainerConfig(this.settings, names.chatId, user, new Date(this.opts.now()))
        const currentImage = await this.docker.imageId(this.opts.image).catch(() => null)
        const drift = configDrift(existing, desired, currentImage)
        const tooOld = this.tooOld(existing.labels['cu.created-at'])
        if (drift !== null || tooOld) {
          this.log.info({ chat: names.key, reason: drift ?? 'max age reached' }, 'recreating the stopped sandbox (volume and data kept)')
          await this.docker.removeContainer(existing.id)
          container = null
        } else {
          await this.reserveSlot(entry)
          try {
            await this.docker.startContainer(existing.id)
            started = true
          } catch (err) {
            const e = err as DockerError
            if (e.unavailable) throw err
            this.log.warn({ chat: names.key, err: describe(err) }, 'starting the stopped sandbox failed; recreating it (volume and data kept)')
            await this.docker.removeContainer(existing.id)
            container = null
          }
        }
      }
      if (container === null) {
        await this.reserveSlot(entry)
        container = await this.create(entry, user)
        started = true
      }
      entry.containerId = container.id
      entry.createdAt = container.labels['cu.created-at']
      const ids = await this.waitReady(entry)
      entry.state = 'running'
      this.changed(entry)
      await this.fixOwnership(paths, ids)
      await this.saveMeta(entry, user, true)
      const info = this.info(entry)
      this.activity(entry)
      return { info, started }
    } catch (err) {
      if (entry.state !== 'running') { entry.state = 'unknown'; this.changed(entry) }
      throw this.mapError(err)
    } finally {
      this.starting.delete(entry)
    }
  }

  /** Creates and starts the container; a 409 means someone else made it: adopt, never remove. */
  private async create (entry: Entry, user: RequestUser | undefined): Promise<{ id: string, labels: Record<string, string>, running: boolean }> {
    const config = buildContainerConfig(this.settings, entry.names.chatId, user, new Date(this.opts.now()))
    const created = await this.createOnce(config)
    if (created === 'conflict') {
      const existing = await this.docker.inspectContainer(entry.names.container)
      if (existing === null) throw new SANDBOX_FAILED('its name is taken and it vanished while being adopted')
      this.log.info({ chat: entry.names.key }, 'sandbox name conflict: adopting the existing container')
      if (!existing.running) await this.docker.startContainer(existing.id)
      return existing
    }
    try {
      await this.docker.startContainer(created.id)
    } catch (err) {
      if ((err as DockerError).unavailable) throw err
      this.log.error({ chat: entry.names.key, err: describe(err) }, 'a new sandbox did not start; removing it')
      await this.docker.removeContainer(created.id).catch(() => {})
      throw new SANDBOX_FAILED('see the server log')
    }
    this.log.info({ chat: entry.names.key, container: entry.names.container }, 'sandbox created')
    return { id: created.id, labels: config.Labels, running: true }
  }

  private async createOnce (config: ReturnType<typeof buildContainerConfig>): Promise<{ id: string } | 'conflict'> {
    try {
      return await this.docker.createContainer(config)
    } catch (err) {
      const e = err as DockerError
      if (e.statusCode === 404 && /no such image/i.test(e.message)) throw new SANDBOX_IMAGE_MISSING(this.opts.image)
      if (e.statusCode === 404 && /network/i.test(e.message) && this.opts.enableNetwork) {
        // The network was removed behind our back: recreate it once.
        await this.docker.ensureNetwork(this.networkName, { 'managed-by': 'computer-use-server', 'cu.prefix': this.opts.prefix })
        return await this.docker.createContainer(config)
      }
      throw err
    }
  }

  /** Ready when an exec succeeds (≤ readyTimeoutMs); the probe also removes a stale opencode auth.json and reports the uid/gid. */
  private async waitReady (entry: Entry): Promise<{ uid: number, gid: number } | null> {
    const deadline = Date.now() + this.opts.readyTimeoutMs
    let lastError: unknown
    while (true) {
      try {
        const r = await this.rawExec(entry.containerId ?? '', READY_PROBE, { user: SANDBOX_USER, timeoutMs: 5000 }, undefined, false)
        const [uid, gid] = r.stdout.toString('utf8').trim().split('\n').map(Number)
        if (uid !== undefined && gid !== undefined && Number.isInteger(uid) && Number.isInteger(gid)) return { uid, gid }
        if (r.exitCode === 0) return null
        lastError = new Error(`ready probe exited with ${String(r.exitCode)}`)
      } catch (err) {
        if ((err as DockerError).unavailable) throw err
        lastError = err
      }
      if (Date.now() >= deadline) {
        this.log.error({ chat: entry.names.key, err: describe(lastError) }, 'sandbox did not become ready')
        throw new SANDBOX_FAILED('it did not become ready')
      }
      await sleep(100)
    }
  }

  private async fixOwnership (paths: ReturnType<typeof chatPaths>, ids: { uid: number, gid: number } | null): Promise<void> {
    const uid = this.opts.uid > 0 ? this.opts.uid : ids?.uid
    const gid = this.opts.gid > 0 ? this.opts.gid : ids?.gid
    if (uid === undefined || gid === undefined) return
    const ok = await chownOutputs(paths, uid, gid)
    if (!ok && !this.ownerWarned) {
      this.ownerWarned = true
      this.log.warn({ uid, gid }, 'cannot give outputs directories to the sandbox user (the server is not root): set SANDBOX_UID/SANDBOX_GID to the server user or run the server as root')
    }
  }

  private async runHooks (info: SandboxInfo, started: boolean, user: RequestUser | undefined): Promise<void> {
    for (const hook of this.hooks) {
      try {
        await hook(info, { started, user })
      } catch (err) {
        this.log.warn({ chat: info.chatKey, err: describe(err) }, 'an onEnsure hook failed')
      }
    }
  }

  private tooOld (createdAt: string | undefined): boolean {
    if (createdAt === undefined) return false
    const t = Date.parse(createdAt)
    return Number.isFinite(t) && this.opts.now() - t > this.opts.maxAgeHours * 3600_000
  }

  // ---------------------------------------------------------------- capacity

  private runningCount (except: Entry): number {
    let n = 0
    for (const e of this.entries.values()) if (e !== except && e.state === 'running') n++
    for (const e of this.starting) if (e !== except && e.state !== 'running') n++
    return n
  }

  /** MAX_RUNNING_SANDBOXES: stop the least recently active idle sandbox, or fail with SANDBOX_CAPACITY. */
  private async reserveSlot (entry: Entry): Promise<void> {
    if (this.opts.maxRunning === 0) { this.starting.add(entry); return }
    while (this.runningCount(entry) >= this.opts.maxRunning) {
      let victim: Entry | undefined
      for (const e of this.entries.values()) {
        if (e === entry || e.state !== 'running' || e.stopping || e.locked > 0 || e.callLeases + e.socketLeases > 0) continue
        if (victim === undefined || e.lastActive < victim.lastActive) victim = e
      }
      if (victim === undefined) throw new SANDBOX_CAPACITY()
      this.log.info({ chat: victim.names.key }, 'sandbox capacity reached: stopping the least recently active idle sandbox')
      await this.stopEntry(victim, 'capacity')
    }
    this.starting.add(entry)
  }

  // ---------------------------------------------------------------- status, stop, remove

  async status (chatId: string): Promise<SandboxStatus> {
    const entry = this.entry(chatId)
    const metaExists = await exists(chatPaths(this.opts.dataDir, chatId).meta)
    let c
    try {
      c = await this.docker.inspectContainer(entry.names.container)
    } catch (err) { throw this.mapError(err) }
    if (entry.locked === 0 && entry.ensuring === null) {
      // A container we did not know about counts as discovered now (like re-adoption), not as idle since ever.
      if (c?.running === true && entry.state !== 'running') entry.lastActive = Math.max(entry.lastActive, this.opts.now())
      entry.state = c === null ? 'absent' : c.running ? 'running' : 'stopped'
      if (c !== null) { entry.containerId = c.id; entry.createdAt = c.labels['cu.created-at'] }
      this.changed(entry)
    }
    if (c === null) return { state: 'absent', metaExists }
    return { state: c.running ? 'running' : 'stopped', metaExists, containerId: c.id }
  }

  async stop (chatId: string): Promise<void> {
    await this.stopEntry(this.entry(chatId), 'stopped')
  }

  private async stopEntry (entry: Entry, reason: StopReason): Promise<void> {
    entry.stopping = true
    try {
      await this.withLock(entry, async () => {
        try {
          await this.docker.stopContainer(entry.containerId ?? entry.names.container, this.opts.stopGraceS)
        } catch (err) { throw this.mapError(err) }
        entry.state = entry.state === 'absent' ? 'absent' : 'stopped'
        this.changed(entry)
        this.log.info({ chat: entry.names.key, reason }, 'sandbox stopped')
      })
    } finally { entry.stopping = false }
    this.notifyStop(entry, reason)
  }

  async remove (chatId: string, opts: { purge?: boolean } = {}): Promise<void> {
    const entry = this.entry(chatId)
    await this.withLock(entry, async () => {
      try {
        await this.docker.removeContainer(entry.names.container)
        entry.state = 'absent'
        entry.containerId = undefined
        this.changed(entry)
        if (opts.purge === true) {
          await this.docker.removeVolume(entry.names.volume)
          await removeChatDir(this.opts.dataDir, entry.names.key)
          entry.meta = undefined
          entry.metaLoaded = false
        }
      } catch (err) { throw this.mapError(err) }
    })
    this.notifyStop(entry, opts.purge === true ? 'purged' : 'removed')
  }

  private notifyStop (entry: Entry, reason: StopReason): void {
    for (const hook of this.stopHooks) {
      try { hook(entry.names.chatId, reason) } catch (err) { this.log.warn({ err: describe(err) }, 'an onStop hook failed') }
    }
  }

  // ---------------------------------------------------------------- leases, activity, hooks

  lease (chatId: string, opts: LeaseOptions = {}): () => void {
    const entry = this.entry(chatId)
    const socket = opts.kind === 'socket'
    if (socket) entry.socketLeases++
    else entry.callLeases++
    this.activity(entry)
    let released = false
    return () => {
      if (released) return
      released = true
      if (socket) entry.socketLeases--
      else entry.callLeases--
      this.activity(entry)
    }
  }

  touch (chatId: string): void {
    this.activity(this.entry(chatId))
  }

  onEnsure (hook: EnsureHook): void { this.hooks.push(hook) }

  onStop (hook: StopHook): void { this.stopHooks.push(hook) }

  // ---------------------------------------------------------------- meta.json

  private metaUserChanged (entry: Entry, user: RequestUser): boolean {
    const m = entry.meta
    if (m === undefined) return true
    return (user.email !== undefined && user.email !== m.user_email) ||
      (user.name !== undefined && user.name !== m.user_name) ||
      (user.mcpServers.length > 0 && user.mcpServers.join(',') !== m.mcp_servers.join(','))
  }

  private async saveMeta (entry: Entry, user?: RequestUser, force = false): Promise<void> {
    const path = chatPaths(this.opts.dataDir, entry.names.chatId).meta
    if (!entry.metaLoaded || (entry.meta === undefined && force)) {
      entry.metaLoaded = true
      entry.meta = await readMeta(path) ?? undefined
    }
    if (entry.meta === undefined && !force) return
    const now = new Date(this.opts.now()).toISOString()
    const previous = entry.meta
    const meta: ChatMeta = {
      chat_id: entry.names.chatId,
      user_email: user?.email ?? previous?.user_email ?? null,
      user_name: user?.name ?? previous?.user_name ?? null,
      mcp_servers: user !== undefined && user.mcpServers.length > 0 ? user.mcpServers : previous?.mcp_servers ?? [],
      created_at: previous?.created_at ?? now,
      last_active_at: new Date(Math.max(entry.lastActive, this.bootTime)).toISOString(),
      image: this.opts.image
    }
    entry.meta = meta
    entry.metaWrittenAt = this.opts.now()
    try {
      await writeMeta(path, meta)
    } catch (err) {
      this.log.warn({ chat: entry.names.key, err: describe(err) }, 'could not write meta.json')
    }
  }

  // ---------------------------------------------------------------- exec

  private requireRunning (chatId: string): Entry {
    const entry = this.entry(chatId)
    if (entry.state !== 'running' || entry.containerId === undefined) throw new SANDBOX_NOT_RUNNING()
    return entry
  }

  /** An exec failed to start: a 404/409 means the container is gone or stopped (cache invalidated). */
  private execStartError (entry: Entry, err: unknown): Error {
    const e = err as DockerError
    if ((e.statusCode === 404 && /no such container/i.test(e.message)) || e.statusCode === 409 ||
      (e.statusCode === 500 && /not running|is paused|restarting/i.test(e.message))) {
      if (entry.locked === 0 && entry.ensuring === null) { entry.state = 'unknown'; this.changed(entry) }
      return new SANDBOX_NOT_RUNNING()
    }
    return this.mapError(err)
  }

  async exec (chatId: string, argv: string[], opts: ExecOptions = {}): Promise<ExecResult> {
    const entry = this.requireRunning(chatId)
    const release = this.lease(chatId)
    try {
      const result = await this.rawExec(entry.containerId ?? '', argv, opts, entry)
      if (result.exitCode === null || result.exitCode >= 128) await this.checkAlive(entry)
      if (result.exitCode !== null && result.exitCode >= 128 && entry.state !== 'running') result.exitCode = null
      return result
    } finally { release() }
  }

  /** Collecting exec with timeout/abort kill. `entry` enables the kill path (marker); internal probes skip the exit code. */
  private async rawExec (containerId: string, argv: string[], opts: ExecOptions, entry?: Entry, wantExitCode = true): Promise<ExecResult> {
    const execId = randomBytes(12).toString('hex')
    const user = opts.user ?? SANDBOX_USER
    const env = toEnvList(opts.env, entry === undefined ? undefined : { CUBICLE_EXEC_ID: execId })
    const stdin = opts.stdin === undefined ? undefined : Buffer.isBuffer(opts.stdin) ? opts.stdin : Buffer.from(opts.stdin, 'utf8')
    let handle: ExecHandle
    try {
      handle = await this.docker.exec(containerId, { argv, user, cwd: opts.cwd ?? '/home/assistant', env, stdin: stdin !== undefined })
    } catch (err) {
      throw entry === undefined ? err : this.execStartError(entry, err)
    }
    const maxBytes = opts.maxBytes ?? DEFAULT_MAX_BYTES
    const out: Buffer[] = []
    const err: Buffer[] = []
    let outLen = 0
    let errLen = 0
    let truncated = false
    const { socket } = handle
    this.streams.add(socket)
    const ended = await new Promise<{ timedOut: boolean, cancelled: boolean, lost: boolean }>(resolve => {
      let timedOut = false
      let cancelled = false
      let done = false
      const timers: NodeJS.Timeout[] = []
      const finish = (lost: boolean): void => {
        if (done) return
        done = true
        for (const t of timers) clearTimeout(t)
        opts.signal?.removeEventListener('abort', onAbort)
        this.streams.delete(socket)
        socket.destroy()
        resolve({ timedOut, cancelled, lost })
      }
      const demux = new Demuxer((stream, data) => {
        if (stream === STDOUT) {
          if (outLen + data.length <= maxBytes) { out.push(Buffer.from(data)); outLen += data.length } else {
            const room = maxBytes - outLen
            if (room > 0) { out.push(Buffer.from(data.subarray(0, room))); outLen += room }
            truncated = true
          }
        } else if (stream === STDERR) {
          if (errLen + data.length <= maxBytes) { err.push(Buffer.from(data)); errLen += data.length } else {
            const room = maxBytes - errLen
            if (room > 0) { err.push(Buffer.from(data.subarray(0, room))); errLen += room }
            truncated = true
          }
        }
      })
      socket.on('data', (chunk: Buffer) => demux.push(chunk))
      socket.on('end', () => finish(false))
      socket.on('close', () => finish(false))
      socket.on('error', () => finish(true))
      const terminate = (): void => {
        if (entry === undefined) { finish(true); return }
        const grace = this.terminate(entry, execId, user, opts.killGraceMs)
        timers.push(setTimeout(() => finish(true), Math.max(RESULT_GRACE_MS, grace + 5000)))
      }
      const onAbort = (): void => { if (!timedOut && !cancelled) { cancelled = true; terminate() } }
      const timeoutMs = opts.timeoutMs ?? this.opts.commandTimeoutS * 1000
      timers.push(setTimeout(() => { if (!cancelled) { timedOut = true; terminate() } }, clampMs(timeoutMs)))
      if (opts.signal !== undefined) {
        if (opts.signal.aborted) onAbort()
        else opts.signal.addEventListener('abort', onAbort, { once: true })
      }
      if (stdin !== undefined) {
        socket.write(stdin)
        socket.end()
      }
    })
    let exitCode: number | null = null
    if (wantExitCode && (!ended.lost || ended.timedOut || ended.cancelled)) {
      for (let i = 0; i < 20; i++) {
        try {
          const state = await this.docker.execInspect(handle.id)
          if (!state.running) { exitCode = state.exitCode; break }
        } catch { break }
        if (ended.timedOut || ended.cancelled) break
        await sleep(i < 5 ? 5 : 25)
      }
    }
    return { exitCode, stdout: Buffer.concat(out, outLen), stderr: Buffer.concat(err, errLen), truncated, timedOut: ended.timedOut, cancelled: ended.cancelled }
  }

  async runCommand (chatId: string, command: string, opts: CommandOptions): Promise<CommandResult> {
    const entry = this.requireRunning(chatId)
    const release = this.lease(chatId)
    try {
      return await this.runWrapped(entry, command, opts)
    } finally { release() }
  }

  private async runWrapped (entry: Entry, command: string, opts: CommandOptions): Promise<CommandResult> {
    const execId = randomBytes(12).toString('hex')
    const env = toEnvList(opts.env, { PAGER: 'cat', GIT_PAGER: 'cat', DEBIAN_FRONTEND: 'noninteractive', CUBICLE_EXEC_ID: execId })
    let handle: ExecHandle
    try {
      handle = await this.docker.exec(entry.containerId ?? '', { argv: commandArgv(command), user: SANDBOX_USER, cwd: '/home/assistant', env })
    } catch (err) {
      throw this.execStartError(entry, err)
    }
    const { socket } = handle
    this.streams.add(socket)
    const result = await new Promise<CommandResult & { sentinel: boolean }>(resolve => {
      let timedOut = false
      let cancelled = false
      let done = false
      let exitCode: number | null = null
      const timers: NodeJS.Timeout[] = []
      let quiet: NodeJS.Timeout | undefined
      const decoder = new TextDecoder('utf-8')
      const emit = (text: string): void => {
        if (text === '') return
        try { opts.onOutput(text) } catch (err) { this.log.warn({ err: describe(err) }, 'onOutput threw') }
      }
      const finish = (): void => {
        if (done) return
        done = true
        for (const t of timers) clearTimeout(t)
        clearTimeout(quiet)
        opts.signal?.removeEventListener('abort', onAbort)
        parser.end()
        emit(decoder.decode())
        this.streams.delete(socket)
        socket.destroy()
        resolve({ exitCode, timedOut, cancelled, sentinel: parser.exitCode !== null })
      }
      const armQuiet = (): void => {
        clearTimeout(quiet)
        quiet = setTimeout(finish, QUIET_MS)
      }
      const parser = new SentinelParser(emit, code => {
        if (timedOut || cancelled) return
        exitCode = code
        // bash has exited: drain what is in flight, at most DRAIN_MS, then return even if
        // background children still hold the output open.
        timers.push(setTimeout(finish, DRAIN_MS))
        armQuiet()
      })
      const demux = new Demuxer((stream, data) => {
        if (stream === STDOUT) {
          emit(decoder.decode(data, { stream: true }))
          if (parser.exitCode !== null) armQuiet()
        } else parser.push(data)
      })
      socket.on('data', (chunk: Buffer) => demux.push(chunk))
      socket.on('end', finish)
      socket.on('close', finish)
      socket.on('error', finish)
      const terminate = (): void => {
        clearTimeout(quiet)
        const grace = this.terminate(entry, execId, SANDBOX_USER, opts.killGraceMs)
        timers.push(setTimeout(finish, Math.max(RESULT_GRACE_MS, grace + 5000)))
      }
      const onAbort = (): void => {
        if (done || timedOut || cancelled) return
        cancelled = true
        terminate()
      }
      timers.push(setTimeout(() => {
        if (done || cancelled || parser.exitCode !== null) return
        timedOut = true
        terminate()
      }, clampMs(opts.timeoutMs)))
      if (opts.signal !== undefined) {
        if (opts.signal.aborted) onAbort()
        else opts.signal.addEventListener('abort', onAbort, { once: true })
      }
    })
    if (!result.sentinel && !result.timedOut && !result.cancelled) {
      // The stream ended without bash's status: the sandbox probably stopped under us.
      await this.checkAlive(entry)
    }
    return { exitCode: result.exitCode, timedOut: result.timedOut, cancelled: result.cancelled }
  }

  /**
   * Timeout/abort of an exec: SIGTERM to its marked processes now, SIGKILL after killGraceMs. The
   * SIGKILL pass runs even when the call has already returned (its output may have closed while
   * processes that redirected theirs live on).
   */
  private terminate (entry: Entry, execId: string, user: string, killGraceMs = this.opts.killGraceMs): number {
    void this.killMarked(entry, execId, 'TERM', user)
    setTimeout(() => { void this.killMarked(entry, execId, 'KILL', user) }, clampMs(killGraceMs)).unref()
    return killGraceMs
  }

  /**
   * Signals every process carrying the exec's marker (second exec as the same user). When SIGKILL
   * cannot be delivered (no exec possible, e.g. the pids limit is exhausted by a fork bomb) or marked
   * processes survive it, the container is killed: the next ensure() starts it again with its data.
   */
  private async killMarked (entry: Entry, execId: string, signal: 'TERM' | 'KILL', user: string): Promise<void> {
    const containerId = entry.containerId
    if (containerId === undefined || this.closed) return
    let ok = false
    try {
      const r = await this.rawExec(containerId, killArgv(signal, execId), { user, timeoutMs: 4000, cwd: '/' }, undefined, false)
      const m = /^done (\d+) (\d+)/m.exec(r.stdout.toString('utf8'))
      ok = m !== null && m[2] === '0'
      if (!ok && !this.closed) this.log.warn({ chat: entry.names.key, signal, result: r.stdout.toString('utf8').slice(0, 100), stderr: r.stderr.toString('utf8').slice(0, 200) }, 'kill exec did not complete')
    } catch (err) {
      if (!this.closed) this.log.warn({ chat: entry.names.key, signal, err: describe(err) }, 'kill exec failed')
    }
    if (!ok && signal === 'KILL' && !this.closed) {
      this.log.warn({ chat: entry.names.key }, 'processes of a timed-out command cannot be killed from inside; killing the sandbox (data kept)')
      try {
        await this.docker.killContainer(containerId)
      } catch (err) {
        this.log.error({ chat: entry.names.key, err: describe(err) }, 'killing the sandbox failed')
      }
      if (entry.locked === 0) { entry.state = 'stopped'; this.changed(entry) }
      this.notifyStop(entry, 'killed')
    }
  }

  /** After an exec lost its stream: refresh the cached state (one inspect). */
  private async checkAlive (entry: Entry): Promise<void> {
    try {
      const c = await this.docker.inspectContainer(entry.names.container)
      if (entry.locked === 0 && entry.ensuring === null) { entry.state = c === null ? 'absent' : c.running ? 'running' : 'stopped'; this.changed(entry) }
    } catch (err) {
      if (entry.locked === 0 && entry.ensuring === null) { entry.state = 'unknown'; this.changed(entry) }
      this.log.debug({ err: describe(err) }, 'state check failed')
    }
  }

  async putFile (chatId: string, path: string, content: Buffer | string, opts: { mode?: number, uid?: number, gid?: number } = {}): Promise<void> {
    const entry = this.requireRunning(chatId)
    if (!path.startsWith('/') || path.endsWith('/')) throw new TypeError('putFile needs an absolute file path')
    const data = Buffer.isBuffer(content) ? content : Buffer.from(content, 'utf8')
    try {
      await this.docker.putFile(entry.containerId ?? '', path, data, opts.mode ?? 0o644, opts.uid ?? 0, opts.gid ?? 0)
    } catch (err) {
      const e = err as DockerError
      if (!e.unavailable && (e.statusCode === 404 || e.statusCode === 400 || e.statusCode === 403) && !/no such container/i.test(e.message)) {
        throw new SANDBOX_PUT_FAILED(path, e.statusCode === 404 ? 'the parent directory does not exist' : 'not permitted')
      }
      throw this.execStartError(entry, err)
    }
  }

  /** A long-lived exec with a raw byte stream (terminal TTY, CDP relay). See types.ts. */
  async openStream (chatId: string, argv: string[], opts: StreamOptions = {}): Promise<SandboxStream> {
    const entry = this.requireRunning(chatId)
    const tty = opts.tty === true
    let handle: ExecHandle
    try {
      handle = await this.docker.exec(entry.containerId ?? '', {
        argv, user: opts.user ?? SANDBOX_USER, cwd: opts.cwd ?? '/home/assistant', env: toEnvList(opts.env), stdin: true, tty
      })
    } catch (err) { throw this.execStartError(entry, err) }
    const { socket } = handle
    this.streams.add(socket)
    socket.once('close', () => this.streams.delete(socket))
    const docker = this.docker
    return {
      socket,
      demux: (onStdout, onStderr) => {
        if (tty) { socket.on('data', (c: Buffer) => onStdout(c)); return }
        const d = new Demuxer((s, data) => { if (s === STDOUT) onStdout(data); else onStderr?.(data) })
        socket.on('data', (c: Buffer) => d.push(c))
      },
      resize: async (cols, rows) => { if (tty) await docker.execResize(handle.id, cols, rows) },
      exitCode: async () => {
        try { return (await docker.execInspect(handle.id)).exitCode } catch { return null }
      },
      close: () => { this.streams.delete(socket); socket.destroy() }
    }
  }

  // ---------------------------------------------------------------- reaper and purge

  /** One reaper pass (every reaperIntervalMs): reconcile, idle stop, max-age removal. */
  async reap (): Promise<void> {
    if (this.closed) return
    this.reaping ??= this.reapOnce().finally(() => { this.reaping = null })
    await this.reaping
  }

  private async reapOnce (): Promise<void> {
    if (!this.bootstrapped) {
      try { await this.bootstrap() } catch { return }
    }
    let list: ContainerSummary[]
    const mark = this.epoch
    try {
      list = await this.docker.listContainers(ownerFilter(this.opts.prefix))
      this.dockerUp = true
    } catch (err) {
      this.dockerUp = false
      this.log.debug({ err: describe(err) }, 'reaper: Docker unavailable')
      return
    }
    const seen = new Set<Entry>()
    for (const c of list) {
      const entry = this.register(c, this.opts.now(), mark)
      if (entry !== null) seen.add(entry)
    }
    for (const entry of this.entries.values()) {
      if (!seen.has(entry) && entry.locked === 0 && entry.ensuring === null && entry.epoch <= mark && (entry.state === 'running' || entry.state === 'stopped')) {
        entry.state = 'absent'
        entry.containerId = undefined
        this.changed(entry)
      }
    }
    const now = this.opts.now()
    const jobs: Array<Promise<void>> = []
    for (const entry of seen) {
      if (entry.locked > 0 || entry.ensuring !== null || entry.stopping) continue
      if (this.tooOld(entry.createdAt) && entry.callLeases === 0) {
        jobs.push(this.removeForAge(entry))
        continue
      }
      if (entry.state === 'running' && entry.callLeases + entry.socketLeases === 0 && now - entry.lastActive >= this.opts.idleTimeoutS * 1000) {
        jobs.push(this.stopEntry(entry, 'idle').catch(err => { this.log.warn({ chat: entry.names.key, err: describe(err) }, 'idle stop failed') }))
      }
    }
    await Promise.all(jobs)
    // Forget chats that have nothing left to track.
    for (const [key, entry] of this.entries) {
      if (entry.state === 'absent' && entry.locked === 0 && entry.ensuring === null && entry.callLeases + entry.socketLeases === 0 &&
        now - entry.lastActive > this.opts.idleTimeoutS * 1000) this.entries.delete(key)
    }
  }

  private async removeForAge (entry: Entry): Promise<void> {
    try {
      await this.withLock(entry, async () => {
        if (entry.callLeases > 0) return
        await this.docker.removeContainer(entry.containerId ?? entry.names.container)
        entry.state = 'absent'
        entry.containerId = undefined
        this.changed(entry)
        this.log.info({ chat: entry.names.key, maxAgeHours: this.opts.maxAgeHours }, 'sandbox reached its maximum age: removed (volume and data kept)')
      })
      this.notifyStop(entry, 'max-age')
    } catch (err) {
      this.log.warn({ chat: entry.names.key, err: describe(err) }, 'max-age removal failed')
    }
  }

  /** One purge pass (hourly): chats with no container and no activity for DATA_MAX_AGE_DAYS lose volume and data. */
  async purge (): Promise<number> {
    if (this.closed || this.opts.dataMaxAgeDays <= 0) return 0
    const cutoff = this.opts.now() - this.opts.dataMaxAgeDays * 86_400_000
    let keys: string[]
    try {
      keys = (await readdir(join(this.opts.dataDir, 'chats'))).filter(k => /^[0-9a-f]{32}$/.test(k))
    } catch { return 0 }
    let purged = 0
    for (const key of keys) {
      const meta = await readMeta(join(this.opts.dataDir, 'chats', key, 'meta.json'))
      if (meta === null || chatKey(meta.chat_id) !== key) continue
      const last = Date.parse(meta.last_active_at)
      if (!Number.isFinite(last) || last > cutoff) continue
      const known = this.entries.get(key)
      if (known !== undefined && (known.callLeases + known.socketLeases > 0 || known.ensuring !== null || known.locked > 0 || known.lastActive > cutoff)) continue
      const entry = this.entry(meta.chat_id)
      try {
        await this.withLock(entry, async () => {
          if (await this.docker.inspectContainer(entry.names.container) !== null) return
          await this.docker.removeVolume(entry.names.volume)
          await removeChatDir(this.opts.dataDir, key)
          entry.state = 'absent'
          entry.meta = undefined
          entry.metaLoaded = false
          this.changed(entry)
          purged++
          this.log.info({ chat: key, lastActive: meta.last_active_at }, 'purged an inactive chat (volume and data deleted)')
        })
      } catch (err) {
        this.log.warn({ chat: key, err: describe(err) }, 'purge failed')
      }
    }
    return purged
  }

  // ---------------------------------------------------------------- errors

  private mapError (err: unknown): Error {
    if (err instanceof DockerError) {
      if (err.unavailable) {
        this.dockerUp = false
        return new SANDBOX_DOCKER_UNAVAILABLE()
      }
      this.log.error({ err: describe(err) }, 'Docker request failed')
      return new SANDBOX_FAILED('see the server log')
    }
    return err instanceof Error ? err : new Error(String(err))
  }
}

function describe (err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
