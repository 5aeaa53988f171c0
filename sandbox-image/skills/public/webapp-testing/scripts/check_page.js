#!/usr/bin/env node
// Checks a web page in headless Chromium, step by step, and says PASS or FAIL.
//
//   node check_page.js URL [STEP ...] [--screenshot FILE] [--allow-console-errors] [--timeout MS]
//
// Steps run in the order given:
//   --expect-text TEXT        the page's visible text contains TEXT (waits up to the timeout)
//   --expect-no-text TEXT     the visible text does not contain TEXT
//   --expect-selector CSS     an element matching CSS is visible
//   --expect-title TEXT       the document title contains TEXT
//   --click CSS               click the first element matching CSS
//   --fill CSS=VALUE          type VALUE into the field matching CSS
//   --press KEY               press a key (Enter, Tab, ...) in the focused element
//   --wait MS                 wait (at most 10000)
//
// Besides the steps, the run fails on an uncaught page error, a console error (unless
// --allow-console-errors) or a failed request of the page's own origin (4xx/5xx or no answer).
// Exit: 0 PASS, 1 FAIL, 2 bad arguments or the browser could not start.
'use strict'
const { chromium } = require('/opt/cubicle-browser/node_modules/playwright-core')

const VALUED = new Set(['--expect-text', '--expect-no-text', '--expect-selector', '--expect-title', '--click', '--fill', '--press', '--wait'])

function usage (msg) {
  console.error(`check_page: ${msg}\nusage: node check_page.js URL [--expect-text T] [--click CSS] [--fill CSS=V] ... [--screenshot F]`)
  process.exit(2)
}

function parse (argv) {
  const o = { url: argv[0], steps: [], screenshot: null, allowConsole: false, timeout: 10000 }
  if (!o.url || o.url.startsWith('--')) usage('the URL comes first')
  try { new URL(o.url) } catch { usage(`not a URL: ${o.url}`) } // eslint-disable-line no-new
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--allow-console-errors') { o.allowConsole = true; continue }
    if (i + 1 >= argv.length) usage(`${a} needs a value`)
    const v = argv[++i]
    if (a === '--screenshot') o.screenshot = v
    else if (a === '--timeout') o.timeout = Math.min(Math.max(Number(v) || 0, 500), 120000)
    else if (VALUED.has(a)) {
      if (a === '--fill' && !v.includes('=')) usage('--fill needs CSS=VALUE')
      o.steps.push([a.slice(2), v])
    } else usage(`unknown option ${a}`)
  }
  return o
}

async function step (page, [kind, value], timeout) {
  const text = async () => page.evaluate(() => document.body ? document.body.innerText : '')
  switch (kind) {
    case 'expect-text':
      await page.waitForFunction(t => document.body && document.body.innerText.includes(t), value, { timeout })
        .catch(async () => { throw new Error(`text not found: ${JSON.stringify(value)} (page text starts: ${JSON.stringify((await text()).slice(0, 200))})`) })
      return `text ${JSON.stringify(value)} present`
    case 'expect-no-text':
      if ((await text()).includes(value)) throw new Error(`text present but should not be: ${JSON.stringify(value)}`)
      return `text ${JSON.stringify(value)} absent`
    case 'expect-selector':
      await page.locator(value).first().waitFor({ state: 'visible', timeout })
        .catch(() => { throw new Error(`no visible element matches ${value}`) })
      return `element ${value} visible`
    case 'expect-title': {
      const title = await page.title()
      if (!title.includes(value)) throw new Error(`title is ${JSON.stringify(title)}, expected it to contain ${JSON.stringify(value)}`)
      return `title contains ${JSON.stringify(value)}`
    }
    case 'click':
      await page.locator(value).first().click({ timeout })
      return `clicked ${value}`
    case 'fill': {
      const at = value.indexOf('=')
      await page.locator(value.slice(0, at)).first().fill(value.slice(at + 1), { timeout })
      return `filled ${value.slice(0, at)}`
    }
    case 'press':
      await page.keyboard.press(value)
      return `pressed ${value}`
    case 'wait':
      await page.waitForTimeout(Math.min(Number(value) || 0, 10000))
      return `waited ${value} ms`
  }
}

async function main () {
  const o = parse(process.argv.slice(2))
  const origin = new URL(o.url).origin
  // Requests of the page's own origin count; the browser's automatic /favicon.ico does not.
  const own = u => u.startsWith(origin) && new URL(u).pathname !== '/favicon.ico'
  const problems = []
  let browser
  try {
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-dev-shm-usage'] })
  } catch (err) {
    console.error(`check_page: Chromium did not start: ${err.message.split('\n')[0]}`)
    process.exit(2)
  }
  let failed = false
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
    page.on('pageerror', err => problems.push(`page error: ${err.message.split('\n')[0]}`))
    // "Failed to load resource" console lines repeat what the response check below reports.
    page.on('console', msg => {
      if (msg.type() === 'error' && !o.allowConsole && !msg.text().startsWith('Failed to load resource')) problems.push(`console error: ${msg.text().slice(0, 300)}`)
    })
    page.on('requestfailed', req => { if (own(req.url())) problems.push(`request failed: ${req.url()} (${req.failure()?.errorText ?? 'error'})`) })
    page.on('response', res => { if (res.status() >= 400 && own(res.url())) problems.push(`HTTP ${res.status()}: ${res.url()}`) })
    const res = await page.goto(o.url, { waitUntil: 'load', timeout: Math.max(o.timeout, 30000) })
    console.log(`opened ${o.url} -> HTTP ${res ? res.status() : '?'}, title ${JSON.stringify(await page.title())}`)
    for (const s of o.steps) {
      try { console.log(`ok   ${await step(page, s, o.timeout)}`) } catch (err) {
        console.log(`FAIL --${s[0]} ${s[1]}: ${err.message.split('\n')[0]}`)
        failed = true
        break
      }
    }
    await page.waitForTimeout(200) // late console errors of the last action
    if (o.screenshot) {
      await page.screenshot({ path: o.screenshot, fullPage: true })
      console.log(`screenshot: ${o.screenshot}`)
    }
  } catch (err) {
    console.log(`FAIL ${err.message.split('\n')[0]}`)
    failed = true
  } finally {
    await browser.close()
  }
  for (const p of problems) console.log(`FAIL ${p}`)
  const pass = !failed && problems.length === 0
  console.log(pass ? 'PASS' : 'FAIL')
  process.exit(pass ? 0 : 1)
}

main()
