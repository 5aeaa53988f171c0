/*
 * The preview page's Network view in real Chromium (docs/contract.md#egress): a real sandbox makes an allowed and a
 * denied connection through the egress proxy, to servers this test starts on loopback, and the page
 * (holding only its capability token) shows both with their reasons, escaped, refreshing while open.
 */
import t from 'tap'
import type { Test } from 'tap'
import http from 'node:http'
import { mkdirSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tempDir } from '../fixtures/temp-dir.js'
import { buildApp, entry } from '../../core/app.js'
import { entries } from '../../fastify.config.js'
import egress from '../../plugins/egress/index.js'
import { testConfig, TEST_API_KEY } from '../helper.js'
import { chromiumOrSkip, gotoReady, launchChromium, logRequestTrouble, orPageLog } from './chromium.js'
import { cleanupPrefix, dockerOrSkip, TEST_IMAGE, removeNetworkFirewall } from './docker.js'
import { nameLookup } from '../fixtures/name-lookup.js'

const PREFIX = 'tegrprev'
const ARTIFACTS = new URL('../../test-artifacts/egress/', import.meta.url)
const CHAT = 'egress-preview'
const gate = await dockerOrSkip()
const chromium = chromiumOrSkip()

async function canary (t: Test, name: string): Promise<{ port: number, hits: () => number }> {
  let hits = 0
  const server = http.createServer((_req, res) => { hits++; res.end(`hello from ${name}\n`) })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.closeAllConnections(); server.close() })
  return { port: (server.address() as AddressInfo).port, hits: () => hits }
}

