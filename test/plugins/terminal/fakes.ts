import { Duplex } from 'node:stream'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fp from 'fastify-plugin'
import type { Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { entry } from '../../../core/app.js'
import { chatPaths } from '../../../core/chat-paths.js'
import capabilities from '../../../plugins/capabilities/index.js'
import terminal from '../../../plugins/terminal/index.js'
import chatStorage from '../../../plugins/chat-storage/index.js'
import { createProbe } from '../../../core/sandbox-probe.js'
import { SUB_AGENT_SANDBOX_TIMEOUT } from '../../../plugins/sub-agent/errors.js'
import { createRunRegistry, createSubAgentService } from '../../../plugins/sub-agent/service.js'
import type { TerminalOptions } from '../../../plugins/terminal/schemas.js'
import type { SandboxService, SandboxState, SandboxStream, StopHook, StreamOptions } from '../../../plugins/sandbox/types.js'
import { listen, TEST_API_KEY } from '../../helper.js'

export const KEY = TEST_API_KEY

/** A TTY stream the test drives: `output()` is what the sandbox prints, `input` what the viewer typed. */
export interface FakeTty {
  argv: string[]
  opts: StreamOptions
  input: Buffer[]
  resizes: Array<[number, number]>
  /** bytes the stream produced so far (flood mode) */
  produced: () => number
  output: (data: string | Buffer) => void
  /** endless output while the reader keeps reading (backpressure tests) */
  flood: (chunk: Buffer) => void
  end: () => void
  closed: () => boolean
  paused: () => boolean
}

/** Answers a probe (non-TTY stream) by argv: the returned text is its stdout. */
export type ProbeAnswer = (argv: string[], opts: StreamOptions) => string | Buffer

/**
 * A SandboxService with a settable state per chat that records everything the terminal plugin
 * asks of it, and streams the test scripts. Registered as `sandbox-docker` so the plugin loads.
 */
export function fakeSandbox (answer: ProbeAnswer = () => '') {
  const states = new Map<string, SandboxState>()
  const metas = new Set<string>()
  const calls: string[] = []
  const ttys: FakeTty[] = []
  const probes: Array<{ argv: string[], opts: StreamOptions }> = []
  const stopHooks: StopHook[] = []
  let leases = 0
  const stateOf = (chatId: string): SandboxState => states.get(chatId) ?? 'absent'
  const notRunning = (): Error => Object.assign(new Error('the sandbox is not running'), { code: 'SANDBOX_NOT_RUNNING', statusCode: 409 })

  function probeStream (argv: string[], opts: StreamOptions): SandboxStream {
    probes.push({ argv, opts })
    const out = answer(argv, opts)
    let sent = false
    const socket = new Duplex({
      read () {
        if (sent) return
        sent = true
        this.push(Buffer.isBuffer(out) ? out : Buffer.from(out))
        this.push(null)
      },
      write (_chunk, _enc, cb) { cb() }
    })
    return { socket, demux: cb => { socket.on('data', cb) }, resize: async () => {}, exitCode: async () => 0, close: () => { socket.destroy() } }
  }

  function ttyStream (argv: string[], opts: StreamOptions): SandboxStream {
    let floodChunk: Buffer | null = null
    let produced = 0
    const tty: FakeTty = {
      argv,
      opts,
      input: [],
      resizes: [],
      produced: () => produced,
      output: data => { socket.push(Buffer.isBuffer(data) ? data : Buffer.from(data)) },
      flood: chunk => { floodChunk = chunk; pump() },
      end: () => { socket.push(null); socket.destroy() },
      closed: () => socket.destroyed,
      paused: () => socket.isPaused()
    }
    // Pushes until the stream's buffer is full; the stream calls read() again once it is consumed.
    const pump = (): void => {
      while (floodChunk !== null && !socket.destroyed) {
        produced += floodChunk.length
        if (!socket.push(floodChunk)) return
      }
    }
    const socket = new Duplex({
      read () { pump() },
      write (chunk: Buffer, _enc, cb) { tty.input.push(chunk); cb() }
    })
    ttys.push(tty)
    return {
      socket,
      demux: cb => { socket.on('data', cb) },
      resize: async (cols, rows) => { tty.resizes.push([cols, rows]) },
      exitCode: async () => null,
      close: () => { calls.push('stream close'); socket.destroy() }
    }
  }

  const sandbox: SandboxService = {
    async ensure (chatId) {
      calls.push(`ensure ${chatId}`)
      states.set(chatId, 'running')
      return { chatId, chatKey: 'k', sandboxId: 'c', name: 'n', createdAt: '' }
    },
    async status (chatId) {
      const state = stateOf(chatId)
      return { state, metaExists: metas.has(chatId), ...(state === 'absent' ? {} : { sandboxId: 'c' }) }
    },
    async exec () { throw new Error('the terminal must not use exec(): it counts as activity') },
    async runCommand () { throw new Error('not used') },
    async putFile () { throw new Error('not used') },
    lease (chatId, opts) {
      leases++
      calls.push(`lease ${chatId} ${opts?.kind ?? 'call'}`)
      return () => { leases--; calls.push(`release ${chatId}`) }
    },
    touch (chatId) { calls.push(`touch ${chatId}`) },
    async stop (chatId) { calls.push(`stop ${chatId}`) },
    async remove (chatId) { calls.push(`remove ${chatId}`) },
    onEnsure () {},
    onStop (hook) { stopHooks.push(hook) },
    async openStream (chatId, argv, opts = {}) {
      if (stateOf(chatId) !== 'running') throw notRunning()
      return opts.tty === true ? ttyStream(argv, opts) : probeStream(argv, opts)
    }
  }
  const plugin = fp(async (fastify: FastifyInstance) => { fastify.decorate('sandbox', sandbox) }, { name: 'sandbox' })
  return {
    sandbox,
    plugin,
    calls,
    ttys,
    probes,
    leases: () => leases,
    setState: (chatId: string, state: SandboxState) => { states.set(chatId, state) },
    setMeta: (chatId: string) => { metas.add(chatId) },
    fireStop: (chatId: string) => { for (const h of stopHooks) h(chatId, 'stopped') }
  }
}

export type FakeSandbox = ReturnType<typeof fakeSandbox>

/**
 * The sub-agent plugin's real `subAgent` service (sessions, processes, kill) over the fake sandbox,
 * registered as `sub-agent` without the tool and its dependencies.
 */
function subAgentPlugin (fake: FakeSandbox, cli: NonNullable<TerminalOptions['cli']>) {
  return fp(async (fastify: FastifyInstance) => {
    const service = createSubAgentService({ sandbox: fake.sandbox, probe: createProbe(fake.sandbox.openStream, 4, 'sub-agent', () => new SUB_AGENT_SANDBOX_TIMEOUT()), log: fastify.log },
      { cli, maxRunsPerChat: 1, processesCacheMs: 2000, probeTimeoutMs: 10000 }, createRunRegistry(1))
    fastify.decorate('subAgent', service)
  }, { name: 'sub-agent' })
}

/**
 * capabilities + the fake sandbox + the sub-agent service (unless `subAgent: false`) + terminal on a
 * listening loopback server (protected unless `open`), with ALLOWED_ORIGINS https://chat.example and
 * `env` on top of the test config.
 */
export async function terminalApp (t: Test, fake: FakeSandbox, opts: Partial<TerminalOptions> & { open?: boolean, subAgent?: boolean, env?: Record<string, string> } = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-terminal-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const { open, subAgent = true, env = {}, ...options } = opts
  const { app, url } = await listen(t, { DATA_DIR: dataDir, MCP_API_KEY: open === true ? '' : KEY, ALLOWED_ORIGINS: 'https://chat.example', ...env }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
    { register: async a => await a.register(fake.plugin) },
    ...(subAgent ? [{ register: async (a: FastifyInstance) => await a.register(subAgentPlugin(fake, options.cli ?? 'claude')) }] : []),
    entry(chatStorage, { dataDir }),
    entry(terminal, options)
  ])
  const writeMeta = (chatId: string, meta: Record<string, unknown>): void => {
    const path = chatPaths(dataDir, chatId).meta
    mkdirSync(join(path, '..'), { recursive: true })
    writeFileSync(path, JSON.stringify(meta))
    fake.setMeta(chatId)
  }
  return { app, url, dataDir, writeMeta, token: (chatId: string, scope: 'f' | 'c' = 'c') => app.links.token(chatId, scope) as string }
}
