import type { FastifyBaseLogger } from 'fastify'
import type { SandboxService } from '../sandbox/types.js'
import { getJson, relayArgv, relayPipe } from './cdp-client.js'
import { CDP_BROWSER_UNAVAILABLE, CDP_SANDBOX_NOT_RUNNING, CDP_TOO_MANY_VIEWERS } from './errors.js'
import { startRelay, type SocketRelay } from './socket-relay.js'
import { pagesOf, parseTargets, parseVersion } from './targets.js'
import type { CdpService } from './types.js'

export interface CdpDeps { sandbox: SandboxService, log: FastifyBaseLogger }

export interface CdpServiceOptions {
  cdpPort: number
  timeoutMs: number
  maxAnswerBytes: number
  maxTargets: number
  maxViewersPerChat: number
  maxViewers: number
  maxMessageBytes: number
  highWaterBytes: number
  connectTimeoutMs: number
}

export interface CdpRuntime {
  service: CdpService
  /** onStop hook of the sandbox service: the chat's sockets close with 1001 (docs/contract.md#idle-stop-max-age-and-purge). */
  sandboxStopped: (chatId: string) => void
  /** Closes every relayed socket with 1001 and frees everything; safe to call twice. */
  close: () => Promise<void>
}

const errCode = (err: unknown): string | undefined => (err as { code?: unknown } | null)?.code as string | undefined

/** Builds the bridge. State (open relays, slots, in-flight fetches) lives in this closure. */
export function createCdpService (deps: CdpDeps, opts: CdpServiceOptions): CdpRuntime {
  const { sandbox, log } = deps
  const openStream = sandbox.openStream
  if (openStream === undefined) throw new TypeError('cdp-bridge needs a sandbox driver with openStream()')
  const relays = new Map<string, Set<SocketRelay>>()
  const slots = new Map<string, number>()
  let slotTotal = 0
  // Concurrent readers of one chat's endpoint (status polls of several viewers) share one relay exec.
  const inflight = new Map<string, Promise<unknown>>()

  async function requireRunning (chatId: string): Promise<void> {
    const status = await sandbox.status(chatId)
    if (status.state !== 'running') throw new CDP_SANDBOX_NOT_RUNNING()
  }

  async function fetchOnce (chatId: string, path: string): Promise<unknown> {
    const abort = new AbortController()
    const timer = setTimeout(() => { abort.abort() }, opts.timeoutMs)
    timer.unref()
    try {
      const opening = openStream!.call(sandbox, chatId, relayArgv(opts.cdpPort))
      const stream = await Promise.race([opening, new Promise<never>((_resolve, reject) => {
        abort.signal.addEventListener('abort', () => { reject(new Error('timeout')) }, { once: true })
      })]).catch(async (err: unknown) => {
        void opening.then(s => { s.close() }, () => {}) // a late stream is closed, never leaked
        throw err
      })
      return await getJson(relayPipe(stream), { port: opts.cdpPort, path, maxBytes: opts.maxAnswerBytes, signal: abort.signal })
    } catch (err) {
      if (errCode(err) === 'SANDBOX_NOT_RUNNING') throw new CDP_SANDBOX_NOT_RUNNING()
      const reason = abort.signal.aborted ? `no answer within ${opts.timeoutMs} ms` : (err as Error).message
      throw new CDP_BROWSER_UNAVAILABLE(reason, { cause: err })
    } finally {
      clearTimeout(timer)
    }
  }

  async function fetchJson (chatId: string, path: string): Promise<unknown> {
    await requireRunning(chatId)
    const key = `${chatId}\u0000${path}`
    let pending = inflight.get(key)
    if (pending === undefined) {
      pending = fetchOnce(chatId, path).finally(() => { inflight.delete(key) })
      inflight.set(key, pending)
    }
    return await pending
  }

  const targets = async (chatId: string): Promise<ReturnType<typeof parseTargets>> => {
    const raw = await fetchJson(chatId, '/json/list')
    try { return parseTargets(raw, opts.maxTargets) } catch (err) { throw new CDP_BROWSER_UNAVAILABLE((err as Error).message) }
  }

  function freeSlot (chatId: string): () => void {
    let freed = false
    return () => {
      if (freed) return
      freed = true
      slotTotal--
      const left = (slots.get(chatId) ?? 1) - 1
      if (left <= 0) slots.delete(chatId)
      else slots.set(chatId, left)
    }
  }

  const service: CdpService = {
    async status (chatId) {
      try {
        return { active: true, pages: pagesOf(await targets(chatId)) }
      } catch (err) {
        log.debug({ chatId, err }, 'browser status: not active')
        return { active: false, pages: [] }
      }
    },
    targets,
    async version (chatId) {
      const raw = await fetchJson(chatId, '/json/version')
      try { return parseVersion(raw) } catch (err) { throw new CDP_BROWSER_UNAVAILABLE((err as Error).message) }
    },
    async reserve (chatId) {
      const used = slots.get(chatId) ?? 0
      if (used >= opts.maxViewersPerChat) throw new CDP_TOO_MANY_VIEWERS(`this chat has ${opts.maxViewersPerChat}`)
      if (slotTotal >= opts.maxViewers) throw new CDP_TOO_MANY_VIEWERS(`the server has ${opts.maxViewers}`)
      // Taken before the (async) status check, so concurrent handshakes cannot overshoot the cap.
      slots.set(chatId, used + 1)
      slotTotal++
      const free = freeSlot(chatId)
      try { await requireRunning(chatId) } catch (err) { free(); throw err }
      return free
    },
    relay (chatId, targetId, client, release) {
      const lease = sandbox.lease(chatId, { kind: 'socket' })
      let set = relays.get(chatId)
      if (set === undefined) { set = new Set(); relays.set(chatId, set) }
      const own = set
      let done = false
      const relay: SocketRelay = startRelay({ sandbox, log }, {
        port: opts.cdpPort, maxMessageBytes: opts.maxMessageBytes, highWaterBytes: opts.highWaterBytes, connectTimeoutMs: opts.connectTimeoutMs
      }, chatId, targetId, client, () => {
        done = true
        own.delete(relay)
        if (own.size === 0 && relays.get(chatId) === own) relays.delete(chatId)
        lease()
        release()
      })
      if (!done) own.add(relay)
    },
    viewers: chatId => relays.get(chatId)?.size ?? 0
  }

  return {
    service,
    sandboxStopped (chatId) {
      for (const relay of [...relays.get(chatId) ?? []]) relay.close(1001, 'sandbox stopped')
    },
    async close () {
      for (const set of [...relays.values()]) for (const relay of [...set]) relay.close(1001, 'server shutting down')
      relays.clear()
    }
  }
}