t.test('the preview page shows the chat\'s egress log (real sandbox, real Chromium)', { skip: gate.skip || chromium.skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  const a = await canary(t, 'canary-a')
  const b = await canary(t, 'canary-b')
  const dataDir = await tempDir(t, `${PREFIX}-data`)
  const config = testConfig({ SANDBOX_PREFIX: PREFIX, DATA_DIR: dataDir, MCP_API_KEY: TEST_API_KEY, DOCKER_IMAGE: TEST_IMAGE })
  // Names the test's resolver knows; the hostile one shows that the page escapes what the sandbox asked for.
  const names: Record<string, string[]> = { 'canary-a.test': ['127.0.0.1'], 'canary-b.test': ['127.0.0.1'] }
  const app = await buildApp(config, [
    ...entries(config, ['capabilities', 'chat-storage', 'sandbox-docker', 'sandbox']),
    entry(egress, {
      allow: `127.0.0.1:${a.port}`,
      lookup: nameLookup(names)
    }),
    ...entries(config, ['files', 'preview'])
  ], { logger: process.env.TEST_LOG === '1' ? { level: 'debug' } : false })
  t.teardown(async () => {
    const net = app.sandbox.network?.()
    await app.close()
    if (net != null) await removeNetworkFirewall(net.name)
  })
  await app.ready()
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  await app.sandbox.ensure(CHAT)
  const sh = async (script: string): Promise<string> => {
    const r = await app.sandbox.exec(CHAT, ['bash', '-c', script], { timeoutMs: 60_000 })
    return r.stdout.toString() + r.stderr.toString()
  }

  t.equal(await sh(`curl -sS -m 20 http://canary-a.test:${a.port}/allowed`), 'hello from canary-a\n')
  t.match(await sh(`curl -sS -m 20 http://canary-b.test:${b.port}/denied`), /blocked by the sandbox egress policy: canary-b\.test \(127\.0\.0\.1\) is a loopback address/)
  t.equal(b.hits(), 0, 'the denied canary saw nothing')

  const browser = await launchChromium(t)
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
  const errors: string[] = []
  page.on('pageerror', err => { errors.push(String(err)) })
  const requests: string[] = []
  page.on('request', req => { requests.push(req.url()) })

  const pageLog: string[] = []
  logRequestTrouble(page, pageLog)
  page.on('console', msg => { if (msg.type() === 'error') pageLog.push(`console: ${msg.text()}`) })

  const token = app.links.token(CHAT, 'c') as string
  const rows = page.locator('#net-rows tr')
  // gotoReady: a Docker network change in another test aborts requests in flight (ERR_NETWORK_CHANGED).
  await orPageLog(pageLog, gotoReady(page, `${url}/preview/${CHAT}?t=${token}#network`, async () => { await rows.nth(1).waitFor({ timeout: 20_000 }) }))

  await t.test('both decisions with host, port, reason and bytes, newest first', async t => {
    const table = await page.$$eval('#net-rows tr', trs => trs.map(tr => ({
      decision: tr.getAttribute('data-decision'),
      cells: [...tr.querySelectorAll('td')].map(td => td.textContent ?? '')
    })))
    t.match(table[0], { decision: 'denied', cells: [/\d{1,2}:\d{2}:\d{2}/, `canary-b.test:${b.port}`, 'HTTP', 'denied', /^canary-b\.test \(127\.0\.0\.1\) is a loopback address/, '—'] })
    t.match(await page.getAttribute('#net-rows tr:first-child .net-reason', 'title'), /^blocked by the sandbox egress policy: canary-b\.test/, 'the full refusal as a tooltip')
    t.match(table[1], { decision: 'allowed', cells: [/\d{1,2}:\d{2}:\d{2}/, `canary-a.test:${a.port}`, 'HTTP', 'allowed', `rule 127.0.0.1:${a.port}`, /^↑ \d+ B ↓ \d+ B$/] })
    t.match(await page.textContent('.net-policy'), /Egress: open — public internet \(server setting\) · 1 allow rule/)
    t.equal(await page.getAttribute('#views [data-view="network"]', 'aria-selected'), 'true')
    mkdirSync(ARTIFACTS, { recursive: true })
    await page.screenshot({ path: new URL('network.png', ARTIFACTS).pathname })
  })

  await t.test('the page reads the log with its capability token, never the API key', async t => {
    const logCalls = requests.filter(u => u.includes(`/api/egress/${CHAT}/log`))
    t.ok(logCalls.length > 0)
    for (const u of logCalls) t.match(new URL(u).searchParams.get('t'), /^v1\.f\./, 'a files (read-only) token')
    const html = await (await fetch(`${url}/preview/${CHAT}?t=${token}`)).text()
    t.notMatch(html, TEST_API_KEY, 'the key is not in the page')
  })

  await t.test('new connections appear while the view is open; hostile host names stay text', async t => {
    // A raw request whose host is markup (curl would refuse such a URL).
    await sh(`python3 - <<'PY'
import os, socket
host, port = os.environ['http_proxy'].split('//')[1].rstrip('/').split(':')
s = socket.create_connection((host, int(port)), timeout=20)
s.sendall(b'GET http://<b>x</b>/ HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')
s.recv(4096)
PY`)
    await sh(`curl -sS -m 20 http://canary-a.test:${a.port}/again`)
    await rows.nth(3).waitFor({ timeout: 15_000 })
    t.equal(await page.locator('#net-rows b').count(), 0, 'no element from a host name')
    t.match(await page.textContent('#net-rows'), /<b>x</)
    t.match(await page.textContent('#net-rows'), /not a valid host name/)
    t.same(errors, [])
  })

  await t.test('the Refused filter shows only refusals', async t => {
    await page.click('.net-filters [data-filter="refused"]')
    const decisions = await page.$$eval('#net-rows tr', trs => trs.map(tr => tr.getAttribute('data-decision')))
    t.ok(decisions.length >= 1)
    t.notOk(decisions.includes('allowed'))
    t.match(await page.textContent('.net-count'), /\d+ connections · \d+ refused/)
  })

  await t.test('a files-token page carries no view switcher; a wrong token gets no log', async t => {
    const filesPage = await browser.newPage()
    // Ready once the listing came (the app ran): a page whose script was lost would show no switcher either.
    await gotoReady(filesPage, `${url}/preview/${CHAT}?t=${app.links.token(CHAT, 'f') as string}`, async () =>
      await filesPage.waitForSelector('#app:is([data-state="ready"], [data-state="empty"])'))
    t.equal(await filesPage.isHidden('#views'), true)
    await filesPage.close()
    const res = await fetch(`${url}/api/egress/${CHAT}/log?t=${app.links.token('someone-else', 'c') as string}`)
    t.equal(res.status, 403)
  })
})
