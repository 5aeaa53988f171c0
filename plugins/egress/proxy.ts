import { createServer, connect, type Server, type Socket } from 'node:net'
import type { Transform } from 'node:stream'
import type { FastifyBaseLogger } from 'fastify'
import { headEnd, MAX_HEAD, parseHead, refusal, type Head } from './head.js'
import { decide, precheck, type Policy, type Target } from './policy.js'
import { MAX_SOCKS, methodReply, parseSocks, REP, SOCKS_VERSION, socksReply, type SocksParse } from './socks.js'
import { createRateLimiter } from './throttle.js'
import type { ConnectionRecord } from './types.js'

/*
 * The egress proxy: one TCP listener on the sandbox network's gateway. Each connection is tied to a
 * chat by its source address (sandboxes cannot spoof it: no NET_RAW/NET_ADMIN, ICC off), asks the
 * policy before DNS and again for the exact address it dials, then tunnels (HTTP CONNECT, SOCKS5
 * CONNECT on the same port) or forwards one plain-HTTP request. Memory per connection is bounded: a 16 KiB head, then pipe() with backpressure.
 */

export type Lookup = (host: string) => Promise<string[]>

export interface ProxyDeps {
  log: FastifyBaseLogger
  /** chat id of a sandbox source address, or null */
  identify: (address: string) => string | null
  policyFor: (chatId: string) => Policy
  lookup: Lookup
  record: (chatId: string, record: ConnectionRecord) => void
  now?: () => number
}

export interface ProxyLimits {
  maxConnectionsPerChat: number
  maxConnections: number
  idleTimeoutMs: number
  connectTimeoutMs: number
  headTimeoutMs: number
  /** per chat, both directions, all connections; 0 = unlimited */
  bytesPerSecond: number
}

export interface EgressProxy {
  server: Server
  listen: (host: string, port: number) => Promise<number>
  /** open connections of a chat (client side) */
  open: (chatId: string) => number
  close: () => Promise<void>
}

