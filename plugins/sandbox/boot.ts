import type { Addresses } from './addresses.js'
import type { Chats, Entry } from './chats.js'
import type { CoreBase } from './context.js'
import { probeWritable } from './data-dirs.js'
import type { DiskQuota } from './disk-quota.js'
import type { DiskWatchdog } from './disk-watchdog.js'
import type { SandboxSummary } from './engine-types.js'
import { SandboxSetupRefused } from './errors.js'
import { ownerFilter, readLabels, sandboxNames } from './names.js'
import type { SandboxNetwork } from './network.js'
import type { Pool } from './pool.js'
import type { PrefixLease } from './prefix-lease.js'
import type { Recovery } from './recovery.js'
import type { Identity } from './sandbox-identity.js'

/*
 * Boot, re-adoption and readiness: connect, take the prefix's lease (prefix-lease.ts), ensure the
 * internal, isolated network (network.ts), register every labelled container of our prefix. Boot never fails because Docker is
 * down: bootstrap() is retried by ensure() and the reaper until it succeeds once.
 */

/** What boot builds on. */
export interface BootDeps {
  lease: PrefixLease
  network: Pick<SandboxNetwork, 'prepareNetwork'>
  quota: Pick<DiskQuota, 'detectQuota'>
  pool: Pick<Pool, 'maintain' | 'drainPool'>
  identity: Identity
  recovery: Pick<Recovery, 'noteOutsideChange'>
  addresses: Pick<Addresses, 'noteListed' | 'addressOn'>
  disk: Pick<DiskWatchdog, 'start' | 'stop'>
}

/** Bootstrap and re-adoption, /ready's check, the timers, close. */
export interface Boot {
  bootstrap: () => Promise<void>
  register: (c: SandboxSummary, activity: number, mark?: number) => Entry | null
  readiness: () => Promise<{ ok: boolean, fields: Record<string, string> }>
  start: (reap: () => Promise<void>, purge: () => Promise<unknown>) => Promise<void>
  close: () => Promise<void>
}

