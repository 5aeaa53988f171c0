import type { FastifyBaseLogger } from 'fastify'
import type { AdapterPayload } from 'oidc-provider'
import { userChatId, validEmail, type TokenUser } from '../../core/identity.js'
import { OAUTH_UNKNOWN_USER } from './errors.js'
import { isMetadataDocumentClient } from './destination.js'
import type { AuthorizationServer } from './provider.js'
import type { OAuthStore } from './store.js'
import type { OAuthService, OAuthUser } from './types.js'

/** What the plugin keeps about a person (store model `Account`, persisted). */
interface AccountRecord { email?: string, name?: string, via: 'key' | 'oidc', lastSignIn: string }

export interface OAuthServiceDeps {
  store: OAuthStore
  /** Set once the authorization server exists (it needs `principal` first, for ID token claims). */
  server: () => AuthorizationServer
  log: FastifyBaseLogger
  resource: string
}

export interface OAuthInternals {
  service: OAuthService
  /** Name and email of a subject, from its account record. */
  principal: (subject: string) => TokenUser
  /** Records a successful sign-in. */
  signedIn: (subject: string, via: 'key' | 'oidc', name?: string) => Promise<void>
}

export function createOAuthService (deps: OAuthServiceDeps): OAuthInternals {
  const { store } = deps
  const accounts = store.adapterFor('Account')
  const account = (subject: string): AccountRecord | undefined => store.get('Account', subject) as AccountRecord | undefined

  function principal (subject: string): TokenUser {
    const record = account(subject)
    const email = validEmail(subject)
    return { subject, ...(email === undefined ? {} : { email }), ...(record?.name === undefined ? {} : { name: record.name }) }
  }

  const grantsOf = (subject: string): Array<[string, AdapterPayload]> =>
    store.list('Grant').filter(([, g]) => g.accountId === subject)

  const service: OAuthService = {
    resource: deps.resource,
    async verify (token) {
      const subject = await deps.server().verifyAccessToken(token)
      return subject === undefined ? undefined : principal(subject)
    },
    listUsers () {
      const users: OAuthUser[] = store.list('Account').map(([subject, p]) => {
        const record = p as unknown as AccountRecord
        // A registered client by its name; a client of a metadata document (never stored) by its client_id URL.
        const clients = grantsOf(subject).map(([, g]) => String(g.clientId))
          .map(id => isMetadataDocumentClient(id) ? id : store.get('Client', id)).filter(c => c !== undefined)
          .map(c => typeof c === 'string' ? c : String(c.client_name ?? c.client_id))
        return { ...principal(subject), chatId: userChatId(subject), via: record.via, lastSignIn: record.lastSignIn, clients }
      })
      return users.sort((a, b) => b.lastSignIn.localeCompare(a.lastSignIn))
    },
    async revokeUser (subject) {
      if (account(subject) === undefined && grantsOf(subject).length === 0) throw new OAUTH_UNKNOWN_USER(subject)
      const grants = grantsOf(subject)
      const grantAdapter = store.adapterFor('Grant')
      for (const [id] of grants) {
        await grantAdapter.revokeByGrantId(id) // tokens and codes of the grant
        store.remove('Grant', id)
      }
      for (const [id, s] of store.list('Session')) if (s.accountId === subject) store.remove('Session', id)
      // A client registration nobody else uses goes too: its refresh gets invalid_client and Claude registers again.
      const stillUsed = new Set(store.list('Grant').map(([, g]) => g.clientId))
      const orphans = [...new Set(grants.map(([, g]) => String(g.clientId)))].filter(id => !stillUsed.has(id))
      for (const id of orphans) store.remove('Client', id)
      store.remove('Account', subject)
      await store.flush()
      deps.log.info({ grants: grants.length, clients: orphans.length }, 'oauth user revoked')
      return { grants: grants.length, clients: orphans.length }
    }
  }

  return {
    service,
    principal,
    async signedIn (subject, via, name) {
      const record: AccountRecord = { via, lastSignIn: new Date().toISOString(), ...(name === undefined ? {} : { name: name.slice(0, 128) }) }
      await accounts.upsert(subject, record as unknown as AdapterPayload)
    }
  }
}
