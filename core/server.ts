import { loadConfig, type AppConfig } from './config.js'

const DEFAULT_PUBLIC = 'http://computer-use-server:8081'

function fatal (message: string): never {
  process.stderr.write(`FATAL: ${message}\n`)
  process.exit(1)
}

let config: AppConfig
try {
  config = loadConfig(process.env)
} catch (err) {
  fatal(err instanceof Error ? err.message : String(err))
}

// The app and its plugins are loaded once the settings are known to be valid: a bad setting stops the
// boot with its FATAL line before the whole module graph loads (≈ 0.3 s of CPU instead of ≈ 1.7 s).
const [{ default: closeWithGrace }, { buildApp }, { SERVER_VERSION }, { default: manifest }] = await Promise.all([
  import('close-with-grace'), import('./app.js'), import('./version.js'), import('../fastify.config.js')
])
const app = await buildApp(config, manifest(config)).catch((err: unknown) => {
  fatal(`could not start: ${err instanceof Error ? err.message : String(err)}`)
})
app.log.info({ version: SERVER_VERSION, mode: config.protectedMode ? 'protected' : 'open', singleUserMode: config.singleUserMode }, 'Cubicle (computer-use-mcp) starting')
app.log.info(`[MCP] Sub-agent runtime: ${config.subagentCli}`)
if (config.PUBLIC_BASE_URL.trim() === '' || config.publicBaseUrl === DEFAULT_PUBLIC) {
  app.log.warn(`PUBLIC_BASE_URL is still the hardcoded default (${config.publicBaseUrl}): links handed to browsers will not resolve; set it to the URL people's browsers use to reach this server`)
}
if (!config.protectedMode) {
  app.log.warn('MCP_API_KEY is empty: /mcp and every chat route (files, uploads, terminal, browser) are unauthenticated; set it for anything but local development')
}
if (config.hostDefaultedToLoopback) {
  app.log.warn('open mode: listening on 127.0.0.1 only (loopback), since MCP_API_KEY is empty and HOST is unset; to listen on all interfaces set HOST=0.0.0.0 (and MCP_API_KEY, so that the network does not get an open server)')
}

// One shutdown path (close-with-grace): SIGTERM/SIGINT, or a fatal error. app.close() stops accepting
// requests (503), lets running tool calls finish or stops them with a clear answer (mcp-transport's
// preClose), ends streams, then runs the plugins' onClose hooks; sandboxes keep running and are
// re-adopted at the next boot. Past CLOSE_GRACE_MS the process exits anyway, with code 1.
closeWithGrace({
  delay: config.CLOSE_GRACE_MS,
  logger: { error: (message: unknown) => { app.log.error(String(message)) } },
  onTimeout: delay => { app.log.error({ delay }, 'shutdown grace period expired; exiting') }
}, async ({ signal, err }) => {
  if (err !== undefined) app.log.error({ err }, 'closing after a fatal error')
  else app.log.info({ signal }, 'closing: running tool calls finish or are stopped; sandboxes keep running')
  await app.close()
  app.log.info('closed')
})

try {
  await app.listen({ host: config.host, port: config.PORT })
} catch (err) {
  fatal(`cannot listen on ${config.host}:${config.PORT}: ${err instanceof Error ? err.message : String(err)}`)
}
