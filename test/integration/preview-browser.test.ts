import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import type { Test } from 'tap'
import { chromiumOrSkip, embeddedFrame } from './chromium.js'
import { allFixtures, docx } from './preview-fixtures.js'
import { pollUntil } from '../fixtures/poll.js'
import { CHAT, KEY, gotoReady, open, orPageLog, setup as harness, shot } from './preview-harness.js'

// Page-side callbacks run in the browser; the project compiles without the DOM lib.
declare const document: any

/** Console lines in which CSP blocked something, except the hostile markdown's inline handler (expected). */
const cspRefusals = (errors: string[]): string[] =>
  errors.filter(e => /Content Security Policy|Refused to/.test(e) && !/inline event handler/.test(e))

async function setup (t: Test): Promise<Awaited<ReturnType<typeof harness>> & { fixtures: Record<string, string | Buffer> }> {
  const fixtures = await allFixtures()
  return { ...await harness(t, fixtures), fixtures }
}

t.test('the preview page opened with a files token renders every preview type and serves downloads', chromiumOrSkip(), async t => {
  const { url, outputs, fixtures, page, token, errors } = await setup(t)
  const paths = Object.keys(fixtures)
  const response = await gotoReady(page, `${url}/preview/${CHAT}?t=${token}`, async () =>
    await orPageLog(errors, page.waitForFunction(n => document.querySelectorAll('#file-list li').length === n, paths.length)))
  t.equal(response?.status(), 200)
  t.notMatch(page.url(), /[?&]t=/, 'the token is removed from the address bar')
  const listed = await page.$$eval('#file-list li', items => items.map(li => li.getAttribute('data-path')))
  t.same(listed, [...paths].reverse(), 'newest first')
  await shot(page, 'list')

  await t.test('image', async t => {
    await open(page, 'images/chart.png')
    await page.waitForFunction(() => document.querySelector('#preview img')?.naturalWidth === 96)
    t.equal(await page.evaluate("document.querySelector('#preview img').naturalHeight"), 64)
    await shot(page, 'image')
  })
  await t.test('pdf in the browser viewer', async t => {
    await open(page, 'report.pdf')
    t.match(await page.$eval('#preview iframe.pdf-frame', f => f.getAttribute('src')), /\/files\/preview-e2e\/~v1\.f\.\d+\.[\w-]+\/report\.pdf$/)
    await page.waitForTimeout(1500) // the viewer paints after the frame's load event
    await shot(page, 'pdf')
  })
  await t.test('markdown rendered and sanitised', async t => {
    await open(page, 'notes/summary.md')
    t.equal(await page.textContent('#preview .markdown h1'), 'Summary heading')
    t.equal(await page.textContent('#preview .markdown strong'), 'bold')
    t.equal(await page.$$eval('#preview .markdown li', l => l.length), 2)
    t.equal(await page.$$eval('#preview script', s => s.length), 0, 'no script element survives')
    t.equal(await page.$eval('#preview .markdown img', img => img.getAttribute('onerror')), null, 'event handlers stripped')
    t.equal(await page.evaluate('typeof window.__pwned'), 'undefined')
    await shot(page, 'markdown')
  })
  await t.test('csv as a table', async t => {
    await open(page, 'data/table.csv')
    t.same(await page.$$eval('#preview table.sheet thead th', th => th.map(c => c.textContent)), ['city', 'population'])
    t.equal(await page.$$eval('#preview table.sheet tbody tr', r => r.length), 3)
    t.equal(await page.textContent('#preview table.sheet tbody tr:first-child td'), 'Berlin')
    await shot(page, 'csv')
  })
  await t.test('xlsx as a table with sheet tabs', async t => {
    await open(page, 'data/book.xlsx')
    t.equal(await page.textContent('#preview .tabs .tab'), 'Budget')
    t.same(await page.$$eval('#preview table.sheet tbody tr:first-child td', td => td.map(c => c.textContent)), ['laptop', '1200'])
    await shot(page, 'xlsx')
  })
  // xlsx 0.18.5 was replaced by read-excel-file (in the parser worker); it must read what Excel writes.
  await t.test('a workbook with several sheets, shared strings, dates, booleans and formula results', async t => {
    await open(page, 'data/quarters.xlsx')
    t.same(await page.$$eval('#preview .tabs .tab', tabs => tabs.map(b => b.textContent)), ['Q1', 'Q2 & notes'])
    t.same(await page.$$eval('#preview table.sheet thead th', th => th.map(c => c.textContent)), ['month', 'revenue', 'closed', 'booked'])
    t.same(await page.$$eval('#preview table.sheet tbody tr', rows => rows.map(r => [...r.querySelectorAll('td')].map(c => c.textContent))), [
      ['Jan', '1234.5', 'TRUE', '2026-01-31'],
      ['Feb', '2469', 'FALSE', '2026-02-28']
    ])
    await page.click('#preview .tabs .tab:nth-child(2)')
    t.equal(await page.getAttribute('#preview .tabs .tab:nth-child(2)', 'aria-selected'), 'true')
    t.equal(await page.textContent('#preview table.sheet tbody td'), 'shared strings, a second sheet')
    await shot(page, 'xlsx-sheets')
  })
  await t.test('a legacy .xls workbook gets a clear notice and a download button', async t => {
    await open(page, 'data/legacy.xls')
    t.equal(await page.textContent('#preview .notice h2'), 'No preview for this file')
    t.match(await page.textContent('#preview .notice p'), /legacy Excel 97–2003 workbook \(\.xls\)/)
    t.equal(await page.getAttribute('#preview .notice a.button', 'download'), 'legacy.xls')
  })
  await t.test('docx converted to HTML', async t => {
    await open(page, 'letter.docx')
    t.equal(await page.textContent('#preview .docx h1'), 'Letter title')
    t.match(await page.textContent('#preview .docx'), /Dear reader, this came from a DOCX file\./)
    await shot(page, 'docx')
  })
  await t.test('source code highlighted', async t => {
    await open(page, 'src/app.py')
    t.ok(await page.$('#preview pre.code code.hljs.language-python'))
    t.equal(await page.textContent('#preview pre.code .hljs-keyword'), 'def')
    await shot(page, 'code')
  })
  await t.test('plain text shown verbatim', async t => {
    await open(page, 'log.txt')
    t.match(await page.textContent('#preview pre.text'), /line two <b>not bold<\/b>/)
    t.equal(await page.$$eval('#preview pre.text b', b => b.length), 0)
    await shot(page, 'text')
  })
  await t.test('audio plays from the files URL', async t => {
    await open(page, 'sound.wav')
    await page.waitForFunction(() => (document.querySelector('#preview audio')?.readyState ?? 0) >= 1)
    t.equal(Math.round(await page.evaluate("document.querySelector('#preview audio').duration") as number), 1)
    await shot(page, 'audio')
  })
  await t.test('video plays from the files URL', async t => {
    await open(page, 'clip.webm')
    await page.waitForFunction(() => (document.querySelector('#preview video')?.readyState ?? 0) >= 1)
    t.equal(await page.evaluate("document.querySelector('#preview video').videoWidth"), 64)
    await shot(page, 'video')
  })
  await t.test('agent HTML runs only in an opaque-origin sandboxed iframe, relative assets load', async t => {
    await open(page, 'site/index.html')
    t.equal(await page.$eval('#preview iframe.html-frame', f => f.getAttribute('sandbox')), 'allow-scripts allow-forms allow-popups')
    // The iframe navigates after it is inserted: poll for its frame instead of racing it (flaky under load).
    const frame = await pollUntil(() => page.frames().find(f => f.url().endsWith('/site/index.html')), f => f !== undefined, 20_000, 50)
    t.ok(frame, 'the agent page is loaded from its /files URL')
    if (frame === undefined) return
    await frame.waitForSelector('#agent[data-ran="yes"]')
    t.equal(await frame.evaluate('window.origin'), 'null', 'opaque origin')
    t.equal(await frame.$eval('#agent', h => h.getAttribute('data-cookie')), 'blocked', 'no access to our cookies')
    t.equal(await frame.evaluate("getComputedStyle(document.getElementById('agent')).color"), 'rgb(200, 30, 30)', 'style.css resolved under the ~token path')
    t.equal(await frame.evaluate("(() => { try { return String(window.parent.document.title) } catch { return 'denied' } })()"), 'denied', 'the parent page is out of reach')
    await shot(page, 'html')
  })
  await t.test('other types offer a download', async t => {
    await open(page, 'deck.pptx')
    t.equal(await page.textContent('#preview .notice h2'), 'No preview for this file type')
  })

  await t.test('the download button delivers the file as an attachment', async t => {
    await open(page, 'data/table.csv')
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download-file')])
    t.equal(download.suggestedFilename(), 'table.csv')
    t.equal(readFileSync(await download.path()).toString('utf8'), fixtures['data/table.csv'])
  })
  await t.test('"Download all" delivers the zip of every output', async t => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download-all')])
    t.equal(download.suggestedFilename(), `chat-${CHAT}-outputs.zip`)
    const zip = readFileSync(await download.path())
    t.equal(zip.subarray(0, 2).toString('latin1'), 'PK')
    for (const path of paths) t.ok(zip.includes(Buffer.from(path)), `${path} is in the archive`)
  })
  await t.test('a new output appears on its own at the top of the list', async t => {
    writeFileSync(join(outputs, 'fresh.txt'), 'new')
    await page.waitForSelector('#file-list li:first-child[data-path="fresh.txt"]', { timeout: 10000 })
    t.pass('listed within the 3 s poll')
  })
  // The hostile markdown's inline handler is reported as blocked (Chrome reports it even for DOMParser documents);
  // anything our own page needed and CSP refused would name the policy (older Chromium: "Refused to …").
  t.same(cspRefusals(errors), [], 'CSP refused nothing the page itself needs')
})

