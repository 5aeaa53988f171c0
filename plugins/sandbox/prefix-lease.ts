import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import type { LeaseHolder, LeaseRecord } from './engine-types.js'
import { SandboxSetupRefused } from './errors.js'
import { labelValue, leaseLabels, rfc3339 } from './names.js'
import { sleep, type Clock } from './clock.js'
import { imageMissing, type CoreBase } from './context.js'

/*
 * One server instance per SANDBOX_PREFIX on an engine. Two instances with one prefix would adopt each
 * other's sandboxes and network, and the second's sandboxes would reach the first one's egress proxy.
 * Before it touches anything of its prefix, an instance takes an exclusive lease on it (an engine
 * operation: created atomically by name, so only one can win), renews it every third of
 * SANDBOX_LEASE_TIMEOUT and releases it on a clean shutdown. A second instance refuses to start and
 * names the holder. A lease is taken over when its holder stopped renewing it for longer than the
 * timeout, or at once when the holder is provably dead (same host, and its process is gone). A lease
 * that missed two renewals (its holder was most likely killed without a clean shutdown, as `docker rm
 * -f` does before an update) is waited for until it is stale, instead of refusing the start.
 */

/** The lease object's labels: the owner's (an uninstall by label removes a lease left by a crash) and its role (listings skip it). */

export const leaseName = (prefix: string): string => `${prefix}-lease`

export function newHolder (clock: Clock): LeaseHolder {
  // The host as a label value (an engine keeps the holder in labels: docs/engine.md#labels).
  return { id: randomUUID(), host: labelValue(hostname()), pid: process.pid, startedAt: rfc3339(new Date(clock.now())) }
}

/** When this process started (ms, given the clock's now): a holder on this host with our pid that started before it was an earlier process. */
const processStart = (now: number): number => now - process.uptime() * 1000

function alive (pid: number): boolean {
  try { process.kill(pid, 0); return true } catch (err) { return (err as NodeJS.ErrnoException).code === 'EPERM' }
}

/** Why a lease may be taken over, or null when its holder may still be running. */
export function takeoverReason (current: LeaseRecord, timeoutMs: number, now: number): string | null {
  if (now - current.renewedAt > timeoutMs) return `not renewed for ${Math.round((now - current.renewedAt) / 1000)} s`
  const h = current.holder
  // Earlier versions kept the raw host name; both forms name this host.
  if ((h.host !== labelValue(hostname()) && h.host !== hostname()) || !Number.isInteger(h.pid) || h.pid <= 0) return null
  if (h.pid !== process.pid) return alive(h.pid) ? null : `its process ${h.pid} on this host is gone`
  const started = Date.parse(h.startedAt)
  return Number.isFinite(started) && started < processStart(now) - 1000 ? `it was an earlier process with this pid (${h.pid}) on this host` : null
}

/** This instance's lease on its SANDBOX_PREFIX. */
export interface PrefixLease {
  readonly holder: LeaseHolder
  takeLease: () => Promise<void>
  releaseLease: () => Promise<void>
}

export function createPrefixLease (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'clock' | 'status'>): PrefixLease {
  const { engine, log, opts, clock, status } = base
  const holder = newHolder(clock)
  /** the prefix's lease while this instance holds it */
  let held: { token: string, timer: NodeJS.Timeout } | null = null

  function heldBy (current: LeaseRecord, now: number): string {
    const h = current.holder
    return `SANDBOX_PREFIX '${opts.prefix}' is in use by another server instance on this ${engine.label.host} engine ` +
      `(host ${h.host || 'unknown'}, pid ${h.pid}, started ${h.startedAt || 'unknown'}, last renewal ${Math.max(0, Math.round((now - current.renewedAt) / 1000))} s ago). ` +
      'Two instances with one prefix would share sandboxes and the sandbox network: give this instance its own SANDBOX_PREFIX, or stop the other one ' +
      `(a lease not renewed for ${opts.leaseTimeoutS} s is taken over)`
  }

  /** Takes the prefix's lease (or keeps it); throws SandboxSetupRefused naming the holder when another instance has it. */
  async function takeLease (): Promise<void> {
    if (held !== null) return
    const name = leaseName(opts.prefix)
    const timeoutMs = opts.leaseTimeoutS * 1000
    for (let attempt = 0; attempt < 5; attempt++) {
      let answer
      try {
        answer = await engine.acquireLease(name, holder, { labels: leaseLabels(opts.prefix), image: opts.image, now: clock.now() })
      } catch (err) {
        if ((err as { reason?: unknown }).reason === 'image-missing') throw imageMissing(base)
        throw err
      }
      if (answer.acquired) { hold(answer.token); return }
      const current = answer.current
      if (current === null) continue
      if (current.holder.id === holder.id) { hold(current.token); return }
      const now = clock.now()
      const why = takeoverReason(current, timeoutMs, now)
      if (why === null) {
        const age = now - current.renewedAt
        if (age > timeoutMs * 2 / 3 && attempt < 4) {
          const waitMs = Math.max(0, timeoutMs - age) + 250
          log.warn({ prefix: opts.prefix, holder: current.holder, waitMs }, 'the lease of the sandbox prefix missed two renewals: waiting until it is stale to take it over')
          await sleep(waitMs)
          continue
        }
        throw new SandboxSetupRefused(heldBy(current, now))
      }
      log.warn({ prefix: opts.prefix, holder: current.holder, reason: why }, 'taking over the lease of the sandbox prefix from an instance that is gone')
      await engine.breakLease(current.token)
    }
    throw new SandboxSetupRefused(`SANDBOX_PREFIX '${opts.prefix}': its lease kept changing hands; another instance is starting with the same prefix`)
  }

  function hold (token: string): void {
    const lease = { token, timer: setInterval(() => { void renew() }, Math.max(1000, opts.leaseTimeoutS * 1000 / 3)) }
    lease.timer.unref()
    held = lease
    log.info({ prefix: opts.prefix, holder }, 'holding the lease of the sandbox prefix')
  }

  /** One renewal; a lease found taken over stops this instance from using the prefix until it can take it again. */
  async function renew (): Promise<void> {
    const lease = held
    if (lease === null || status.closed) return
    let kept: boolean
    try {
      kept = await engine.renewLease(lease.token, clock.now())
    } catch (err) {
      log.warn({ err }, 'renewing the lease of the sandbox prefix failed; retrying')
      return
    }
    if (kept || held !== lease) return
    clearInterval(lease.timer)
    held = null
    // The next ensure() or reaper pass bootstraps again: it takes the lease back or refuses, naming the holder.
    status.bootstrapped = false
    log.error({ prefix: opts.prefix }, 'the lease of the sandbox prefix was taken over by another instance: this instance creates, starts and reaps no sandboxes until it holds the lease again')
  }

  /** Clean shutdown: the lease is released (only this instance's own lease object). */
  async function releaseLease (): Promise<void> {
    const lease = held
    if (lease === null) return
    clearInterval(lease.timer)
    held = null
    try {
      await engine.breakLease(lease.token)
    } catch (err) {
      log.warn({ err }, 'releasing the lease of the sandbox prefix failed; the next instance takes it over once it is stale')
    }
  }

  return { holder, takeLease, releaseLease }
}
