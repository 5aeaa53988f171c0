import t from 'tap'
import { buildApp, entry } from '../../../core/app.js'
import fp from 'fastify-plugin'
import sandbox from '../../../plugins/sandbox/index.js'
import chatStorage from '../../../plugins/chat-storage/index.js'
import sandboxMemory from '../../../plugins/sandbox-memory/index.js'
import { createMemoryEngine } from '../../../plugins/sandbox-memory/memory-engine.js'
import { loadConfig } from '../../../core/config.js'
import { chatEnv, checkContributor, containerEnvList, contributedEnv, managedNames, toEnvList, withheldNames } from '../../../plugins/sandbox/env.js'
import { sandboxEnvList } from '../../../plugins/sandbox/sandbox-spec.js'
import { RUN_ONLY, subAgentEnvContributor, subAgentEnvFromConfig } from '../../../plugins/sub-agent/env.js'
import { PROXY_VARS, proxyEnvContributor } from '../../../plugins/egress/proxy-env.js'
import { tempDir } from '../../fixtures/temp-dir.js'

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
const MEMORY_IMAGE = 'cubicle-memory-test:latest'
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
  t.same(chatEnv('c1', undefined), { CHAT_ID: 'c1' })
  t.same(chatEnv('c1', { emailRejected: false, mcpServers: [], credentials: { gitlabToken: 'g' } }),
    { CHAT_ID: 'c1', GITLAB_TOKEN: 'g', GITLAB_HOST: 'gitlab.com' })
  t.same(toEnvList({ A: '1', B: '', MCP_API_KEY: 'x', 'BAD-NAME': 'y' }, { A: '2', C: '3', LINK_SIGNING_KEY: 'z' }), ['A=2', 'C=3'])
  t.same(toEnvList({ A: '1' }, { A: '' }), [], 'a later empty value unsets')
})

t.test('a container\'s own environment never carries provider credentials, whatever a layer says', async t => {
  for (const cli of ['claude', 'codex', 'opencode'] as const) {
    const run = subAgentEnvFromConfig(loadConfig({ ...ALL, SUBAGENT_CLI: cli, VISION_API_KEY: 'vk' }))
    t.ok(Object.keys(run).length > 0)
    const settings = { sandboxEnv: run, envContributors: [subAgentEnvContributor(cli)] }
    t.same(sandboxEnvList(settings, { CHAT_ID: 'c1', ...run }), ['CHAT_ID=c1', `SUBAGENT_CLI=${cli}`], `${cli}: only the per-chat variables and SUBAGENT_CLI`)
  }
  for (const name of ['ANTHROPIC_AUTH_TOKEN', 'OPENAI_API_KEY', 'AZURE_OPENAI_API_KEY', 'OPENROUTER_API_KEY', 'ANTHROPIC_API_KEY', 'VISION_API_KEY', 'OPENCODE_CONFIG']) {
    t.ok(RUN_ONLY.includes(name), `${name} is run-only`)
  }
  t.same(containerEnvList(new Set(), { HTTP_PROXY: 'http://gw:3128', MCP_API_KEY: 'x' }), ['HTTP_PROXY=http://gw:3128'])
})

t.test('environment contributors (docs/engine.md#environment): own names only, withheld names dropped, drift names', async t => {
  const egress = proxyEnvContributor({ network: () => ({ name: 'n', gateway: '172.30.0.1', subnet: null, bridge: 'br' }) }, 3128)
  const sub = subAgentEnvContributor('codex')
  const rogue = { names: ['A'], env: () => ({ A: '1', B: 'not managed: ignored' }) }
  t.same(contributedEnv([egress, sub, rogue]), {
    ...Object.fromEntries(PROXY_VARS.map(n => [n, n.toLowerCase() === 'no_proxy' ? 'localhost,127.0.0.1,::1' : n.toLowerCase() === 'all_proxy' ? 'socks5h://172.30.0.1:3128' : 'http://172.30.0.1:3128'])),
    SUBAGENT_CLI: 'codex',
    A: '1'
  })
  const offline = proxyEnvContributor({ network: () => null }, 3128)
  t.same(contributedEnv([offline]), {}, 'no network: no proxy variables')
  t.same(contributedEnv([{ names: ['A'], env: () => ({ A: '1' }) }, { names: ['A'], env: () => ({ A: '2' }) }]), { A: '2' }, 'the later contributor wins')
  t.ok(withheldNames([sub]).has('OPENAI_API_KEY'))
  t.same([...managedNames([sub])].slice(0, 2), ['CHAT_ID', 'SUBAGENT_CLI'])
  t.ok(managedNames([egress]).has('HTTP_PROXY'))
  t.ok(managedNames([sub]).has('ANTHROPIC_AUTH_TOKEN'), 'withheld names are compared too: a container that carried one is recreated')
  // A contributor that would hand out a server secret, CHAT_ID or a bad name is refused when it registers.
  for (const name of ['MCP_API_KEY', 'CHAT_ID', 'BAD-NAME', '']) {
    t.throws(() => { checkContributor({ names: [name], env: () => ({}) }) }, TypeError, `refuses ${JSON.stringify(name)}`)
  }
  t.throws(() => { checkContributor({ names: [], withheld: ['LINK_SIGNING_KEY'], env: () => ({}) }) }, TypeError)
  t.doesNotThrow(() => { checkContributor(sub) })
  t.same(sandboxEnvList({ sandboxEnv: { SUBAGENT_CLI: 'claude', X: '1' }, envContributors: [sub] }), ['SUBAGENT_CLI=codex', 'X=1'], 'contributions win over the extra variables')
})

t.test('a plugin registered after the core contributes to pool sandboxes too: the pool waits until every plugin loaded', async t => {
  const dir = await tempDir(t, 'env-contrib')
  const engine = createMemoryEngine({ images: [MEMORY_IMAGE] })
  const app = await buildApp(loadConfig({ DATA_DIR: dir, LOG_LEVEL: 'silent' }), [
    entry(chatStorage, { dataDir: dir }),
    entry(sandboxMemory, { client: engine }),
    entry(sandbox, { image: MEMORY_IMAGE, prefix: 'envc', dataDir: dir, enableNetwork: false, agent: false, poolSize: 1 }),
    // Registered after the core: its pool must not create before this contributor exists.
    entry(fp(async f => { f.sandbox.addEnvContributor?.({ names: ['CONTRIB'], env: () => ({ CONTRIB: 'late' }) }) }, { name: 'late-contributor' }), {})
  ], { logger: false })
  t.teardown(async () => { await app.close() })
  await app.ready()
  for (let i = 0; i < 200 && app.sandbox.pooled?.() !== 1; i++) await new Promise(resolve => setTimeout(resolve, 10))
  t.equal(app.sandbox.pooled?.(), 1, 'the pool filled')
  const pooled = [...engine.sandboxes.values()].filter(b => b.name.startsWith('envc-pool-'))
  t.equal(pooled.length, 1, 'one pool sandbox, never replaced for drift')
  t.ok(pooled[0]?.spec.env.includes('CONTRIB=late'), 'the pool sandbox carries the late plugin\'s variable')
  await app.sandbox.ensure('chat-env')
  const r = await app.sandbox.exec('chat-env', ['sh', '-c', 'echo "$CONTRIB:$CHAT_ID"'])
  t.equal(r.stdout.toString().trim(), 'late:chat-env', 'the claimed sandbox has it, and the chat\'s own variables')
})