t.test('the page works embedded in an opaque-origin sandboxed iframe of another site (Open WebUI)', chromiumOrSkip(), async t => {
  const { url, page, token, fixtures, errors } = await setup(t)
  // The embedding page is served by another loopback server (another origin: other port); its iframe has no
  // allow-same-origin, so the preview's origin is opaque.
  const html = `<!doctype html><iframe id="embed" sandbox="allow-scripts allow-popups allow-downloads" style="width:1000px;height:700px" src="${url}/preview/${CHAT}?t=${token}"></iframe>`
  const embedder = createServer((req, res) => { res.writeHead(200, { 'content-type': 'text/html' }).end(html) })
  await new Promise<void>(resolve => embedder.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { embedder.close() })
  const listed = async (): Promise<unknown> =>
    await (await embeddedFrame(page)).waitForFunction(n => document.querySelectorAll('#file-list li').length === n, Object.keys(fixtures).length, { timeout: 15000 })
  await gotoReady(page, `http://127.0.0.1:${(embedder.address() as AddressInfo).port}/`, listed)
  const frame = await embeddedFrame(page)
  t.ok(frame, 'the preview frame loaded')
  t.equal(await frame.evaluate('window.origin'), 'null', 'the preview runs with an opaque origin')
  await frame.click('#file-list li[data-path="data/table.csv"] button')
  await frame.waitForSelector('#preview[data-rendered="data/table.csv"] table.sheet')
  t.equal(await frame.textContent('#preview table.sheet tbody tr:first-child td'), 'Berlin', 'cross-origin fetches of listing and file work (CORS *)')
  // the parser worker starts from a blob bootstrap, which works where a URL worker cannot (origin null).
  await frame.click('#file-list li[data-path="data/book.xlsx"] button')
  await frame.waitForSelector('#preview[data-rendered="data/book.xlsx"] table.sheet')
  t.same(await frame.$$eval('#preview table.sheet tbody tr:first-child td', td => td.map(c => c.textContent)), ['laptop', '1200'], 'xlsx parsed in the worker')
  await frame.click('#file-list li[data-path="notes/summary.md"] button')
  await frame.waitForSelector('#preview[data-rendered="notes/summary.md"] .markdown h1')
  t.equal(await frame.textContent('#preview .markdown h1'), 'Summary heading', 'markdown parsed in the worker')
  await frame.click('#file-list li[data-path="src/app.py"] button')
  await frame.waitForSelector('#preview[data-rendered="src/app.py"] .hljs-keyword')
  t.equal(await frame.textContent('#preview pre.code .hljs-keyword'), 'def', 'code highlighted in the worker')
  await shot(page, 'embedded')
  t.same([...cspRefusals(errors), ...errors.filter(e => /CORS/.test(e))], [], 'no CSP or CORS refusals')
})

