import { connect as netConnect, type Socket } from 'node:net'
import type { FastifyBaseLogger } from 'fastify'
import type { AppAddress, SandboxService } from '../sandbox/types.js'

/*
 * The direct route to an app (docs/features.md#the-direct-route): a TCP connection from the server straight to
 * the sandbox's own address on the sandbox network, for an app that listens beyond loopback (0.0.0.0, ::, the
 * sandbox's address). Two process wake-ups instead of the relay's six (server → agent → app and back).
 *
 * The address comes from the engine (SandboxService.appAddress: its own records, never the sandbox's word),
 * and an address may go to another chat's sandbox once this one stopped. So every new connection is proven:
 * the engine is asked again once the connection is up, and only the same generation (the same sandbox on
 * the same attachment to the network: it held the address all along) lets a byte be sent on it; anything
 * else closes it unused and the request takes the relay. A stop of the chat's sandbox forgets the address
 * (the service closes every connection of the chat); a pause keeps it (the engine's answer wakes the sandbox).
 *
 * A refused connection (the app listens on loopback only, or moved there) takes the relay for that request;
 * so do an engine that cannot answer now or answers later than answerTimeoutMs (busy with starts), and an
 * address the server cannot reach after all (the engine's answer is then not asked again for a while; once the
 * addresses of three different chats failed so in a row, the route is off for everyone for a longer while: a
 * firewall that drops the sandboxes' replies would otherwise cost every new connection the connect timeout,
 * while one chat's app, however it fails, never turns off the route of another).
 */

export interface DirectOptions {
  /** How long a direct connect may take before the relay is used (a bridge on the same host answers at once). */
  connectTimeoutMs: number
  /** How long the engine's answer may take before the request takes the relay (an engine busy with starts). */
  answerTimeoutMs: number
  /** How long an unreachable or absent address is not asked again. */
  retryMs: number
  /** How long the route is off for every chat after unreachable addresses of UNREACHABLE_CHATS chats in a row. */
  offMs: number
  log: FastifyBaseLogger
  now?: () => number
  /** Connects (tests replace it to simulate an unreachable network); the socket or the failure's code. */
  dial?: (host: string, port: number, timeoutMs: number) => Promise<Socket | string>
}

export interface DirectRoute {
  /** A connection to the app on the sandbox's own address, proven to be the chat's sandbox; undefined: take the relay. */
  open: (chatId: string, port: number) => Promise<Socket | undefined>
  /** The chat's sandbox stopped: its address is asked again before the next direct connection. */
  forget: (chatId: string) => void
}

/** What is remembered per chat: the engine's last answer (null: none) and when it was read. */
interface Known { address: AppAddress | null, at: number }

const MAX_CHATS = 10_000
/**
 * Chats whose addresses must all have been unreachable, with no direct connection made in between, before the
 * route goes off for everyone: one chat's app with a full listen queue (connects time out) turns off only its
 * own address for a while, never the route of other chats.
 */
