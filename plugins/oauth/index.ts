import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { loadOrCreateKeys } from './keys.js'
import type { AuthorizationServer } from './provider.js'
import { createOAuthService } from './service.js'
import { createOAuthStore } from './store.js'
import { createStoreDisk } from './store-disk.js'
import { OAuthOptions } from './schemas.js'
import loginRoutes from './login.js'
import oauthRoutes from './routes.js'

const PERSISTED = ['Client', 'Grant', 'RefreshToken', 'AccessToken', 'Account']

/**
 * OAuth 2.1 authorization server for /mcp (docs/contract.md#oauth): Claude connects by URL alone. Its access
 * tokens are accepted on /mcp beside the static key through core auth's bearer-verifier hook, and
 * their subject becomes the user (core/identity.ts), so no other plugin knows OAuth exists.
 */
const oauth: FastifyPluginAsync<OAuthOptions> = async (fastify, raw) => {
  const opts = parseOptions(OAuthOptions, raw, 'oauth')
  if (!opts.enabled) return
  const log = fastify.log.child({ plugin: 'oauth' })
  const storage = fastify.chatStorage
  const publicBaseUrl = opts.publicBaseUrl.replace(/\/+$/, '')
  const resource = `${publicBaseUrl}${opts.resourcePath}`
  const limits: Record<string, number> = { Client: opts.maxClients }
  const maxEntryBytes = 64 * 1024
  const store = createOAuthStore({
    disk: createStoreDisk({
      state: storage.serverState('oauth/state'),
      // Anyone may register a client: one file each, so a registration costs the same however many exist.
      perEntry: { Client: storage.serverState('oauth/clients') },
      log,
      maxEntryBytes,
      limit: model => limits[model] ?? opts.maxTokens,
      now: Date.now
    }),
    log,
    persisted: PERSISTED,
    limits,
    defaultLimit: opts.maxTokens,
    maxEntryBytes
  })
  // Loaded only when enabled: a server without OAuth never loads oidc-provider or openid-client.
  // Loading them and generating first-start keys both take seconds on a busy host: side by side.
  await store.load()
  const [{ keys, created }, { createAuthorizationServer }, { createUpstream }] =
    await Promise.all([loadOrCreateKeys(storage.serverState('oauth')), import('./provider.js'), import('./upstream.js')])
  if (created) log.info('oauth signing keys generated and kept in DATA_DIR/oauth/keys.json')
  const internals = createOAuthService({ store, server: () => server, log, resource })
  const server: AuthorizationServer = createAuthorizationServer(store, keys, {
    issuer: publicBaseUrl,
    resource,
    prefix: opts.prefix,
    accessTokenTtlS: opts.accessTokenTtlS,
    refreshTokenTtlS: opts.refreshTokenTtlS,
    account: internals.principal,
    maxClientMetadataBytes: opts.maxClientMetadataBytes,
    clientMetadata: { maxBytes: opts.maxClientMetadataBytes, perMinute: opts.registrationsPerMinute, perMinuteTotal: opts.registrationsPerMinuteTotal, overrides: raw.clientMetadataFetch }
  })
  const upstream = opts.oidcIssuer === ''
    ? undefined
    : createUpstream({
      issuer: opts.oidcIssuer,
      clientId: opts.oidcClientId,
      clientSecret: opts.oidcClientSecret,
      redirectUri: `${publicBaseUrl}${opts.prefix}/upstream/callback`,
      allowed: opts.oidcAllowedEmails
    })

  fastify.decorate('oauth', internals.service)
  fastify.auth.addBearerVerifier({
    routes: [opts.resourcePath, `${opts.resourcePath}/`],
    verify: internals.service.verify,
    challenge: { resource_metadata: `${publicBaseUrl}/.well-known/oauth-protected-resource${opts.resourcePath}` }
  })
  fastify.addHook('onClose', async () => { await store.flush() })

  const common = { server, publicBaseUrl, prefix: opts.prefix }
  await fastify.register(oauthRoutes, { deps: { ...common, service: internals.service, resourcePath: opts.resourcePath, registrationsPerMinute: opts.registrationsPerMinute, registrationsPerMinuteTotal: opts.registrationsPerMinuteTotal } })
  await fastify.register(loginRoutes, {
    prefix: opts.prefix,
    deps: { ...common, internals, csrfKey: keys.csrfKey, keyLogin: opts.keyLogin, loginFailuresPerMinute: opts.loginFailuresPerMinute, ...(upstream === undefined ? {} : { upstream }) }
  })
  log.info({ resource, upstream: upstream !== undefined, keyLogin: opts.keyLogin }, 'oauth authorization server ready')
}

export default fp(oauth, { name: 'oauth', fastify: '5.x', dependencies: ['chat-storage'], decorators: { fastify: ['auth', 'chatStorage'] } })