t.test('long markdown and DOCX render completely and in order (parsed in blocks, sanitised in slices)', chromiumOrSkip(), async t => {
  const sections = Array.from({ length: 6000 }, (_, i) => `## Section ${i}\n\nText ${i} with *emphasis* and \`code\`.`).join('\n\n')
  const paragraphs = ['Long letter', ...Array.from({ length: 3000 }, (_, i) => `Paragraph ${i} & <b>not bold</b>.`)]
  const { url, page, token, errors } = await harness(t, { 'notes/long.md': sections, 'long.docx': await docx(paragraphs) })
  await gotoReady(page, `${url}/preview/${CHAT}?t=${token}`, async () =>
    await orPageLog(errors, page.waitForSelector('#file-list li[data-path="notes/long.md"]')))
  await open(page, 'notes/long.md', 60000)
  t.ok(sections.length > 300000, 'several slices of 64 KB')
  const headings = await page.$$eval('#preview .markdown h2', h => [h.length, h[0]?.textContent, h[h.length - 1]?.textContent])
  t.same(headings, [6000, 'Section 0', 'Section 5999'])
  t.equal(await page.$$eval('#preview .markdown p em', e => e.length), 6000)
  t.equal(await page.$$eval('#preview .markdown > *', n => n.filter(e => e.tagName === 'H2').map(e => Number(e.textContent.slice(8))).every((v, i) => v === i)), true, 'in document order')
  await open(page, 'long.docx', 60000)
  const docxParagraphs = await page.$$eval('#preview .docx p', p => p.map(e => e.textContent))
  t.equal(docxParagraphs.length, 3000)
  t.equal(docxParagraphs[0], 'Paragraph 0 & <b>not bold</b>.')
  t.equal(docxParagraphs[2999], 'Paragraph 2999 & <b>not bold</b>.')
  t.equal(await page.$$eval('#preview .docx > *', n => n.length), 3001, 'every paragraph a direct child: no slice boundary split an element')
})

