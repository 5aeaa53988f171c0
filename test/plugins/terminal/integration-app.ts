/*
 * What the terminal integration tests (test/integration/terminal-*, test/serial/terminal-flood.test.ts) share: the real stack (transport,
 * capabilities, Docker driver, tools, the sub-agent service, preview, terminal) listening on a port chosen up front, so
 * PUBLIC_BASE_URL is the address a browser really uses (its Origin is then allowed), and a ttyd
 * client over a real WebSocket.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { StringDecoder } from 'node:string_decoder'
import WebSocket from 'ws'
import type { Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../../core/app.js'
import { entries } from '../../../fastify.config.js'
import { testConfig, TEST_API_KEY } from '../../helper.js'
import { removeByPrefix, TEST_IMAGE } from '../../integration/docker.js'
import { closeAppStep, runSteps } from '../../fixtures/bounded.js'

export const KEY = TEST_API_KEY
const TAIL_CHARS = 256 * 1024
const OVERLAP = 4096

async function freePort (): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

export interface TerminalStack { app: FastifyInstance, url: string, prefix: string, dataDir: string, token: (chatId: string, scope?: 'f' | 'c') => string }

/** The stack in protected mode; on teardown the app closes and the prefix's Docker objects and data go. */
export async function terminalStack (t: Test, env: Record<string, string> = {}): Promise<TerminalStack> {
  const prefix = `tt-${randomBytes(4).toString('hex')}`
  const dataDir = await mkdtemp(join(tmpdir(), 'term-data-'))
  const built: { app?: FastifyInstance } = {}
  // One teardown, each step bounded and run even when one before it failed (test/fixtures/bounded.ts).
  t.teardown(async () => {
    await runSteps([
      ...(built.app === undefined ? [] : [closeAppStep(built.app)]),
      { name: `removing the Docker objects of ${prefix}`, ms: 120_000, run: async () => await removeByPrefix(prefix) },
      { name: `removing ${dataDir}`, ms: 30_000, run: async () => { await rm(dataDir, { recursive: true, force: true }) } }
    ])
  })
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const config = testConfig({ SANDBOX_PREFIX: prefix, DATA_DIR: dataDir, DOCKER_IMAGE: TEST_IMAGE, MCP_API_KEY: KEY, PUBLIC_BASE_URL: url, ...env })
  const app = await buildApp(config, entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools', 'runtime-cli', 'sub-agent', 'files', 'cdp-bridge', 'preview', 'terminal']),
    { logger: process.env.TEST_LOG === '1' ? { level: 'debug' } : false })
  built.app = app
  await app.ready()
  await app.listen({ port, host: '127.0.0.1' })
  return { app, url, prefix, dataDir, token: (chatId, scope = 'c') => app.links.token(chatId, scope) as string }
}

/**
 * A ttyd-protocol client: what it typed goes in as `0` frames. It keeps only the last 256–512 K
 * characters of what was printed, and a waiter searches only new output (plus a 4 K overlap for a
 * match split across messages), so a flood costs the test neither memory nor quadratic time.
 * Positions are absolute character offsets (see `received`).
 */
export class TermClient {
  /** characters printed so far */
  received = 0
  /** output bytes received so far */
  bytes = 0
  titles: string[] = []
  readonly closed: Promise<{ code: number, reason: string }>
  private chunks: string[] = []
  private kept = 0
  private recent = ''
  private readonly decoder = new StringDecoder('utf8')
  private readonly waiters = new Set<(window: string, start: number) => void>()

  private constructor (readonly ws: WebSocket) {
    ws.on('message', (data: Buffer) => {
      if (data[0] === 0x31) { this.titles.push(data.subarray(1).toString()); return }
      if (data[0] !== 0x30) return
      const text = this.decoder.write(data.subarray(1))
      this.bytes += data.length - 1
      const window = this.recent + text
      const start = this.received + text.length - window.length
      this.received += text.length
      this.chunks.push(text)
      this.kept += text.length
      if (this.kept > 2 * TAIL_CHARS) { this.chunks = [this.chunks.join('').slice(-TAIL_CHARS)]; this.kept = TAIL_CHARS }
      this.recent = window.slice(-OVERLAP)
      for (const w of this.waiters) w(window, start)
    })
    this.closed = new Promise(resolve => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })))
  }

  /** The last printed text (bounded). */
  get text (): string { return this.chunks.join('') }

  /** Printed text from absolute offset `from` on, as far as it is still kept. */
  since (from: number): string { const tail = this.text; return tail.slice(Math.max(0, from - (this.received - tail.length))) }

  /** Opens and sends the first (size) message; rejects with the HTTP status of a refused handshake. */
  static async open (t: Test, url: string, chatId: string, token: string, size = { columns: 100, rows: 30 }, origin?: string): Promise<TermClient> {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/terminal/${chatId}/ws?t=${token}`, ['tty'], origin === undefined ? {} : { origin })
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('unexpected-response', (_req, res) => { ws.terminate(); reject(Object.assign(new Error(`handshake refused: ${res.statusCode}`), { status: res.statusCode })) })
      ws.once('error', reject)
    })
    t.teardown(() => { ws.terminate() })
    const client = new TermClient(ws)
    ws.send(JSON.stringify({ AuthToken: '', ...size }))
    return client
  }

  type (text: string): void { this.ws.send(Buffer.from(`0${text}`, 'utf8')) }
  resize (columns: number, rows: number): void { this.ws.send(`1${JSON.stringify({ columns, rows })}`) }

  /** Resolves with the first match of `pattern` in output printed after absolute offset `from` (see `received`). */
  async waitFor (pattern: RegExp, timeoutMs = 20000, from = 0): Promise<RegExpExecArray> {
    const now = pattern.exec(this.since(from))
    if (now !== null) return now
    return await new Promise((resolve, reject) => {
      const check = (window: string, start: number): void => {
        const m = pattern.exec(window.slice(Math.max(0, from - start)))
        if (m !== null) { done(); resolve(m) }
      }
      const timer = setTimeout(() => { done(); reject(new Error(`timed out waiting for ${String(pattern)}; output tail: ${JSON.stringify(this.recent.slice(-400))}`)) }, timeoutMs)
      const done = (): void => { clearTimeout(timer); this.waiters.delete(check) }
      this.waiters.add(check)
    })
  }

  async close (): Promise<void> {
    this.ws.close()
    await this.closed
  }
}
