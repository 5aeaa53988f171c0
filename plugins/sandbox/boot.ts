import { noteListed } from './addresses.js'
import { probeWritable } from './data-dirs.js'
import { noteOutsideChange } from './recovery.js'
import { detectQuota } from './disk-quota.js'
import { diskPass } from './disk-watchdog.js'
import type { SandboxSummary } from './engine-types.js'
import { ownerFilter, readLabels, sandboxNames } from './names.js'
import { drainPool, maintain } from './pool.js'
import { bindListed, sortListing } from './sandbox-identity.js'
import { changed, entryOf, type Entry, type Registry } from './registry.js'
import { prepareNetwork } from './network.js'
import { releaseLease, takeLease } from './prefix-lease.js'
import { SandboxSetupRefused } from './errors.js'

/*
 * Boot, re-adoption and readiness: connect, take the prefix's lease (prefix-lease.ts), ensure the
 * internal, isolated network (network.ts), register every labelled container of our prefix. Boot never fails because Docker is
 * down: bootstrap() is retried by ensure() and the reaper until it succeeds once.
 */

/** Single flight; retried by ensure() and the reaper until it succeeds once. */
export async function bootstrap (reg: Registry): Promise<void> {
  if (reg.bootstrapped) return
  reg.bootstrapping ??= (async () => {
    try {
      await reg.engine.ping(3000)
    } catch (err) {
      reg.engineUp = false
      throw err
    }
    reg.engineUp = true
    try {
      // Nothing of the prefix is touched before this instance holds its lease (prefix-lease.ts).
      await takeLease(reg)
      if (reg.opts.enableNetwork) await prepareNetwork(reg)
    } catch (err) {
      // Logged once per distinct reason: ensure() and the reaper retry the bootstrap.
      if (err instanceof SandboxSetupRefused && reg.refusal !== err.message) { reg.refusal = err.message; reg.log.error(err.message) }
      throw err
    }
    reg.refusal = null
    await detectQuota(reg)
    const imageId = await reg.engine.imageId(reg.opts.image)
    if (imageId === null) {
      reg.log.error(`sandbox image '${reg.opts.image}' is missing: build it with \`npm run sandbox:build\` (sandbox-image/build.sh); tool calls fail until it exists`)
    }
    await readopt(reg)
    reg.bootstrapped = true
  })().finally(() => { reg.bootstrapping = null })
  await reg.bootstrapping
}

/** docs/contract.md#idle-stop-max-age-and-purge: register every labelled container of our prefix; the boot time counts as activity. */
async function readopt (reg: Registry): Promise<void> {
  const { chats, unclaimed } = await sortListing(reg, await reg.engine.list(ownerFilter(reg.opts.prefix)))
  let adopted = 0
  for (const c of chats) {
    if (register(reg, c, reg.opts.now()) !== null) adopted++
  }
  const volumes = await reg.engine.listVolumes(ownerFilter(reg.opts.prefix)).catch(() => [])
  reg.log.info({ containers: adopted, running: chats.filter(c => c.running).length, volumes: volumes.length, pool: unclaimed.length }, 're-adopted sandboxes')
  // Unclaimed pool sandboxes: kept when they still match, else replaced; then the pool fills up.
  void maintain(reg, unclaimed).catch(err => { reg.log.warn({ err }, 'warm pool: re-adoption failed') })
}

/** Registers a listed container when its labels are consistent; mismatches are logged, never touched. */
export function register (reg: Registry, c: SandboxSummary, activity: number, mark = Infinity): Entry | null {
  const labels = readLabels(reg.opts.prefix, c.labels)
  if (!labels.ok || c.name !== sandboxNames(reg.opts.prefix, labels.chatId).container) {
    if (!reg.ignored.has(c.id)) {
      reg.ignored.add(c.id)
      reg.log.warn({ container: c.name, reason: labels.ok ? 'name does not match the chat key' : labels.reason },
        'ignoring a labelled container that is not a consistent sandbox of ours (left untouched)')
    }
    return null
  }
  const entry = entryOf(reg, labels.chatId)
  if (entry.locked > 0 || entry.ensuring !== null || entry.epoch > mark) return entry
  const known = entry.state === 'running' || entry.state === 'stopped'
  if (entry.state === 'running' && !c.running) noteOutsideChange(entry, false)
  entry.state = c.running ? 'running' : 'stopped'
  entry.sandboxId = c.id
  entry.createdAt = labels.createdAt
  if (!known) entry.lastActive = Math.max(entry.lastActive, activity)
  bindListed(reg, entry, c)
  changed(reg, entry)
  noteListed(reg, entry, c)
  return entry
}

/**
 * The engine's check of /ready: fields engine (ok | unavailable), the same under the engine's own name
 * (`docker`, which monitors written for earlier versions read), image, data_dir.
 */
export async function readiness (reg: Registry): Promise<{ ok: boolean, fields: Record<string, string> }> {
  const [up, writable] = await Promise.all([
    reg.engine.ping(2000).then(() => true, () => false),
    probeWritable(reg.opts.dataDir)
  ])
  reg.engineUp = up
  let image: 'present' | 'missing' = 'missing'
  if (up) {
    image = (await reg.engine.imageId(reg.opts.image).catch(() => null)) === null ? 'missing' : 'present'
    if (!reg.bootstrapped) void bootstrap(reg).catch(() => {})
  }
  const engine = up ? 'ok' : 'unavailable'
  return {
    ok: up && image === 'present' && writable,
    fields: { engine, [reg.engine.name]: engine, image, data_dir: writable ? 'writable' : 'not_writable' }
  }
}

/** Boot: connect, ensure the network, re-adopt, start the reaper. Never throws when Docker is down. */
export async function startService (reg: Registry, reap: () => Promise<void>, purge: () => Promise<unknown>): Promise<void> {
  try {
    await bootstrap(reg)
  } catch (err) {
    // An unsafe setup refuses the boot (the message says what to fix); an engine that is down does not.
    if (err instanceof SandboxSetupRefused) { await releaseLease(reg); reg.engine.close(); throw err }
    if (reg.engineUp === true) {
      reg.log.error({ err, engine: reg.engine.name }, 'the sandbox setup did not finish at boot; the next tool call and the reaper try again')
    } else {
      reg.log.error({ err, engine: reg.engine.name },
        `${reg.engine.label.engine} is unavailable at boot; sandboxes will be created once it answers (/ready reports ${reg.engine.name}: unavailable)`)
    }
  }
  reg.reaperTimer = setInterval(() => { void reap().catch(err => reg.log.warn({ err }, 'reaper pass failed')) }, reg.opts.reaperIntervalMs)
  reg.reaperTimer.unref()
  reg.purgeTimer = setInterval(() => { void purge().catch(err => reg.log.warn({ err }, 'purge pass failed')) }, reg.opts.purgeIntervalMs)
  reg.purgeTimer.unref()
  if (reg.opts.diskLimit > 0) {
    reg.diskTimer = setInterval(() => { void diskPass(reg) }, reg.opts.diskCheckIntervalMs)
    reg.diskTimer.unref()
  }
}

/** onClose: timers stop and open exec streams end; sandboxes keep running (re-adopted next boot). */
export async function closeService (reg: Registry): Promise<void> {
  reg.closed = true
  clearInterval(reg.reaperTimer)
  clearInterval(reg.purgeTimer)
  clearInterval(reg.diskTimer)
  clearTimeout(reg.diskPoke)
  for (const s of reg.streams) s.close()
  reg.streams.clear()
  await drainPool(reg)
  await releaseLease(reg)
  reg.engine.close()
}
