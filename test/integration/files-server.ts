/*
 * A capabilities + files server in its own process, so a test can measure the server's RSS without its own
 * client buffers in the number. Env: DATA_DIR, MCP_API_KEY, FILES_OPTIONS (JSON of extra files options).
 * Prints one line `{"url":"http://127.0.0.1:<port>"}` on stdout once it listens; exits on SIGTERM.
 */
import { buildApp, entry } from '../../core/app.js'
import { loadConfig } from '../../core/config.js'
import capabilities from '../../plugins/capabilities/index.js'
import files from '../../plugins/files/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'

const config = loadConfig({ DATA_DIR: process.env.DATA_DIR, MCP_API_KEY: process.env.MCP_API_KEY, LOG_LEVEL: 'warn', PUBLIC_BASE_URL: 'http://cubicle.test' })
const extra = JSON.parse(process.env.FILES_OPTIONS ?? '{}') as Record<string, number>
const app = await buildApp(config, [
  entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
  entry(chatStorage, { dataDir: config.DATA_DIR }),
  entry(files, { ...extra })
], { logger: false })
const url = await app.listen({ port: 0, host: '127.0.0.1' })
process.stdout.write(`${JSON.stringify({ url })}\n`)
process.once('SIGTERM', () => { void app.close().then(() => process.exit(0)) })
