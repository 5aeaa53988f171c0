import type { FastifyBaseLogger } from 'fastify'
import type { ListeningSocket, SandboxFileOp, SandboxFileResult, SandboxService } from '../sandbox/types.js'
import type { LinkService } from '../capabilities/types.js'
import { AppSocket, relayArgv, SandboxAgent, type AppConnection } from './connection.js'
import { PORTS_APP_UNREACHABLE, PORTS_SANDBOX_NOT_RUNNING, PORTS_TOO_MANY_CONNECTIONS } from './errors.js'
import { listeningPorts, parseListening } from './listening.js'
import type { PortsService } from './types.js'
import type { AppOrigins } from './origin.js'
import { createDirectRoute } from './direct.js'

export interface PortsDeps {
  sandbox: SandboxService
  links: LinkService
  log: FastifyBaseLogger
  /** APPS_DOMAIN: apps on their own origins (origin.ts) */
  appOrigins?: AppOrigins
}

export interface PortsServiceOptions {
  maxConnectionsPerChat: number
  /** How long an unused keep-alive connection stays open (below the 5 s of Node's servers, so the app rarely closes it first). */
  freeSocketMs: number
  /** Ports never listed (the browser's CDP port). */
  hiddenPorts: number[]
  listTimeoutMs: number
  /** How long the agent may take to connect to an app (a listen backlog that is full); default 30 s */
  connectTimeoutMs?: number
  /** How long a connection straight to the sandbox's address may take before the relay is used; default 2 s (direct.ts) */
  directConnectTimeoutMs?: number
}

/** What the routes and the other hooks of the plugin drive besides the public service. */
export interface PortsRuntime {
  service: PortsService
  /** The chat's agent for HTTP requests; 429 when its queue is full. */
  agent: (chatId: string) => SandboxAgent
  /** A relay connection for a WebSocket, counted against the chat's cap until it closes (429 over it). */
  socket: (chatId: string, port: number) => Promise<AppConnection>
  /** Throws PORTS_SANDBOX_NOT_RUNNING unless the chat's sandbox runs; never starts it. */
  requireRunning: (chatId: string) => Promise<void>
  /**
   * Listening ports that were not listening at the previous call for this chat (bash_tool results); `sockets`:
   * the sandbox's listening sockets as the command's exit said them (else they are asked for).
   */
  newlyListening: (chatId: string, sockets?: readonly ListeningSocket[]) => Promise<number[]>
  /** onStop of the sandbox: the chat's connections are closed; after a stop (not a pause) its ports count as new again. */
  sandboxStopped: (chatId: string, paused: boolean) => void
  close: () => Promise<void>
}

/** How many listening sockets the agent lists at most. */
export const LISTENING_MAX = 4096
/** What is read of the TCP tables (parseListening reads at most 8192 lines of them). */
const TABLE_MAX_BYTES = 1024 * 1024
const ENOENT = 2

/** SandboxService.connect's refusals: nothing listens, no answer in time, another failure to connect. */
const CONNECT_FAILED = new Set(['ECONNREFUSED', 'ETIMEDOUT', 'ECONNFAILED'])

const notRunning = (err: unknown): boolean => (err as { code?: unknown } | null)?.code === 'SANDBOX_NOT_RUNNING'

