import t from 'tap'
import { loadConfig } from '../../../core/config.js'
import { chatEnv, containerEnvList, RUN_ONLY, subAgentEnvFromConfig, toEnvList } from '../../../plugins/sandbox/env.js'

// Every variable of docs/contract.md#credential-allowlist set on the host, plus the server secrets.
const ALL: Record<string, string> = {
  ANTHROPIC_AUTH_TOKEN: 'a-tok',
  ANTHROPIC_BASE_URL: 'https://gw',
  ANTHROPIC_MODEL: 'm',
  ANTHROPIC_DEFAULT_SONNET_MODEL: 's',
  ANTHROPIC_DEFAULT_OPUS_MODEL: 'o',
  ANTHROPIC_DEFAULT_HAIKU_MODEL: 'h',
  CLAUDE_CODE_SUBAGENT_MODEL: 'c',
  CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS: '1',
  DISABLE_PROMPT_CACHING: '1',
  DISABLE_PROMPT_CACHING_SONNET: '1',
  DISABLE_PROMPT_CACHING_OPUS: '1',
  DISABLE_PROMPT_CACHING_HAIKU: '1',
  OPENAI_API_KEY: 'oa',
  OPENAI_BASE_URL: 'https://oa',
  CODEX_MODEL: 'cm',
  AZURE_OPENAI_API_KEY: 'az',
  AZURE_OPENAI_ENDPOINT: 'https://az',
  AZURE_OPENAI_API_VERSION: 'v',
  CODEX_CONFIG_EXTRA: 'x',
  OPENROUTER_API_KEY: 'or',
  ANTHROPIC_API_KEY: 'ak',
  OPENCODE_MODEL: 'om',
  OPENCODE_CONFIG_EXTRA: 'y',
  MCP_API_KEY: 'secret-1-0123456789abcdef0123456789abcdef',
  LINK_SIGNING_KEY: 'secret-2-0123456789abcdef0123456789abcdef',
  MCP_TOKENS_API_KEY: 'secret-3',
  MCP_TOKENS_URL: 'https://tokens'
}
const SECRETS = ['MCP_API_KEY', 'LINK_SIGNING_KEY', 'MCP_TOKENS_API_KEY']

t.test('claude row only (docs/contract.md#credential-allowlist)', async t => {
  const env = subAgentEnvFromConfig(loadConfig({ ...ALL, SUBAGENT_CLI: 'claude' }))
  t.same(Object.keys(env).sort(), ['ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_BASE_URL', 'ANTHROPIC_DEFAULT_HAIKU_MODEL', 'ANTHROPIC_DEFAULT_OPUS_MODEL',
    'ANTHROPIC_DEFAULT_SONNET_MODEL', 'ANTHROPIC_MODEL', 'CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS', 'CLAUDE_CODE_SUBAGENT_MODEL',
    'DISABLE_PROMPT_CACHING', 'DISABLE_PROMPT_CACHING_HAIKU', 'DISABLE_PROMPT_CACHING_OPUS', 'DISABLE_PROMPT_CACHING_SONNET'])
  for (const absent of ['OPENAI_API_KEY', 'OPENROUTER_API_KEY', 'OPENAI_BASE_URL', 'OPENCODE_CONFIG', 'OPENCODE_CONFIG_EXTRA', 'CODEX_CONFIG_EXTRA', ...SECRETS]) {
    t.notOk(absent in env, `no ${absent}`)
  }
})

t.test('claude: ANTHROPIC_BASE_URL defaults only when a token exists; empty counts as unset', async t => {
  t.equal(subAgentEnvFromConfig(loadConfig({ ANTHROPIC_AUTH_TOKEN: 't' })).ANTHROPIC_BASE_URL, 'https://api.anthropic.com')
  t.equal(subAgentEnvFromConfig(loadConfig({ ANTHROPIC_AUTH_TOKEN: 't', ANTHROPIC_BASE_URL: '' })).ANTHROPIC_BASE_URL, 'https://api.anthropic.com')
  t.same(subAgentEnvFromConfig(loadConfig({})), {}, 'nothing set, nothing passed')
  t.same(subAgentEnvFromConfig(loadConfig({ ANTHROPIC_BASE_URL: 'https://gw' })), { ANTHROPIC_BASE_URL: 'https://gw' })
})

