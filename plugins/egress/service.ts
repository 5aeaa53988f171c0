import type { FastifyBaseLogger } from 'fastify'
import type { Socket } from 'node:net'
import type { SandboxService } from '../sandbox/types.js'
import { createAddressMap } from './address-map.js'
import { createConnectionLog } from './connection-log.js'
import { createChatLayers } from './chat-layers.js'
import { EGRESS_BAD_RULE } from './errors.js'
import { createHostAddresses } from './host-addresses.js'
import { createHostsFile } from './hosts-file.js'
import type { EgressMode, Policy } from './policy.js'
import { createEgressProxy, type EgressProxy, type Lookup } from './proxy.js'
import { combine, parseLayer, type ParsedLayer } from './layers.js'
import { createResolver, parseServers } from './resolver.js'
import { parseRules } from './rules.js'
import type { OverrideStore, UsersFile } from './store.js'
import type { EgressOptions } from './schemas.js'
import type { EffectivePolicy, EgressService } from './types.js'

/*
 * The egress service: the policy of each chat (server setting, user default, chat override), the source
 * address → chat map (address-map.ts) fed by the sandbox driver's onAddress hook on every start and
 * stop (and by onEnsure where the driver has no onAddress), the connection log, and the proxy
 * listener, bound on the sandbox network's gateway when the first sandbox with network starts or is
 * re-adopted. A sandbox gets an address before its chat's first call when the server re-adopts it at
 * boot (or learns it on the start path, before onEnsure): its override and user are then loaded at
 * once, and the proxy waits for that load before deciding any of its connections, so such a sandbox
 * is never judged by the server's setting alone (an override may be stricter). If the load fails, the
 * address is unmapped (refused as unknown) until the chat's next call loads it.
 */

export interface EgressDeps {
  sandbox: Pick<SandboxService, 'network' | 'address' | 'restrictEgress'>
  log: FastifyBaseLogger
  /** tests resolve their canary names here; default: c-ares (resolver.ts) with EGRESS_DNS_SERVERS and the hosts file */
  lookup?: Lookup
  /** tests on a shared host skip the engine's restriction of the network (Docker: iptables rules) */
  firewall?: boolean
  /** where overrides persist (absent: memory only) */
  store?: OverrideStore
  /** EGRESS_USERS, when set */
  users?: UsersFile
}

