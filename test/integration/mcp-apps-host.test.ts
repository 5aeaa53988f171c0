/*
 * MCP Apps views in real Chromium (docs/features.md#views-in-the-chat-mcp-apps): a host page
 * (test/fixtures/apps-host.ts) renders each ui://cubicle view from resources/read, under the CSP
 * built from the resource's `_meta.ui.csp`, in an opaque-origin iframe, and feeds it the tool result
 * over the official ext-apps bridge; the SDK v2 client declares the Apps extension over real HTTP.
 * The files view lists an output, the terminal view runs a typed command, the browser view shows the
 * model's live page and sends it a key. APPS_SCREENSHOT=<png> saves the browser view in the host.
 */
import t, { type Test } from 'tap'
import type { Frame, Page } from 'playwright-core'
import type { CallToolResult } from '@modelcontextprotocol/client'
import { dockerOrSkip } from './docker.js'
import { chromiumOrSkip, gotoReady, launchChromium, logRequestTrouble, orPageLog } from './chromium.js'
import { browserApp, KEY, SITE } from './browser-app.js'
import { appsClient, startAppsHost } from '../fixtures/apps-host.js'

// Page-side callbacks run in the browser; the project compiles without the DOM lib.
declare const window: any
declare const document: any

const CHAT = 'apps-host'
const gate = await dockerOrSkip()
const chromiumGate = chromiumOrSkip()
const textOf = (r: CallToolResult): string => r.content.map(c => c.type === 'text' ? c.text : '').join('')

