// the human watches the model's browser in the preview's Browser view (real Chromium, the
// preview embedded in an opaque-origin iframe as Open WebUI does), takes over, types, and the model
// reads what the human typed; closing the viewer leaves the agent's page usable at its original size.
import t from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { dockerOrSkip } from './docker.js'
import { chromiumOrSkip, embeddedFrame, gotoReady, launchChromium } from './chromium.js'
import { bash, browserApp, mcpClient, SITE } from './browser-app.js'
import { pollUntil } from '../fixtures/poll.js'

// Page-side callbacks run in the browser; the project compiles without the DOM lib.
declare const document: any

const gate = await dockerOrSkip()
const chromiumGate = chromiumOrSkip()

t.test('the human sees the model\'s page live, takes over and types; the model reads it', { skip: gate.skip || chromiumGate.skip }, async t => {
  const { app, url } = await browserApp(t)
  const c = await mcpClient(t, url, 'browser-human')
  await bash(c, SITE)
  await bash(c, "browser eval \"document.body.style.background = 'rgb(0, 200, 0)'\"")
  const sizeBefore = await bash(c, 'browser eval "innerWidth + \'x\' + innerHeight"')
  t.match(sizeBefore, /"\d+x\d+"/)

  const browser = await launchChromium(t)
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } })
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', err => { errors.push(String(err)) })
  // An opaque-origin embedding (sandbox without allow-same-origin): the socket's Origin is `null`.
  const token = app.links.token('browser-human', 'c') as string
  const html = `<!doctype html><iframe id="embed" sandbox="allow-scripts allow-forms allow-popups" style="width:1380px;height:880px;border:0"
    src="${url}/preview/browser-human?t=${token}#browser"></iframe>`
  const embedder = createServer((_req, res) => { res.writeHead(200, { 'content-type': 'text/html' }).end(html) })
  await new Promise<void>(resolve => embedder.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { embedder.closeAllConnections(); embedder.close() })
  await gotoReady(page, `http://127.0.0.1:${(embedder.address() as AddressInfo).port}/`, async () =>
    await (await embeddedFrame(page)).waitForSelector('#browser-view[data-state="live"]', { timeout: 120_000 }))
  const frame = await embeddedFrame(page)
  t.equal(await frame.evaluate('window.origin'), 'null', 'the preview runs with an opaque origin')

  await frame.waitForFunction(() => Number(document.getElementById('browser-screen').dataset.frames) >= 1, undefined, { timeout: 60_000 })
  t.match(await frame.textContent('#browser-url') ?? '', /127\.0\.0\.1:8000\/index\.html/, 'the URL of the tab is shown')
  t.match(await frame.textContent('#browser-tabs') ?? '', /Agent page/, 'the tab is listed')

  // The frame shows the model's page: its green background, read back from the shown pixels.
  const pixel = await frame.evaluate(async () => {
    const img = document.getElementById('browser-screen')
    await img.decode()
    const canvas = document.createElement('canvas')
    canvas.width = img.naturalWidth
    canvas.height = img.naturalHeight
    const ctx = canvas.getContext('2d')
    ctx.drawImage(img, 0, 0)
    return Array.from(ctx.getImageData(canvas.width - 20, canvas.height - 20, 1, 1).data).slice(0, 3)
  }) as number[]
  t.ok(pixel[0]! < 40 && pixel[1]! > 170 && pixel[2]! < 40, `the screencast shows the page's green background (${pixel.join(',')})`)

  await frame.click('#browser-takeover')
  t.equal(await frame.getAttribute('#browser-view', 'data-takeover'), 'on')
  // Click the page's input (CSS 250,215 in a 1280-wide viewport) through the scaled image.
  const box = await frame.locator('#browser-screen').boundingBox()
  const viewport = JSON.parse(JSON.parse(sizeBefore.match(/"[^"]+"/)?.[0] ?? '"0x0"').replace(/^(\d+)x(\d+)$/, '[$1,$2]')) as [number, number]
  if (box === null) throw new Error('no screen')
  const scale = box.width / viewport[0]
  await frame.locator('#browser-screen').click({ position: { x: 250 * scale, y: 215 * scale } })
  await page.keyboard.type('hello human', { delay: 30 })
  await page.keyboard.press('Enter')

  // The keys travel through the screencast's input relay: read until they arrived (at most 30 s, not 30 tries).
  const typed = await pollUntil(async () => await bash(c, "browser eval \"document.getElementById('out').textContent\""), s => /Entered: hello human/.test(s), 30_000, 200)
  t.match(typed, /Entered: hello human/, 'the model reads what the human typed (and the Enter key)')

  await frame.click('#browser-takeover')
  t.equal(await frame.getAttribute('#browser-view', 'data-takeover'), 'off', 'released')

  t.test('browser handoff: the view shows the assistant\'s reason until the human hands the browser back', async t => {
    // This client declares no URL elicitation: the model gets the link, the view shows the reason.
    const text = await bash(c, 'browser handoff "Log in to the test site"')
    t.match(text, /Give them this link \(it opens the live browser of this chat\): \S+\/preview\/browser-human\?t=\S+#browser/)
    t.notMatch(text, /::cubicle::/, 'the request line is not shown')
    await frame.waitForSelector('#browser-handoff:not([hidden])', { timeout: 30_000 })
    t.match(await frame.textContent('#browser-handoff-why') ?? '', /take over: Log in to the test site/)
    await frame.click('#browser-handoff-done')
    await frame.waitForSelector('#browser-handoff', { state: 'hidden', timeout: 30_000 })
    // The view hides the banner as it sends the release; the server's answer may come a moment later.
    const handoff = async (): Promise<unknown> => ((await (await fetch(`${url}/browser/browser-human/status?t=${token}`)).json()) as { handoff?: unknown }).handoff
    let open = await handoff()
    for (const until = Date.now() + 10_000; open !== undefined && Date.now() < until;) {
      await new Promise(resolve => setTimeout(resolve, 200))
      open = await handoff()
    }
    t.equal(open, undefined, 'the server ended the handoff')
  })

  t.test('the view reconnects on its own after the sandbox restarted', async t => {
    const connections = Number(await frame.getAttribute('#browser-view', 'data-connections'))
    await app.sandbox.stop('browser-human')
    await frame.waitForSelector('#browser-view:not([data-state="live"])', { timeout: 60_000 })
    await bash(c, SITE)
    await frame.waitForSelector('#browser-view[data-state="live"]', { timeout: 120_000 })
    t.ok(Number(await frame.getAttribute('#browser-screen', 'data-frames')) > 0, 'frames flow again')
    t.ok(Number(await frame.getAttribute('#browser-view', 'data-connections')) > connections, 'over a new connection')
    t.match(await frame.textContent('#browser-url') ?? '', /127\.0\.0\.1:8000\/index\.html/)
  })

  t.test('closing the viewer leaves the agent\'s page usable at its original size', async t => {
    await page.close()
    t.equal(await pollUntil(() => app.cdp.viewers('browser-human'), n => n === 0), 0, 'the viewer\'s socket is gone')
    // the value only: the tool may append page events (a console entry) that vary from run to run
    const size = (out: string): string | undefined => /"\d+x\d+"/.exec(out)?.[0]
    t.equal(size(await bash(c, 'browser eval "innerWidth + \'x\' + innerHeight"')), size(sizeBefore), 'same viewport size')
    const snapshot = await bash(c, 'browser snapshot')
    const ref = /button "Go" \[ref=(e\d+)\]/.exec(snapshot)?.[1] ?? 'e0'
    await bash(c, `browser click ${ref}`)
    t.match(await bash(c, "browser eval \"document.getElementById('out').textContent\""), /Clicked: /, 'the page still works for the model')
    t.same(errors, [], 'no page errors in the viewer')
  })
})
