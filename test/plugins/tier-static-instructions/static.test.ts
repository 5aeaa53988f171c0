import t from 'tap'
import { buildApp, entry } from '../../../core/app.js'
import { loadConfig } from '../../../core/config.js'
import mcpTransport from '../../../plugins/mcp-transport/index.js'
import tierStaticInstructions from '../../../plugins/tier-static-instructions/index.js'
import { TierStaticInstructionsOptions } from '../../../plugins/tier-static-instructions/schemas.js'
import { parseOptions } from '../../../core/config.js'

const config = loadConfig({ LOG_LEVEL: 'silent' })
const transport = entry(mcpTransport, { singleUserMode: 'lenient', publicBaseUrl: config.publicBaseUrl, allowedOrigins: [], maxBodyBytes: 1 << 20, keepAliveMs: 15000 })

t.test('the default text satisfies docs/contract.md#tier-3-static-instructions', async t => {
  const { text } = parseOptions(TierStaticInstructionsOptions, {}, 'x')
  t.match(text, 'README.md')
  t.match(text, '/home/assistant/README.md')
  t.match(text, 'resources/list')
  t.match(text, /view/)
  t.notMatch(text, 'prompts/get')
  t.ok(text.length < 600, 'short')
})

t.test('a configured text without README.md or with prompts/get stops the boot', async t => {
  for (const text of ['Just a sandbox. See resources/list.', 'Read README.md, resources/list, or prompts/get.']) {
    const err = await buildApp(config, [transport, entry(tierStaticInstructions, { text })], { logger: false }).catch((e: unknown) => e)
    t.match(err, { code: 'TIER_STATIC_BAD_TEXT' }, text)
  }
})
