import { createServer, connect, type Server, type Socket } from 'node:net'
import type { FastifyBaseLogger } from 'fastify'
import { parseIp } from './addresses.js'
import { refusal } from './head.js'
import { BLOCKED, decide, precheck, type Policy, type Target } from './policy.js'
import { httpReplies, readRequest, socksReplies, splice, type Replies } from './proxy-io.js'
import type { Lookup } from './resolver.js'
import { createSlots } from './slots.js'
import { methodReply, REP, socksReply } from './socks.js'
import { createRateLimiter } from './throttle.js'
import type { ConnectionRecord } from './types.js'

/*
 * The egress proxy: one TCP listener on the sandbox network's gateway, and connections handed over with
 * their chat (accept: a sandbox without a network interface reaches the proxy over its agent socket's run
 * directory, docs/network.md#egress-over-the-agent-socket). A TCP connection is tied to a
 * chat by its source address (sandboxes cannot spoof it: no NET_RAW/NET_ADMIN, ICC off). Each asks the
 * policy before DNS and again for the exact address it dials, then tunnels (HTTP CONNECT, SOCKS5
 * CONNECT on the same port) or forwards one plain-HTTP request. Memory per connection is bounded: a 16 KiB head, then pipe() with backpressure.
 * Open connections and name lookups in flight are counted slots (slots.ts): per chat, over all chats,
 * with a reserve for chats holding few; a lookup is cancelled when its client goes away.
 */

export type { Lookup } from './resolver.js'

export interface ProxyDeps {
  log: FastifyBaseLogger
  /** chat id of a sandbox source address, or null */
  identify: (address: string) => string | null
  policyFor: (chatId: string) => Policy
  /** settles once the chat's policy layers are loaded (a sandbox mapped before its first call); absent: always loaded */
  ready?: (chatId: string) => Promise<void>
  /** resolves a name; the signal aborts when the client goes away */
  lookup: Lookup
  record: (chatId: string, record: ConnectionRecord) => void
  now?: () => number
}

/** Defaults of the limits the plugin's options do not set (schemas.ts uses the same); an unset reserve is an eighth of the total connections, a quarter of the lookups. */
export const PROXY_DEFAULTS = { reservedBelow: 4, maxLookupsPerChat: 8, maxLookups: 64 } as const

export interface ProxyLimits {
  maxConnectionsPerChat: number
  maxConnections: number
  /** the last of maxConnections, only for chats holding fewer than reservedBelow connections */
  reservedConnections?: number
  reservedBelow?: number
  /** name lookups in flight: per chat, over all chats, and the last of those for chats with at most one */
  maxLookupsPerChat?: number
  maxLookups?: number
  reservedLookups?: number
  idleTimeoutMs: number
  connectTimeoutMs: number
  headTimeoutMs: number
  /** per chat, both directions, all connections; 0 = unlimited */
  bytesPerSecond: number
}

export interface EgressProxy {
  server: Server
  listen: (host: string, port: number) => Promise<number>
  /** Serves a connection whose chat the caller knows (not from anything the connection says), under the same policy, slots and limits. */
  accept: (client: Socket, chatId: string) => void
  /** open connections of a chat (client side) */
  open: (chatId: string) => number
  /** name lookups in flight of a chat */
  lookups: (chatId: string) => number
  close: () => Promise<void>
}