t.test('a chat without outputs shows the empty state', chromiumOrSkip(), async t => {
  const { url, page, errors } = await setup(t)
  const response = await gotoReady(page, `${url}/preview/other-chat?t=${await tokenFor(url, 'other-chat')}`, async () =>
    await orPageLog(errors, page.waitForSelector('#preview .empty h2')))
  t.equal(response?.status(), 200)
  t.equal(await page.textContent('#preview .empty h2'), 'No outputs yet')
  t.equal(await page.getAttribute('#download-all', 'aria-disabled'), 'true')
  t.equal(await page.isVisible('#download-file'), false, 'no per-file buttons without a file')
  await shot(page, 'empty')
})

t.test('a listing request that stalls is given up and the next poll lists the files', chromiumOrSkip(), async t => {
  const { url, page, errors } = await setup(t)
  let stalled = 0
  // The first listing request never gets an answer (a dead connection the browser still waits on).
  await page.route(/\/api\/outputs\//, async route => {
    if (stalled++ === 0) return
    await route.continue()
  })
  const started = Date.now()
  await gotoReady(page, `${url}/preview/other-chat?t=${await tokenFor(url, 'other-chat')}`, async () =>
    await orPageLog(errors, page.waitForSelector('#preview .empty h2', { timeout: 30000 })))
  t.ok(stalled >= 2, `the listing was asked again (${stalled} requests)`)
  t.ok(Date.now() - started >= 9000, 'after the first request was given up (10 s)')
})

t.test('an expired link shows a clear error instead of the page', chromiumOrSkip(), async t => {
  const { url, page } = await setup(t)
  const response = await gotoReady(page, `${url}/preview/${CHAT}?t=v1.f.1000.AAAAAAAAAAAAAAAAAAAAAA`, async () =>
    await page.waitForFunction(() => /forbidden/.test(document.body?.textContent ?? '')))
  t.equal(response?.status(), 403)
  t.match(await page.textContent('body'), /forbidden/)
})

/** A files token for another chat, minted by the same key the server uses (derived from MCP_API_KEY). */
async function tokenFor (url: string, chat: string): Promise<string> {
  const res = await fetch(`${url}/preview/${chat}`, { headers: { authorization: `Bearer ${KEY}` } })
  const html = await res.text()
  const config = JSON.parse(/<script type="application\/json" id="config">(.*?)<\/script>/s.exec(html)?.[1] ?? '{}') as { apiUrl: string }
  return new URL(config.apiUrl, url).searchParams.get('t') as string
}
