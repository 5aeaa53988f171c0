import { createHash } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import QuickLRU from 'quick-lru'
import type { RequestCredentials } from '../../core/identity.js'
import type { PromptService } from '../prompt-render/types.js'
import type { EnsureHook, SandboxService } from '../sandbox/types.js'

export interface ReadmeDeps {
  sandbox: SandboxService
  prompts: PromptService
  log: FastifyBaseLogger
  now?: () => number
}
export interface ReadmeOptions { path: string, checkIntervalMs: number, maxChats: number }

interface Written { digest: string, email: string | undefined, checkedAt: number }

const digest = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex')

/**
 * The onEnsure hook of tier 2. Writes the README (root:root 0644, so assistant can read but not edit it)
 * whenever the sandbox was (re)started; otherwise re-renders at most once per check interval per chat,
 * or at once when a different user calls, and writes only when the text changed. Never throws.
 */
export function createReadmeHook (deps: ReadmeDeps, opts: ReadmeOptions): EnsureHook {
  const { sandbox, prompts, log } = deps
  const now = deps.now ?? Date.now
  const written = new QuickLRU<string, Written>({ maxSize: opts.maxChats })
  // One check per chat at a time: concurrent tool calls of a chat wait for the same write.
  const running = new Map<string, Promise<void>>()

  async function check (chatId: string, email: string | undefined, force: boolean, credentials: RequestCredentials | undefined): Promise<void> {
    const last = written.get(chatId)
    if (!force && last !== undefined && last.email === email && now() - last.checkedAt < opts.checkIntervalMs) return
    const text = await prompts.render({ chatId, ...(email !== undefined && { email }), ...(credentials !== undefined && { credentials }) })
    const d = digest(text)
    if (!force && last?.digest === d) {
      written.set(chatId, { ...last, email, checkedAt: now() })
      return
    }
    await sandbox.putFile(chatId, opts.path, text, { mode: 0o644, uid: 0, gid: 0 })
    written.set(chatId, { digest: d, email, checkedAt: now() })
    log.debug({ chatId, bytes: Buffer.byteLength(text) }, 'README written')
  }

  return async (box, event) => {
    const chatId = box.chatId
    const email = event.user?.email
    const pending = running.get(chatId)
    if (pending !== undefined && !event.started) { await pending; return }
    const job = (pending ?? Promise.resolve()).then(async () => await check(chatId, email, event.started, event.user?.credentials)).catch((err: unknown) => {
      // Not fatal: the tools work without the README. Retry after the interval (or for another user).
      written.set(chatId, { digest: '', email, checkedAt: now() })
      log.warn({ err, chatId }, 'writing the README failed')
    })
    running.set(chatId, job)
    try { await job } finally { if (running.get(chatId) === job) running.delete(chatId) }
  }
}
