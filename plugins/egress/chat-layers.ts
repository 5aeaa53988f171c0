import { NO_USER_DEFAULTS, userDefault, type ParsedLayer } from './layers.js'
import type { OverrideStore, UsersFile } from './store.js'

/*
 * Per-chat state above the server's setting: the chat's override and its user's email, kept in
 * memory for chats with a running sandbox (the proxy decides synchronously) and for chats whose
 * override was set through the API. A sandbox start (attach with started=true) re-reads both from
 * disk, so an override file removed by the data purge, or written by an earlier server process,
 * takes effect; a stopped sandbox's entry is dropped (detach). A per-chat generation keeps a slow
 * read from overwriting an override set while it ran.
 */

interface ChatState { chat: ParsedLayer | null, email: string | undefined }

export interface ChatLayers {
  /** sync, for the proxy: the chat's override as last loaded or set */
  chatLayer: (chatId: string) => ParsedLayer | null
  /** sync, for the proxy: the default of the chat's user */
  userLayer: (chatId: string) => ParsedLayer | null
  userDefault: (email: string | undefined) => ParsedLayer | null
  /** the chat's state, from memory or (not cached) from disk */
  peek: (chatId: string) => Promise<ChatState>
  set: (chatId: string, layer: ParsedLayer | null) => Promise<void>
  attach: (chatId: string, started: boolean, email: string | undefined) => Promise<void>
  detach: (chatId: string) => void
  close: () => void
}

const USERS_CHECK_MS = 5000

export function createChatLayers (store: OverrideStore | null, users: UsersFile | null): ChatLayers {
  const chats = new Map<string, ChatState>()
  const generation = new Map<string, number>()
  const bump = (chatId: string): number => {
    const next = (generation.get(chatId) ?? 0) + 1
    generation.set(chatId, next)
    return next
  }
  const defaults = (): typeof NO_USER_DEFAULTS => users?.current() ?? NO_USER_DEFAULTS
  const timer = users === null ? null : setInterval(() => { void users.check() }, USERS_CHECK_MS).unref()

  const fromDisk = async (chatId: string): Promise<ChatState> => ({
    chat: await store?.read(chatId) ?? null,
    email: await store?.email(chatId)
  })

  return {
    chatLayer: chatId => chats.get(chatId)?.chat ?? null,
    userLayer: chatId => userDefault(defaults(), chats.get(chatId)?.email),
    userDefault: email => userDefault(defaults(), email),
    peek: async chatId => chats.get(chatId) ?? await fromDisk(chatId),
    async set (chatId, layer) {
      await store?.write(chatId, layer)
      bump(chatId)
      const known = chats.get(chatId)
      chats.set(chatId, { chat: layer, email: known?.email ?? await store?.email(chatId) })
    },
    async attach (chatId, started, email) {
      const known = chats.get(chatId)
      if (known !== undefined && !started) {
        if (email !== undefined) known.email = email
        return
      }
      const gen = bump(chatId)
      const state = await fromDisk(chatId)
      if (generation.get(chatId) !== gen) {
        const now = chats.get(chatId)
        if (now !== undefined && email !== undefined) now.email = email
        return
      }
      chats.set(chatId, { chat: state.chat, email: email ?? state.email })
    },
    detach: chatId => {
      chats.delete(chatId)
      generation.delete(chatId)
    },
    close: () => { if (timer !== null) clearInterval(timer) }
  }
}
