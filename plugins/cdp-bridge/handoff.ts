/*
 * The human's turn in the browser (docs/contract.md#browser-handoff): `browser handoff "<why>"` in the
 * sandbox asks the server (a command request of bash_tool) to hand the shared browser to the person in the
 * chat. Where the client can do URL-mode elicitation (2025-11-25: a request on the call's stream; 2026-07-28:
 * the call answers input_required and the client retries it with the human's answer), the server asks the human to open the take-over
 * link and keeps the call open until they hand the browser back (the Release button of the Browser view,
 * which calls POST /browser/{chat}/handoff/release), or decline, or the wait runs out; elsewhere the answer
 * carries the link for the model to give. The open handoff of a chat (its reason) is what the Browser
 * view shows in its banner. State: one open handoff per chat, at most `maxChats`, each expiring.
 */
import { randomUUID } from 'node:crypto'
import type { ToolCallContext, ToolInputRequired } from '../mcp-transport/types.js'

export interface OpenHandoff { id: string, why: string, since: number }

export interface HandoffOptions {
  /** How long the human has to answer the elicitation. */
  askTimeoutMs: number
  /** How long a call waits for the browser to be handed back after the human accepted. */
  waitTimeoutMs: number
  /** How long an open handoff is shown when nobody waits for it (the link was given as text). */
  shownMs: number
  maxChats: number
  /** Progress while waiting, so clients that reset their timeout on progress keep the call. */
  progressMs: number
  now?: () => number
}

export interface HandoffService {
  /** The chat's open handoff, if any (the Browser view shows its reason). */
  current (chatId: string): OpenHandoff | undefined
  /** The human handed the browser back: ends the chat's open handoff. False when there was none. */
  release (chatId: string): boolean
  /**
   * Handles one `browser handoff` request of a bash_tool call; returns the text for the model, or on
   * 2026-07-28 the URL-mode question for the client (then again, resumed, with the human's answer).
   */
  request (ctx: ToolCallContext, why: string, takeoverUrl: string): Promise<string | ToolInputRequired>
  /** Forgets every open handoff (onClose; waiting calls end with their own cancellation). */
  close (): void
}

interface Entry extends OpenHandoff { expires: number, released: () => void, done: Promise<void> }

const REASON_MAX = 300
const cleanReason = (text: string): string => {
  // eslint-disable-next-line no-control-regex
  const oneLine = text.replace(/[\u0000-\u001f\u007f]+/g, ' ').replace(/\s+/g, ' ').trim()
  const cut = Array.from(oneLine).slice(0, REASON_MAX).join('')
  return cut === '' ? 'the assistant needs you to use the browser' : cut
}
const seconds = (ms: number): string => `${Math.max(1, Math.round(ms / 1000))} s`

