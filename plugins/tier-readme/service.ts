import { createHash } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import QuickLRU from 'quick-lru'
import type { RequestCredentials } from '../../core/identity.js'
import type { PromptService } from '../prompt-render/types.js'
import type { EnsureHook, SandboxService, StartHook } from '../sandbox/types.js'

export interface ReadmeDeps {
  sandbox: SandboxService
  prompts: PromptService
  log: FastifyBaseLogger
  now?: () => number
}
export interface ReadmeOptions { path: string, checkIntervalMs: number, maxChats: number }

interface Written { digest: string, email: string | undefined, checkedAt: number }

const digest = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex')

/** The hooks of tier 2: `start` for the sandbox service's onStart (when it has one), `ensure` for its onEnsure. */
export interface ReadmeHooks { start: StartHook, ensure: EnsureHook }

/**
 * Tier 2. Writes the README (root:root 0644, so assistant can read but not edit it) whenever the sandbox was
 * (re)started: through the start hook while the sandbox's agent starts (so it costs a new chat's first call
 * nothing: docs/performance.md), else (no start hook, or its write failed) from the onEnsure hook. Otherwise
 * re-renders at most once per check interval per chat, or at once when a different user calls, and writes
 * only when the text changed. Never throws.
 */
export function createReadmeHooks (deps: ReadmeDeps, opts: ReadmeOptions): ReadmeHooks {
  const { sandbox, prompts, log } = deps
  const now = deps.now ?? Date.now
  const written = new QuickLRU<string, Written>({ maxSize: opts.maxChats })
  // One check per chat at a time: concurrent tool calls of a chat wait for the same write.
  const running = new Map<string, Promise<void>>()
  // The sandbox each chat's start hook wrote the README into during the start in progress (consumed by the onEnsure hook).
  const startWrote = new QuickLRU<string, string>({ maxSize: opts.maxChats })

  async function render (chatId: string, email: string | undefined, credentials: RequestCredentials | undefined): Promise<string> {
    return await prompts.render({ chatId, ...(email !== undefined && { email }), ...(credentials !== undefined && { credentials }) })
  }

  async function check (chatId: string, email: string | undefined, force: boolean, credentials: RequestCredentials | undefined): Promise<void> {
    const last = written.get(chatId)
    if (!force && last !== undefined && last.email === email && now() - last.checkedAt < opts.checkIntervalMs) return
    const text = await render(chatId, email, credentials)
    const d = digest(text)
    if (!force && last?.digest === d) {
      written.set(chatId, { ...last, email, checkedAt: now() })
      return
    }
    await sandbox.putFile(chatId, opts.path, text, { mode: 0o644, uid: 0, gid: 0 })
    written.set(chatId, { digest: d, email, checkedAt: now() })
    log.debug({ chatId, bytes: Buffer.byteLength(text) }, 'README written')
  }

  /** Under the chat's lock, while the sandbox starts: the README written through the engine. */
  const start: StartHook = async (box, event, files) => {
    startWrote.delete(box.chatId)
    const email = event.user?.email
    const text = await render(box.chatId, email, event.user?.credentials)
    await files.put(opts.path, text, { mode: 0o644, uid: 0, gid: 0 })
    written.set(box.chatId, { digest: digest(text), email, checkedAt: now() })
    startWrote.set(box.chatId, box.sandboxId)
    log.debug({ chatId: box.chatId, bytes: Buffer.byteLength(text) }, 'README written at the start')
  }

  const ensure: EnsureHook = async (box, event) => {
    const chatId = box.chatId
    const email = event.user?.email
    // A start whose start hook wrote the README needs no second write (a failed one left no mark: forced below).
    const wroteAtStart = event.started && startWrote.get(chatId) === box.sandboxId
    if (event.started) startWrote.delete(chatId)
    const force = event.started && !wroteAtStart
    const pending = running.get(chatId)
    if (pending !== undefined && !force) { await pending; return }
    const job = (pending ?? Promise.resolve()).then(async () => await check(chatId, email, force, event.user?.credentials)).catch((err: unknown) => {
      // Not fatal: the tools work without the README. Retry after the interval (or for another user).
      written.set(chatId, { digest: '', email, checkedAt: now() })
      log.warn({ err, chatId }, 'writing the README failed')
    })
    running.set(chatId, job)
    try { await job } finally { if (running.get(chatId) === job) running.delete(chatId) }
  }

  return { start, ensure }
}
