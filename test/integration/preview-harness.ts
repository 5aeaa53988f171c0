/*
 * A real server (capabilities, files, preview) over a temp data dir with the given outputs, and a Chromium
 * page, for the preview's browser tests.
 */
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import type { BrowserContext, Page } from 'playwright-core'
import type { Test } from 'tap'
import { entry } from '../../core/app.js'
import { chatPaths } from '../../core/chat-paths.js'
import capabilities from '../../plugins/capabilities/index.js'
import files from '../../plugins/files/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'
import preview from '../../plugins/preview/index.js'
import { listen, TEST_API_KEY } from '../helper.js'
import { launchChromium, logRequestTrouble } from './chromium.js'
export { gotoReady, orPageLog } from './chromium.js'

export const KEY = TEST_API_KEY
export const CHAT = 'preview-e2e'
const ARTIFACTS = new URL('../../test-artifacts/preview/', import.meta.url)

export interface PreviewHarness {
  app: FastifyInstance
  url: string
  outputs: string
  context: BrowserContext
  page: Page
  /** The chat's files token (what a shared link carries). */
  token: string
  /** Console errors and uncaught page errors, in order. */
  errors: string[]
}

/** Writes `fixtures` below the chat's outputs with ascending mtimes: the last one is listed first. */
export function writeOutputs (outputs: string, fixtures: Record<string, string | Buffer>): void {
  let when = Math.floor(Date.now() / 1000) - 3600
  for (const [rel, content] of Object.entries(fixtures)) {
    const abs = join(outputs, rel)
    mkdirSync(dirname(abs), { recursive: true })
    writeFileSync(abs, content)
    utimesSync(abs, when, when)
    when += 10
  }
}

export async function setup (t: Test, fixtures: Record<string, string | Buffer>, parseTimeoutMs?: number): Promise<PreviewHarness> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-preview-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const { app, url } = await listen(t, { DATA_DIR: dataDir, MCP_API_KEY: KEY }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
    entry(chatStorage, { dataDir: config.DATA_DIR }),
    entry(files, { archiveMaxBytes: config.ARCHIVE_MAX_BYTES, frameAncestors: config.FRAME_ANCESTORS }),
    entry(preview, { frameAncestors: config.FRAME_ANCESTORS, ...(parseTimeoutMs === undefined ? {} : { parseTimeoutMs }) })
  ])
  const outputs = chatPaths(dataDir, CHAT).outputs
  writeOutputs(outputs, fixtures)
  const browser = await launchChromium(t)
  const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 800 } })
  const page = await context.newPage()
  const errors: string[] = []
  page.on('console', msg => { if (msg.type() === 'error') errors.push(msg.text()) })
  page.on('pageerror', err => { errors.push(String(err)) })
  logRequestTrouble(page, errors)
  return { app, url, outputs, context, page, token: app.links.token(CHAT, 'f') as string, errors }
}

/** Clicks a file in the list and waits until its preview (or its notice) is in place. */
export async function open (page: Page, path: string, timeout = 15000): Promise<void> {
  await page.click(`#file-list li[data-path="${path}"] button`)
  await page.waitForSelector(`#preview[data-rendered="${path}"]`, { timeout })
}

export async function shot (page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true })
  await page.screenshot({ path: new URL(`${name}.png`, ARTIFACTS).pathname })
}