export function createBoot (base: CoreBase, chats: Chats, d: BootDeps): Boot {
  const { engine, log, clock, status, streams } = base
  const { lease, network, quota, pool, identity, recovery, addresses, disk } = d
  let bootstrapping: Promise<void> | null = null
  /** why the last bootstrap refused the setup (logged once per reason), null when it did not */
  let refusal: string | null = null
  let reaperTimer: NodeJS.Timeout | undefined
  let purgeTimer: NodeJS.Timeout | undefined

  /** Single flight; retried by ensure() and the reaper until it succeeds once. */
  async function bootstrap (): Promise<void> {
    if (status.bootstrapped) return
    bootstrapping ??= (async () => {
      try {
        await engine.ping(3000)
      } catch (err) {
        status.engineUp = false
        throw err
      }
      status.engineUp = true
      try {
        // Nothing of the prefix is touched before this instance holds its lease (prefix-lease.ts).
        await lease.takeLease()
        // Egress over the agent socket (docs/network.md#egress-over-the-agent-socket): no network for new sandboxes.
        if (base.opts.enableNetwork && !base.egressOverSocket) await network.prepareNetwork()
      } catch (err) {
        // Logged once per distinct reason: ensure() and the reaper retry the bootstrap.
        if (err instanceof SandboxSetupRefused && refusal !== err.message) { refusal = err.message; log.error(err.message) }
        throw err
      }
      refusal = null
      await quota.detectQuota()
      const imageId = await engine.imageId(base.opts.image)
      if (imageId === null) {
        log.error(`sandbox image '${base.opts.image}' is missing: build it with \`npm run sandbox:build\` (sandbox-image/build.sh); tool calls fail until it exists`)
      }
      await readopt()
      status.bootstrapped = true
    })().finally(() => { bootstrapping = null })
    await bootstrapping
  }

  /** docs/contract.md#idle-stop-max-age-and-purge: register every labelled container of our prefix; the boot time counts as activity. */
  async function readopt (): Promise<void> {
    const { chats: listed, unclaimed } = await identity.sortListing(await engine.list(ownerFilter(base.opts.prefix)))
    let adopted = 0
    for (const c of listed) {
      if (register(c, clock.now()) !== null) adopted++
    }
    // Sandboxes created on the network before egress went over the agent socket keep it (and its proxy
    // listener and firewall) until they stop: a stopped one is recreated without it (configDrift: network changed).
    if (base.egressOverSocket && listed.some(c => (c.running || c.paused === true) && addresses.addressOn(c) !== null)) {
      await network.prepareNetwork({ legacy: true }).catch(err => { log.error({ err }, 'the sandbox network of sandboxes created before egress went over the agent socket cannot be prepared: they have no way out until they are recreated') })
    }
    const volumes = await engine.listVolumes(ownerFilter(base.opts.prefix)).catch(() => [])
    log.info({ containers: adopted, running: listed.filter(c => c.running).length, paused: listed.filter(c => c.paused === true).length, volumes: volumes.length, pool: unclaimed.length }, 're-adopted sandboxes')
    // Unclaimed pool sandboxes: kept when they still match, else replaced; then the pool fills up.
    void pool.maintain(unclaimed).catch(err => { log.warn({ err }, 'warm pool: re-adoption failed') })
  }

  /** Registers a listed container when its labels are consistent; mismatches are logged, never touched. */
  function register (c: SandboxSummary, activity: number, mark = Infinity): Entry | null {
    const labels = readLabels(base.opts.prefix, c.labels)
    if (!labels.ok || c.name !== sandboxNames(base.opts.prefix, labels.chatId).container) {
      identity.ignore(c, labels.ok ? 'name does not match the chat key' : labels.reason,
        'ignoring a labelled container that is not a consistent sandbox of ours (left untouched)')
      return null
    }
    const entry = chats.entryOf(labels.chatId)
    if (entry.locked > 0 || entry.ensuring !== null || entry.epoch > mark) return entry
    const known = entry.state === 'running' || entry.state === 'paused' || entry.state === 'stopped'
    const paused = c.paused === true
    if ((entry.state === 'running' || entry.state === 'paused') && !c.running && !paused) recovery.noteOutsideChange(entry, false)
    // Paused behind our back, or before this server started: its paused time counts from now.
    if (paused && entry.state !== 'paused') entry.pausedAt = clock.now()
    entry.state = c.running ? 'running' : paused ? 'paused' : 'stopped'
    entry.sandboxId = c.id
    entry.createdAt = labels.createdAt
    if (!known) entry.lastActive = Math.max(entry.lastActive, activity)
    identity.bindListed(entry, c)
    chats.changed(entry)
    addresses.noteListed(entry, c)
    return entry
  }

  /**
   * The engine's check of /ready: fields engine (ok | unavailable), the same under the engine's own name
   * (`docker`, which monitors written for earlier versions read), image, data_dir, and `paused`: how many
   * sandboxes the idle reaper froze (a count, never failing the check).
   */
  async function readiness (): Promise<{ ok: boolean, fields: Record<string, string> }> {
    const [up, writable] = await Promise.all([
      engine.ping(2000).then(() => true, () => false),
      probeWritable(base.opts.dataDir)
    ])
    status.engineUp = up
    let image: 'present' | 'missing' = 'missing'
    if (up) {
      image = (await engine.imageId(base.opts.image).catch(() => null)) === null ? 'missing' : 'present'
      if (!status.bootstrapped) void bootstrap().catch(() => {})
    }
    const answer = up ? 'ok' : 'unavailable'
    let paused = 0
    for (const e of chats.entries.values()) if (e.state === 'paused') paused++
    return {
      ok: up && image === 'present' && writable,
      fields: { engine: answer, [engine.name]: answer, image, data_dir: writable ? 'writable' : 'not_writable', paused: String(paused) }
    }
  }

  /** Boot: connect, ensure the network, re-adopt, start the reaper. Never throws when Docker is down. */
  async function start (reap: () => Promise<void>, purge: () => Promise<unknown>): Promise<void> {
    try {
      await bootstrap()
    } catch (err) {
      // An unsafe setup refuses the boot (the message says what to fix); an engine that is down does not.
      if (err instanceof SandboxSetupRefused) { await lease.releaseLease(); engine.close(); throw err }
      if (status.engineUp === true) {
        log.error({ err, engine: engine.name }, 'the sandbox setup did not finish at boot; the next tool call and the reaper try again')
      } else {
        log.error({ err, engine: engine.name },
          `${engine.label.engine} is unavailable at boot; sandboxes will be created once it answers (/ready reports ${engine.name}: unavailable)`)
      }
    }
    reaperTimer = setInterval(() => { void reap().catch(err => log.warn({ err }, 'reaper pass failed')) }, base.opts.reaperIntervalMs)
    reaperTimer.unref()
    purgeTimer = setInterval(() => { void purge().catch(err => log.warn({ err }, 'purge pass failed')) }, base.opts.purgeIntervalMs)
    purgeTimer.unref()
    disk.start()
  }

  /** onClose: timers stop and open exec streams end; sandboxes keep running (re-adopted next boot). */
  async function close (): Promise<void> {
    status.closed = true
    clearInterval(reaperTimer)
    clearInterval(purgeTimer)
    disk.stop()
    for (const s of streams) s.close()
    streams.clear()
    await pool.drainPool()
    await lease.releaseLease()
    engine.close()
  }

  return { bootstrap, register, readiness, start, close }
}