export function createHandoffService (opts: HandoffOptions): HandoffService {
  const now = opts.now ?? Date.now
  const open = new Map<string, Entry>()

  const end = (chatId: string, entry: Entry): void => {
    if (open.get(chatId) === entry) open.delete(chatId)
    entry.released()
  }
  const live = (chatId: string): Entry | undefined => {
    const entry = open.get(chatId)
    if (entry !== undefined && entry.expires <= now()) { end(chatId, entry); return undefined }
    return entry
  }
  const begin = (chatId: string, why: string, lifetimeMs: number): Entry => {
    const previous = open.get(chatId)
    if (previous !== undefined) end(chatId, previous)
    let released = (): void => {}
    const done = new Promise<void>(resolve => { released = resolve })
    const entry: Entry = { id: randomUUID(), why, since: now(), expires: now() + lifetimeMs, released, done }
    open.set(chatId, entry)
    while (open.size > opts.maxChats) {
      const [oldest, first] = open.entries().next().value as [string, Entry]
      end(oldest, first)
    }
    return entry
  }

  /** Waits until the entry is released, the wait runs out or the call is cancelled, with progress meanwhile. */
  async function waitForRelease (ctx: ToolCallContext, entry: Entry): Promise<'released' | 'timeout' | 'cancelled'> {
    const started = now()
    let timer: NodeJS.Timeout | undefined
    let ticker: NodeJS.Timeout | undefined
    let onAbort = (): void => {}
    try {
      return await Promise.race([
        entry.done.then(() => 'released' as const),
        new Promise<'timeout'>(resolve => { timer = setTimeout(() => { resolve('timeout') }, opts.waitTimeoutMs) }),
        new Promise<'cancelled'>(resolve => {
          onAbort = () => { resolve('cancelled') }
          if (ctx.signal.aborted) onAbort()
          else ctx.signal.addEventListener('abort', onAbort, { once: true })
        }),
        new Promise<never>(() => {
          ticker = setInterval(() => {
            const elapsed = Math.round((now() - started) / 1000)
            ctx.progress(elapsed, undefined, `waiting for the user to hand the browser back (${elapsed} s)`).catch(() => {})
          }, opts.progressMs)
        })
      ])
    } finally {
      clearTimeout(timer)
      clearInterval(ticker)
      ctx.signal.removeEventListener('abort', onAbort)
    }
  }

  const linkText = (url: string, why: string): string =>
    `The browser is ready for the user. Give them this link (it opens the live browser of this chat): ${url}\n` +
    `Ask them to click "Take over", do what is needed (${why}), then click "Release". Wait until they tell you they are done, ` +
    'then look at the page again (browser snapshot) before you continue. Never ask for their password in the chat.'

  const question = (why: string, url: string): { message: string, url: string } => ({ message: `The assistant asks you to take over the browser: ${why}`, url })

  /** After the human answered: declined or dismissed ends it; accepted waits for the browser to be handed back. */
  async function answered (ctx: ToolCallContext, entry: Entry, action: string, takeoverUrl: string): Promise<string> {
    if (action !== 'accept') {
      end(ctx.chatId, entry)
      return `The user ${action === 'decline' ? 'declined' : 'dismissed'} the request to take over the browser (${entry.why}). ` +
        'Carry on without it, or ask them in the chat what they prefer.'
    }
    const started = now()
    const outcome = await waitForRelease(ctx, entry)
    if (outcome === 'released') {
      return `The user took over the browser and handed it back after ${seconds(now() - started)}. ` +
        'The page may have changed: look at it again (browser snapshot) before you continue.'
    }
    end(ctx.chatId, entry)
    if (outcome === 'cancelled') return 'The handoff was cancelled.'
    return `The user opened the browser but did not hand it back within ${seconds(opts.waitTimeoutMs)}. ` +
      `Ask them in the chat whether they are done; the link stays valid: ${takeoverUrl}`
  }

  /** The retried 2026-07-28 call: the human's answer to the question of the first round (untrusted shape). */
  async function resumed (ctx: ToolCallContext, state: Record<string, unknown>, responses: Record<string, unknown>, takeoverUrl: string): Promise<string> {
    const entry = live(ctx.chatId)
    if (entry === undefined || entry.id !== state.handoff) {
      return 'The handoff ended before the user answered (a newer one replaced it, or it expired). Run `browser handoff` again if the user is still needed.'
    }
    const answer = responses.handoff as { action?: unknown } | undefined
    const action = typeof answer?.action === 'string' && ['accept', 'decline'].includes(answer.action) ? answer.action : 'cancel'
    return await answered(ctx, entry, action, takeoverUrl)
  }

  return {
    current (chatId) {
      const entry = live(chatId)
      return entry === undefined ? undefined : { id: entry.id, why: entry.why, since: entry.since }
    },

    release (chatId) {
      const entry = live(chatId)
      if (entry === undefined) return false
      end(chatId, entry)
      return true
    },

    async request (ctx, rawWhy, takeoverUrl) {
      const why = cleanReason(rawWhy)
      const round = ctx.inputRound
      if (round?.resumed !== undefined) return await resumed(ctx, round.resumed.state, round.resumed.responses, takeoverUrl)
      if (ctx.elicitUrl === undefined && round?.url === true) {
        // 2026-07-28: the call ends asking the client; the human's answer comes with the retried call.
        const entry = begin(ctx.chatId, why, opts.askTimeoutMs + opts.waitTimeoutMs)
        return { inputRequired: { requests: { handoff: { method: 'elicitation/create', params: { mode: 'url', ...question(why, takeoverUrl) } } }, state: { handoff: entry.id } } }
      }
      if (ctx.elicitUrl === undefined) {
        begin(ctx.chatId, why, opts.shownMs)
        return linkText(takeoverUrl, why)
      }
      const entry = begin(ctx.chatId, why, opts.askTimeoutMs + opts.waitTimeoutMs)
      let action
      try {
        action = await ctx.elicitUrl({ ...question(why, takeoverUrl), elicitationId: entry.id }, opts.askTimeoutMs)
      } catch (err) {
        if (ctx.signal.aborted) { end(ctx.chatId, entry); return 'The handoff was cancelled.' }
        // The client could not ask (or did not answer): the link goes to the model instead.
        ctx.log.debug({ err }, 'browser handoff: URL elicitation failed; giving the link as text')
        entry.expires = now() + opts.shownMs
        return linkText(takeoverUrl, why)
      }
      return await answered(ctx, entry, action, takeoverUrl)
    },

    close () { open.clear() }
  }
}
