/*
 * Counted slots per chat and over all chats, with a reserve: the proxy's open connections and its
 * name lookups in flight each use one. A chat takes a slot when it holds fewer than `perChat` and
 * fewer than `total` are taken; the last `reserved` of the total go only to chats holding fewer than
 * `reservedBelow`. So chats that flood (up to their own cap each) can fill the shared part, never the
 * reserve, and a chat with little open still gets its first slots. Pure bookkeeping, O(1).
 */

export interface SlotLimits {
  perChat: number
  total: number
  /** slots at the end of `total` kept for light chats (0: none) */
  reserved: number
  /** a chat holding fewer than this many may use the reserved slots */
  reservedBelow: number
}

/** why a slot was refused: the chat's own cap, the total, or the shared part is full and the chat is not light */
export type SlotRefusal = 'chat' | 'total' | 'reserved'

export interface Slots {
  take: (chatId: string) => SlotRefusal | null
  release: (chatId: string) => void
  held: (chatId: string) => number
  taken: () => number
}

export function createSlots (limits: SlotLimits): Slots {
  const byChat = new Map<string, number>()
  let taken = 0
  return {
    take (chatId) {
      const held = byChat.get(chatId) ?? 0
      if (held >= limits.perChat) return 'chat'
      if (taken >= limits.total) return 'total'
      if (taken >= limits.total - limits.reserved && held >= limits.reservedBelow) return 'reserved'
      byChat.set(chatId, held + 1)
      taken++
      return null
    },
    release (chatId) {
      const held = byChat.get(chatId)
      if (held === undefined) return
      taken--
      if (held <= 1) byChat.delete(chatId)
      else byChat.set(chatId, held - 1)
    },
    held: chatId => byChat.get(chatId) ?? 0,
    taken: () => taken
  }
}
