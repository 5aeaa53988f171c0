import type { SandboxDetails, SandboxSummary } from './engine-types.js'
import type { Chats, Entry } from './chats.js'
import type { CoreBase } from './context.js'
import type { AddressHook } from './types.js'

/*
 * A sandbox's address on the sandbox network, as the egress proxy needs it to tell which chat a
 * connection comes from. The engine may give a sandbox a new address at every start (a stopped
 * sandbox's address goes back to the network's pool, and the next sandbox started takes it), so the
 * address is learnt on the start path itself: ensure() publishes it before it resolves, hence before
 * the first command of that start runs. Stops, removals and sandboxes found stopped or gone publish
 * null; listings (boot re-adoption, the reaper) publish what the engine reports.
 */

/** The chats' addresses on the sandbox network and the onAddress hooks told about them. */
export interface Addresses {
  addressOn: (c: Pick<SandboxDetails, 'addresses'> | Pick<SandboxSummary, 'addresses'>) => string | null
  publishAddress: (entry: Entry, ip: string | null) => void
  dropAddress: (entry: Entry) => void
  learnAddress: (entry: Entry, sandboxId: string) => Promise<void>
  noteListed: (entry: Entry, c: SandboxSummary) => void
  addHook: (hook: AddressHook) => void
  addressOf: (entry: Entry) => Promise<string | null>
}

export function createAddresses (base: Pick<CoreBase, 'engine' | 'log' | 'networkName'>, chats: Chats): Addresses {
  const { engine, log } = base
  const hooks: AddressHook[] = []

  /** The address the engine reports on our network, or null. */
  function addressOn (c: Pick<SandboxDetails, 'addresses'> | Pick<SandboxSummary, 'addresses'>): string | null {
    const ip = c.addresses?.[base.networkName]
    return typeof ip === 'string' && ip !== '' ? ip : null
  }

  /** Records the chat's current address (null: none) and tells every address hook, synchronously. */
  function publishAddress (entry: Entry, ip: string | null): void {
    const id = entry.sandboxId
    entry.address = ip === null || id === undefined ? undefined : { sandboxId: id, ip }
    for (const hook of hooks) {
      try { hook(entry.names.chatId, ip) } catch (err) { log.warn({ chat: entry.names.key, err }, 'an onAddress hook failed') }
    }
  }

  /** Forgets the address of a sandbox that stopped or vanished (no-op when none is known). */
  function dropAddress (entry: Entry): void {
    if (entry.address !== undefined) publishAddress(entry, null)
  }

  /** After a start: the address this start gave, from the engine (the start path awaits it). */
  async function learnAddress (entry: Entry, sandboxId: string): Promise<void> {
    const details = await engine.inspect(sandboxId)
    publishAddress(entry, details?.running === true ? addressOn(details) : null)
  }

  /** A listed sandbox (re-adoption, reconcile): running ones publish the listed address when the engine gives one. */
  function noteListed (entry: Entry, c: SandboxSummary): void {
    if (!c.running) { dropAddress(entry); return }
    if (c.addresses === undefined) return
    const ip = addressOn(c)
    if (ip !== entry.address?.ip || entry.address?.sandboxId !== c.id) publishAddress(entry, ip)
  }

  /** Registers a hook and tells it every address known already (sandboxes re-adopted before it registered). */
  function addAddressHook (hook: AddressHook): void {
    hooks.push(hook)
    for (const entry of chats.entries.values()) {
      if (entry.state === 'running' && entry.address !== undefined) hook(entry.names.chatId, entry.address.ip)
    }
  }

  /** The `address` extension: the running sandbox's address for its current start; inspected when unknown. */
  async function sandboxAddress (entry: Entry): Promise<string | null> {
    const id = entry.sandboxId
    if (entry.state !== 'running' || id === undefined) return null
    if (entry.address?.sandboxId === id) return entry.address.ip
    const details = await engine.inspect(id)
    const ip = details?.running === true ? addressOn(details) : null
    if (ip === null || entry.sandboxId !== id || entry.state !== 'running') return ip
    publishAddress(entry, ip)
    return ip
  }

  return { addressOn, publishAddress, dropAddress, learnAddress, noteListed, addHook: addAddressHook, addressOf: sandboxAddress }
}
