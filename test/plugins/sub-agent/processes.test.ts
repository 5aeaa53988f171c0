import t from 'tap'
import { isCliCommand } from '../../../plugins/sub-agent/cli.js'
import { cliProcesses, killArgv, parsePs, validPid } from '../../../plugins/sub-agent/processes.js'

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