t.test('codex row only', async t => {
  const env = subAgentEnvFromConfig(loadConfig({ ...ALL, SUBAGENT_CLI: 'codex' }))
  t.same(Object.keys(env).sort(), ['AZURE_OPENAI_API_KEY', 'AZURE_OPENAI_API_VERSION', 'AZURE_OPENAI_ENDPOINT', 'CODEX_CONFIG_EXTRA', 'CODEX_MODEL', 'OPENAI_API_KEY', 'OPENAI_BASE_URL'])
  for (const absent of ['ANTHROPIC_AUTH_TOKEN', 'OPENROUTER_API_KEY', 'OPENCODE_CONFIG', 'OPENCODE_CONFIG_EXTRA', ...SECRETS]) t.notOk(absent in env, `no ${absent}`)
})

t.test('opencode row only, plus OPENCODE_CONFIG', async t => {
  const env = subAgentEnvFromConfig(loadConfig({ ...ALL, SUBAGENT_CLI: 'OpenCode' }))
  t.same(env, { OPENROUTER_API_KEY: 'or', OPENAI_API_KEY: 'oa', ANTHROPIC_API_KEY: 'ak', OPENCODE_MODEL: 'om', OPENCODE_CONFIG_EXTRA: 'y', OPENCODE_CONFIG: '/tmp/opencode.json' })
  for (const absent of ['ANTHROPIC_AUTH_TOKEN', 'CODEX_CONFIG_EXTRA', ...SECRETS]) t.notOk(absent in env, `no ${absent}`)
})

t.test('vision settings only with VISION_API_KEY', async t => {
  t.notOk('VISION_MODEL' in subAgentEnvFromConfig(loadConfig({ VISION_API_URL: 'https://v' })))
  t.match(subAgentEnvFromConfig(loadConfig({ VISION_API_KEY: 'vk', VISION_API_URL: 'https://v' })), { VISION_API_KEY: 'vk', VISION_API_URL: 'https://v', VISION_MODEL: 'gpt-4o' })
})

t.test('per-chat env and the env list', async t => {
  t.same(chatEnv('c1', 'codex', undefined), { CHAT_ID: 'c1', SUBAGENT_CLI: 'codex' })
  t.same(chatEnv('c1', 'claude', { emailRejected: false, mcpServers: [], credentials: { gitlabToken: 'g' } }),
    { CHAT_ID: 'c1', SUBAGENT_CLI: 'claude', GITLAB_TOKEN: 'g', GITLAB_HOST: 'gitlab.com' })
  t.same(toEnvList({ A: '1', B: '', MCP_API_KEY: 'x', 'BAD-NAME': 'y' }, { A: '2', C: '3', LINK_SIGNING_KEY: 'z' }), ['A=2', 'C=3'])
  t.same(toEnvList({ A: '1' }, { A: '' }), [], 'a later empty value unsets')
})

t.test('a container\'s own environment never carries provider credentials, whatever a layer says', async t => {
  for (const cli of ['claude', 'codex', 'opencode']) {
    const run = subAgentEnvFromConfig(loadConfig({ ...ALL, SUBAGENT_CLI: cli, VISION_API_KEY: 'vk' }))
    t.ok(Object.keys(run).length > 0)
    t.same(containerEnvList(run, { CHAT_ID: 'c1', SUBAGENT_CLI: cli }), ['CHAT_ID=c1', `SUBAGENT_CLI=${cli}`], `${cli}: only the per-chat variables`)
  }
  for (const name of ['ANTHROPIC_AUTH_TOKEN', 'OPENAI_API_KEY', 'AZURE_OPENAI_API_KEY', 'OPENROUTER_API_KEY', 'ANTHROPIC_API_KEY', 'VISION_API_KEY', 'OPENCODE_CONFIG']) {
    t.ok(RUN_ONLY.has(name), `${name} is run-only`)
  }
  t.same(containerEnvList({ HTTP_PROXY: 'http://gw:3128', MCP_API_KEY: 'x' }), ['HTTP_PROXY=http://gw:3128'])
})
