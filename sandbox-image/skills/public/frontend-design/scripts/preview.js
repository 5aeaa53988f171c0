#!/usr/bin/env node
// Previews a single-file web artifact the way the user will see it, and checks that it stands alone.
//
//   node preview.js FILE.html [--out DIR] [--sizes 1280x800,390x844] [--allow-external]
//
// For each size it saves DIR/<name>-<W>x<H>.png (full page; default DIR /tmp/preview) to look at
// with `view`. It fails (exit 1) when the page throws a JavaScript error, logs a console error, or
// loads anything that is not inside the file itself (another local file, or http(s) unless
// --allow-external): the user gets one file, so relative links to images, scripts or styles break.
// It also reports the page's horizontal overflow at each size (content wider than the screen).
// Exit: 0 ok, 1 problems found, 2 bad arguments or the browser could not start.
'use strict'
const fs = require('fs')
const path = require('path')
const { pathToFileURL } = require('url')
const { chromium } = require('/opt/cubicle-browser/node_modules/playwright-core')

function fail (msg) { console.error(`preview: ${msg}`); process.exit(2) }

function parse (argv) {
  const o = { file: argv[0], out: '/tmp/preview', sizes: [[1280, 800], [390, 844]], allowExternal: false }
  if (!o.file || o.file.startsWith('--')) fail('usage: node preview.js FILE.html [--out DIR] [--sizes 1280x800,390x844] [--allow-external]')
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--allow-external') { o.allowExternal = true; continue }
    const v = argv[++i]
    if (v === undefined) fail(`${a} needs a value`)
    if (a === '--out') o.out = v
    else if (a === '--sizes') {
      o.sizes = v.split(',').map(s => {
        const m = /^(\d{2,4})x(\d{2,4})$/.exec(s.trim())
        if (!m) fail(`--sizes wants WxH[,WxH...], got ${s}`)
        return [Number(m[1]), Number(m[2])]
      })
    } else fail(`unknown option ${a}`)
  }
  let st
  try { st = fs.statSync(o.file) } catch { fail(`${o.file}: no such file`) }
  if (!st.isFile()) fail(`${o.file}: not a file`)
  if (st.size > 20 * 1024 * 1024) fail(`${o.file} is ${Math.round(st.size / 1048576)} MB; keep a single-file artifact well below 20 MB`)
  return o
}

async function main () {
  const o = parse(process.argv.slice(2))
  const file = path.resolve(o.file)
  const url = pathToFileURL(file).href
  const name = path.basename(file).replace(/\.[^.]*$/, '')
  const problems = []
  fs.mkdirSync(o.out, { recursive: true })
  let browser
  try {
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-dev-shm-usage'] })
  } catch (err) { fail(`Chromium did not start: ${err.message.split('\n')[0]}`) }
  try {
    for (const [w, h] of o.sizes) {
      const page = await browser.newPage({ viewport: { width: w, height: h } })
      const seen = new Set()
      const note = msg => { if (!seen.has(msg)) { seen.add(msg); problems.push(`${w}x${h}: ${msg}`) } }
      page.on('pageerror', err => note(`JavaScript error: ${err.message.split('\n')[0]}`))
      // "Failed to load resource" repeats a blocked request reported by the route below.
      page.on('console', m => { if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) note(`console error: ${m.text().slice(0, 200)}`) })
      await page.route('**/*', route => {
        const u = route.request().url()
        if (u === url || u.startsWith('data:') || u.startsWith('blob:') || u === 'about:blank') return route.continue()
        if (/^https?:/.test(u) && o.allowExternal) return route.continue()
        note(u.startsWith('file:') ? `loads a separate local file: ${u} (inline it)` : `loads from the network: ${u} (inline it, or pass --allow-external)`)
        return route.abort()
      })
      await page.goto(url, { waitUntil: 'load', timeout: 30000 })
      await page.waitForTimeout(300) // first animations and timers
      const width = await page.evaluate(() => document.documentElement.scrollWidth)
      if (width > w + 1) note(`content is ${width}px wide, wider than the ${w}px screen (horizontal scrolling)`)
      const shot = path.join(o.out, `${name}-${w}x${h}.png`)
      await page.screenshot({ path: shot, fullPage: true })
      console.log(`screenshot ${shot}  title ${JSON.stringify(await page.title())}`)
      await page.close()
    }
  } finally { await browser.close() }
  for (const p of problems) console.log(`PROBLEM ${p}`)
  console.log(problems.length === 0 ? 'OK: no errors, nothing loaded from outside the file' : `${problems.length} problem(s)`)
  process.exit(problems.length === 0 ? 0 : 1)
}

main().catch(err => { console.error(`preview: ${err.message.split('\n')[0]}`); process.exit(2) })