export function createEgressService (deps: EgressDeps, opts: Required<EgressOptions>): {
  service: EgressService
  proxy: EgressProxy
  /** onEnsure: bind the proxy when needed, map the sandbox's address to its chat, (re)load its override and user */
  attach: (chatId: string, event?: { started: boolean, user?: { email?: string } }) => Promise<void>
  detach: (chatId: string) => void
  /** onAddress: the sandbox's current address (null: none) */
  assign: (chatId: string, address: string | null) => void
  /** A connection from the chat's sandbox over its agent socket (docs/network.md#egress-over-the-agent-socket) */
  accept: (chatId: string, socket: Socket) => void
  close: () => Promise<void>
} {
  const server = { mode: opts.mode, rules: parseRules(opts.allow) }
  const layers = createChatLayers(deps.store ?? null, deps.users ?? null)
  const addresses = createAddressMap()
  const connections = createConnectionLog(opts.logSize, opts.logChats)
  const host = createHostAddresses({ procDir: opts.procDir, log: deps.log })
  const hostsFile = createHostsFile({ path: opts.hostsFile, log: deps.log })

  // The layer loads in flight per chat (attach, or an address learnt before any call): the proxy awaits them.
  const loading = new Map<string, Promise<void>>()
  const load = async (chatId: string, started: boolean, email: string | undefined): Promise<void> => {
    const run = layers.attach(chatId, started, email)
    const settled: Promise<void> = run.then(() => {}, () => {}).finally(() => { if (loading.get(chatId) === settled) loading.delete(chatId) })
    loading.set(chatId, settled)
    await run
  }
  const ready = async (chatId: string): Promise<void> => {
    for (let p = loading.get(chatId); p !== undefined; p = loading.get(chatId)) await p
  }

  const policyFor = (chatId: string): Policy => {
    const { mode, rules } = combine(server, layers.userLayer(chatId), layers.chatLayer(chatId))
    return { mode, rules, hostAddresses: host.current() }
  }

  const proxy = createEgressProxy({
    log: deps.log,
    identify: address => addresses.chatOf(address),
    policyFor,
    ready,
    lookup: deps.lookup ?? createResolver({ servers: parseServers(opts.dnsServers), timeoutMs: opts.dnsTimeoutMs, hosts: hostsFile.table }),
    record: (chatId, record) => {
      connections.add(chatId, record)
      deps.log.debug({ chatId, host: record.host, port: record.port, decision: record.decision, reason: record.reason }, 'egress connection')
    }
  }, {
    maxConnectionsPerChat: opts.maxConnectionsPerChat,
    maxConnections: opts.maxConnections,
    ...(opts.reservedConnections === undefined ? {} : { reservedConnections: opts.reservedConnections }),
    reservedBelow: opts.reservedBelow,
    maxLookupsPerChat: opts.maxLookupsPerChat,
    maxLookups: opts.maxLookups,
    idleTimeoutMs: opts.idleTimeoutS * 1000,
    connectTimeoutMs: 10_000,
    headTimeoutMs: 10_000,
    bytesPerSecond: opts.maxBytesPerSecond
  })

  /** The engine closes the network's other paths to the host (EGRESS_FIREWALL); failures are logged, the proxy still serves. */
  const restrict = async (): Promise<void> => {
    try {
      const warnings = await deps.sandbox.restrictEgress?.(opts.port) ?? ['the sandbox service cannot restrict its network']
      for (const warning of warnings) deps.log.warn({ warning }, 'egress firewall: partly installed')
    } catch (err) {
      deps.log.error({ err }, 'cannot install the egress firewall: sandboxes can reach host services on the network gateway; see docs/network.md')
    }
  }

  // The host addresses and the hosts file are read before the first connection is decided (each start() reads once).
  const readSources = async (): Promise<void> => { await Promise.all([host.start(), hostsFile.start()]) }

  let bound: Promise<boolean> | null = null
  const listen = async (): Promise<boolean> => {
    const net = deps.sandbox.network?.() ?? null
    if (net === null) return false
    bound ??= (async () => {
      try {
        await readSources()
        await proxy.listen(net.listen ?? net.gateway, opts.port)
      } catch (err) {
        deps.log.error({ err, gateway: net.gateway, port: opts.port }, 'egress proxy cannot listen: sandboxes have no way out')
        bound = null
        return false
      }
      deps.log.info({ gateway: net.gateway, port: opts.port, mode: opts.mode, rules: server.rules.length }, 'egress proxy listening')
      if (deps.firewall !== false) await restrict()
      return true
    })()
    return await bound
  }

  const describe = (chatId: string, chat: ParsedLayer | null, email: string | undefined): EffectivePolicy => {
    const user = layers.userDefault(email)
    const c = combine(server, user, chat)
    return { mode: c.mode, source: c.source, allow: c.rules.map(r => r.text), override: chat?.layer ?? null, user: user === null ? null : { email: email ?? '', ...user.layer } }
  }

  const service: EgressService = {
    async effective (chatId) {
      const { chat, email } = await layers.peek(chatId)
      return describe(chatId, chat, email)
    },
    async setOverride (chatId, override) {
      let layer: ParsedLayer | null = null
      if (override !== null) {
        try { layer = parseLayer(override, 'override') } catch (err) { throw new EGRESS_BAD_RULE((err as Error).message.replace(/^override: /, '')) }
      }
      await layers.set(chatId, layer)
      return await service.effective(chatId)
    },
    connections: chatId => connections.list(chatId)
  }

  return {
    service,
    proxy,
    attach: async (chatId, event) => {
      await load(chatId, event?.started ?? true, event?.user?.email)
      if (!await listen()) return
      const ip = await deps.sandbox.address?.(chatId) ?? null
      if (ip !== null) addresses.assign(chatId, ip)
    },
    detach: chatId => {
      layers.detach(chatId)
      addresses.assign(chatId, null)
    },
    assign: (chatId, address) => {
      if (address !== null) {
        load(chatId, true, undefined).catch(err => {
          deps.log.warn({ err, chatId }, 'egress: the chat\'s override could not be read; its sandbox is refused until its next call')
          if (addresses.chatOf(address) === chatId) addresses.assign(chatId, null)
        })
        void listen()
      }
      addresses.assign(chatId, address)
    },
    accept: (chatId, socket) => {
      socket.on('error', () => {})
      // A sandbox re-adopted at boot may connect before its chat's first call: its layers are read first (an
      // override may be stricter than the server's setting); if they cannot be, the connection is refused.
      Promise.all([readSources(), load(chatId, false, undefined)]).then(() => { proxy.accept(socket, chatId) }, err => {
        deps.log.warn({ err, chatId }, 'egress: the chat\'s override could not be read; its sandbox\'s connection is refused')
        socket.destroy()
      })
    },
    close: async () => { layers.close(); host.close(); hostsFile.close(); await proxy.close() }
  }
}

export type { EgressMode }
