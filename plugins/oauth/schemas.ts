import Type, { type Static } from 'typebox'

export const OAuthOptions = Type.Object({
  enabled: Type.Optional(Type.Boolean({ default: false, description: 'OAUTH_ENABLED: off, the plugin registers nothing' })),
  publicBaseUrl: Type.String({ minLength: 1, description: 'PUBLIC_BASE_URL: the issuer, and the base of the resource URL' }),
  dataDir: Type.String({ minLength: 1, description: 'DATA_DIR: state and keys live in oauth/ below it' }),
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
  maxClients: Type.Optional(Type.Integer({ default: 2000, minimum: 10, description: 'Registered clients kept; the oldest unused one goes first' })),
  maxTokens: Type.Optional(Type.Integer({ default: 50000, minimum: 100, description: 'Entries kept per kind of state (grants, tokens, sessions, interactions)' }))
})
export type OAuthOptions = Static<typeof OAuthOptions>

export const UserParams = Type.Object({ subject: Type.String({ minLength: 1, maxLength: 254 }) })
export type UserParams = Static<typeof UserParams>

/** The one scope of the resource: using the sandbox computer over MCP. */
export const SCOPE = 'mcp'
