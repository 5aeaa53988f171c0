// The sub-agent plugin without a sandbox, one group per part, all in one test process (docs/testing.md#the-unit-tiers-time).
import t, { type Test } from 'tap'
import { buildInvocation, MAX_ARGV_BYTES, promptText, type RunSpec } from '../../../plugins/sub-agent/argv.js'
import { argvFile, RUN_SCRIPT } from '../../../plugins/sub-agent/setup.js'
import { CLIS, missingCliHint, isCliCommand } from '../../../plugins/sub-agent/cli.js'
import { codexProfile, mcpConfig, mcpServerNames, opencodeConfig, runEnv, secretsOf } from '../../../plugins/sub-agent/credentials.js'
import type { RequestUser } from '../../../core/identity.js'
import { readFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { EventStream, MAX_LINE_CHARS, parseOutput } from '../../../plugins/sub-agent/events.js'
import { formatCost, formatDuration, formatResult, terminationReason, type FormatInput } from '../../../plugins/sub-agent/format.js'
import { capHeadTail } from '../../../plugins/sub-agent/text.js'
import { cliProcesses, killArgv, parsePs, validPid } from '../../../plugins/sub-agent/processes.js'
import { formatElapsed, startRunProgress } from '../../../plugins/sub-agent/progress.js'
import { execFileSync, spawnSync } from 'node:child_process'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { MAX_SESSIONS, parseSessions, sessionsArgv } from '../../../plugins/sub-agent/sessions.js'

// argv of each CLI (docs/contract.md#sub-agent-execution), stdin fallback, no shell anywhere.
t.test('argv', async t => {
  const base = (cli: RunSpec['cli'], extra: Partial<RunSpec> = {}): RunSpec => ({
    cli,
    task: 'Fix the tests',
    system: 'SYSTEM',
    model: cli === 'claude' ? 'claude-sonnet-4-6' : cli === 'codex' ? 'gpt-5-codex' : 'anthropic/claude-sonnet-4-6',
    maxTurns: 25,
    workingDirectory: '/home/assistant/proj',
    runDir: '/home/assistant/.sub_agent/r-1',
    ...extra
  })

  t.test('claude: prompt right after -p, model, system prompt, turns, permissions, stream-json', async t => {
    const inv = buildInvocation(base('claude'))
    t.same(inv.argv, ['claude', '-p', 'Fix the tests', '--model', 'claude-sonnet-4-6', '--append-system-prompt', 'SYSTEM',
      '--max-turns', '25', '--permission-mode', 'bypassPermissions', '--disallowedTools', 'AskUserQuestion,ExitPlanMode',
      '--output-format', 'stream-json', '--verbose'])
    t.equal(inv.stdin, '')
    t.equal(inv.promptOnStdin, false)
  })

  t.test('claude resume: --resume with the new task, without --model and --append-system-prompt', async t => {
    const inv = buildInvocation(base('claude', { resumeSessionId: 'abc-123', task: 'Now add docs', mcpConfigPath: '/home/assistant/.mcp.json' }))
    t.same(inv.argv, ['claude', '-p', 'Now add docs', '--resume', 'abc-123', '--max-turns', '25', '--permission-mode', 'bypassPermissions',
      '--disallowedTools', 'AskUserQuestion,ExitPlanMode', '--output-format', 'stream-json', '--verbose', '--mcp-config', '/home/assistant/.mcp.json'])
    t.notOk(inv.argv.includes('--model'))
    t.notOk(inv.argv.includes('--append-system-prompt'))
  })

  t.test('codex: exec --json, no approvals prompt, the container as sandbox, --cd, last-message file, system + task', async t => {
    const inv = buildInvocation(base('codex', { codexProfile: 'cubicle', openaiBaseUrl: 'https://gw.example/v1' }))
    t.same(inv.argv, ['codex', 'exec', '-p', 'cubicle', '-c', 'approval_policy="never"', '-c', 'check_for_update_on_startup=false',
      '-c', 'openai_base_url="https://gw.example/v1"', '--sandbox', 'danger-full-access', '--cd', '/home/assistant/proj',
      '--json', '--skip-git-repo-check', '--model', 'gpt-5-codex', '--output-last-message', '/home/assistant/.sub_agent/r-1/last_message.txt',
      'SYSTEM\n\n---\n\nFix the tests'])
    t.notOk(inv.argv.includes('--dangerously-bypass-approvals-and-sandbox'))
  })

  t.test('codex resume: exec resume <id> with the model and the new task only', async t => {
    const inv = buildInvocation(base('codex', { resumeSessionId: '01a2-x', task: 'Continue' }))
    t.same(inv.argv.slice(0, 4), ['codex', 'exec', 'resume', '01a2-x'])
    t.ok(inv.argv.includes('sandbox_mode="danger-full-access"'))
    t.equal(inv.argv[inv.argv.indexOf('--model') + 1], 'gpt-5-codex')
    t.equal(inv.argv.at(-1), 'Continue')
    t.notOk(inv.argv.includes('--cd'))
  })

  t.test('opencode: run with model, json events, --auto; resume with --session', async t => {
    t.same(buildInvocation(base('opencode')).argv, ['opencode', 'run', '--model', 'anthropic/claude-sonnet-4-6', '--format', 'json', '--auto', 'SYSTEM\n\n---\n\nFix the tests'])
    t.same(buildInvocation(base('opencode', { resumeSessionId: 'ses_1', task: 'More' })).argv,
      ['opencode', 'run', '--session', 'ses_1', '--model', 'anthropic/claude-sonnet-4-6', '--format', 'json', '--auto', 'More'])
  })

  t.test('a prompt over 100 KiB goes through stdin: claude and opencode without the argument, codex with -', async t => {
    const big = 'x'.repeat(MAX_ARGV_BYTES)
    for (const cli of ['claude', 'codex', 'opencode'] as const) {
      const inv = buildInvocation(base(cli, { task: big }))
      t.equal(inv.promptOnStdin, true, cli)
      t.equal(inv.stdin, promptText(base(cli, { task: big })))
      t.notOk(inv.argv.some(a => a.includes(big)), `${cli}: no argument carries the prompt`)
      t.ok(inv.argv.reduce((n, a) => n + Buffer.byteLength(a), 0) < 4096)
    }
    t.equal(buildInvocation(base('codex', { task: big })).argv.at(-1), '-')
    t.same(buildInvocation(base('claude', { task: big })).argv.slice(0, 3), ['claude', '-p', '--model'])
  })

  t.test('multi-byte text counts in bytes; just under the limit stays in argv', async t => {
    const emoji = '😀'.repeat(26_000) // 104,000 bytes
    t.equal(buildInvocation(base('claude', { task: emoji })).promptOnStdin, true)
    t.equal(buildInvocation(base('claude', { task: 'é'.repeat(20_000) })).promptOnStdin, false)
  })

  t.test('a task starting with - never reads as an option: it goes through stdin', async t => {
    const inv = buildInvocation(base('claude', { task: '--dangerously-skip-permissions please' }))
    t.equal(inv.promptOnStdin, true)
    t.notOk(inv.argv.includes('--dangerously-skip-permissions please'))
  })

  t.test('shell metacharacters and NUL survive as plain argv (the argv file is NUL-separated)', async t => {
    const task = 'rm -rf / $(reboot) `id` "; echo pwned \'\n\u0000end'
    const inv = buildInvocation(base('opencode', { task }))
    const file = argvFile(inv.argv)
    const back = file.split('\0').slice(0, -1)
    t.same(back, inv.argv.map(a => a.replace(/\0/g, '')))
    t.match(back.at(-1), /\$\(reboot\) `id` "; echo pwned '\nend$/)
    t.notMatch(RUN_SCRIPT, /Fix the tests|\$\(reboot\)/, 'the command text is a constant')
  })
})

// slim leaves codex out for its size; a server configured for a CLI its image lacks gets told which image has it.
t.test('cli-image', async t => {
  t.test('codex is not in slim: the hint names the agents image, how to build it and how to select it', async t => {
    t.equal(CLIS.codex.inSlim, false)
    const hint = missingCliHint('codex')
    t.match(hint, '`codex` is not in the default slim image')
    t.match(hint, 'bash sandbox-image/build.sh --target agents --tag computer-use-sandbox:agents')
    t.match(hint, 'DOCKER_IMAGE=computer-use-sandbox:agents')
    t.match(hint, 'SUBAGENT_CLI=claude or opencode', 'the CLIs slim has are offered instead')
  })

  t.test('claude and opencode are in every target: the hint says to rebuild the image', async t => {
    for (const cli of ['claude', 'opencode'] as const) {
      t.equal(CLIS[cli].inSlim, true, `${cli} is in slim`)
      const hint = missingCliHint(cli)
      t.match(hint, `every target of sandbox-image/build.sh (slim, agents, full) installs \`${cli}\``)
      t.notMatch(hint, '--target agents')
    }
  })
})

// per-run environment (docs/contract.md#credential-allowlist), MCP servers (docs/contract.md#sub-agent-mcp-servers), CLI configuration files.
t.test('credentials', async t => {
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
})

// result parsing of claude JSON, codex JSONL and opencode JSONL (docs/contract.md#sub-agent-result), from real CLI output.
t.test('events', async t => {
  const fixture = (name: string): string => readFileSync(new URL(`../../fixtures/sub-agent/${name}`, import.meta.url), 'utf8')

  t.test('claude stream-json: text, cost, turns, session from the result object; actions from tool_use', async t => {
    const { outcome, actions } = parseOutput('claude', fixture('claude-stream.jsonl'))
    t.equal(outcome.text, 'Fixture done: wrote fx/hello.txt')
    t.equal(outcome.costUsd, 0.0012000000000000001)
    t.equal(outcome.turns, 2)
    t.match(outcome.sessionId, /^[0-9a-f-]{36}$/)
    t.equal(outcome.isError, false)
    t.equal(actions[0], 'Starting (claude-sonnet-4-6)')
    t.match(actions[1], /^Bash: mkdir -p "\$\(dirname 'fx\/hello\.txt'\)"/)
    t.equal(actions.at(-1), 'Says: Fixture done: wrote fx/hello.txt')
  })

  t.test('claude --output-format json (one object) parses the same way', async t => {
    const { outcome } = parseOutput('claude', fixture('claude-json.json'))
    t.match(outcome, { text: 'Fixture done: wrote fx/hello.txt', turns: 2, isError: false })
    t.ok((outcome.costUsd ?? 0) > 0)
  })

  t.test('claude error_max_turns: an error without text, with the reason', async t => {
    const { outcome } = parseOutput('claude', fixture('claude-max-turns.jsonl'))
    t.equal(outcome.isError, true)
    t.equal(outcome.text, undefined)
    t.match(outcome.errorText, /turn limit/)
    t.equal(outcome.turns, 2)
  })

  t.test('claude: 0 cost, 0 turns and an empty session count as unknown; the last result object wins', async t => {
    const lines = [
      '{"type":"result","subtype":"success","is_error":false,"result":"first","total_cost_usd":0.5,"num_turns":3,"session_id":"s-1"}',
      '{"type":"result","subtype":"success","is_error":false,"result":"second","total_cost_usd":0,"num_turns":0,"session_id":""}'
    ].join('\n')
    const { outcome } = parseOutput('claude', lines)
    t.equal(outcome.text, 'second')
    t.equal(outcome.costUsd, undefined)
    t.equal(outcome.turns, undefined)
    t.equal(outcome.sessionId, 's-1', 'the id seen earlier in the stream stays known')
  })

  t.test('claude killed before its result: no text (assistant text on the way is not an answer)', async t => {
    const stream = fixture('claude-stream.jsonl').split('\n').filter(l => !l.includes('"type":"result"')).join('\n')
    const { outcome } = parseOutput('claude', stream)
    t.equal(outcome.text, undefined)
    t.match(outcome.sessionId, /^[0-9a-f-]{36}$/)
  })

  t.test('codex JSONL: text of the last agent_message, thread id as session, no cost or turns', async t => {
    const { outcome, actions } = parseOutput('codex', fixture('codex.jsonl'))
    t.equal(outcome.text, 'Fixture done: wrote fx/hello.txt')
    t.match(outcome.sessionId, /^[0-9a-f]{8}-/)
    t.equal(outcome.costUsd, undefined)
    t.equal(outcome.turns, undefined)
    t.equal(outcome.isError, false)
    t.equal(actions[0], 'Starting')
    t.ok(actions.some(a => /^Running: mkdir -p "\$\(dirname 'fx\/hello\.txt'\)"/.test(a)), actions.join(' | '))
  })

  t.test('codex failing to reach its model: no text, the last error message, the thread id', async t => {
    const { outcome } = parseOutput('codex', fixture('codex-fail.jsonl'))
    t.equal(outcome.text, undefined)
    t.match(outcome.errorText, /Reconnecting/)
    t.match(outcome.sessionId, /^[0-9a-f]{8}-/)
  })

  t.test('codex turn.failed marks the run as an error', async t => {
    const { outcome } = parseOutput('codex', '{"type":"thread.started","thread_id":"t-1"}\n{"type":"turn.failed","error":{"message":"quota exceeded"}}\n')
    t.match(outcome, { isError: true, errorText: 'quota exceeded', sessionId: 't-1' })
  })

  t.test('opencode JSONL: text of the last message, cost summed over steps, steps as turns', async t => {
    const { outcome, actions } = parseOutput('opencode', fixture('opencode.jsonl'))
    t.equal(outcome.text, 'Fixture done: wrote fx/hello.txt')
    t.equal(Number(outcome.costUsd?.toFixed(5)), 0.00028)
    t.equal(outcome.turns, 2)
    t.match(outcome.sessionId, /^ses_/)
    t.ok(actions.some(a => a.startsWith('bash: mkdir -p')), actions.join(' | '))
  })

  t.test('opencode: text parts of one message join; a later message replaces the text; usage.total_cost as fallback; error events', async t => {
    const lines = [
      '{"type":"text","sessionID":"ses_a","part":{"messageID":"m1","text":"Hello "}}',
      '{"type":"text","sessionID":"ses_a","part":{"messageID":"m1","text":"world"}}',
      '{"type":"step_finish","sessionID":"ses_a","part":{"cost":0}}',
      '{"type":"text","sessionID":"ses_a","part":{"messageID":"m2","text":"Final"}}',
      '{"type":"summary","usage":{"total_cost":0.25}}',
      '{"type":"error","sessionID":"ses_a","error":{"name":"APIError","data":{"message":"rate limited"}}}'
    ].join('\n')
    const { outcome } = parseOutput('opencode', lines)
    t.match(outcome, { text: 'Final', costUsd: 0.25, turns: 1, isError: true, errorText: 'rate limited', sessionId: 'ses_a' })
  })

  t.test('malformed lines are skipped everywhere; plain text is kept as a bounded tail', async t => {
    for (const cli of ['claude', 'codex', 'opencode'] as const) {
      const junk = ['not json', '{"unterminated": ', '[1,2,3]', '{"type":"result","result":42}', '{"type":"item.completed","item":"x"}',
        '{"type":"tool_use","part":null}', '\u0000\u001b[31m{}', '{"sessionID":{"x":1}}', '{"session_id":"bad id with spaces"}'].join('\n')
      const { outcome, raw } = parseOutput(cli, junk)
      t.equal(outcome.text, undefined, cli)
      t.equal(outcome.sessionId, undefined, cli)
      t.match(raw, /not json/)
    }
  })

  t.test('lines are split across chunks at any point, and a line over the cap is dropped whole', async t => {
    const text = fixture('claude-stream.jsonl')
    const actions: string[] = []
    const stream = new EventStream('claude', a => actions.push(a))
    for (let i = 0; i < text.length; i += 7) stream.push(text.slice(i, i + 7))
    stream.end()
    t.equal(stream.reader.outcome().text, 'Fixture done: wrote fx/hello.txt')
    const huge = new EventStream('claude', () => {})
    huge.push('{"type":"result","result":"' + 'a'.repeat(MAX_LINE_CHARS) + '"}\n')
    huge.push('{"type":"result","result":"small","num_turns":1}\n')
    t.equal(huge.reader.outcome().text, 'small')
  })
})

// the result format of docs/contract.md#sub-agent-result.
t.test('format', async t => {
  const input = (over: Partial<FormatInput> = {}): FormatInput => ({
    displayModel: 'sonnet',
    maxTurns: 25,
    durationMs: 12_345,
    timeoutS: 3600,
    maxChars: 30_000,
    outcome: { text: 'Done: 3 files changed.', costUsd: 0.0042, turns: 7, sessionId: 'abc-123', isError: false },
    ending: { exitCode: 0, timedOut: false },
    ...over
  })

  t.test('Completed (success): header, fields, text, session line', async t => {
    const r = formatResult(input())
    t.equal(r.isError, false)
    t.equal(r.text, [
      '**Sub-Agent Completed** (success)',
      '**Model:** sonnet | **Turns:** 7/25 | **Cost:** $0.0042 | **Duration:** 12.3s',
      '',
      'Done: 3 files changed.',
      '',
      '**Session ID:** `abc-123` (hint: pass it as resume_session_id to continue)'
    ].join('\n'))
  })

  t.test('unknown turns show ?/max, unknown or zero cost shows unavailable, no session line without an id', async t => {
    const r = formatResult(input({ outcome: { text: 'ok', isError: false } }))
    t.match(r.text, '**Turns:** ?/25 | **Cost:** unavailable |')
    t.notMatch(r.text, 'Session ID')
  })

  t.test('cost is never $0.00 or $0.0000', async t => {
    t.equal(formatCost(0), 'unavailable')
    t.equal(formatCost(undefined), 'unavailable')
    t.equal(formatCost(Number.NaN), 'unavailable')
    t.equal(formatCost(0.00001), '<$0.0001')
    t.equal(formatCost(0.00005), '$0.0001')
    t.equal(formatCost(1.23456), '$1.2346')
    for (const c of [0, 1e-9, 4e-5, 0.00004999]) t.notMatch(formatCost(c), /^\$0\.0+$/)
  })

  t.test('duration has one decimal', async t => {
    t.equal(formatDuration(0), '0.0s')
    t.equal(formatDuration(61_049), '61.0s')
    t.equal(formatDuration(999), '1.0s')
  })

  t.test('Completed (error): the CLI reported an error or exited non-zero with text', async t => {
    const a = formatResult(input({ outcome: { text: 'API error 401', isError: true } }))
    t.equal(a.isError, true)
    t.match(a.text, /^\*\*Sub-Agent Completed\*\* \(error\)\n/)
    const b = formatResult(input({ ending: { exitCode: 2, timedOut: false } }))
    t.match(b.text, /^\*\*Sub-Agent Completed\*\* \(error\)\n/)
  })

  t.test('the terminated reasons of the table', async t => {
    const none = { isError: false }
    t.equal(terminationReason({ exitCode: null, timedOut: true }, none, 3600), 'timed out after 3600s')
    t.equal(terminationReason({ exitCode: 124, timedOut: false }, none, 60), 'timed out after 60s')
    t.equal(terminationReason({ exitCode: 137, timedOut: false }, none, 60), 'killed by SIGKILL')
    t.equal(terminationReason({ exitCode: -9, timedOut: false }, none, 60), 'killed by SIGKILL')
    t.equal(terminationReason({ exitCode: 143, timedOut: false }, none, 60), 'terminated by SIGTERM')
    t.equal(terminationReason({ exitCode: -15, timedOut: false }, none, 60), 'terminated by SIGTERM')
    t.equal(terminationReason({ exitCode: 0, timedOut: false }, none, 60), 'crashed before producing results')
    t.equal(terminationReason({ exitCode: 3, timedOut: false }, none, 60), 'failed with exit code 3')
    t.match(terminationReason({ exitCode: null, timedOut: false }, none, 60), /without an exit status/)
    t.equal(terminationReason({ exitCode: 3, timedOut: false }, { isError: true, text: 'x' }, 60), undefined, 'text makes it Completed (error)')
    t.equal(terminationReason({ exitCode: 143, timedOut: false }, { isError: false, text: 'partial' }, 60), 'terminated by SIGTERM', 'a kill is Terminated even with text')
  })

  t.test('Terminated form: reason, model and duration, the sentence, last action, error output, session line', async t => {
    const r = formatResult(input({
      outcome: { isError: false, sessionId: 's-9', errorText: 'Reconnecting... 5/5' },
      ending: { exitCode: null, timedOut: true },
      durationMs: 3_610_000,
      lastAction: 'Bash: npm test',
      errorOutput: 'npm ERR! something\n'
    }))
    t.equal(r.isError, true)
    const lines = r.text.split('\n')
    t.equal(lines[0], '**Sub-Agent Terminated** (timed out after 3600s)')
    t.equal(lines[1], '**Model:** sonnet | **Duration:** 3610.0s')
    t.match(lines[3], /^The agent process ended before producing results/)
    t.equal(lines[4], 'Last action: Bash: npm test')
    t.match(r.text, /Error output \(end\):\n```\nReconnecting\.\.\. 5\/5\nnpm ERR! something\n```/)
    t.match(r.text, /\n\n\*\*Session ID:\*\* `s-9` \(hint: pass it as resume_session_id to continue\)$/)
    t.notMatch(r.text, /Turns|Cost/)
  })

  t.test('the agent text is capped head + tail; secrets and control characters never come through', async t => {
    const text = 'H'.repeat(20_000) + 'MIDDLE' + 'T'.repeat(20_000)
    const r = formatResult(input({ outcome: { text: `${text}\u001b[31m`, isError: false }, secrets: ['sk-secret-value-1'] }))
    t.ok(r.text.includes('H'.repeat(15_000)), 'head kept')
    t.ok(r.text.includes('T'.repeat(14_000)), 'tail kept')
    t.notOk(r.text.includes('MIDDLE'), 'middle left out')
    t.ok(r.text.includes("[... 10010 characters of the agent's answer omitted ...]"), 'the note says how much')
    t.notOk(r.text.includes('\u001b'), 'no escape characters')
    const s = formatResult(input({ outcome: { text: 'token is sk-secret-value-1 ok', isError: false }, secrets: ['sk-secret-value-1'] }))
    t.match(s.text, 'token is [redacted] ok')
    const e = formatResult(input({ outcome: { isError: false }, ending: { exitCode: 1, timedOut: false }, errorOutput: 'Invalid key sk-secret-value-1', secrets: ['sk-secret-value-1'] }))
    t.notMatch(e.text, 'sk-secret-value-1')
  })

  t.test('capHeadTail never splits a surrogate pair and leaves short text alone', async t => {
    t.equal(capHeadTail('short', 10), 'short')
    const capped = capHeadTail('😀'.repeat(3000), 1000)
    t.ok(Array.from(capped).every(ch => ch.length === 2 || /[\s[\].a-z0-9']/.test(ch)), 'only whole emoji and the note')
    t.match(capped, /2000 characters/)
  })
})

t.test('processes', async t => {
  t.test('a command line belongs to the active CLI only when it runs the CLI itself', async t => {
    const yes: Array<[string, string]> = [
      ['claude', 'claude -p hello'],
      ['claude', '/home/assistant/.local/bin/claude --resume x'],
      ['claude', 'node /usr/lib/node_modules/@anthropic-ai/claude-code/cli.js -p x'],
      ['codex', 'codex exec --json hi'],
      ['codex', 'node /usr/local/lib/node_modules/@openai/codex/bin/codex.js exec'],
      ['codex', '/usr/local/lib/node_modules/@openai/codex/vendor/x86_64-unknown-linux-musl/codex/codex exec'],
      ['opencode', 'opencode run hi'],
      ['opencode', 'bun /usr/lib/node_modules/opencode-ai/bin/opencode run'],
      ['codex', 'node /usr/local/bin/codex exec --json hi'],
      ['opencode', '/usr/local/bin/opencode run x']
    ]
    for (const [cli, args] of yes) t.ok(isCliCommand(cli as 'claude', args), `${cli}: ${args}`)
    const no: Array<[string, string]> = [
      ['claude', 'bash -c claude'],
      ['claude', 'vim claude.md'],
      ['claude', 'node claude.js'],
      ['codex', 'node /home/assistant/codex.js'],
      ['claude', 'grep claude'],
      ['claude', 'codex exec'],
      ['codex', 'claude -p x'],
      ['claude', 'tmux -u new-session -A -s main'],
      ['claude', 'node /tmp/@anthropic-ai/claude-code-evil/cli.js'],
      ['opencode', 'sleep infinity']
    ]
    for (const [cli, args] of no) t.notOk(isCliCommand(cli as 'claude', args), `${cli}: ${args}`)
  })

  t.test('ps output is parsed defensively: PID 1, malformed and huge lines never become entries', async t => {
    const out = [
      '    1  100 claude',
      '   12   61 claude -p x',
      'garbage line',
    `   13    5 claude ${'a'.repeat(20000)}`,
    '  -14    5 claude',
    '   15 abc claude',
    ''
    ].join('\n')
    const entries = parsePs(out)
    t.same(entries.map(e => e.pid), [12, 13])
    t.equal(entries[1]?.args.length, 8192 - 'x   13    5 '.length + 1, 'a line is cut at 8 KiB before parsing')
    const procs = cliProcesses('claude', entries)
    t.same(procs.map(p => [p.pid, p.elapsed_minutes]), [[12, 1], [13, 0]])
    t.ok(procs.every(p => p.command.length <= 100), 'commands are cut to 100 characters')
  })

  t.test('at most 10 processes, in pid order, with control characters removed', async t => {
    const lines = Array.from({ length: 25 }, (_, i) => ` ${100 - i} 600 claude \u001b[31mrun\u0007 ${i}`).join('\n')
    const procs = cliProcesses('claude', parsePs(lines))
    t.equal(procs.length, 10)
    t.same(procs.map(p => p.pid), [76, 77, 78, 79, 80, 81, 82, 83, 84, 85])
    t.notMatch(procs[0]?.command, /[\u0000-\u001f]/) // eslint-disable-line no-control-regex
    t.equal(procs[0]?.elapsed_minutes, 10)
  })

  t.test('pids are validated strictly: integers from 2 to PID_MAX_LIMIT, never 1', async t => {
    t.ok(validPid(2))
    t.ok(validPid(4194304))
    for (const bad of [1, 0, -1, 4.5, 4194305, Number.NaN, Infinity]) t.notOk(validPid(bad), String(bad))
    t.same(parsePs('4194305 5 claude\n   9 5 claude\n').map(e => e.pid), [9], 'ps lines beyond PID_MAX_LIMIT are dropped')
  })

  t.test('the kill script gets pid, the exact command line and the grace in tenths as separate arguments', async t => {
    const argv = killArgv(42, 'claude -p "$(rm -rf ~)"', 2000)
    t.same(argv.slice(3), ['cubicle-kill', '42', 'claude -p "$(rm -rf ~)"', '20'])
    t.match(argv[2], /kill -TERM/)
    t.match(argv[2], /kill -KILL/)
  })
})

// progress notifications of a run (docs/contract.md#sub-agent-execution) on an injected clock.
t.test('progress', async t => {
  interface Sent { progress: number, total: number | undefined, message: string }

  function harness (intervalS = 15, wantsProgress = true) {
    let now = 1_000_000
    const sent: Sent[] = []
    const ctx = { wantsProgress, progress: async (progress: number, total: number | undefined, message: string) => { sent.push({ progress, total, message }) } }
    const p = startRunProgress(ctx, { intervalS, totalS: 3600, now: () => now, tickMs: 2 })
    const advance = async (ms: number): Promise<void> => { now += ms; await new Promise(resolve => setTimeout(resolve, 20)) }
    return { p, sent, advance }
  }

  t.test('elapsed is written as s, m ss, h mm', async t => {
    t.equal(formatElapsed(0), '0s')
    t.equal(formatElapsed(59.9), '59s')
    t.equal(formatElapsed(65), '1m 05s')
    t.equal(formatElapsed(3599), '59m 59s')
    t.equal(formatElapsed(3720), '1h 02m')
  })

  t.test('first after 1 s, then every interval; progress = elapsed seconds, total = timeout', async t => {
    const { p, sent, advance } = harness(15)
    t.teardown(p.stop)
    await advance(500)
    t.equal(sent.length, 0, 'nothing before one second')
    await advance(600)
    t.same(sent, [{ progress: 1, total: 3600, message: 'Agent running... (1s)' }])
    await advance(10_000)
    t.equal(sent.length, 1, 'no repeat inside the interval')
    await advance(5_000)
    t.same(sent.at(-1), { progress: 16, total: 3600, message: 'Agent running... (16s)' })
  })

  t.test('a new action is reported at the next whole second, at most one per second, never a repeated progress value', async t => {
    const { p, sent, advance } = harness(15)
    t.teardown(p.stop)
    await advance(1100)
    p.action('Bash: npm test')
    p.action('Read: package.json')
    await advance(100)
    t.equal(sent.length, 1, 'the same second as the last notification: held back')
    await advance(900)
    t.same(sent.at(-1), { progress: 2, total: 3600, message: 'Read: package.json (2s)' })
    p.action('Read: package.json')
    await advance(1000)
    t.equal(sent.length, 2, 'the same action again is not news')
    p.action('Write: src/a.ts')
    await advance(1000)
    t.equal(sent.at(-1)?.message, 'Write: src/a.ts (4s)')
    await advance(15_000)
    t.equal(sent.at(-1)?.message, 'Write: src/a.ts (19s)', 'periodic notifications repeat the latest action')
    const values = sent.map(s => s.progress)
    t.same(values, [...new Set(values)].sort((a, b) => a - b), 'strictly increasing')
    t.equal(p.last(), 'Write: src/a.ts')
  })

  t.test('stop() ends notifications for good; without a progress token nothing is sent', async t => {
    const a = harness(15)
    await a.advance(1100)
    a.p.stop()
    a.p.action('late')
    await a.advance(20_000)
    t.equal(a.sent.length, 1)
    const b = harness(15, false)
    b.p.action('x')
    await b.advance(20_000)
    t.equal(b.sent.length, 0)
    b.p.stop()
  })
})

t.test('sessions', async t => {
/*
 * The session lister runs in the sandbox with the image's python3. Here it runs with the host's
 * python3 against a fake home, so the stores of the three CLIs and hostile files are checked without
 * Docker (test/integration/terminal-ws.test.ts runs it in the real image).
 */
  const python = spawnSync('python3', ['--version']).status === 0

  function withHome (t: Test, files: Record<string, string | { link: string }>, mtimes: Record<string, number> = {}): string {
    const home = mkdtempSync(join(tmpdir(), 'cubicle-sessions-'))
    t.teardown(() => rmSync(home, { recursive: true, force: true }))
    for (const [path, content] of Object.entries(files)) {
      const full = join(home, path)
      mkdirSync(dirname(full), { recursive: true })
      if (typeof content === 'string') writeFileSync(full, content)
      else symlinkSync(content.link, full)
    }
    for (const [path, seconds] of Object.entries(mtimes)) utimesSync(join(home, path), seconds, seconds)
    return home
  }

  /** Runs the lister as the sandbox would (argv as given, python3 from PATH) and parses its output like the service. */
  function list (cli: 'claude' | 'codex' | 'opencode', home: string): ReturnType<typeof parseSessions> {
    const [, ...args] = sessionsArgv(cli)
    return parseSessions(execFileSync('python3', args, { env: { HOME: home, PATH: process.env.PATH }, encoding: 'utf8', timeout: 10_000 }))
  }

  const lines = (...values: unknown[]): string => values.map(v => JSON.stringify(v)).join('\n') + '\n'

  t.test('the lister runs python3 in isolated mode with the CLI, the cap and the head size as arguments', async t => {
    const argv = sessionsArgv('codex', 1000)
    t.equal(argv[0], '/usr/bin/python3')
    t.equal(argv[1], '-I', 'no user site, no PYTHON* variables from the sandbox')
    t.same(argv.slice(4), ['codex', String(MAX_SESSIONS), '1000'])
  })

  t.test('claude: id from the file name, model, first real user message or the summary as label', { skip: !python && 'python3 is not installed on this host' }, async t => {
    const dir = '.claude/projects/-home-assistant'
    const home = withHome(t, {
      [`${dir}/0b1c-id.jsonl`]: lines(
        { type: 'user', message: { role: 'user', content: '<command-name>/init</command-name>' } },
        { type: 'user', message: { role: 'user', content: [{ type: 'text', text: 'Fix   the\nbuild please' }] } },
        { type: 'assistant', message: { model: 'claude-sonnet-4-6', content: [] } }),
      [`${dir}/a2.jsonl`]: lines({ type: 'summary', summary: 'Refactor parser' }, { type: 'user', message: { content: 'x' } }),
      [`${dir}/link.jsonl`]: { link: '/dev/zero' }
    }, { [`${dir}/0b1c-id.jsonl`]: 1700000000, [`${dir}/a2.jsonl`]: 1700000100 })
    t.same(list('claude', home), [
      { session_id: 'a2', model: null, timestamp: 1700000100, label: 'Refactor parser' },
      { session_id: '0b1c-id', model: 'claude-sonnet-4-6', timestamp: 1700000000, label: 'Fix the build please' }
    ], 'the symlink is not followed')
  })

  t.test('codex: both rollout formats, environment wrappers skipped', { skip: !python && 'python3 is not installed on this host' }, async t => {
    const id = '0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b'
    const old = '11111111-2222-3333-4444-555555555555'
    const newFile = `.codex/sessions/2025/10/01/rollout-2025-10-01T10-00-00-${id}.jsonl`
    const oldFile = `.codex/sessions/2025/01/01/rollout-2025-01-01T00-00-00-${old}.jsonl`
    const home = withHome(t, {
      [newFile]: lines(
        { type: 'session_meta', payload: { id, cwd: '/home/assistant' } },
        { type: 'response_item', payload: { type: 'message', role: 'user', content: [{ type: 'input_text', text: '<environment_context>…</environment_context>' }] } },
        { type: 'turn_context', payload: { model: 'gpt-5-codex' } },
        { type: 'event_msg', payload: { type: 'user_message', message: 'write tests' } }),
      [oldFile]: lines(
        { id: old, timestamp: '2025-01-01', instructions: null },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'old format task' }] })
    }, { [newFile]: 1759300000, [oldFile]: 1735689600 })
    t.same(list('codex', home), [
      { session_id: id, model: 'gpt-5-codex', timestamp: 1759300000, label: 'write tests' },
      { session_id: old, model: null, timestamp: 1735689600, label: 'old format task' }
    ])
  })

  t.test('opencode: the JSON store of older releases (the SQLite store is covered on real Docker)', { skip: !python && 'python3 is not installed on this host' }, async t => {
    const dir = '.local/share/opencode/storage/session/project'
    const home = withHome(t, {
      [`${dir}/ses_abc.json`]: JSON.stringify({ id: 'ses_abc', title: 'Add login page', model: { modelID: 'gpt-5' } }),
      [`${dir}/broken.json`]: '{"id": "ses_'
    }, { [`${dir}/ses_abc.json`]: 1700000000 })
    t.same(list('opencode', home), [{ session_id: 'ses_abc', model: 'gpt-5', timestamp: 1700000000, label: 'Add login page' }])
  })

  t.test('at most 20 sessions, newest first, from a store with more', { skip: !python && 'python3 is not installed on this host' }, async t => {
    const files: Record<string, string> = {}
    const mtimes: Record<string, number> = {}
    for (let i = 0; i < 25; i++) {
      files[`.claude/projects/p/s${i}.jsonl`] = lines({ type: 'user', message: { content: `task ${i}` } })
      mtimes[`.claude/projects/p/s${i}.jsonl`] = 1700000000 + i
    }
    const sessions = list('claude', withHome(t, files, mtimes))
    t.equal(sessions.length, 20)
    t.same(sessions.slice(0, 2).map(s => [s.session_id, s.label, s.timestamp]), [['s24', 'task 24', 1700000024], ['s23', 'task 23', 1700000023]])
  })

  t.test('hostile helper output: bad ids dropped, labels cleaned and cut to 80, oversized lines skipped', async t => {
    const long = 'é'.repeat(300)
    const out = [
      JSON.stringify({ id: '../../etc', model: 'm', ts: 5, label: 'x' }),
      JSON.stringify({ id: 'ok', model: '  ', ts: 4, label: `${long}\u0007\u001b[31m` }),
      JSON.stringify({ id: '$(reboot)', ts: 3 }),
      JSON.stringify({ id: 'huge', ts: 2, label: 'y'.repeat(9000) }),
      JSON.stringify({ id: 'ok', ts: 9, label: 'a duplicate' }),
      JSON.stringify({ id: 'nots', ts: 'yesterday', model: 7, label: ['x'] }),
      '{"id": "cut-off',
      'not json at all'
    ].join('\n')
    const sessions = parseSessions(out)
    t.same(sessions.map(s => s.session_id), ['ok', 'nots'])
    t.ok((sessions[0]?.label.length ?? 99) <= 80)
    t.match(sessions[0]?.label, /…$/)
    t.notMatch(sessions[0]?.label, /[\u0000-\u001f]/) // eslint-disable-line no-control-regex
    t.equal(sessions[0]?.model, null, 'a blank model is null')
    t.same(sessions[1], { session_id: 'nots', model: null, timestamp: 0, label: '' }, 'wrongly typed fields are dropped')
    const many = Array.from({ length: 30 }, (_, i) => JSON.stringify({ id: `s${i}`, ts: i + 1 })).join('\n')
    t.equal(parseSessions(many).length, MAX_SESSIONS)
  })
})
