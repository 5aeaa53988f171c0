import t from 'tap'
import Fastify from 'fastify'
import type { FastifyPluginAsync } from 'fastify'
import capabilities from '../../plugins/capabilities/index.js'
import mcpTransport from '../../plugins/mcp-transport/index.js'
import oauth from '../../plugins/oauth/index.js'
import sandbox from '../../plugins/sandbox/index.js'

// services a plugin takes from core (auth, readiness) are declared in its fastify-plugin
// metadata, so a registration without them stops the boot with a clear error instead of a TypeError later.
const CASES: Array<[string, FastifyPluginAsync<any>, string]> = [
  ['capabilities', capabilities, 'auth'],
  ['mcp-transport', mcpTransport, 'auth'],
  ['oauth', oauth, 'auth'],
  ['sandbox', sandbox, 'readiness']
]

for (const [name, plugin, decorator] of CASES) {
  t.test(`${name} declares that it needs fastify.${decorator}`, async t => {
    const app = Fastify({ logger: false })
    t.teardown(async () => { await app.close() })
    const err = await app.register(plugin, {}).ready().then(() => undefined, (e: unknown) => e as { code?: string, message?: string })
    t.equal(err?.code, 'FST_ERR_PLUGIN_NOT_PRESENT_IN_INSTANCE', `${name} without ${decorator}`)
    t.match(err?.message, new RegExp(decorator))
  })
}
