import t from 'tap'
import { appendNotes, appendOutputLinks, bashResult, firstCommand, formatElapsed, lastOutputLine, progressMessage, resultNotes, semanticMessage, SANDBOX_STOPPED } from '../../../plugins/workspace-tools/bash-result.js'
import { cpLength } from '../../../plugins/workspace-tools/text.js'

const textOf = (r: { content: Array<{ type: string, text?: string }> }): string => r.content[0]?.text ?? ''

t.test('first command skips NAME=value assignments, wrappers and their options, and takes the basename', async t => {
  const table: Array<[string, string | undefined]> = [
    ['grep foo file', 'grep'],
    ['FOO=1 /usr/bin/grep x', 'grep'],
    ['A=1 B="two words" rg pattern', 'rg'],
    ['sudo -u root find / -name x', 'find'],
    ['sudo env LANG=C diff a b', 'diff'],
    ['env -i PATH=/bin test -f x', 'test'],
    ['nice -n 10 grep x', 'grep'],
    ['nice grep x', 'grep'],
    ['time -p grep x', 'grep'],
    ['strace -f -o /tmp/log grep x', 'grep'],
    ['[ -f /etc/passwd ]', '['],
    ['  \t grep -q x y', 'grep'],
    ['"grep" x', 'grep'],
    ["'/bin/grep' x", 'grep'],
    ['cat f | grep x', 'cat'],
    ['cd /tmp && grep x', 'cd'],
    ['grep;ls', 'grep'],
    ['FOO=1', undefined],
    ['', undefined],
    ['sudo', undefined]
  ]
  for (const [command, expected] of table) t.equal(firstCommand(command), expected, command)
})

t.test('semantic messages apply only to exit status 1 of grep/rg/find/diff/test/[', async t => {
  t.equal(semanticMessage('grep x f', 1), 'No matches found')
  t.equal(semanticMessage('rg x', 1), 'No matches found')
  t.equal(semanticMessage('find / -name x', 1), 'Some directories were inaccessible')
  t.equal(semanticMessage('diff a b', 1), 'Files differ')
  t.equal(semanticMessage('test -f x', 1), 'Condition is false')
  t.equal(semanticMessage('[ -f x ]', 1), 'Condition is false')
  t.equal(semanticMessage('grep x f', 2), undefined, 'grep error status 2 is a real failure')
  t.equal(semanticMessage('grep x f', 0), undefined)
  t.equal(semanticMessage('ls missing', 1), undefined)
  t.equal(semanticMessage('egrep x', 1), undefined, 'only the listed commands')
  t.equal(semanticMessage('grep x', null), undefined)
})

t.test('result table of docs/contract.md#bash_tool', async t => {
  const base = { command: 'echo hello', timeoutSeconds: 120, timedOut: false }
  t.same(bashResult({ ...base, exitCode: 0, output: 'hello\n' }), { content: [{ type: 'text', text: 'hello\n' }] }, 'exit 0 output unchanged')
  t.equal(textOf(bashResult({ ...base, exitCode: 0, output: '' })), '[No output]')
  t.equal(textOf(bashResult({ ...base, exitCode: 0, output: ' \n\t' })), '[No output]', 'blank counts as no output')
  t.equal(textOf(bashResult({ ...base, command: 'grep x f', exitCode: 1, output: '' })), 'No matches found')
  t.equal(textOf(bashResult({ ...base, command: 'diff a b', exitCode: 1, output: '< a\n> b\n' })), '< a\n> b\n', 'semantic with output: output only')
  t.equal(textOf(bashResult({ ...base, command: 'false', exitCode: 1, output: '' })), '[Exit code: 1]')
  t.equal(textOf(bashResult({ ...base, command: 'ls nope', exitCode: 2, output: 'ls: nope: No such file\n' })), 'ls: nope: No such file\n\n[Exit code: 2]')
  t.equal(textOf(bashResult({ ...base, command: 'grep x', exitCode: 2, output: 'grep: f: No such file' })), 'grep: f: No such file\n[Exit code: 2]')
  t.equal(textOf(bashResult({ ...base, exitCode: null, timedOut: true, output: 'partial' })), 'partial\n[Command timed out after 120 seconds]')
  t.equal(textOf(bashResult({ ...base, exitCode: 143, timedOut: true, output: '', timeoutSeconds: 3 })), '[Command timed out after 3 seconds]')
  const lost = bashResult({ ...base, exitCode: null, output: 'half' })
  t.equal(lost.isError, true)
  // an unknown status says what is known (the driver's notices give the cause when it has one)
  t.equal(textOf(lost), `${SANDBOX_STOPPED}\n\nOutput before that (last 1000 characters at most):\nhalf`)
  t.match(SANDBOX_STOPPED, /^Error: the command ended without an exit status/)
  t.equal(bashResult({ ...base, exitCode: 7, output: '' }).isError, undefined, 'a non-zero exit is not an isError')
})

