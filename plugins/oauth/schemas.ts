import Type, { type Static } from 'typebox'
import type { ClientMetadataFetchOverrides } from './client-metadata.js'

export const OAuthOptions = Type.Object({
  enabled: Type.Optional(Type.Boolean({ default: false, description: 'OAUTH_ENABLED: off, the plugin registers nothing' })),
  publicBaseUrl: Type.String({ minLength: 1, description: 'PUBLIC_BASE_URL: the issuer, and the base of the resource URL' }),
  resourcePath: Type.Optional(Type.String({ default: '/mcp', pattern: '^/[a-z0-9/_-]*[a-z0-9_-]$', description: 'Path of the protected MCP endpoint' })),
  prefix: Type.Optional(Type.String({ default: '/oauth', pattern: '^/[a-z0-9_-]+$', description: 'Path of the authorization server endpoints and pages' })),
  keyLogin: Type.Optional(Type.Boolean({ default: true, description: 'OAUTH_KEY_LOGIN' })),
  accessTokenTtlS: Type.Optional(Type.Integer({ default: 3600, minimum: 60, description: 'OAUTH_ACCESS_TOKEN_TTL' })),
  refreshTokenTtlS: Type.Optional(Type.Integer({ default: 2592000, minimum: 300, description: 'OAUTH_REFRESH_TOKEN_TTL' })),
  oidcIssuer: Type.Optional(Type.String({ default: '', description: 'OIDC_ISSUER; empty = no upstream sign-in' })),
  oidcClientId: Type.Optional(Type.String({ default: '', description: 'OIDC_CLIENT_ID' })),
  oidcClientSecret: Type.Optional(Type.String({ default: '', description: 'OIDC_CLIENT_SECRET' })),
  oidcAllowedEmails: Type.Optional(Type.Array(Type.String(), { default: [], description: 'OIDC_ALLOWED_EMAILS, parsed' })),
  loginFailuresPerMinute: Type.Optional(Type.Integer({ default: 10, minimum: 1, description: 'Wrong access keys per client address and minute before the login page answers 429' })),
  registrationsPerMinute: Type.Optional(Type.Integer({ default: 20, minimum: 1, description: 'Dynamic client registrations per client address and minute' })),
  registrationsPerMinuteTotal: Type.Optional(Type.Integer({ default: 60, minimum: 1, description: 'Dynamic client registrations per minute from all addresses together' })),
  maxClientMetadataBytes: Type.Optional(Type.Integer({ default: 8192, minimum: 1024, maximum: 49152, description: 'Largest registration request (client metadata as JSON) in bytes; larger ones get invalid_client_metadata' })),
  maxClients: Type.Optional(Type.Integer({ default: 2000, minimum: 10, description: 'Registered clients kept; the oldest unused one goes first' })),
  maxTokens: Type.Optional(Type.Integer({ default: 50000, minimum: 100, description: 'Entries kept per kind of state (grants, tokens, sessions, interactions)' }))
})
/** The schema's options plus `clientMetadataFetch`, test overrides of the metadata fetch that no setting reaches (client-metadata.ts). */
export type OAuthOptions = Static<typeof OAuthOptions> & { clientMetadataFetch?: ClientMetadataFetchOverrides }

export const UserParams = Type.Object({ subject: Type.String({ minLength: 1, maxLength: 254, description: 'the user (email, or owner) whose grants are revoked' }) })
export type UserParams = Static<typeof UserParams>

/** The one scope of the resource: using the sandbox computer over MCP. */
export const SCOPE = 'mcp'

/** The pending sign-in of /interaction/{uid}: an id the authorization server issued. */
export const UidParams = Type.Object({ uid: Type.String({ description: 'interaction id (its cookie must match)' }) })

/** The sign-in and consent forms (application/x-www-form-urlencoded, ≤ 8 KiB), checked by hand: errors are pages. */
export const LoginForm = Type.Object({
  csrf: Type.String({ description: 'the form\'s CSRF token' }),
  key: Type.Optional(Type.String({ description: 'the access key (MCP_API_KEY)' })),
  email: Type.Optional(Type.String({ description: 'who signs in; empty for the owner' }))
})
export const ConsentForm = Type.Object({
  csrf: Type.String({ description: 'the form\'s CSRF token' }),
  decision: Type.Optional(Type.String({ description: '`allow` grants access; anything else denies' }))
})
export const TicketQuery = Type.Object({ ticket: Type.Optional(Type.String({ description: 'one-time ticket of the finished upstream sign-in' })) })
export const CallbackQuery = Type.Object({
  code: Type.Optional(Type.String({ description: 'authorization code of the upstream OIDC provider' })),
  state: Type.Optional(Type.String({ description: 'the state this server sent upstream' }))
}, { additionalProperties: true })
