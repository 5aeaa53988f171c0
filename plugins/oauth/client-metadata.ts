import type { IncomingMessage } from 'node:http'
import { errors, type Configuration } from 'oidc-provider'
import { createFailureThrottle } from '../../core/failure-throttle.js'
import { redirectHostsProblem } from './destination.js'
import { createOutboundFetch, type ResolveHost } from './outbound-fetch.js'

/*
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document, MCP SEP-991; the way
 * 2026-07-28 clients such as Claude identify themselves, DCR being deprecated there): a client_id
 * that is an https URL names a JSON document, published by the client, with its metadata. oidc-provider
 * implements the feature (fetch, validation, caching: at least 30 s, at most a day, 100 documents);
 * this file gives it the SSRF-safe fetch of outbound-fetch.ts and the same cost bounds and
 * one-host rule as a dynamic registration:
 *
 * - a fetch (a document not in the cache) counts like a registration: per client address and in total
 *   per minute (`registrationsPerMinute`, `registrationsPerMinuteTotal`);
 * - a document is at most `maxClientMetadataBytes` (as a registration request is), fetched within 2.5 s;
 * - its redirect URIs must name one host (loopback aside), as for a registration (destination.ts).
 */

/** Test overrides of the metadata fetch (plugin option `clientMetadataFetch`); never set from the environment. */
export interface ClientMetadataFetchOverrides {
  /** Replaces the public-address-only resolver, e.g. to reach the test's own https server on loopback. */
  resolve?: ResolveHost
  /** Extra trusted CA certificates (PEM), e.g. the test server's self-signed certificate. */
  ca?: string
}

export interface ClientMetadataOptions {
  maxBytes: number
  /** Documents fetched per client address and minute, and from all addresses together (a registration's budget). */
  perMinute: number
  perMinuteTotal: number
  /** The client address fastify determined for a raw request (trusted proxies applied). */
  addressOf: (req: IncomingMessage) => string
  overrides?: ClientMetadataFetchOverrides
}

const FETCH_TIMEOUT_MS = 2500

/** The part of the provider configuration for client_id URLs: the feature, the fetch and its body limits. */
export function clientMetadataConfiguration (opts: ClientMetadataOptions): Pick<Configuration, 'fetch' | 'fetchResponseBodyLimits'> & { feature: NonNullable<Configuration['features']>['clientIdMetadataDocument'] } {
  const outbound = createOutboundFetch({ maxBytes: opts.maxBytes, timeoutMs: FETCH_TIMEOUT_MS, ...opts.overrides })
  const allowFetch = fetchBudget(opts.perMinute, opts.perMinuteTotal)
  return {
    feature: {
      enabled: true,
      // The implemented draft: an oidc-provider update that changes it stops the boot instead of changing behaviour silently.
      ack: 'draft-02',
      // ctx is undefined outside a provider request (the sign-in pages look clients up too).
      allowFetch: async ctx => allowFetch((ctx as typeof ctx | undefined) === undefined ? '' : opts.addressOf(ctx.req)),
      allowClient: async (_ctx, client) => {
        const problem = redirectHostsProblem(client.redirectUris)
        if (problem !== undefined) throw new errors.InvalidClientMetadata(problem)
        return true
      },
      cacheDuration: { min: 30, max: 86400 }
    },
    fetch: outbound,
    // Nothing else this server enables fetches (no private_key_jwt, no sector identifiers), but bound them anyway.
    fetchResponseBodyLimits: { 'client_id metadata document': opts.maxBytes, jwks_uri: opts.maxBytes, sector_identifier_uri: opts.maxBytes }
  }
}

/**
 * The fetch budget: `perAddress` documents per client address and minute, `total` from all addresses
 * together, the same budget a dynamic registration has. True when one more fetch may go out (and counts it).
 */
function fetchBudget (perAddress: number, total: number, now: () => number = Date.now): (address: string) => boolean {
  const mine = createFailureThrottle({ limit: perAddress, now })
  const all = createFailureThrottle({ limit: total, now })
  return address => !mine.fail(address).throttled && !all.fail('all').throttled
}