export function createEgressProxy (deps: ProxyDeps, limits: ProxyLimits): EgressProxy {
  const maxLookups = limits.maxLookups ?? PROXY_DEFAULTS.maxLookups
  const l = {
    ...limits,
    reservedConnections: Math.min(limits.reservedConnections ?? Math.floor(limits.maxConnections / 8), limits.maxConnections - 1),
    reservedBelow: limits.reservedBelow ?? PROXY_DEFAULTS.reservedBelow,
    maxLookupsPerChat: limits.maxLookupsPerChat ?? PROXY_DEFAULTS.maxLookupsPerChat,
    maxLookups,
    reservedLookups: Math.min(limits.reservedLookups ?? Math.floor(maxLookups / 4), maxLookups - 1)
  }
  const connections = createSlots({ perChat: l.maxConnectionsPerChat, total: l.maxConnections, reserved: l.reservedConnections, reservedBelow: l.reservedBelow })
  const lookups = createSlots({ perChat: l.maxLookupsPerChat, total: l.maxLookups, reserved: l.reservedLookups, reservedBelow: 2 })
  const sockets = new Set<Socket>()
  const now = deps.now ?? Date.now
  const rate = createRateLimiter(limits.bytesPerSecond)
  const server = createServer({ pauseOnConnect: false }, client => {
    serve(client, deps.identify(stripMapped(client.remoteAddress ?? '')))
  })
  // A hard stop above the counted limit, so that a refusal past the limit is still answered with its reason.
  server.maxConnections = l.maxConnections + 64

  function serve (client: Socket, chatId: string | null): void {
    sockets.add(client)
    client.once('close', () => sockets.delete(client))
    client.on('error', () => {})
    if (chatId === null) { client.end(refusal(403, `${BLOCKED}: this address is not a running sandbox`)); return }
    const refused = connections.take(chatId)
    if (refused !== null) {
      const status = refused === 'chat' ? 429 : 503
      const message = refused === 'chat'
        ? `${BLOCKED}: more than ${l.maxConnectionsPerChat} open connections`
        : refused === 'total'
          ? `egress proxy busy: ${l.maxConnections} open connections over all sandboxes`
          : `egress proxy busy: the last ${l.reservedConnections} of ${l.maxConnections} connections are kept for sandboxes holding fewer than ${l.reservedBelow}, and this one holds ${connections.held(chatId)}`
      client.end(refusal(status, message))
      return
    }
    client.once('close', () => {
      connections.release(chatId)
      if (connections.held(chatId) === 0) rate.release(chatId)
    })
    const failed = (e: unknown): void => {
      deps.log.error({ err: e, chatId }, 'egress connection failed')
      client.destroy()
    }
    readRequest(client, limits.headTimeoutMs, {
      http: (err, head, rest) => {
        if (err !== null) { client.end(refusal(400, `bad proxy request: ${err}`)); return }
        if (head === undefined) return
        handle(chatId, client, head, head.kind === 'connect' ? 'CONNECT' : 'HTTP', httpReplies(client, head), rest ?? Buffer.alloc(0)).catch(failed)
      },
      socks: (result, rest) => {
        if (result.state === 'error') {
          // A refused command or address type is logged like a refusal; a broken greeting is not a request.
          if (result.reply === REP.commandNotSupported) deps.record(chatId, { time: new Date(now()).toISOString(), host: result.host ?? '', port: result.port ?? 0, method: 'SOCKS5', decision: 'failed', reason: 'socks', message: result.message, bytesUp: 0, bytesDown: 0, durationMs: 0 })
          if (result.method === true) client.end(methodReply(false))
          else if (result.reply === null) client.destroy()
          else client.end(socksReply(result.reply))
          return
        }
        if (result.state !== 'done') return
        handle(chatId, client, { host: result.host, port: result.port }, 'SOCKS5', socksReplies(client), rest).catch(failed)
      }
    })
  }

  /** The addresses of a name (an address literal is its own), within the chat's and the total lookup slots; null when refused (answered). */
  async function resolve (chatId: string, client: Socket, host: string, refuse: (status: number, d: { message: string, reason: string }) => void): Promise<string[] | null> {
    if (parseIp(host) !== null) return [host]
    const refused = lookups.take(chatId)
    if (refused !== null) {
      const message = refused === 'chat'
        ? `egress proxy busy: ${l.maxLookupsPerChat} name lookups of this sandbox are already in flight`
        : refused === 'total'
          ? `egress proxy busy: ${l.maxLookups} name lookups in flight over all sandboxes`
          : `egress proxy busy: the last ${l.reservedLookups} of ${l.maxLookups} name lookups in flight are kept for sandboxes with at most one`
      refuse(503, { reason: 'dns-limit', message: `cannot resolve ${host}: ${message}` })
      return null
    }
    const abort = new AbortController()
    const onClose = (): void => { abort.abort() }
    client.once('close', onClose)
    try {
      return await deps.lookup(host, abort.signal)
    } catch (err) {
      if (!client.destroyed) refuse(502, { reason: 'dns', message: `cannot resolve ${host}: ${(err as NodeJS.ErrnoException).code ?? 'lookup failed'}` })
      return null
    } finally {
      client.off('close', onClose)
      lookups.release(chatId)
    }
  }

  async function handle (chatId: string, client: Socket, head: Target, method: string, replies: Replies, rest: Buffer): Promise<void> {
    const started = now()
    const base = { time: new Date(started).toISOString(), host: head.host, port: head.port, method }
    const refuse = (status: number, d: { message: string, reason: string }, address?: string): void => {
      const decision = status === 403 ? 'denied' : 'failed'
      deps.record(chatId, { ...base, ...(address === undefined ? {} : { address }), decision, reason: d.reason, message: d.message, bytesUp: 0, bytesDown: 0, durationMs: now() - started })
      replies.refuse(status, d)
    }
    await deps.ready?.(chatId)
    const policy = deps.policyFor(chatId)
    const pre = precheck(policy, head)
    if (pre !== null) { refuse(403, pre); return }
    const addresses = await resolve(chatId, client, head.host, refuse)
    if (addresses === null) return
    const decisions = addresses.slice(0, 16).map(address => ({ address, d: decide(policy, head, address) }))
    const chosen = decisions.find(x => x.d.allow)
    if (chosen === undefined) {
      const first = decisions[0]
      if (first === undefined) refuse(502, { reason: 'dns', message: `cannot resolve ${head.host}: no addresses` })
      else refuse(403, first.d, first.address)
      return
    }
    if (client.destroyed) return
    const upstream = connect({ host: chosen.address, port: head.port })
    sockets.add(upstream)
    upstream.once('close', () => sockets.delete(upstream))
    const connectTimer = setTimeout(() => upstream.destroy(new Error('connect timeout')), limits.connectTimeoutMs)
    upstream.once('error', err => {
      clearTimeout(connectTimer)
      if (!upstream.connecting && upstream.bytesRead + upstream.bytesWritten > 0) { client.destroy(); return }
      if (!client.destroyed) refuse(502, { reason: 'upstream', message: `upstream ${head.host}:${head.port} unreachable: ${(err as NodeJS.ErrnoException).code ?? err.message}` }, chosen.address)
    })
    upstream.once('connect', () => {
      clearTimeout(connectTimer)
      upstream.removeAllListeners('error')
      upstream.on('error', () => { client.destroy() })
      client.on('error', () => { upstream.destroy() })
      replies.established(upstream)
      if (rest.length > 0) upstream.write(rest)
      splice(client, upstream, limits.idleTimeoutMs, limits.bytesPerSecond > 0 ? () => rate.stream(chatId) : null)
      let recorded = false
      const done = (): void => {
        if (recorded) return
        recorded = true
        deps.record(chatId, {
          ...base,
          address: chosen.address,
          decision: 'allowed',
          reason: chosen.d.reason,
          ...(chosen.d.rule === undefined ? {} : { rule: chosen.d.rule }),
          bytesUp: upstream.bytesWritten,
          bytesDown: upstream.bytesRead,
          durationMs: now() - started
        })
      }
      upstream.once('close', done)
      client.once('close', done)
    })
  }

  return {
    server,
    listen: async (host, port) => await new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen({ host, port }, () => {
        server.off('error', reject)
        const a = server.address()
        resolve(typeof a === 'object' && a !== null ? a.port : port)
      })
    }),
    accept: (client, chatId) => {
      // One that closed while its chat's layers were read would hold its slot for good: its 'close' is past.
      if (client.destroyed) return
      // Past the hard stop of the TCP listener, nothing is answered: the engine bounds each sandbox's socket too.
      if (sockets.size >= 2 * (l.maxConnections + 64)) { client.destroy(); return }
      serve(client, chatId)
    },
    open: chatId => connections.held(chatId),
    lookups: chatId => lookups.held(chatId),
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>(resolve => { if (server.listening) server.close(() => { resolve() }); else resolve() })
    }
  }
}

function stripMapped (address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address
}