export function createEgressProxy (deps: ProxyDeps, limits: ProxyLimits): EgressProxy {
  const perChat = new Map<string, number>()
  const sockets = new Set<Socket>()
  const now = deps.now ?? Date.now
  const rate = createRateLimiter(limits.bytesPerSecond)
  const server = createServer({ pauseOnConnect: false }, client => {
    sockets.add(client)
    client.once('close', () => sockets.delete(client))
    client.on('error', () => {})
    const chatId = deps.identify(stripMapped(client.remoteAddress ?? ''))
    if (chatId === null) { client.end(refusal(403, 'blocked by the sandbox egress policy: this address is not a running sandbox')); return }
    const count = perChat.get(chatId) ?? 0
    if (count >= limits.maxConnectionsPerChat) {
      client.end(refusal(429, `blocked by the sandbox egress policy: more than ${limits.maxConnectionsPerChat} open connections`))
      return
    }
    perChat.set(chatId, count + 1)
    client.once('close', () => {
      const left = (perChat.get(chatId) ?? 1) - 1
      if (left <= 0) { perChat.delete(chatId); rate.release(chatId) } else perChat.set(chatId, left)
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
  })
  server.maxConnections = limits.maxConnections

  async function handle (chatId: string, client: Socket, head: Target, method: string, replies: Replies, rest: Buffer): Promise<void> {
    const started = now()
    const base = { time: new Date(started).toISOString(), host: head.host, port: head.port, method }
    const refuse = (status: number, d: { message: string, reason: string }, address?: string): void => {
      const decision = status === 403 ? 'denied' : 'failed'
      deps.record(chatId, { ...base, ...(address === undefined ? {} : { address }), decision, reason: d.reason, message: d.message, bytesUp: 0, bytesDown: 0, durationMs: now() - started })
      replies.refuse(status, d)
    }
    const policy = deps.policyFor(chatId)
    const pre = precheck(policy, head)
    if (pre !== null) { refuse(403, pre); return }
    let addresses: string[]
    try {
      addresses = await deps.lookup(head.host)
    } catch (err) {
      refuse(502, { reason: 'dns', message: `cannot resolve ${head.host}: ${(err as NodeJS.ErrnoException).code ?? 'lookup failed'}` })
      return
    }
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
    open: chatId => perChat.get(chatId) ?? 0,
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>(resolve => { if (server.listening) server.close(() => { resolve() }); else resolve() })
    }
  }
}

function stripMapped (address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address
}

/** How a refusal or an open tunnel is told to the client: HTTP status lines, or SOCKS5 replies. */
interface Replies {
  refuse: (status: number, d: { message: string, reason: string }) => void
  established: (upstream: Socket) => void
}

function httpReplies (client: Socket, head: Head): Replies {
  return {
    refuse: (status, d) => { client.end(refusal(status, d.message)) },
    established: upstream => {
      if (head.kind === 'connect') client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
      else upstream.write(head.head)
    }
  }
}

/** SOCKS5 carries no text: the reply code says what kind of refusal, the per-chat log says why. */
function socksReplies (client: Socket): Replies {
  return {
    refuse: (status, d) => {
      const code = status === 403 ? REP.notAllowed : d.reason === 'dns' ? REP.hostUnreachable : d.reason === 'upstream' ? REP.refused : REP.failure
      client.end(socksReply(code))
    },
    established: () => { client.write(socksReply(REP.ok)) }
  }
}

interface RequestReaders {
  http: (err: string | null, head?: Head, rest?: Buffer) => void
  socks: (result: SocksParse, rest: Buffer) => void
}

/**
 * Reads the first request (within timeoutMs), then stops reading: an HTTP head (≤ MAX_HEAD bytes), or,
 * when the first byte is 0x05, a SOCKS5 greeting (answered at once) and CONNECT request (≤ MAX_SOCKS).
 */
function readRequest (client: Socket, timeoutMs: number, readers: RequestReaders): void {
  const chunks: Buffer[] = []
  let size = 0
  let greeted = false
  const timer = setTimeout(() => {
    finish()
    if (chunks[0]?.[0] === SOCKS_VERSION) client.destroy()
    else readers.http('no request within the time limit')
  }, timeoutMs)
  const finish = (): void => { clearTimeout(timer); client.off('data', onData); client.off('end', onEnd) }
  const onEnd = (): void => { finish(); client.destroy() }
  const onSocks = (buf: Buffer): void => {
    const methods = buf[1]
    if (!greeted && methods !== undefined && buf.length >= 2 + methods && buf.subarray(2, 2 + methods).includes(0x00)) {
      greeted = true
      client.write(methodReply(true))
    }
    const result = parseSocks(buf.subarray(0, MAX_SOCKS))
    if (result.state === 'more') {
      if (buf.length >= MAX_SOCKS) { finish(); client.destroy() }
      return
    }
    finish()
    client.pause()
    readers.socks(result, result.state === 'done' ? buf.subarray(result.used) : Buffer.alloc(0))
  }
  const onData = (chunk: Buffer): void => {
    chunks.push(chunk)
    size += chunk.length
    const buf = chunks.length === 1 ? chunk : Buffer.concat(chunks)
    chunks.length = 0
    chunks.push(buf)
    if (buf[0] === SOCKS_VERSION) { onSocks(buf); return }
    const done = readers.http
    const end = headEnd(buf.subarray(0, MAX_HEAD + 4))
    if (end < 0) {
      if (size > MAX_HEAD) { finish(); done('request head larger than 16 KiB') }
      return
    }
    finish()
    client.pause()
    const head = parseHead(buf.subarray(0, end))
    if (typeof head === 'string') { done(head); return }
    done(null, head, buf.subarray(end))
  }
  client.on('data', onData)
  client.on('end', onEnd)
}

/** Pipes both ways with backpressure; either side idle for idleMs (no bytes either way) closes both. */
function splice (client: Socket, upstream: Socket, idleMs: number, throttle: (() => Transform) | null): void {
  client.setTimeout(idleMs, () => { client.destroy(); upstream.destroy() })
  upstream.setTimeout(idleMs, () => { client.destroy(); upstream.destroy() })
  if (throttle === null) {
    client.pipe(upstream)
    upstream.pipe(client)
  } else {
    client.pipe(throttle()).pipe(upstream)
    upstream.pipe(throttle()).pipe(client)
  }
  client.resume()
  client.once('close', () => upstream.destroy())
  // A clean end reaches the client through the pipe (after any throttled chunks); anything else drops it.
  upstream.once('close', () => { if (!upstream.readableEnded) client.destroy() })
}
