import t from 'tap'
import { spawn } from 'node:child_process'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { locateSuite, suiteRequired, type Check } from '../fixtures/conformance-suite.js'
import { TEST_API_KEY } from '../helper.js'
import { freePort, registerClient, startOAuthServer } from '../fixtures/oauth-server.js'
import { chromiumOrSkip, gotoReady, inNewContext, launchChromium } from './chromium.js'
import { tempDir } from '../fixtures/temp-dir.js'

// The official suite's authorization-server scenarios (`conformance authorization`) against our OAuth
// server (docs/contract.md#oauth): the metadata document, and the authorization code grant with PKCE,
// whose browser step (sign-in and consent) Chromium performs on the real pages, as a person would.

const suite = locateSuite()
const chromium = chromiumOrSkip()
const skip = typeof suite === 'string' && !suiteRequired() ? suite : chromium.skip

t.test('the conformance suite\'s authorization scenarios pass against the OAuth server', { skip }, async t => {
  if (typeof suite === 'string') {
    t.fail(`the MCP conformance suite is required here (REQUIRE_DOCKER=1 or CI): ${suite}`)
    return
  }
  const server = await startOAuthServer(t)
  const browser = await launchChromium(t)
  const port = await freePort()
  const redirect = `http://127.0.0.1:${port}/callback`
  const clientId = await registerClient(server.base, redirect, 'conformance suite')
  const out = await tempDir(t, 'cu-auth-conformance')

  const child = spawn(suite.node, [suite.cli, 'authorization', '--url', server.base, '--client-id', clientId, '--resource', `${server.base}/mcp`,
    '-p', String(port), '-o', out], { stdio: ['ignore', 'pipe', 'pipe'] })
  const exited = new Promise<number | null>(resolve => { child.once('exit', code => { resolve(code) }) })
  t.teardown(() => { child.kill() })
  let output = ''
  child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString('utf8') })
  // The suite prints the authorization URL and waits for its callback: sign in there like a person.
  const authorizeAt = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8')
      const match = /^(https?:\/\/\S+\/authorize\?\S+)$/m.exec(output)
      if (match?.[1] !== undefined) resolve(match[1])
    })
    void exited.then(() => { reject(new Error(`the suite ended before the browser step:\n${output.slice(-2000)}`)) })
  })
  // A sign-in that lost a request to a network change of the Docker host is done again in a new context.
  const landed = await inNewContext(browser, async page => {
    await gotoReady(page, authorizeAt, async () => { await page.locator('input[name=key]').waitFor() })
    await page.fill('input[name=key]', TEST_API_KEY)
    await page.fill('input[name=email]', 'suite@example.com')
    await page.click('button[type=submit]')
    // The consent page, unless the server decides without one; either way the browser lands on the suite's callback.
    const allow = page.locator('button[value=allow]')
    await Promise.race([page.waitForURL(u => u.href.startsWith(redirect)), allow.click().then(async () => { await page.waitForURL(u => u.href.startsWith(redirect)) })])
    return new URL(page.url())
  })
  await exited

  const results = new Map<string, Check[]>()
  for (const dir of await readdir(out)) {
    results.set(dir.replace(/^authorization-server-/, '').replace(/-\d{4}-\d\d-\d\dT[\d-]+Z$/, ''), JSON.parse(await readFile(join(out, dir, 'checks.json'), 'utf8')) as Check[])
  }
  const all = [...results.values()].flat()
  t.ok(all.length >= 2, `both scenarios ran: ${[...results.keys()].join(', ')}`)
  const problems = (scenario: string): string[] => (results.get(scenario) ?? []).filter(c => c.status !== 'SUCCESS' && c.status !== 'INFO')
    .map(c => `${c.id} ${c.status}: ${c.errorMessage ?? ''}`)
  t.ok(results.get('authorization-server-metadata-endpoint')?.some(c => c.status === 'SUCCESS'), 'metadata: ran and passed')
  // Includes the Client ID Metadata Document check (client_id_metadata_document_supported).
  t.same(problems('authorization-server-metadata-endpoint'), [], 'metadata: no warning, no failure')
  // The suite's authorization request names no scope: the server applies its default, `mcp`.
  t.ok(landed.searchParams.has('code'), `the browser came back with a code (${landed.searchParams.get('error') ?? 'no error'})`)
  t.same(problems('authorization-code-grant'), [], 'code grant with PKCE: no warning, no failure')
})
