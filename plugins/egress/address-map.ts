/*
 * Which chat a connection to the egress proxy comes from: the source address → chat map. The sandbox
 * driver tells every address a start gives (before the first command of that start) and every address
 * that goes away; an address is one chat's at a time, so assigning it to a chat takes it from whichever
 * chat held it before (that chat's sandbox no longer has it: the engine gave it to the new one), and a
 * chat's new address replaces its old one.
 */

export interface AddressMap {
  /** The chat's current address (null: it has none, e.g. stopped). */
  assign: (chatId: string, address: string | null) => void
  /** The chat an address belongs to now, or null. */
  chatOf: (address: string) => string | null
  /** How many addresses are mapped (tests, metrics). */
  readonly size: number
}

export function createAddressMap (): AddressMap {
  const byAddress = new Map<string, string>()
  const addressOf = new Map<string, string>()
  return {
    assign (chatId, address) {
      const previous = addressOf.get(chatId)
      if (previous === address) return
      if (previous !== undefined) {
        addressOf.delete(chatId)
        if (byAddress.get(previous) === chatId) byAddress.delete(previous)
      }
      if (address === null) return
      const holder = byAddress.get(address)
      if (holder !== undefined && holder !== chatId && addressOf.get(holder) === address) addressOf.delete(holder)
      byAddress.set(address, chatId)
      addressOf.set(chatId, address)
    },
    chatOf: address => byAddress.get(address) ?? null,
    get size () { return byAddress.size }
  }
}
