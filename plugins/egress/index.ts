import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { CORE_INVALID_PLUGIN_OPTIONS } from '../../core/errors.js'
import { parseOptions } from '../../core/config.js'
import { checkServers, parseServers } from './resolver.js'
import { parseRules } from './rules.js'
import routes from './routes.js'
import { EgressOptions } from './schemas.js'
import { createEgressService } from './service.js'
import { proxyEnvContributor } from './proxy-env.js'
import { createOverrideStore, loadUsersFile, type UsersFile } from './store.js'
import type { Lookup } from './proxy.js'

export type { EgressOptions } from './schemas.js'

/**
 * Sandbox egress (docs/contract.md#egress): sandboxes sit on an internal Docker network with no route out; their
 * only way out is this plugin's HTTP proxy (CONNECT and plain HTTP) on the network's gateway, which
 * decides every connection by the chat's policy (chat override > user default > server setting) after
 * DNS, logs it per chat, and caps connections. Overrides persist in the chat's storage (chat-storage).
 * Decorates `egress`; routes under /api/egress/:chat.
 *
 * `lookup` (not an option of the manifest) lets tests resolve their canary names.
 */
const egress: FastifyPluginAsync<EgressOptions & { lookup?: Lookup }> = async (fastify, raw) => {
  const { lookup, ...rest } = raw
  const opts = parseOptions(EgressOptions, rest, 'egress')
  try { parseRules(opts.allow) } catch (err) { throw new CORE_INVALID_PLUGIN_OPTIONS('egress', `EGRESS_ALLOW: ${(err as Error).message}`) }
  try { checkServers(parseServers(opts.dnsServers)) } catch (err) { throw new CORE_INVALID_PLUGIN_OPTIONS('egress', `EGRESS_DNS_SERVERS: ${(err as Error).message} (an IP address, optionally with :port; IPv6 with a port in brackets)`) }
  const log = fastify.log.child({ plugin: 'egress' })
  let users: UsersFile | undefined
  if (opts.users !== '') {
    try { users = await loadUsersFile(opts.users, log) } catch (err) { throw new CORE_INVALID_PLUGIN_OPTIONS('egress', `EGRESS_USERS: ${(err as Error).message}`) }
  }
  const { service, attach, detach, assign, accept, close } = createEgressService({
    sandbox: fastify.sandbox,
    log,
    ...(lookup === undefined ? {} : { lookup }),
    firewall: opts.firewall,
    store: createOverrideStore(fastify.chatStorage, log),
    ...(users === undefined ? {} : { users })
  }, opts)
  fastify.decorate('egress', service)
  // Sandboxes without a network interface reach the proxy over their agent socket where the engine offers it
  // (docs/network.md#egress-over-the-agent-socket), else through the sandbox network's gateway.
  const overSocket = fastify.sandbox.egressOverSocket?.(opts.port, accept) === true
  // Every sandbox's proxy variables point at this plugin's proxy (the sandbox's only way out).
  fastify.sandbox.addEnvContributor?.(proxyEnvContributor(fastify.sandbox, opts.port, overSocket))
  fastify.sandbox.onEnsure(async (box, event) => { await attach(box.chatId, event) })
  fastify.sandbox.onStop?.(chatId => { detach(chatId) })
  fastify.sandbox.onAddress?.(assign)
  fastify.addHook('preClose', close)
  await fastify.register(routes)
}

export default fp(egress, {
  name: 'egress',
  fastify: '5.x',
  dependencies: ['sandbox', 'chat-storage'],
  decorators: { fastify: ['sandbox', 'auth', 'chatStorage'] }
})