export function createPortsService (deps: PortsDeps, opts: PortsServiceOptions): PortsRuntime {
  const { sandbox, links, log } = deps
  const openStream = sandbox.openStream
  if (openStream === undefined) throw new TypeError('ports needs a sandbox driver with openStream()')
  const agents = new Map<string, SandboxAgent>()
  /** open relay connections per chat (HTTP, pooled or in use, and WebSockets) */
  const open = new Map<string, Set<AppConnection>>()
  /** the ports seen at the last bash_tool call, per chat (bounded: oldest chats forgotten first) */
  const seen = new Map<string, Set<number>>()
  const hidden = new Set(opts.hiddenPorts)

  const direct = createDirectRoute(sandbox, { connectTimeoutMs: opts.directConnectTimeoutMs ?? 2000, answerTimeoutMs: 1000, retryMs: 30_000, offMs: 600_000, log })

  /** Straight to the sandbox's address when the app listens there (direct.ts), else through the agent when it serves (one frame), else an exec relay. */
  async function openApp (chatId: string, port: number): Promise<AppConnection> {
    try {
      const straight = await direct.open(chatId, port)
      if (straight !== undefined) return straight
      if (sandbox.connect !== undefined) {
        const inner = await sandbox.connect(chatId, port, { timeoutMs: opts.connectTimeoutMs ?? 30_000 })
        if (inner !== undefined) return inner
      }
      return AppSocket.relay(await openStream!.call(sandbox, chatId, relayArgv(port)))
    } catch (err) {
      if (notRunning(err)) throw new PORTS_SANDBOX_NOT_RUNNING()
      // The agent could not connect (nothing listens on 127.0.0.1 nor ::1, or no answer in time).
      if (CONNECT_FAILED.has(String((err as { code?: unknown } | null)?.code))) throw new PORTS_APP_UNREACHABLE(String(port), { cause: err })
      throw err
    }
  }

  async function connect (chatId: string, port: number): Promise<AppConnection> {
    const socket = await openApp(chatId, port)
    let set = open.get(chatId)
    if (set === undefined) { set = new Set(); open.set(chatId, set) }
    const own = set
    own.add(socket)
    socket.once('close', () => {
      own.delete(socket)
      if (own.size === 0 && open.get(chatId) === own) open.delete(chatId)
    })
    return socket
  }

  function agent (chatId: string): SandboxAgent {
    let a = agents.get(chatId)
    if (a === undefined) {
      a = new SandboxAgent(async port => await connect(chatId, port), {
        keepAlive: true,
        maxSockets: opts.maxConnectionsPerChat,
        maxTotalSockets: opts.maxConnectionsPerChat,
        maxFreeSockets: Math.min(8, opts.maxConnectionsPerChat),
        timeout: opts.freeSocketMs,
        scheduling: 'lifo'
      })
      agents.set(chatId, a)
    }
    if (a.queued() >= opts.maxConnectionsPerChat * 4) throw new PORTS_TOO_MANY_CONNECTIONS(`${opts.maxConnectionsPerChat} per chat`)
    return a
  }

  /**
   * The server's own record when it says running (no engine call: a status is an inspect and a file read,
   * most of a small proxied request's time under load); else the engine's answer (a paused sandbox counts
   * as running: the connection wakes it). One stopped behind the server's back in between fails the
   * request's connection instead.
   */
  async function requireRunning (chatId: string): Promise<void> {
    if (sandbox.knownRunning?.(chatId) === true) return
    if ((await sandbox.status(chatId)).state !== 'running') throw new PORTS_SANDBOX_NOT_RUNNING()
  }

  /**
   * The listening ports, asked after every bash_tool command: through the in-sandbox agent's socket
   * listing when it serves it (the kernel's socket diagnostics: no process started, and no walk of the
   * host's whole connection table, which reading /proc/net/tcp costs milliseconds per read on a large
   * machine, docs/performance.md); else the TCP tables, read by the agent (an agent older than the
   * listing) or with one `cat` of both. A table the kernel does not have (no IPv6) is empty.
   */
  async function listeningNow (chatId: string): Promise<number[]> {
    const signal = AbortSignal.timeout(opts.listTimeoutMs)
    const fileOp = sandbox.fileOp
    if (fileOp !== undefined) {
      const ask = async (op: SandboxFileOp): Promise<SandboxFileResult | undefined> => {
        const r = await fileOp.call(sandbox, chatId, op, { timeoutMs: opts.listTimeoutMs, signal })
        return r === undefined || r.timedOut || r.cancelled ? undefined : r
      }
      const listed = await ask({ op: 'listening', max: LISTENING_MAX })
      if (listed?.sockets !== undefined) return listeningPorts(listed.sockets, hidden)
      if (listed !== undefined) {
        const read = async (path: string): Promise<string | undefined> => {
          const r = await ask({ op: 'read', path, max: TABLE_MAX_BYTES })
          if (r === undefined) return undefined
          if (r.ok) return r.data.toString('latin1')
          return r.errno === ENOENT ? '' : undefined
        }
        const tables = await Promise.all([read('/proc/net/tcp'), read('/proc/net/tcp6')])
        if (tables[0] !== undefined && tables[1] !== undefined) return parseListening(`${tables[0]}\n${tables[1]}`, hidden)
      }
    }
    const res = await sandbox.exec(chatId, ['cat', '/proc/net/tcp', '/proc/net/tcp6'], { timeoutMs: opts.listTimeoutMs, maxBytes: TABLE_MAX_BYTES, signal })
    return parseListening(res.stdout.toString('latin1'), hidden)
  }

  /** `known`: the caller just ran a call in the sandbox, its own record is enough (no engine call). */
  async function listening (chatId: string, known = false): Promise<number[]> {
    const running = known && sandbox.knownRunning !== undefined ? sandbox.knownRunning(chatId) : (await sandbox.status(chatId)).state === 'running'
    if (!running) return []
    try {
      return await listeningNow(chatId)
    } catch (err) {
      if (notRunning(err)) return []
      throw err
    }
  }

  const appUrl = (chatId: string, port: number): string => {
    if (deps.appOrigins === undefined) return `${links.publicBaseUrl}/apps/${encodeURIComponent(chatId)}/${port}/`
    // A link handed out: its host's key resolves to this chat from now on.
    deps.appOrigins.remember(chatId)
    return `${deps.appOrigins.originOf(chatId, port)}/`
  }

  const service: PortsService = {
    async apps (chatId) { return (await listening(chatId)).map(port => ({ port, url: appUrl(chatId, port) })) },
    appUrl,
    connections: chatId => open.get(chatId)?.size ?? 0
  }

  const dropChat = (chatId: string): void => {
    agents.get(chatId)?.destroy()
    agents.delete(chatId)
    for (const socket of [...open.get(chatId) ?? []]) socket.destroy()
  }

  return {
    service,
    agent,
    async socket (chatId, port) {
      if (service.connections(chatId) >= opts.maxConnectionsPerChat) throw new PORTS_TOO_MANY_CONNECTIONS(`${opts.maxConnectionsPerChat} per chat`)
      return await connect(chatId, port)
    },
    requireRunning,
    async newlyListening (chatId, sockets) {
      const now = sockets === undefined ? await listening(chatId, true) : listeningPorts(sockets, hidden)
      const before = seen.get(chatId)
      seen.delete(chatId)
      seen.set(chatId, new Set(now))
      if (seen.size > 10_000) seen.delete(seen.keys().next().value as string)
      return now.filter(port => before?.has(port) !== true)
    },
    sandboxStopped (chatId, paused) {
      dropChat(chatId)
      if (!paused) { seen.delete(chatId); direct.forget(chatId) }
      log.debug({ chatId }, 'sandbox stopped: app connections closed')
    },
    async close () {
      for (const chatId of [...agents.keys(), ...open.keys()]) dropChat(chatId)
    }
  }
}
