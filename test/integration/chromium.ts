import { existsSync, readdirSync, readlinkSync } from 'node:fs'
import type { Test } from 'tap'
import type { Browser, BrowserContext, Frame, Page, Request, Response } from 'playwright-core'
import { chromium } from 'playwright-core'
import { runSteps } from '../fixtures/bounded.js'
import { refuseInUnitTier } from '../fixtures/tier.js'

refuseInUnitTier('test/integration/chromium.ts (Chromium)')

export const CHROMIUM_PATH = '/usr/bin/chromium'
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync']

/** tap options: skip loudly without Debian's Chromium, unless REQUIRE_DOCKER=1 (CI), where its absence fails. */
export function chromiumOrSkip (): { skip: string | false } {
  if (existsSync(CHROMIUM_PATH)) return { skip: false }
  if (process.env.REQUIRE_DOCKER === '1') throw new Error(`REQUIRE_DOCKER=1 but ${CHROMIUM_PATH} is missing (apt-get install chromium)`)
  return { skip: `SKIPPED: ${CHROMIUM_PATH} is missing (apt-get install chromium) — browser tests did not run` }
}

/** A launched browser's process, and the sockets of its stdout and stderr (`socket:[inode]`). */
interface BrowserProcess { pid: number, stdio: string[] }
const processes = new WeakMap<Browser, BrowserProcess>()

/** Launches Chromium (CHROMIUM_ARGS and `args`); with `t`, closes it on teardown within a bound (closeChromium). */
export async function launchChromium (t?: Test, args: string[] = []): Promise<Browser> {
  const browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: [...CHROMIUM_ARGS, ...args] })
  const found = await processOf(browser)
  if (found !== undefined) processes.set(browser, found)
  if (t !== undefined) t.teardown(async () => { await closeChromium(browser) })
  return browser
}

async function processOf (browser: Browser): Promise<BrowserProcess | undefined> {
  try {
    const cdp = await browser.newBrowserCDPSession()
    const { processInfo } = await cdp.send('SystemInfo.getProcessInfo')
    await cdp.detach()
    const pid = processInfo.find(p => p.type === 'browser')?.id
    if (pid === undefined) return undefined
    const stdio: string[] = []
    for (const fd of [1, 2]) {
      try { stdio.push(readlinkSync(`/proc/${pid}/fd/${fd}`)) } catch {}
    }
    return { pid, stdio: stdio.filter(link => link.startsWith('socket:') || link.startsWith('pipe:')) }
  } catch {
    return undefined
  }
}

/**
 * SIGKILL to the browser's process group and to every other process holding its stdout or stderr:
 * Chromium's crash handlers (chrome_crashpad_handler) run in sessions of their own, out of the group
 * Playwright kills, and Playwright's close waits until the browser's stdio is closed by all of them.
 */
function killChromium ({ pid, stdio }: BrowserProcess): void {
  try { process.kill(-pid, 'SIGKILL') } catch {}
  if (stdio.length === 0) return
  let names: string[]
  try { names = readdirSync('/proc') } catch { return }
  for (const name of names) {
    const other = Number(name)
    if (!Number.isInteger(other) || other === process.pid) continue
    try {
      if ([1, 2].some(fd => stdio.includes(readlinkSync(`/proc/${other}/fd/${fd}`)))) process.kill(other, 'SIGKILL')
    } catch {}
  }
}

const CLOSE_MS = 20_000

/**
 * Closes `browser` within CLOSE_MS; past it (or when close fails), kills its processes (killChromium) and
 * says so on stderr. Never throws: a teardown that throws skips the ones registered before it, such as the
 * server's close, and a server left listening keeps the test process alive.
 */
export async function closeChromium (browser: Browser): Promise<void> {
  const proc = processes.get(browser)
  const kill = (): void => { if (proc !== undefined) killChromium(proc) }
  try {
    await runSteps([{ name: `closing Chromium (pid ${proc?.pid ?? 'unknown'})`, ms: CLOSE_MS, run: async () => { await browser.close() }, force: kill }])
  } catch (err) {
    process.stderr.write(`teardown: closing Chromium failed (${(err as Error).message.split('\n')[0] ?? ''}); killing its processes\n`)
    kill()
  }
}

/** Closes `context` within CLOSE_MS (a context of a browser that stopped answering never closes); never throws. */
export async function closeContext (context: BrowserContext): Promise<void> {
  try {
    await runSteps([{ name: 'closing a browser context', ms: CLOSE_MS, run: async () => { await context.close() } }])
  } catch (err) {
    process.stderr.write(`teardown: closing a browser context failed (${(err as Error).message.split('\n')[0] ?? ''})\n`)
  }
}

/** Adds the page's failed requests and 5xx answers to `log` (beside its console errors, if the test records them). */
export function logRequestTrouble (page: Page, log: string[]): void {
  page.on('requestfailed', req => { log.push(`request failed: ${req.method()} ${req.url()} ${req.failure()?.errorText ?? ''}`) })
  page.on('response', res => { if (res.status() >= 500) log.push(`HTTP ${res.status()}: ${res.url()}`) })
}

