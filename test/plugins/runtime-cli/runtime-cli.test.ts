import t from 'tap'
import { resolveModel, type ModelSettings } from '../../../plugins/runtime-cli/model.js'
import { build, TEST_API_KEY } from '../../helper.js'
import { entries } from '../../../fastify.config.js'

const none: ModelSettings = {
  SUB_AGENT_DEFAULT_MODEL: '',
  CODEX_SUB_AGENT_DEFAULT_MODEL: '',
  CODEX_MODEL: '',
  OPENCODE_SUB_AGENT_DEFAULT_MODEL: '',
  OPENCODE_MODEL: '',
  ANTHROPIC_DEFAULT_SONNET_MODEL: '',
  ANTHROPIC_DEFAULT_OPUS_MODEL: '',
  ANTHROPIC_DEFAULT_HAIKU_MODEL: ''
}

t.test('model resolution follows the per-CLI chains of docs/contract.md#model-resolution', async t => {
  t.match(resolveModel('claude', '', none), { model: 'claude-sonnet-4-6', display: 'sonnet' })
  t.match(resolveModel('claude', ' OPUS ', none), { model: 'claude-opus-4-6', display: 'opus' })
  t.match(resolveModel('claude', 'haiku', { ...none, ANTHROPIC_DEFAULT_HAIKU_MODEL: 'my-haiku' }), { model: 'my-haiku' })
  t.match(resolveModel('claude', 'claude-x', none), { model: 'claude-x', display: 'claude-x' })
  t.match(resolveModel('codex', '', none), { model: 'gpt-5-codex' })
  t.match(resolveModel('codex', '', { ...none, CODEX_MODEL: 'o4', SUB_AGENT_DEFAULT_MODEL: 'x' }), { model: 'o4' })
  t.match(resolveModel('codex', '', { ...none, SUB_AGENT_DEFAULT_MODEL: 'gpt-x' }), { model: 'gpt-x' })
  const alias = resolveModel('codex', 'sonnet', none)
  t.equal(alias.ok, false)
  t.match(alias, { error: /Claude-only.*CODEX_SUB_AGENT_DEFAULT_MODEL/ })
  t.match(resolveModel('opencode', '', none), { model: 'anthropic/claude-sonnet-4-6' })
  t.match(resolveModel('opencode', 'haiku', none), { model: 'anthropic/claude-haiku-4-5' })
  t.match(resolveModel('opencode', '', { ...none, OPENCODE_MODEL: 'openrouter/x' }), { model: 'openrouter/x' })
})

for (const [cli, model] of [['claude', 'claude-sonnet-4-6'], ['codex', 'gpt-5-codex'], ['opencode', 'anthropic/claude-sonnet-4-6']] as const) {
  t.test(`GET /api/runtime/cli reports ${cli} with its default model, without auth`, async t => {
    const app = await build(t, { SUBAGENT_CLI: cli, MCP_API_KEY: TEST_API_KEY }, config => entries(config, ['runtime-cli']))
    const res = await app.inject('/api/runtime/cli')
    t.equal(res.statusCode, 200)
    t.same(res.json(), { cli, default_model: model, supports_cost: cli === 'claude' })
    t.equal(res.headers['cache-control'], 'no-store')
    for (const method of ['POST', 'PUT', 'DELETE'] as const) t.equal((await app.inject({ method, url: '/api/runtime/cli' })).statusCode, 405)
  })
}
