/*
 * Dynamic client registration needs no credential, so what it may cost is bounded: metadata size,
 * registrations per address and in total, and the disk work of one registration, which no longer
 * grows with the number of clients (one file per client). Old single-file stores are moved into that
 * layout on boot; files below DATA_DIR/oauth are never reached through a planted symlink.
 * Real HTTP against the real server, no Docker.
 */
import { readFileSync } from 'node:fs'
import { lstat, mkdir, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { entryFile } from '../../plugins/oauth/store-disk.js'
import { authorizeUrl, exchangeCode, probeMcp, registerClient, signInWithFetch, startOAuthServer, tokenRequest } from '../fixtures/oauth-server.js'
import { tempDir } from '../fixtures/temp-dir.js'

const REDIRECT = 'http://127.0.0.1:45873/cb'

const clientPayload = (id: string, name: string, redirect = REDIRECT): Record<string, unknown> => ({
  client_id: id, client_id_issued_at: 1700000000, client_name: name, redirect_uris: [redirect], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none'
})

/** Writes DATA_DIR/oauth/state/Client.json in the single-file format of earlier versions. */
async function seedOldStore (dataDir: string, clients: Array<Record<string, unknown>>): Promise<void> {
  await mkdir(join(dataDir, 'oauth', 'state'), { recursive: true, mode: 0o700 })
  const entries = clients.map(p => [p.client_id, { p, e: null }])
  await writeFile(join(dataDir, 'oauth', 'state', 'Client.json'), JSON.stringify({ version: 1, entries }), { mode: 0o600 })
}

async function register (base: string, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Response> {
  return await fetch(`${base}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', ...body }) })
}

t.test('client metadata over 8 KiB of JSON is refused with invalid_client_metadata; just under passes', async t => {
  const { base } = await startOAuthServer(t)
  const big = await register(base, { client_name: 'x'.repeat(9000) })
  t.equal(big.status, 400)
  const body = await big.json() as Record<string, unknown>
  t.equal(body.error, 'invalid_client_metadata')
  t.match(body.error_description, /at most 8192/)
  t.notOk('client_id' in body)
  t.equal((await register(base, { client_name: 'x'.repeat(7900) })).status, 201)
})

t.test('registrations are limited in total too: many addresses together get 429 with Retry-After', async t => {
  const { base } = await startOAuthServer(t, { env: { TRUST_PROXY: '127.0.0.1' }, oauth: { registrationsPerMinute: 2, registrationsPerMinuteTotal: 5 } })
  const statuses: number[] = []
  let refused: Response | undefined
  // Fixed one-minute windows: should one end mid-test, the count starts over, hence the slack.
  for (let i = 1; i <= 20 && refused === undefined; i++) {
    const res = await register(base, {}, { 'x-forwarded-for': `198.51.100.${i}` }) // a new address each time
    statuses.push(res.status)
    if (res.status === 429) refused = res
  }
  t.same(statuses.slice(0, 5), [201, 201, 201, 201, 201])
  t.ok(refused, 'a registration from a fresh address was refused')
  t.match(refused?.headers.get('retry-after'), /^\d+$/)
  t.match(await refused?.json(), { error: 'too_many_requests', error_description: /on this server.*try again in \d+ seconds/ })
})

/** Bytes this process handed to write(2) and friends so far (the server runs in this process). */
const written = (): number => Number(/wchar:\s*(\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))?.[1])

/** Waits until nothing more is written (coalesced writes of the store included). */
async function settle (): Promise<void> {
  let last = written()
  for (let quiet = 0; quiet < 3;) {
    await new Promise(resolve => setTimeout(resolve, 100))
    const now = written()
    quiet = now === last ? quiet + 1 : 0
    last = now
  }
}

/** Registers `n` clients of ~7 KiB each; bytes written and milliseconds per registration. */
async function cost (base: string, n: number): Promise<{ bytes: number, ms: number }> {
  await register(base, { client_name: 'warm-up' })
  await settle()
  const before = written()
  const start = performance.now()
  for (let i = 0; i < n; i++) {
    const res = await register(base, { client_name: `load ${i} ${'x'.repeat(7000)}` })
    if (res.status !== 201) throw new Error(`registration answered ${res.status}`)
  }
  const ms = (performance.now() - start) / n
  await settle()
  return { bytes: (written() - before) / n, ms }
}

t.test('a registration costs the same disk work with 400 clients as with none', { skip: process.platform !== 'linux' ? 'reads /proc/self/io' : false }, async t => {
  const limits = { registrationsPerMinute: 1000, registrationsPerMinuteTotal: 1000 }
  const empty = await startOAuthServer(t, { oauth: limits })
  const dataDir = await tempDir(t, 'oauth-reg')
  await seedOldStore(dataDir, Array.from({ length: 400 }, (_, i) => clientPayload(`seeded-${i}`, `seeded ${i} ${'y'.repeat(7000)}`)))
  const full = await startOAuthServer(t, { dataDir, oauth: limits })
  const at0 = await cost(empty.base, 10)
  const at400 = await cost(full.base, 10)
  t.comment(`per registration: ${Math.round(at0.bytes)} bytes, ${at0.ms.toFixed(1)} ms at 0 clients; ${Math.round(at400.bytes)} bytes, ${at400.ms.toFixed(1)} ms at 400 (ratio ${(at400.bytes / at0.bytes).toFixed(2)} bytes, ${(at400.ms / at0.ms).toFixed(2)} time)`)
  t.ok(at400.bytes < at0.bytes * 2, `bytes written per registration at 400 clients (${Math.round(at400.bytes)}) stay within twice those at 0 (${Math.round(at0.bytes)})`)
  t.ok(at400.bytes < 64 * 1024, 'and well below one copy of every client (about 2.8 MB)')
})

t.test('an old single client file is moved into one file per client on boot, and its clients keep working', async t => {
  const dataDir = await tempDir(t, 'oauth-reg')
  await seedOldStore(dataDir, [clientPayload('old-client-a', 'Claude'), clientPayload('old-client-b', 'mcp-remote'), clientPayload('-starts-with-dash', 'odd id')])
  const first = await startOAuthServer(t, { dataDir })
  const clients = join(dataDir, 'oauth', 'clients')
  t.same((await readdir(join(dataDir, 'oauth', 'state'))).filter(n => n.startsWith('Client')), [], 'the old file is gone')
  t.same((await readdir(clients)).sort(), ['old-client-a', 'old-client-b', '-starts-with-dash'].map(entryFile).sort())
  t.equal((await stat(clients)).mode & 0o777, 0o700)
  for (const name of await readdir(clients)) t.equal((await stat(join(clients, name))).mode & 0o777, 0o600, name)
  const tokens = await exchangeCode(first.base, 'old-client-a', REDIRECT, await signInWithFetch(authorizeUrl(first.base, 'old-client-a', REDIRECT), REDIRECT, { email: 'kim@example.com' }))
  t.not((await probeMcp(first.base, tokens.access_token)).status, 401, 'a migrated client signs in')
  const fresh = await registerClient(first.base, REDIRECT)
  t.equal((await readdir(clients)).length, 4, 'a registration adds one file')
  await first.app.close()

  const second = await startOAuthServer(t, { dataDir, port: first.port })
  const refreshed = await tokenRequest(second.base, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: 'old-client-a' })
  t.equal(refreshed.status, 200, 'after a restart the migrated client and its grant are still there')
  const again = await exchangeCode(second.base, fresh, REDIRECT, await signInWithFetch(authorizeUrl(second.base, fresh, REDIRECT), REDIRECT, {}))
  t.not((await probeMcp(second.base, again.access_token)).status, 401, 'so is the client registered after the move')
})

t.test('symlinks planted below DATA_DIR/oauth are never followed, for reading or writing', async t => {
  const dataDir = await tempDir(t, 'oauth-reg')
  const outside = await tempDir(t, 'oauth-reg')
  // A client file that is a link to a file elsewhere holding a valid-looking client.
  const planted = clientPayload('planted-client', 'Planted')
  await writeFile(join(outside, 'client.json'), JSON.stringify({ version: 1, id: 'planted-client', entry: { p: planted, e: null } }))
  const linkedClient = join(dataDir, 'oauth', 'clients', entryFile('planted-client'))
  await mkdir(join(dataDir, 'oauth', 'clients'), { recursive: true, mode: 0o700 })
  await symlink(join(outside, 'client.json'), linkedClient)
  // A grant file that is a link to a file elsewhere.
  await mkdir(join(dataDir, 'oauth', 'state'), { recursive: true, mode: 0o700 })
  await writeFile(join(outside, 'grants'), JSON.stringify({ version: 1, entries: [] }))
  await symlink(join(outside, 'grants'), join(dataDir, 'oauth', 'state', 'Grant.json'))

  const { base } = await startOAuthServer(t, { dataDir })
  const res = await fetch(authorizeUrl(base, 'planted-client', REDIRECT), { redirect: 'manual' })
  t.equal(res.status, 400, 'the linked client was not loaded')
  t.match(await res.text(), /invalid_client/)
  t.ok((await lstat(linkedClient)).isSymbolicLink(), 'the client link is left as it is, unread')
  t.match(await readdir(join(dataDir, 'oauth', 'state')), [/^Grant\.json\.corrupt-\d+$/], 'the grant link is set aside for the operator, unread')

  // Planted while the server runs: the next write replaces the link and leaves its target alone.
  await writeFile(join(outside, 'victim'), 'precious')
  const account = join(dataDir, 'oauth', 'state', 'Account.json')
  await symlink(join(outside, 'victim'), account)
  const clientId = await registerClient(base, REDIRECT)
  await signInWithFetch(authorizeUrl(base, clientId, REDIRECT), REDIRECT, { email: 'lee@example.com' }) // writes the account
  await new Promise(resolve => setTimeout(resolve, 300)) // the account file is written coalesced, after the sign-in
  t.equal(await readFile(join(outside, 'victim'), 'utf8'), 'precious', 'the link target is untouched')
  t.ok((await lstat(account)).isFile(), 'the link itself was replaced by a regular file')
  t.match(await readFile(account, 'utf8'), /lee@example\.com/)
  t.equal(await readFile(join(outside, 'client.json'), 'utf8'), JSON.stringify({ version: 1, id: 'planted-client', entry: { p: planted, e: null } }))
})

t.test('a keys file that is a symlink stops the boot instead of being followed', async t => {
  const dataDir = await tempDir(t, 'oauth-reg')
  const first = await startOAuthServer(t, { dataDir })
  await first.app.close()
  const keys = join(dataDir, 'oauth', 'keys.json')
  const elsewhere = join(dataDir, 'keys-elsewhere.json')
  await writeFile(elsewhere, await readFile(keys))
  await rm(keys)
  await symlink(elsewhere, keys)
  await t.rejects(startOAuthServer(t, { dataDir }), /keys\.json.*symbolic link/)
})
