import { existsSync } from 'node:fs'
import type { Browser } from 'playwright-core'
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
