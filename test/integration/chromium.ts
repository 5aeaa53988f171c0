import { existsSync } from 'node:fs'
import type { Browser, Page } from 'playwright-core'
import { chromium } from 'playwright-core'
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

export async function launchChromium (): Promise<Browser> {
  return await chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS })
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
