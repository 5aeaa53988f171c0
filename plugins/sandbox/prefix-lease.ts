import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import type { LeaseHolder, LeaseRecord } from './engine-types.js'
import { SandboxSetupRefused } from './errors.js'
import { LEASE_ROLE, MANAGED_BY, rfc3339 } from './names.js'
import { imageMissing, sleep, type Registry } from './registry.js'

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
const leaseLabels = (prefix: string): Record<string, string> => ({ 'managed-by': MANAGED_BY, 'cu.prefix': prefix, [LEASE_ROLE.label]: LEASE_ROLE.value })

export const leaseName = (prefix: string): string => `${prefix}-lease`

export function newHolder (): LeaseHolder {
  return { id: randomUUID(), host: hostname(), pid: process.pid, startedAt: rfc3339(new Date()) }
}

/** When this process started (ms): a holder on this host with our pid that started before it was an earlier process. */
const processStart = (): number => Date.now() - process.uptime() * 1000

function alive (pid: number): boolean {
  try { process.kill(pid, 0); return true } catch (err) { return (err as NodeJS.ErrnoException).code === 'EPERM' }
}

/** Why a lease may be taken over, or null when its holder may still be running. */
export function takeoverReason (current: LeaseRecord, timeoutMs: number, now: number): string | null {
  if (now - current.renewedAt > timeoutMs) return `not renewed for ${Math.round((now - current.renewedAt) / 1000)} s`
  const h = current.holder
  if (h.host !== hostname() || !Number.isInteger(h.pid) || h.pid <= 0) return null
  if (h.pid !== process.pid) return alive(h.pid) ? null : `its process ${h.pid} on this host is gone`
  const started = Date.parse(h.startedAt)
  return Number.isFinite(started) && started < processStart() - 1000 ? `it was an earlier process with this pid (${h.pid}) on this host` : null
}

function heldBy (reg: Registry, current: LeaseRecord, now: number): string {
  const h = current.holder
  return `SANDBOX_PREFIX '${reg.opts.prefix}' is in use by another server instance on this ${reg.engine.label.host} engine ` +
    `(host ${h.host || 'unknown'}, pid ${h.pid}, started ${h.startedAt || 'unknown'}, last renewal ${Math.max(0, Math.round((now - current.renewedAt) / 1000))} s ago). ` +
    'Two instances with one prefix would share sandboxes and the sandbox network: give this instance its own SANDBOX_PREFIX, or stop the other one ' +
    `(a lease not renewed for ${reg.opts.leaseTimeoutS} s is taken over)`
}

/** Takes the prefix's lease (or keeps it); throws SandboxSetupRefused naming the holder when another instance has it. */
export async function takeLease (reg: Registry): Promise<void> {
  if (reg.lease !== null) return
  const name = leaseName(reg.opts.prefix)
  const timeoutMs = reg.opts.leaseTimeoutS * 1000
  for (let attempt = 0; attempt < 5; attempt++) {
    let answer
    try {
      answer = await reg.engine.acquireLease(name, reg.holder, { labels: leaseLabels(reg.opts.prefix), image: reg.opts.image, now: Date.now() })
    } catch (err) {
      if ((err as { reason?: unknown }).reason === 'image-missing') throw imageMissing(reg)
      throw err
    }
    if (answer.acquired) { hold(reg, answer.token); return }
    const current = answer.current
    if (current === null) continue
    if (current.holder.id === reg.holder.id) { hold(reg, current.token); return }
    const now = Date.now()
    const why = takeoverReason(current, timeoutMs, now)
    if (why === null) {
      const age = now - current.renewedAt
      if (age > timeoutMs * 2 / 3 && attempt < 4) {
        const waitMs = Math.max(0, timeoutMs - age) + 250
        reg.log.warn({ prefix: reg.opts.prefix, holder: current.holder, waitMs }, 'the lease of the sandbox prefix missed two renewals: waiting until it is stale to take it over')
        await sleep(waitMs)
        continue
      }
      throw new SandboxSetupRefused(heldBy(reg, current, now))
    }
    reg.log.warn({ prefix: reg.opts.prefix, holder: current.holder, reason: why }, 'taking over the lease of the sandbox prefix from an instance that is gone')
    await reg.engine.breakLease(current.token)
  }
  throw new SandboxSetupRefused(`SANDBOX_PREFIX '${reg.opts.prefix}': its lease kept changing hands; another instance is starting with the same prefix`)
}

function hold (reg: Registry, token: string): void {
  const lease = { token, timer: setInterval(() => { void renew(reg) }, Math.max(1000, reg.opts.leaseTimeoutS * 1000 / 3)) }
  lease.timer.unref()
  reg.lease = lease
  reg.log.info({ prefix: reg.opts.prefix, holder: reg.holder }, 'holding the lease of the sandbox prefix')
}

/** One renewal; a lease found taken over stops this instance from using the prefix until it can take it again. */
async function renew (reg: Registry): Promise<void> {
  const lease = reg.lease
  if (lease === null || reg.closed) return
  let kept: boolean
  try {
    kept = await reg.engine.renewLease(lease.token, Date.now())
  } catch (err) {
    reg.log.warn({ err }, 'renewing the lease of the sandbox prefix failed; retrying')
    return
  }
  if (kept || reg.lease !== lease) return
  clearInterval(lease.timer)
  reg.lease = null
  // The next ensure() or reaper pass bootstraps again: it takes the lease back or refuses, naming the holder.
  reg.bootstrapped = false
  reg.log.error({ prefix: reg.opts.prefix }, 'the lease of the sandbox prefix was taken over by another instance: this instance creates, starts and reaps no sandboxes until it holds the lease again')
}

/** Clean shutdown: the lease is released (only this instance's own lease object). */
export async function releaseLease (reg: Registry): Promise<void> {
  const lease = reg.lease
  if (lease === null) return
  clearInterval(lease.timer)
  reg.lease = null
  try {
    await reg.engine.breakLease(lease.token)
  } catch (err) {
    reg.log.warn({ err }, 'releasing the lease of the sandbox prefix failed; the next instance takes it over once it is stale')
  }
}
