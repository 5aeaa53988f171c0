import t from 'tap'
import { mkdirSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Frame, Page } from 'playwright-core'
import { dockerOrSkip } from './docker.js'
import { chromiumOrSkip, embeddedFrame, gotoReady, launchChromium } from './chromium.js'
import { terminalStack } from '../plugins/terminal/integration-app.js'
import { pollUntil } from '../fixtures/poll.js'

const ARTIFACTS = new URL('../../test-artifacts/terminal/', import.meta.url)
const CHAT = 'term-browser'
const gate = await dockerOrSkip()
const chromium = chromiumOrSkip()

async function shot (page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true })
  await page.screenshot({ path: new URL(`${name}.png`, ARTIFACTS).pathname })
}

/** The text of xterm's rows (its DOM renderer), one line per row. */
const rows = async (where: Page | Frame): Promise<string> =>
  await where.$$eval('.xterm-rows > div', divs => divs.map(d => d.textContent ?? '').join('\n'))

async function waitForText (where: Page | Frame, pattern: RegExp, timeout = 20000): Promise<string> {
  const end = Date.now() + timeout
  for (;;) {
    const text = await rows(where)
    if (pattern.test(text)) return text
    if (Date.now() > end) throw new Error(`${String(pattern)} not on screen:\n${text}`)
    await new Promise(resolve => setTimeout(resolve, 100))
  }
}

/** Types a command line through the real xterm.js UI (keyboard events into its textarea). */
async function typeLine (page: Page | Frame, text: string): Promise<void> {
  await page.click('.term-screen')
  await page.locator('.xterm-helper-textarea').pressSequentially(text)
  await page.locator('.xterm-helper-textarea').press('Enter')
}