t.test('each view renders in a host page from resources/read and works', { skip: gate.skip || chromiumGate.skip }, async t => {
  const { url } = await browserApp(t, {}, ['terminal', 'mcp-apps'])
  const host = await startAppsHost(t)
  const apps = await appsClient(t, url, { Authorization: `Bearer ${KEY}`, 'X-Chat-Id': CHAT })
  const call = async (name: string, args: Record<string, unknown>): Promise<CallToolResult> =>
    await apps.callTool({ name, arguments: args }, { timeout: 240_000 })
  const bash = async (command: string): Promise<CallToolResult> => await call('bash_tool', { command, description: 'apps host test' })
  const browser = await launchChromium(t)
  const context = await browser.newContext({ viewport: { width: 1180, height: 700 } })
  const tools = (await apps.listTools()).tools
  const viewOf = (name: string): string => (tools.find(tool => tool.name === name)?._meta as { ui: { resourceUri: string } }).ui.resourceUri

  /** The host's turn: read the tool's view over MCP, render it in the page, hand it the call's input and result. */
  async function render (t: Test, page: Page, tool: string, input: Record<string, unknown>, result: CallToolResult, log: string[]): Promise<Frame> {
    const { contents } = await apps.readResource({ uri: viewOf(tool) })
    const [view] = contents as unknown as Array<{ text: string, _meta: { ui: { csp: unknown } } }>
    page.on('pageerror', err => { log.push(`pageerror: ${String(err)}`) })
    // The spec's CSP fields have no worker-src: a host that maps them as the spec does blocks the
    // document parser's blob worker, and Markdown, code and Office files show a notice instead.
    page.on('console', msg => { if (msg.type() === 'error' && !msg.text().startsWith('Creating a worker from \'blob:')) log.push(`console: ${msg.text()}`) })
    logRequestTrouble(page, log)
    await gotoReady(page, host.url, async () => await page.waitForFunction(() => typeof window.renderView === 'function'))
    const rendered = page.evaluate(async args => await window.renderView(args), { html: view?.text, csp: view?._meta.ui.csp, toolInput: input, toolResult: result })
    await orPageLog(log, Promise.race([rendered, new Promise((_resolve, reject) => setTimeout(() => { reject(new Error('the view did not complete the bridge handshake in 30 s')) }, 30_000).unref())]))
    const frame = await (await page.waitForSelector('#view')).contentFrame()
    if (frame === null) throw new Error('the view frame did not load')
    t.equal(await frame.evaluate(() => window.origin), 'null', `${tool}: the view runs with an opaque origin`)
    return frame
  }

  await t.test('files: bash_tool writes an output, its view lists it', async t => {
    const quiet = await bash('echo nothing written')
    t.equal(quiet._meta?.['cubicle/view'], undefined, 'a call that changed no output names no view')
    const input = { command: 'mkdir -p /mnt/user-data/outputs && printf "# Report\\n\\nfrom the host test\\n" > /mnt/user-data/outputs/report.md', description: 'write a report' }
    const result = await call('bash_tool', input)
    t.match(textOf(result), /Files created or modified in \/mnt\/user-data\/outputs: report\.md: /, 'the text result is unchanged')
    t.match(result._meta?.['cubicle/view'], { view: 'files', scope: 'files', token: /^v1\.f\./ })
    const page = await context.newPage()
    const log: string[] = []
    const frame = await render(t, page, 'bash_tool', input, result, log)
    await orPageLog(log, frame.waitForSelector('#file-list li[data-path="report.md"]', { timeout: 30_000 }))
    t.match(await frame.textContent('#count') ?? '', /1 file/, 'the listing')
    await orPageLog(log, frame.waitForSelector('#preview .notice', { timeout: 30_000 }))
    t.match(await frame.textContent('#preview') ?? '', /Could not show a preview/, 'no parser worker under this host\'s CSP: a notice with a download')
    t.equal(await frame.isHidden('#views'), true, 'a files token: no Browser or Terminal tab')
    t.same(log, [], 'no page error, failed request or console error')
    await page.close()
  })

  await t.test('terminal: show_computer opens the shell, a typed command runs', async t => {
    const input = { view: 'terminal' }
    const result = await call('show_computer', input)
    const page = await context.newPage()
    const log: string[] = []
    const frame = await render(t, page, 'show_computer', input, result, log)
    await orPageLog(log, frame.waitForSelector('.term-view[data-state="open"]', { timeout: 60_000 }))
    await frame.click('.term-screen')
    await frame.locator('.xterm-helper-textarea').pressSequentially('echo apps-$((6*7))')
    await frame.locator('.xterm-helper-textarea').press('Enter')
    await orPageLog(log, frame.waitForFunction(() => [...document.querySelectorAll('.xterm-rows > div')].some((d: any) => /^apps-42\s*$/.test(d.textContent ?? '')), undefined, { timeout: 20_000 }))
    t.pass('the command ran and its output shows in the view')
    t.same(log, [], 'no page error, failed request or console error')
    await page.close()
  })

  await t.test('browser: a browser command shows the live page, a key typed in the view reaches it', async t => {
    await bash(SITE)
    const input = { command: 'browser eval "document.title"', description: 'read the title' }
    const result = await call('bash_tool', input)
    t.match(textOf(result), /Agent page/)
    t.match(result._meta?.['cubicle/view'], { view: 'browser', scope: 'full', token: /^v1\.c\./ })
    const page = await context.newPage()
    const log: string[] = []
    const frame = await render(t, page, 'bash_tool', input, result, log)
    await orPageLog(log, frame.waitForSelector('#browser-view[data-state="live"]', { timeout: 120_000 }))
    await frame.waitForFunction(() => Number(document.getElementById('browser-screen').dataset.frames) >= 1, undefined, { timeout: 60_000 })
    t.match(await frame.textContent('#browser-url') ?? '', /127\.0\.0\.1:8000\/index\.html/, 'the live page')
    if (process.env.APPS_SCREENSHOT !== undefined) await page.screenshot({ path: process.env.APPS_SCREENSHOT })
    await bash('browser eval "document.getElementById(\'name\').focus()"')
    await frame.click('#browser-takeover')
    await frame.locator('#browser-screen').focus()
    await page.keyboard.type('ok', { delay: 30 })
    await page.keyboard.press('Enter')
    let out = ''
    for (let i = 0; i < 30 && !/Entered: ok/.test(out); i++) out = textOf(await bash('browser eval "document.getElementById(\'out\').textContent"'))
    t.match(out, /Entered: ok/, 'keys typed in the view reached the page')
    await frame.click('#browser-takeover')
    t.same(log, [], 'no page error, failed request or console error')
    await page.close()
  })
})
