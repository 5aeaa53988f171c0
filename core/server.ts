import { readFileSync } from 'node:fs'
import { buildApp } from './app.js'
import { loadConfig, type AppConfig } from './config.js'
import manifest from '../fastify.config.js'

const DEFAULT_PUBLIC = 'http://computer-use-server:8081'

function fatal (message: string): never {
  process.stderr.write(`FATAL: ${message}\n`)
  process.exit(1)
}

export function serverVersion (): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url).pathname.replace('/dist/', '/'), 'utf8')) as { version: string }
  return pkg.version
}

let config: AppConfig
try {
  config = loadConfig(process.env)
} catch (err) {
  fatal(err instanceof Error ? err.message : String(err))
}

const app = await buildApp(config, manifest(config)).catch((err: unknown) => {
  fatal(`could not start: ${err instanceof Error ? err.message : String(err)}`)
})
app.log.info({ version: serverVersion(), mode: config.MCP_API_KEY === '' ? 'open' : 'protected', singleUserMode: config.singleUserMode }, 'Cubicle (computer-use-mcp) starting')
app.log.info(`[MCP] Sub-agent runtime: ${config.subagentCli}`)
if (config.PUBLIC_BASE_URL.trim() === '' || config.publicBaseUrl === DEFAULT_PUBLIC) {
  app.log.warn(`PUBLIC_BASE_URL is still the hardcoded default (${config.publicBaseUrl}): links handed to browsers will not resolve; set it to the URL people's browsers use to reach this server`)
}
if (config.MCP_API_KEY === '') {
  app.log.warn('MCP_API_KEY is empty: /mcp and every chat route (files, uploads, terminal, browser) are unauthenticated; set it for anything but local development')
}
if (config.hostDefaultedToLoopback) {
  app.log.warn('open mode: listening on 127.0.0.1 only (loopback), since MCP_API_KEY is empty and HOST is unset; to listen on all interfaces set HOST=0.0.0.0 (and MCP_API_KEY, so that the network does not get an open server)')
}

let closing = false
async function shutdown (signal: string): Promise<void> {
  if (closing) return
  closing = true
  app.log.info({ signal }, 'closing')
  const timer = setTimeout(() => { app.log.error('shutdown grace period expired'); process.exit(1) }, config.CLOSE_GRACE_MS)
  timer.unref()
  try { await app.close() } catch (err) { app.log.error({ err }, 'error while closing') }
  process.exit(0)
}
// Signals are handled here only: plugins release what they hold in their onClose hooks.
process.once('SIGINT', () => { void shutdown('SIGINT') })
process.once('SIGTERM', () => { void shutdown('SIGTERM') })

try {
  await app.listen({ host: config.host, port: config.PORT })
} catch (err) {
  fatal(`cannot listen on ${config.host}:${config.PORT}: ${err instanceof Error ? err.message : String(err)}`)
}
