import { generateKeyPair, randomBytes, type JsonWebKey } from 'node:crypto'
import { promisify } from 'node:util'
import type { StateFiles } from '../chat-storage/types.js'

/*
 * The authorization server's secrets: JWS signing keys (ID tokens, the JWKS) and the keys that sign
 * its cookies. Generated on first start with node:crypto and kept in DATA_DIR/oauth/keys.json
 * (0600; chat storage's state files: read by descriptor, never through a symlink, written atomically),
 * so a restart keeps sessions and tokens valid. Deleting the file rotates everything.
 */

export interface OAuthKeys {
  /** Private JWKs (RS256 first: oidc-provider's default ID token algorithm, then ES256). */
  jwks: JsonWebKey[]
  /** Cookie signing keys (Keygrip order: the first signs). */
  cookieKeys: string[]
  /** HMAC key of the login page's CSRF tokens. */
  csrfKey: string
}

const generate = promisify(generateKeyPair)

async function createKeys (): Promise<OAuthKeys> {
  const rsa = await generate('rsa', { modulusLength: 2048 })
  const ec = await generate('ec', { namedCurve: 'P-256' })
  const stamp = Date.now().toString(36)
  return {
    jwks: [
      { ...rsa.privateKey.export({ format: 'jwk' }), kid: `rs-${stamp}`, alg: 'RS256', use: 'sig' },
      { ...ec.privateKey.export({ format: 'jwk' }), kid: `es-${stamp}`, alg: 'ES256', use: 'sig' }
    ],
    cookieKeys: [randomBytes(32).toString('base64url')],
    csrfKey: randomBytes(32).toString('base64url')
  }
}

function valid (keys: Partial<OAuthKeys>): keys is OAuthKeys {
  return Array.isArray(keys.jwks) && keys.jwks.length > 0 && Array.isArray(keys.cookieKeys) &&
    keys.cookieKeys.length > 0 && typeof keys.csrfKey === 'string' && keys.csrfKey.length >= 32
}

const FILE = 'keys.json'
const MAX_BYTES = 64 * 1024

/** Reads the kept keys from `files` (`oauth`), or generates and keeps them on first start. A damaged file stops the boot. */
export async function loadOrCreateKeys (files: StateFiles): Promise<{ keys: OAuthKeys, created: boolean }> {
  const text = await files.read(FILE, MAX_BYTES)
  if (text !== null) {
    let keys: Partial<OAuthKeys> = {}
    try { keys = JSON.parse(text) as Partial<OAuthKeys> } catch {}
    if (!valid(keys)) throw new Error(`DATA_DIR/oauth/${FILE} is not a key file of this server; move it away to generate new keys (every OAuth user signs in again)`)
    return { keys, created: false }
  }
  const keys = await createKeys()
  await files.write(FILE, JSON.stringify(keys), { maxBytes: MAX_BYTES, mode: 0o600 })
  return { keys, created: true }
}