const UNREACHABLE_CHATS = 3
/** Failures to connect that say the address cannot be reached from here (rather than that nothing listens). */
const UNREACHABLE = new Set(['EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'EADDRNOTAVAIL'])

const same = (a: AppAddress | null, b: AppAddress | null): boolean => a !== null && b !== null && a.address === b.address && a.generation === b.generation

const ignore = (): void => {}

/**
 * Connects within `timeoutMs`: the socket, or the failure's code ('ETIMEDOUT' for the timeout). A connected socket
 * keeps a listener that ignores its errors: the sandbox may reset it while the engine is asked (an 'error' nobody
 * listens to would end the process); its users add their own and see the socket destroyed.
 */
export async function dial (host: string, port: number, timeoutMs: number): Promise<Socket | string> {
  return await new Promise(resolve => {
    const socket = netConnect({ host, port, noDelay: true })
    const failed = (err: Error & { code?: string }): void => {
      clearTimeout(timer)
      socket.destroy()
      resolve(err.code ?? 'ECONNFAILED')
    }
    const timer = setTimeout(() => { socket.destroy(); resolve('ETIMEDOUT') }, timeoutMs)
    socket.once('connect', () => {
      clearTimeout(timer)
      socket.off('error', failed)
      socket.on('error', ignore)
      resolve(socket)
    })
    socket.once('error', failed)
  })
}

export function createDirectRoute (sandbox: Pick<SandboxService, 'appAddress'>, o: DirectOptions): DirectRoute {
  const now = o.now ?? (() => performance.now())
  const known = new Map<string, Known>()
  /** chats with an unreachable address since the last direct connection made; the route is off until `offUntil` */
  const unreachable = new Set<string>()
  const connectTo = o.dial ?? dial
  let offUntil = -Infinity
  /** the engine's answer being read, per chat, with the step at which it was asked */
  const reading = new Map<string, { asked: number, answer: Promise<AppAddress | null> }>()
  /** per chat, the read that starts once the one being read ended, shared by whoever waits for it */
  const queued = new Map<string, Promise<AppAddress | null>>()
  /** orders asks and connects: an answer asked at a later step than a connect was read after it */
  let step = 0

  const remember = (chatId: string, address: AppAddress | null): void => {
    known.delete(chatId)
    known.set(chatId, { address, at: now() })
    if (known.size > MAX_CHATS) known.delete(known.keys().next().value as string)
  }

  /** The engine's answer, or null after a failure other than the sandbox not running (which the relay reports). */
  async function ask (chatId: string): Promise<AppAddress | null> {
    try {
      return await sandbox.appAddress!(chatId)
    } catch (err) {
      if ((err as { code?: unknown } | null)?.code === 'SANDBOX_NOT_RUNNING') throw err
      o.log.debug({ chatId, err }, 'app address unknown: relay')
      return null
    }
  }

  function startRead (chatId: string): Promise<AppAddress | null> {
    const read = { asked: ++step, answer: ask(chatId) }
    reading.set(chatId, read)
    read.answer.finally(() => { if (reading.get(chatId) === read) reading.delete(chatId) }).catch(() => {})
    return read.answer
  }

  /**
   * An answer asked after step `since`: the one being read when it was asked later than that, else the next
   * read, started once the current one ended (so a page's connections made together cost two engine calls, not
   * one each), or a new one when none is being read.
   */
  async function readAfter (chatId: string, since: number): Promise<AppAddress | null> {
    const r = reading.get(chatId)
    if (r === undefined) return await startRead(chatId)
    if (r.asked > since) return await r.answer
    let next = queued.get(chatId)
    if (next === undefined) {
      next = r.answer.catch(() => null).then(async () => {
        queued.delete(chatId)
        return await startRead(chatId)
      })
      queued.set(chatId, next)
    }
    return await next
  }

  /** readAfter within answerTimeoutMs; 'late' when the engine took longer (the answer still lands in the shared read). */
  async function answerAfter (chatId: string, since: number): Promise<AppAddress | null | 'late'> {
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<'late'>(resolve => { timer = setTimeout(() => { resolve('late') }, o.answerTimeoutMs) })
    try { return await Promise.race([readAfter(chatId, since), late]) } finally { clearTimeout(timer) }
  }

  async function open (chatId: string, port: number): Promise<Socket | undefined> {
    if (sandbox.appAddress === undefined || now() < offUntil) return undefined
    let before = known.get(chatId)
    if (before === undefined || (before.address === null && now() - before.at > o.retryMs)) {
      const answer = await answerAfter(chatId, 0)
      if (answer === 'late') return undefined
      before = { address: answer, at: now() }
      remember(chatId, before.address)
    }
    const target = before.address
    if (target === null) return undefined
    const socket = await connectTo(target.address, port, o.connectTimeoutMs)
    if (typeof socket === 'string') {
      if (UNREACHABLE.has(socket)) {
        remember(chatId, null)
        unreachable.add(chatId)
        if (unreachable.size >= UNREACHABLE_CHATS) {
          unreachable.clear()
          offUntil = now() + o.offMs
          o.log.warn({ code: socket, offS: Math.round(o.offMs / 1000) }, 'sandbox addresses are not reachable from the server (a firewall dropping their replies? docs/network.md): apps take the relay for a while')
        }
      }
      return undefined
    }
    unreachable.clear()
    // The proof: the engine still says this very holding of the address, read after the connection was made.
    const connected = ++step
    let after: AppAddress | null | 'late'
    try { after = await answerAfter(chatId, connected) } catch (err) { socket.destroy(); throw err }
    // Late, or reset by the sandbox meanwhile: the relay.
    if (after === 'late' || socket.destroyed) { socket.destroy(); return undefined }
    if (!same(target, after)) {
      socket.destroy()
      remember(chatId, after)
      o.log.debug({ chatId }, 'the sandbox\'s address changed while connecting: relay')
      return undefined
    }
    return socket
  }

  return { open, forget: chatId => { known.delete(chatId) } }
}