t.test('elapsed format: 45s, 2m, 2m 15s', async t => {
  t.equal(formatElapsed(0), '0s')
  t.equal(formatElapsed(1), '1s')
  t.equal(formatElapsed(45), '45s')
  t.equal(formatElapsed(59.9), '59s')
  t.equal(formatElapsed(60), '1m')
  t.equal(formatElapsed(120), '2m')
  t.equal(formatElapsed(135), '2m 15s')
  t.equal(formatElapsed(3601), '60m 1s')
})

t.test('progress message: description, elapsed, and the last non-blank output line without ANSI, cut to 120', async t => {
  t.equal(progressMessage('Installing deps', 'npm i', 15, ''), 'Running: Installing deps (15s)')
  t.equal(progressMessage('Build', 'make', 75, 'compiling a.c\ncompiling b.c\n\n  \n'), 'Running: Build (1m 15s)\n→ compiling b.c')
  t.equal(progressMessage('Colour', 'x', 30, '\u001b[32mgreen\u001b[0m text\n'), 'Running: Colour (30s)\n→ green text')
  t.equal(progressMessage('Bar', 'x', 30, 'progress 10%\rprogress 55%'), 'Running: Bar (30s)\n→ progress 55%')
  const long = 'L'.repeat(300)
  const msg = progressMessage('Long', 'x', 30, long)
  const line = msg.split('\n→ ')[1] ?? ''
  t.equal(cpLength(line), 120)
  const cmd = 'python3 -c "' + 'x'.repeat(100) + '"'
  t.equal(progressMessage('', cmd, 2, ''), `Running: ${cmd.slice(0, 60)} (2s)`, 'empty description → first 60 chars of the command')
})

t.test('lastOutputLine strips OSC titles and control characters', async t => {
  t.equal(lastOutputLine('\u001b]0;title\u0007done\n'), 'done')
  t.equal(lastOutputLine('\n\n'), undefined)
})

t.test('output links: up to 10 listed with URLs, the rest counted, and never past the limit', async t => {
  const links = Array.from({ length: 12 }, (_, i): [string, string] => [`f${i}.txt`, `http://x/files/c/f${i}.txt`])
  const text = appendOutputLinks('out', links, 32000)
  t.match(text, /^out\n\n\[Files created or modified in \/mnt\/user-data\/outputs: f0\.txt: http:\/\/x\/files\/c\/f0\.txt, /)
  t.match(text, /f9\.txt: http:\/\/x\/files\/c\/f9\.txt \(and 2 more\)\]$/)
  t.notMatch(text, /f10\.txt:/)
  t.equal(appendOutputLinks('out', [], 100), 'out')
  const tight = appendOutputLinks('y'.repeat(100), links, 240)
  t.ok(cpLength(tight) <= 240)
  t.match(tight, /\(and \d+ more\)\]$/)
  t.equal(appendOutputLinks('y'.repeat(195), links, 200), 'y'.repeat(195), 'no room: no line')
})

// Notes other plugins add to bash_tool results (workspace-tools ResultNote: the ports plugin's new listening ports).
t.test('result notes: answers in registration order, failures, empty and late answers left out', async t => {
  const notes = [
    async () => 'first',
    async () => { throw new Error('boom') },
    async () => undefined,
    async () => '',
    async () => await new Promise<string>(resolve => { setTimeout(() => { resolve('late') }, 500) }),
    async (chatId: string) => `for ${chatId}`
  ]
  const started = Date.now()
  t.same(await resultNotes(notes, 'chat-a', {}, 100), ['first', 'for chat-a'])
  t.ok(Date.now() - started < 450, 'a slow note does not hold the result')
  t.same(await resultNotes([], 'chat-a'), [])
  const listening = [{ family: 4 as const, address: '127.0.0.1', port: 3000 }]
  t.same(await resultNotes([async (_chatId, facts) => facts.listening?.map(s => String(s.port)).join(',')], 'chat-a', { listening }), ['3000'], 'the facts of the command\'s exit reach the notes')
})

t.test('notes are appended while they fit the limit', async t => {
  t.equal(appendNotes('out', ['[a]', '[b]'], 100), 'out\n\n[a]\n\n[b]')
  t.equal(appendNotes('out', ['x'.repeat(50), '[b]'], 20), 'out\n\n[b]', 'one that does not fit is left out, the next still goes')
})
