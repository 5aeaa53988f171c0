// per-run environment (docs/contract.md#credential-allowlist), MCP servers (docs/contract.md#sub-agent-mcp-servers), CLI configuration files.
import t from 'tap'
import { codexProfile, mcpConfig, mcpServerNames, opencodeConfig, runEnv, secretsOf } from '../../../plugins/sub-agent/credentials.js'
import type { RequestUser } from '../../../core/identity.js'

const user = (over: Partial<RequestUser> = {}): RequestUser => ({ emailRejected: false, mcpServers: [], credentials: {}, ...over })

t.test('claude: the server row, quiet switches, header key with its URL, the email header', async t => {
  const cliEnv = { ANTHROPIC_AUTH_TOKEN: 'server-token', ANTHROPIC_BASE_URL: 'https://gw.example' }
  t.same(runEnv({ cli: 'claude', cliEnv, user: user(), networkEnabled: true }), {
    ANTHROPIC_AUTH_TOKEN: 'server-token',
    ANTHROPIC_BASE_URL: 'https://gw.example',
    DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    SUBAGENT_CLI: 'claude'
  })
  const withKey = runEnv({ cli: 'claude', cliEnv, user: user({ email: 'a@b.c', credentials: { anthropicApiKey: 'header-key', anthropicBaseUrl: 'https://mine.example' } }), networkEnabled: true })
  t.equal(withKey.ANTHROPIC_AUTH_TOKEN, 'header-key')
  t.equal(withKey.ANTHROPIC_BASE_URL, 'https://mine.example')
  t.equal(withKey.ANTHROPIC_CUSTOM_HEADERS, 'x-openwebui-user-email: a@b.c')
  const keyOnly = runEnv({ cli: 'claude', cliEnv: {}, user: user({ credentials: { anthropicApiKey: 'header-key' } }), networkEnabled: true })
  t.equal(keyOnly.ANTHROPIC_BASE_URL, 'https://api.anthropic.com', 'default endpoint when a token exists')
})

t.test('a header URL without a header key never redirects the server token (docs/contract.md#request-headers)', async t => {
  const env = runEnv({ cli: 'claude', cliEnv: { ANTHROPIC_AUTH_TOKEN: 'server-token', ANTHROPIC_BASE_URL: 'https://gw.example' }, user: user({ credentials: { anthropicBaseUrl: 'https://evil.example' } }), networkEnabled: true })
  t.equal(env.ANTHROPIC_BASE_URL, 'https://gw.example')
  t.equal(env.ANTHROPIC_AUTH_TOKEN, 'server-token')
})

t.test('opencode: ANTHROPIC_API_KEY from the header, its config path, no catalogue fetch without network', async t => {
  const env = runEnv({ cli: 'opencode', cliEnv: { OPENROUTER_API_KEY: 'or' }, user: user({ credentials: { anthropicApiKey: 'k' } }), networkEnabled: false })
  t.match(env, { OPENROUTER_API_KEY: 'or', ANTHROPIC_API_KEY: 'k', OPENCODE_CONFIG: '/tmp/opencode.json', OPENCODE_DISABLE_MODELS_FETCH: '1', SUBAGENT_CLI: 'opencode' })
  t.equal(runEnv({ cli: 'opencode', cliEnv: {}, user: user(), networkEnabled: true }).OPENCODE_DISABLE_MODELS_FETCH, undefined)
  t.notOk('ANTHROPIC_AUTH_TOKEN' in env)
})

t.test('codex: only its own row; a claude header key is not passed', async t => {
  const env = runEnv({ cli: 'codex', cliEnv: { OPENAI_API_KEY: 'o' }, user: user({ email: 'a@b.c', credentials: { anthropicApiKey: 'k' } }), networkEnabled: true })
  t.same(env, { OPENAI_API_KEY: 'o', SUBAGENT_CLI: 'codex' })
})

t.test('secrets of an environment are the values of key, token, secret and password variables', async t => {
  t.same(secretsOf({ OPENAI_API_KEY: 'a', ANTHROPIC_AUTH_TOKEN: 'b', ANTHROPIC_BASE_URL: 'c', SUBAGENT_CLI: 'claude' }).sort(), ['a', 'b'])
})

t.test('~/.mcp.json: blocklist, gateway URL per name, email header, token left to claude\'s expansion', async t => {
  t.same(mcpServerNames(user({ mcpServers: ['github', 'docker_ai', 'docker-ai', 'computer-use-mcp', 'jira'] })), ['github', 'jira'])
  const json = JSON.parse(mcpConfig(['github'], 'https://gw.example/', 'a@b.c')) as unknown
  t.same(json, { mcpServers: { github: { type: 'http', url: 'https://gw.example/mcp/github', headers: { 'x-openwebui-user-email': 'a@b.c', Authorization: 'Bearer ${ANTHROPIC_AUTH_TOKEN}' } } } })
  const noEmail = JSON.parse(mcpConfig(['x'], 'https://gw.example', undefined)) as { mcpServers: { x: { headers: Record<string, string> } } }
  t.same(Object.keys(noEmail.mcpServers.x.headers), ['Authorization'])
})

t.test('opencode config: defaults, header endpoint, OPENCODE_CONFIG_EXTRA merged deeply; bad extra reported', async t => {
  const base = JSON.parse(opencodeConfig({}, user()).text) as Record<string, unknown>
  t.same(base, { $schema: 'https://opencode.ai/config.json', autoupdate: false, share: 'disabled' })
  const merged = opencodeConfig({ OPENCODE_CONFIG_EXTRA: '{"provider":{"anthropic":{"options":{"timeout":5}}},"share":"manual"}' },
    user({ credentials: { anthropicApiKey: 'k', anthropicBaseUrl: 'https://mine.example' } }))
  t.same(JSON.parse(merged.text), { $schema: 'https://opencode.ai/config.json', autoupdate: false, share: 'manual', provider: { anthropic: { options: { baseURL: 'https://mine.example', timeout: 5 } } } })
  t.equal(opencodeConfig({ OPENCODE_CONFIG_EXTRA: '[1]' }, user()).extraInvalid, true)
  t.equal(opencodeConfig({ OPENCODE_CONFIG_EXTRA: '{bad' }, user()).extraInvalid, true)
})

t.test('CODEX_CONFIG_EXTRA becomes a profile file (line endings normalised); empty means none', async t => {
  t.equal(codexProfile({ CODEX_CONFIG_EXTRA: 'model = "o4"\r\n\r\n' }), 'model = "o4"\n')
  t.equal(codexProfile({ CODEX_CONFIG_EXTRA: '  ' }), undefined)
  t.equal(codexProfile({}), undefined)
})