t.test('the preview page\'s Terminal view in real Chromium', { skip: gate.skip || chromium.skip }, async t => {
  const { app, url, token } = await terminalStack(t)
  await app.sandbox.ensure(CHAT)
  const browser = await launchChromium(t)
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: url })
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', err => { errors.push(String(err)) })
  // Not a page error: a request lost to a network change of the Docker host (gotoReady opens the page again).
  page.on('console', msg => { if (msg.type() === 'error' && !/WebSocket|net::ERR_NETWORK_CHANGED/.test(msg.text())) errors.push(msg.text()) })

  await gotoReady(page, `${url}/preview/${CHAT}?t=${token(CHAT)}`, async () => {
    await page.click('#views [data-view="terminal"]')
    await page.waitForSelector('.term-view[data-state="open"]', { timeout: 30000 })
  })
  t.equal(await page.getAttribute('#views [data-view="terminal"]', 'aria-selected'), 'true')
  t.equal(await page.isHidden('main.layout'), true, 'the outputs view is hidden')

  await t.test('a command typed through xterm.js runs and its output shows', async t => {
    await typeLine(page, 'echo hi-from-$((40+2))')
    const screen = await waitForText(page, /^hi-from-42\s*$/m)
    t.match(screen, /\$ echo hi-from-\$\(\(40\+2\)\)/, 'the typed line is echoed')
    await shot(page, 'echo')
  })

  await t.test('UTF-8 and colours', async t => {
    await typeLine(page, "printf '\\033[31mred-ü-✓-日本\\033[0m\\n'")
    await waitForText(page, /^red-ü-✓-日本\s*$/m)
    const red = await page.$$eval('.xterm-rows span', spans => spans.filter(s => (s.textContent ?? '').includes('red-ü')).map(s => s.className).join(' '))
    t.match(red, /xterm-fg-1\b/, 'printed in ANSI red')
  })

  await t.test('the terminal follows the window size', async t => {
    await typeLine(page, 'echo "wide=$(tput cols)"')
    const wide = Number((/^wide=(\d+)/m.exec(await waitForText(page, /^wide=\d+/m)))?.[1])
    await page.setViewportSize({ width: 800, height: 600 })
    // The new size reaches the pty asynchronously: ask again (a new marker each time) until it changed, at most 20 s.
    let attempt = 0
    const narrow = await pollUntil(async () => {
      const marker = `narrow${++attempt}`
      await typeLine(page, `clear; echo "${marker}=$(tput cols)"`)
      return Number(new RegExp(`^${marker}=(\\d+)`, 'm').exec(await waitForText(page, new RegExp(`^${marker}=\\d+`, 'm')))?.[1])
    }, n => n !== wide, 20_000, 300)
    t.ok(wide > 100, `wide window: ${wide} columns`)
    t.ok(narrow < wide - 30, `narrow window: ${narrow} columns`)
    await page.setViewportSize({ width: 1280, height: 800 })
  })

  await t.test('paste and copy through the clipboard', async t => {
    await page.evaluate("navigator.clipboard.writeText('echo pasted-$((2+3))')")
    await page.click('.term-bar button:has-text("Paste")')
    // The paste reads the clipboard asynchronously: an Enter pressed at once can reach the shell first.
    await waitForText(page, /echo pasted-\$\(\(2\+3\)\)\s*$/m)
    await page.locator('.xterm-helper-textarea').press('Enter')
    await waitForText(page, /^pasted-5\s*$/m)
    await page.evaluate("navigator.clipboard.writeText('')")
    // tmux has the mouse: Shift+drag selects in xterm.js itself.
    const line = page.locator('.xterm-rows > div', { hasText: /^pasted-5\s*$/ }).last()
    const box = await line.boundingBox()
    if (box === null) throw new Error('no row box')
    await page.keyboard.down('Shift')
    await page.mouse.move(box.x + 1, box.y + box.height / 2)
    await page.mouse.down()
    await page.mouse.move(box.x + 8 * 9, box.y + box.height / 2, { steps: 5 })
    await page.mouse.up()
    await page.keyboard.up('Shift')
    await page.click('.term-bar button:has-text("Copy")')
    t.match(await page.evaluate('navigator.clipboard.readText()'), /^pasted-5/, 'the selection is on the clipboard')
  })

  await t.test('the Browser view beside it: switching views keeps the terminal session and its screen', async t => {
    await page.click('#views [data-view="browser"]')
    await page.waitForSelector('#browser-view', { state: 'visible' })
    t.equal(await page.isHidden('#terminal-pane'), true, 'the terminal pane is hidden')
    t.equal(await page.isHidden('main.layout'), true, 'the outputs view stays hidden')
    t.equal(await page.getAttribute('#views [data-view="browser"]', 'aria-selected'), 'true')
    await page.click('#views [data-view="outputs"]')
    t.equal(await page.isVisible('main.layout'), true, 'Outputs shows again')
    t.equal(await page.isHidden('#browser-view'), true)
    await page.click('#views [data-view="terminal"]')
    t.equal(await page.isHidden('#browser-view'), true, 'the browser view is hidden')
    await waitForText(page, /^pasted-5\s*$/m)
    await typeLine(page, 'echo again-$((3*3))')
    await waitForText(page, /^again-9\s*$/m)
    t.equal(await page.getAttribute('.term-view', 'data-state'), 'open', 'the same connection, no reconnect')
  })

  await t.test('a stopped sandbox shows "start it?", and the button brings the terminal back', async t => {
    await app.sandbox.stop(CHAT)
    await page.waitForSelector('.term-overlay h3:has-text("The sandbox is stopped")', { timeout: 30000 })
    await shot(page, 'stopped')
    await page.click('.term-overlay button:has-text("Start it")')
    await page.waitForSelector('.term-view[data-state="open"]', { timeout: 60000 })
    await typeLine(page, 'echo back-$((5*5))')
    await waitForText(page, /^back-25\s*$/m)
    t.pass('the started sandbox answers in the same view')
  })

  await t.test('the full-window page /terminal/{chat}', async t => {
    const win = await context.newPage()
    await gotoReady(win, `${url}/terminal/${CHAT}?t=${token(CHAT)}`, async () => await win.waitForSelector('.term-view[data-state="open"]', { timeout: 30000 }))
    t.notMatch(win.url(), /[?&]t=/, 'the token is removed from the address bar')
    await typeLine(win, 'echo window-$((6*7))')
    await waitForText(win, /^window-42\s*$/m)
    await waitForText(page, /^window-42\s*$/m)
    t.pass('both viewers show the shared session')
    t.match(await win.title(), /term-browser/)
    await shot(win, 'window')
    await win.close()
  })

  t.same(errors, [], 'no page errors')
})

t.test('the Terminal view works inside an opaque-origin iframe of another site', { skip: gate.skip || chromium.skip }, async t => {
  const { app, url, token } = await terminalStack(t)
  await app.sandbox.ensure(CHAT)
  const html = `<!doctype html><iframe id="embed" sandbox="allow-scripts allow-popups" style="width:1000px;height:600px" src="${url}/preview/${CHAT}?t=${token(CHAT)}#terminal"></iframe>`
  const embedder = createServer((_req, res) => { res.writeHead(200, { 'content-type': 'text/html' }).end(html) })
  await new Promise<void>(resolve => embedder.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { embedder.closeAllConnections(); embedder.close() })
  const browser = await launchChromium(t)
  const page = await browser.newPage()
  await gotoReady(page, `http://127.0.0.1:${(embedder.address() as AddressInfo).port}/`, async () =>
    await (await embeddedFrame(page)).waitForSelector('.term-view[data-state="open"]', { timeout: 30000 }))
  const frame = await embeddedFrame(page)
  t.equal(await frame.evaluate('window.origin'), 'null', 'opaque origin: the WebSocket sends Origin: null')
  await typeLine(frame, 'echo framed-$((8*8))')
  await waitForText(frame, /^framed-64\s*$/m)
  await shot(page, 'iframe')
})