/**
 * `wait`, and when it fails (a timeout), an error that starts with the last lines of `log`: a timeout
 * alone says nothing about why the page did not get there.
 */
export async function orPageLog<T> (log: string[], wait: Promise<T>): Promise<T> {
  try {
    return await wait
  } catch (err) {
    throw new Error(`page log: [${log.slice(-6).join(' | ')}] ${(err as Error).message.split('\n')[0] ?? ''}`)
  }
}

/** The frame of `page`'s iframe `selector` (an embedded page), once the element is there. */
export async function embeddedFrame (page: Page, selector = '#embed'): Promise<Frame> {
  const frame = await (await page.waitForSelector(selector)).contentFrame()
  if (frame === null) throw new Error(`${selector}: the embedded frame did not load`)
  return frame
}

/** Whether `req` is one whose loss to ERR_NETWORK_CHANGED may leave a page that never gets ready. */
function lostToNetworkChange (req: Request): boolean {
  // Any request counts: a lost fetch may leave a page waiting for its next poll longer than the test does
  // (a full run saw the egress log's rows never come), and module scripts a page imports (the preview's
  // render/*.js, lost in a full run) did not always come as resource type `script`. Opening again costs
  // only time.
  return (req.failure()?.errorText ?? '').includes('ERR_NETWORK_CHANGED')
}

/** How many times a page or flow is tried while it loses requests to network changes. */
const ATTEMPTS = 5

/**
 * The pause before try `attempt` (from 2): 0.5, 1, 2, 4 s. Docker changes the network in bursts (a test that
 * removes its containers: twenty changes in two seconds), and a page opened again at once lost its scripts to
 * the same burst three times in a row (a run beside a bench).
 */
async function settle (attempt: number): Promise<void> {
  if (attempt > 1) await new Promise(resolve => setTimeout(resolve, Math.min(4000, 500 * 2 ** (attempt - 2))))
}

/**
 * Opens `url` and waits for `ready`. Chromium fails requests in flight with ERR_NETWORK_CHANGED when the
 * host's network interfaces change, which Docker does whenever a test beside this one creates or removes a
 * container or network; a page that lost its document, a script, a stylesheet or a data fetch that way may never
 * get ready, so it is opened again after a pause (at most `attempts` times). Every other failure is the test's.
 */
export async function gotoReady (page: Page, url: string, ready: () => Promise<unknown>, attempts = ATTEMPTS): Promise<Response | null> {
  const lostUrls: string[] = []
  for (let attempt = 1; ; attempt++) {
    await settle(attempt)
    let lost = false
    let onLost: () => void = () => {}
    const lostOne = new Promise<'lost'>(resolve => { onLost = () => { resolve('lost') } })
    const watch = (req: Request): void => {
      if (!lostToNetworkChange(req)) return
      lost = true
      lostUrls.push(req.url())
      onLost()
    }
    page.on('requestfailed', watch)
    try {
      const response = await page.goto(url).catch((err: Error) => {
        // The document itself lost that way: goto's own error says so, whether or not the event came first.
        if (err.message.includes('net::ERR_NETWORK_CHANGED')) { lost = true; lostUrls.push(url) }
        throw err
      })
      if (await Promise.race([ready().then(() => 'ready' as const), lostOne]) === 'ready') return response
      if (attempt >= attempts) throw new Error(`${url}: the page lost requests to ERR_NETWORK_CHANGED ${attempts} times (${lostUrls.slice(-4).join(', ')})`)
    } catch (err) {
      if (!lost || attempt >= attempts) throw err
    } finally {
      page.off('requestfailed', watch)
    }
    // On stderr, which a full run's log keeps: how often this happens is what tells a flake from a cause.
    process.stderr.write(`gotoReady: ${url} lost ${lostUrls.at(-1) ?? 'a request'} to ERR_NETWORK_CHANGED; opening it again (try ${attempt + 1} of ${attempts})\n`)
  }
}

/**
 * Runs `flow` on a new page of a new context of `browser` (closed after), and runs it again in another new
 * context when a request of that context was lost to ERR_NETWORK_CHANGED (see gotoReady) and the flow failed:
 * for a sequence of form posts (a sign-in), which reopening one page cannot replay, and whose cookies a second
 * attempt must not inherit. At most `attempts` times; only for a flow that may run twice.
 */
export async function inNewContext<T> (browser: Browser, flow: (page: Page, context: BrowserContext) => Promise<T>, attempts = ATTEMPTS): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    await settle(attempt)
    const context = await browser.newContext()
    let lost = false
    context.on('requestfailed', req => { if (lostToNetworkChange(req)) lost = true })
    try {
      return await flow(await context.newPage(), context)
    } catch (err) {
      if (!lost || attempt >= attempts) throw err
      process.stderr.write(`inNewContext: a request was lost to ERR_NETWORK_CHANGED and the flow failed (${(err as Error).message.split('\n')[0] ?? ''}); running it again (try ${attempt + 1} of ${attempts})\n`)
    } finally {
      await closeContext(context)
    }
  }
}
