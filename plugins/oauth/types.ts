import type { TokenUser } from '../../core/identity.js'

/** A person who signed in through the OAuth login page. */
export interface OAuthUser {
  /** The token subject: the email given or verified at sign-in, or `owner` for a key sign-in without one. */
  subject: string
  email?: string
  name?: string
  /** The chat an OAuth request without X-Chat-Id of this user maps to (core/identity.ts userChatId). */
  chatId: string
  /** How they last signed in. */
  via: 'key' | 'oidc'
  /** ISO time of the last sign-in. */
  lastSignIn: string
  /** Names of the client apps holding a live grant of theirs (Claude, mcp-remote, …). */
  clients: string[]
}

export interface OAuthService {
  /** The protected resource, `<PUBLIC>/mcp`: the audience of every access token. */
  readonly resource: string
  /** The principal of a live access token for this resource whose grant and client still exist, else undefined. Never throws for a bad token. */
  verify: (token: string) => Promise<TokenUser | undefined>
  /** Everybody who signed in and still has an account record, newest sign-in first. */
  listUsers: () => OAuthUser[]
  /**
   * Signs a user out everywhere: every grant, refresh and access token of theirs is revoked at once
   * (their next /mcp request gets 401, their next refresh `invalid_grant`), their sessions at the
   * login page end, and client registrations only they used are deleted (`invalid_client`, so
   * Claude registers anew). Rejects with OAUTH_UNKNOWN_USER (404) for a subject never seen.
   * A user of the access key can sign in again; a user of OIDC cannot once off OIDC_ALLOWED_EMAILS.
   */
  revokeUser: (subject: string) => Promise<{ grants: number, clients: number }>
}

declare module 'fastify' {
  interface FastifyInstance { oauth: OAuthService }
}
