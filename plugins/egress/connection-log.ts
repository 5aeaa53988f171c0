import type { ConnectionRecord } from './types.js'

/*
 * The per-chat connection log: a ring of the last `perChat` records for each of the last `chats`
 * chats written to (least recently written chat evicted first). Memory is bounded by both numbers
 * and by the record fields' own bounds (host ≤ 255, message ≤ 300 characters).
 */

export interface ConnectionLog {
  add: (chatId: string, record: ConnectionRecord) => void
  /** oldest first */
  list: (chatId: string) => ConnectionRecord[]
}

export function createConnectionLog (perChat: number, chats: number): ConnectionLog {
  const rings = new Map<string, ConnectionRecord[]>()
  return {
    add (chatId, record) {
      const ring = rings.get(chatId) ?? []
      rings.delete(chatId)
      rings.set(chatId, ring)
      ring.push({ ...record, host: record.host.slice(0, 255), ...(record.message === undefined ? {} : { message: record.message.slice(0, 300) }) })
      if (ring.length > perChat) ring.splice(0, ring.length - perChat)
      while (rings.size > chats) {
        const oldest = rings.keys().next().value
        if (oldest === undefined) break
        rings.delete(oldest)
      }
    },
    list: chatId => [...(rings.get(chatId) ?? [])]
  }
}
