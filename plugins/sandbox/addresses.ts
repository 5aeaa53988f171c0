import type { SandboxDetails, SandboxSummary } from './engine-types.js'
import type { Entry, Registry } from './registry.js'
import type { AddressHook } from './types.js'

/*
 * A sandbox's address on the sandbox network, as the egress proxy needs it to tell which chat a
 * connection comes from. The engine may give a sandbox a new address at every start (a stopped
 * sandbox's address goes back to the network's pool, and the next sandbox started takes it), so the
 * address is learnt on the start path itself: ensure() publishes it before it resolves, hence before
 * the first command of that start runs. Stops, removals and sandboxes found stopped or gone publish
 * null; listings (boot re-adoption, the reaper) publish what the engine reports.
 */

/** The address the engine reports on our network, or null. */
export function addressOn (reg: Registry, c: Pick<SandboxDetails, 'addresses'> | Pick<SandboxSummary, 'addresses'>): string | null {
  const ip = c.addresses?.[reg.networkName]
  return typeof ip === 'string' && ip !== '' ? ip : null
}

/** Records the chat's current address (null: none) and tells every address hook, synchronously. */
export function publishAddress (reg: Registry, entry: Entry, ip: string | null): void {
  const id = entry.sandboxId
  entry.address = ip === null || id === undefined ? undefined : { sandboxId: id, ip }
  for (const hook of reg.addressHooks) {
    try { hook(entry.names.chatId, ip) } catch (err) { reg.log.warn({ chat: entry.names.key, err }, 'an onAddress hook failed') }
  }
}

/** Forgets the address of a sandbox that stopped or vanished (no-op when none is known). */
export function dropAddress (reg: Registry, entry: Entry): void {
  if (entry.address !== undefined) publishAddress(reg, entry, null)
}

/** After a start: the address this start gave, from the engine (the start path awaits it). */
export async function learnAddress (reg: Registry, entry: Entry, sandboxId: string): Promise<void> {
  const details = await reg.engine.inspect(sandboxId)
  publishAddress(reg, entry, details?.running === true ? addressOn(reg, details) : null)
}

/** A listed sandbox (re-adoption, reconcile): running ones publish the listed address when the engine gives one. */
export function noteListed (reg: Registry, entry: Entry, c: SandboxSummary): void {
  if (!c.running) { dropAddress(reg, entry); return }
  if (c.addresses === undefined) return
  const ip = addressOn(reg, c)
  if (ip !== entry.address?.ip || entry.address?.sandboxId !== c.id) publishAddress(reg, entry, ip)
}

/** Registers a hook and tells it every address known already (sandboxes re-adopted before it registered). */
export function addAddressHook (reg: Registry, hook: AddressHook): void {
  reg.addressHooks.push(hook)
  for (const entry of reg.entries.values()) {
    if (entry.state === 'running' && entry.address !== undefined) hook(entry.names.chatId, entry.address.ip)
  }
}

/** The `address` extension: the running sandbox's address for its current start; inspected when unknown. */
export async function sandboxAddress (reg: Registry, entry: Entry): Promise<string | null> {
  const id = entry.sandboxId
  if (entry.state !== 'running' || id === undefined) return null
  if (entry.address?.sandboxId === id) return entry.address.ip
  const details = await reg.engine.inspect(id)
  const ip = details?.running === true ? addressOn(reg, details) : null
  if (ip === null || entry.sandboxId !== id || entry.state !== 'running') return ip
  publishAddress(reg, entry, ip)
  return ip
}
