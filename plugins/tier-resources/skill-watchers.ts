/*
 * Which chats to tell when a user's skill set changes (docs/contract.md#skills). A chat is remembered under its
 * user's email when it lists or reads skill resources (only such a client has a list to refresh);
 * when user-skills reports a change for that email, each remembered chat gets
 * notifications/resources/list_changed on its open GET /mcp streams. Bounded: at most `maxChats`
 * chats in all (the least recently seen is forgotten first) and none older than `ttlMs`.
 */

export interface SkillWatchers {
  /** Records that `chatId` of user `email` looks at skill resources. */
  remember (email: string, chatId: string): void
  /** The chats of `email` seen within the TTL. */
  chatsOf (email: string): string[]
  /** How many chats are remembered (tests, diagnostics). */
  size (): number
}

export function createSkillWatchers (opts: { maxChats: number, ttlMs: number, now?: () => number }): SkillWatchers {
  const now = opts.now ?? Date.now
  // chatId -> { email, seen }; Map order = least recently seen first.
  const chats = new Map<string, { email: string, seen: number }>()
  const byEmail = new Map<string, Set<string>>()

  const forget = (chatId: string): void => {
    const entry = chats.get(chatId)
    if (entry === undefined) return
    chats.delete(chatId)
    const set = byEmail.get(entry.email)
    set?.delete(chatId)
    if (set?.size === 0) byEmail.delete(entry.email)
  }

  return {
    remember (email, chatId) {
      forget(chatId) // a chat may change hands; re-inserting also moves it to the end
      chats.set(chatId, { email, seen: now() })
      let set = byEmail.get(email)
      if (set === undefined) { set = new Set(); byEmail.set(email, set) }
      set.add(chatId)
      while (chats.size > opts.maxChats) {
        const oldest = chats.keys().next().value
        if (oldest === undefined) break
        forget(oldest)
      }
    },

    chatsOf (email) {
      const limit = now() - opts.ttlMs
      const out: string[] = []
      for (const chatId of [...(byEmail.get(email) ?? [])]) {
        if ((chats.get(chatId)?.seen ?? 0) < limit) forget(chatId)
        else out.push(chatId)
      }
      return out
    },

    size: () => chats.size
  }
}
