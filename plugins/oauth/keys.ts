import { generateKeyPair, randomBytes, type JsonWebKey } from 'node:crypto'
import { open, readFile, rename, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'

/*
 * The authorization server's secrets: JWS signing keys (ID tokens, the JWKS) and the keys that sign
 * its cookies. Generated on first start with node:crypto and kept in DATA_DIR/oauth/keys.json
 * (0600), so a restart keeps sessions and tokens valid. Deleting the file rotates everything.
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

/** Reads the kept keys, or generates and keeps them on first start. A damaged file stops the boot. */
export async function loadOrCreateKeys (dir: string): Promise<{ keys: OAuthKeys, created: boolean }> {
  const file = join(dir, 'keys.json')
  try {
    const keys = JSON.parse(await readFile(file, 'utf8')) as Partial<OAuthKeys>
    if (!valid(keys)) throw new Error(`${file} is not a key file of this server; move it away to generate new keys (every OAuth user signs in again)`)
    return { keys, created: false }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
  const keys = await createKeys()
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`
  const handle = await open(tmp, 'wx', 0o600)
  try {
    await handle.writeFile(JSON.stringify(keys))
    await handle.sync()
  } finally { await handle.close() }
  try { await rename(tmp, file) } catch (err) { await rm(tmp, { force: true }); throw err }
  return { keys, created: true }
}
