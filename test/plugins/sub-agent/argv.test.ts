// argv of each CLI (docs/contract.md#sub-agent-execution), stdin fallback, no shell anywhere.
import t from 'tap'
import { buildInvocation, MAX_ARGV_BYTES, promptText, type RunSpec } from '../../../plugins/sub-agent/argv.js'
import { argvFile, RUN_SCRIPT } from '../../../plugins/sub-agent/setup.js'

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
