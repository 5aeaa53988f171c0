import { createHmac, timingSafeEqual } from 'node:crypto'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { InteractionResults } from 'oidc-provider'
import { createFailureThrottle } from '../../core/failure-throttle.js'
import { validEmail } from '../../core/identity.js'
import { PAGE_CSP, renderConsent, renderErrorPage, renderLogin, type ClientView } from './pages.js'
import type { AuthorizationServer } from './provider.js'
import type { OAuthInternals } from './service.js'
import type { Upstream } from './upstream.js'
import { destinationOf, isMetadataDocumentClient } from './destination.js'
import { OAUTH_UPSTREAM_FAILED } from './errors.js'
import { HAND_CHECKED } from '../../core/route-schema.js'
import { CallbackQuery, ConsentForm, LoginForm, TicketQuery, UidParams } from './schemas.js'

/*
 * The interaction pages oidc-provider sends the browser to: sign-in (access key, or upstream OIDC),
 * then consent. Each POST needs three things a cross-site page cannot produce: the interaction
 * cookie (SameSite=Lax, path-bound, checked by oidc-provider), a CSRF token (HMAC of the
 * interaction id under a kept key) and, when the browser sends them, our own Origin and
 * `Sec-Fetch-Site: same-origin`.
 */

export interface LoginDeps {
  server: AuthorizationServer
  internals: OAuthInternals
  upstream?: Upstream
  csrfKey: string
  publicBaseUrl: string
  /** Path of the interaction pages below PUBLIC, e.g. '/oauth'. */
  prefix: string
  keyLogin: boolean
  loginFailuresPerMinute: number
}

type Form = Record<string, string>
interface Uid { Params: { uid: string } }

export default async function loginRoutes (fastify: FastifyInstance, { deps }: { deps: LoginDeps }): Promise<void> {
  const { server, internals, upstream } = deps
  const { provider } = server
  const publicOrigin = new URL(deps.publicBaseUrl).origin
  const base = `${deps.publicBaseUrl}${deps.prefix}/interaction`
  const throttle = createFailureThrottle({ limit: deps.loginFailuresPerMinute, now: Date.now })
  const csrfFor = (uid: string): string => createHmac('sha256', deps.csrfKey).update(`csrf\0${uid}`).digest('base64url')

  fastify.removeAllContentTypeParsers()
  fastify.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: 8192 }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)))
  })
  fastify.addHook('onRequest', async (_request, reply) => {
    reply.header('Content-Security-Policy', PAGE_CSP).header('X-Frame-Options', 'DENY').header('Cache-Control', 'no-store')
  })

  const page = (reply: FastifyReply, status: number, html: string): FastifyReply => reply.code(status).type('text/html; charset=utf-8').send(html)
  const problem = (reply: FastifyReply, status: number, error: string, detail: string): FastifyReply => page(reply, status, renderErrorPage(error, detail))
  // These are pages a person reads: errors become an error page, not JSON (5xx without details).
  fastify.setErrorHandler(async (err: Error & { statusCode?: number }, request, reply) => {
    const status = err.statusCode !== undefined && err.statusCode >= 400 ? err.statusCode : 500
    if (status >= 500) request.log.error({ err }, 'oauth sign-in failed')
    else request.log.warn({ code: (err as { code?: string }).code }, 'oauth sign-in refused')
    return problem(reply, status, status === 403 ? 'Not allowed' : 'Sign-in failed',
      status < 500 || err instanceof OAUTH_UPSTREAM_FAILED ? err.message : `internal error (ref ${request.id})`)
  })

  /** The pending interaction of this browser, or undefined after answering with an error page. */
  async function interaction (request: FastifyRequest<Uid>, reply: FastifyReply): Promise<Awaited<ReturnType<typeof provider.interactionDetails>> | undefined> {
    try {
      const details = await provider.interactionDetails(request.raw, reply.raw)
      if (details.uid === request.params.uid) return details
    } catch {}
    problem(reply, 400, 'This sign-in has expired', 'The sign-in page was open too long, or opened in another browser than the one that started it.')
    return undefined
  }

  /**
   * CSRF token and the browser's own word on where a POST comes from; answers 403 and returns false
   * when any is wrong. Under `Referrer-Policy: no-referrer` browsers send `Origin: null` for our
   * own forms, so a null Origin proves nothing either way; Sec-Fetch-Site does.
   */
  function genuine (request: FastifyRequest<Uid>, reply: FastifyReply, form: Form): boolean {
    const origin = request.headers.origin
    const site = request.headers['sec-fetch-site']
    const token = Buffer.from(form.csrf ?? '')
    const expected = Buffer.from(csrfFor(request.params.uid))
    const sameSite = (origin === undefined || origin === 'null' || origin === publicOrigin) && (site === undefined || site === 'same-origin')
    if (sameSite && token.length === expected.length && timingSafeEqual(token, expected)) return true
    problem(reply, 403, 'Request refused', 'This form was not sent from the sign-in page of this server.')
    return false
  }

  /** The client of an interaction and where this request's code goes: its own redirect_uri, checked against the client's. */
  async function clientView (params: Record<string, unknown>): Promise<ClientView> {
    const client = typeof params.client_id === 'string' ? await provider.Client.find(params.client_id) : undefined
    const requested = typeof params.redirect_uri === 'string' ? params.redirect_uri : undefined
    const redirect = client === undefined
      ? undefined
      : requested === undefined
        ? (client.redirectUris?.length === 1 ? client.redirectUris[0] : undefined)
        : (client.redirectUriAllowed(requested) ? requested : undefined)
    const publisher = client !== undefined && isMetadataDocumentClient(client.clientId) ? new URL(client.clientId).host.slice(0, 200) : undefined
    return { name: (client?.clientName ?? 'an unnamed app').slice(0, 100), destination: destinationOf(redirect), ...(publisher === undefined ? {} : { publisher }) }
  }

  async function finish (request: FastifyRequest, reply: FastifyReply, result: InteractionResults): Promise<FastifyReply> {
    const returnTo = await provider.interactionResult(request.raw, reply.raw, result, { mergeWithLastSubmission: false })
    return await reply.redirect(returnTo, 303)
  }

  async function loginPage (request: FastifyRequest<Uid>, reply: FastifyReply, status: number, error?: string, email?: string): Promise<FastifyReply> {
    const details = await interaction(request, reply)
    if (details === undefined) return reply
    return page(reply, status, renderLogin({
      action: `${base}/${details.uid}/login`,
      csrf: csrfFor(details.uid),
      client: await clientView(details.params),
      keyLogin: deps.keyLogin,
      ...(upstream === undefined ? {} : { oidcUrl: `${base}/${details.uid}/oidc` }),
      ...(error === undefined ? {} : { error }),
      ...(email === undefined ? {} : { email })
    }))
  }

  fastify.get<Uid>('/interaction/:uid', { ...HAND_CHECKED, schema: { tags: ['oauth'], summary: 'The sign-in or consent page of one authorization (HTML)', params: UidParams } }, async (request, reply) => {
    const details = await interaction(request, reply)
    if (details === undefined) return reply
    if (details.prompt.name === 'login') return await loginPage(request, reply, 200)
    const subject = details.session?.accountId ?? ''
    return page(reply, 200, renderConsent({ action: `${base}/${details.uid}/consent`, csrf: csrfFor(details.uid), client: await clientView(details.params), subject }))
  })

  fastify.post<Uid & { Body: Form }>('/interaction/:uid/login', { ...HAND_CHECKED, schema: { tags: ['oauth'], summary: 'Sign-in form: the access key and an optional email', params: UidParams, consumes: ['application/x-www-form-urlencoded'], body: LoginForm } }, async (request, reply) => {
    const form = request.body ?? {}
    if (!deps.keyLogin) return problem(reply, 404, 'Not available', 'Sign-in with the access key is switched off on this server.')
    if (!genuine(request, reply, form)) return reply
    const rawEmail = (form.email ?? '').trim()
    const email = validEmail(rawEmail.toLowerCase())
    if (!fastify.auth.isApiKey(form.key ?? '')) {
      const verdict = throttle.fail(request.ip)
      if (verdict.throttled) {
        if (verdict.firstThrottled) request.log.warn({ remoteAddress: request.ip }, 'oauth login attempts throttled')
        reply.header('Retry-After', String(verdict.retryAfter))
        return await loginPage(request, reply, 429, `Too many wrong keys from your address. Try again in ${verdict.retryAfter} seconds.`, rawEmail)
      }
      return await loginPage(request, reply, 401, 'That is not the access key of this server.', rawEmail)
    }
    if (rawEmail !== '' && email === undefined) return await loginPage(request, reply, 400, 'That email address is not valid.', rawEmail)
    const details = await interaction(request, reply)
    if (details === undefined) return reply
    const subject = email ?? 'owner'
    await internals.signedIn(subject, 'key')
    request.log.info({ via: 'key' }, 'oauth sign-in')
    return await finish(request, reply, { login: { accountId: subject, amr: ['pwd'], remember: true } })
  })

  fastify.post<Uid & { Body: Form }>('/interaction/:uid/consent', { ...HAND_CHECKED, schema: { tags: ['oauth'], summary: 'Consent form: allow or deny the app', params: UidParams, consumes: ['application/x-www-form-urlencoded'], body: ConsentForm } }, async (request, reply) => {
    const form = request.body ?? {}
    if (!genuine(request, reply, form)) return reply
    const details = await interaction(request, reply)
    if (details === undefined) return reply
    if (details.prompt.name !== 'consent' || details.session === undefined) return problem(reply, 400, 'Nothing to allow', 'Sign in first.')
    if (form.decision !== 'allow') return await finish(request, reply, { error: 'access_denied', error_description: 'the user denied access' })
    // The page offered no Allow for a destination it could not name; neither does the server.
    if ((await clientView(details.params)).destination.kind === 'unknown') return problem(reply, 400, 'Nothing to allow', 'Where this sign-in would go is unknown.')
    const grant = (details.grantId === undefined ? undefined : await provider.Grant.find(details.grantId)) ??
      new provider.Grant({ accountId: details.session.accountId, clientId: String(details.params.client_id) })
    const missing = details.prompt.details as { missingOIDCScope?: string[], missingOIDCClaims?: string[], missingResourceScopes?: Record<string, string[]> }
    if (missing.missingOIDCScope !== undefined) grant.addOIDCScope(missing.missingOIDCScope.join(' '))
    if (missing.missingOIDCClaims !== undefined) grant.addOIDCClaims(missing.missingOIDCClaims)
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) grant.addResourceScope(indicator, scopes.join(' '))
    return await finish(request, reply, { consent: { grantId: await grant.save() } })
  })

  if (upstream === undefined) return
  fastify.get<Uid>('/interaction/:uid/oidc', { ...HAND_CHECKED, schema: { tags: ['oauth'], summary: 'Starts sign-in with the upstream OIDC issuer', params: UidParams } }, async (request, reply) => {
    const details = await interaction(request, reply)
    if (details === undefined) return reply
    return await reply.redirect(await upstream.start(details.uid), 303)
  })

  fastify.get('/upstream/callback', { ...HAND_CHECKED, schema: { tags: ['oauth'], summary: 'Redirect URI of the upstream OIDC issuer', querystring: CallbackQuery } }, async (request, reply) => {
    const url = new URL(`${deps.publicBaseUrl}${deps.prefix}/upstream/callback`)
    url.search = new URL(request.url, publicOrigin).search
    const { uid, ticket } = await upstream.finish(url)
    return await reply.redirect(`${base}/${uid}/upstream?ticket=${encodeURIComponent(ticket)}`, 303)
  })

  fastify.get<Uid & { Querystring: { ticket?: string } }>('/interaction/:uid/upstream', { ...HAND_CHECKED, schema: { tags: ['oauth'], summary: 'Finishes an upstream OIDC sign-in in the browser that started it', params: UidParams, querystring: TicketQuery } }, async (request, reply) => {
    const details = await interaction(request, reply)
    if (details === undefined) return reply
    const identity = upstream.take(details.uid, request.query.ticket ?? '')
    if (identity === undefined) return problem(reply, 400, 'This sign-in has expired', 'Start again from the app you were connecting.')
    await internals.signedIn(identity.email, 'oidc', identity.name)
    request.log.info({ via: 'oidc' }, 'oauth sign-in')
    return await finish(request, reply, { login: { accountId: identity.email, amr: ['fed'], remember: true } })
  })
}
