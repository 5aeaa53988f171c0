/*
 * bash_tool result texts for what happened to the sandbox: every notice says what really
 * happened and what was lost, an unknown exit status names its cause, and notes fit the result limit.
 */
import t from 'tap'
import type { CallToolResult } from '@modelcontextprotocol/server'
import { bashResult, formatBytes, noticeText, SANDBOX_STOPPED } from '../../../plugins/workspace-tools/bash-result.js'
import type { SandboxNotice } from '../../../plugins/sandbox/types.js'

const MiB = 1024 * 1024
const textOf = (r: CallToolResult): string => { const b = r.content[0]; return b?.type === 'text' ? b.text : '' }
const base = { command: 'echo hi', exitCode: 0, timedOut: false, output: 'hi\n', timeoutSeconds: 120 }
const disk = (action: 'stopped' | 'none'): SandboxNotice =>
  ({ kind: 'disk-limit', action, limit: 50 * MiB, usage: { total: 81 * MiB, home: 80 * MiB, outputs: 512 * 1024, other: 512 * 1024 } })

t.test('sizes in binary units', async t => {
  t.equal(formatBytes(0), '0 bytes')
  t.equal(formatBytes(1000), '1000 bytes')
  t.equal(formatBytes(512 * 1024), '512 KiB')
  t.equal(formatBytes(80 * MiB), '80 MiB')
  t.equal(formatBytes(1.5 * 1024 * MiB), '1.5 GiB')
  t.equal(formatBytes(10 * 1024 * MiB), '10 GiB')
})

t.test('a successful command keeps its exact output and gets one note per event', async t => {
  const r = bashResult({ ...base, notices: [{ kind: 'sandbox-stopped', action: 'recreated', removed: true, by: 'outside' }] })
  t.notOk(r.isError)
  t.match(textOf(r), /^hi\n\n\n\[Note: The sandbox had been removed outside this server \(by an administrator, or an engine restart\); a new one was created for this command on the same workspace\. Files in \/home\/assistant and \/mnt\/user-data\/outputs are kept; files elsewhere \(such as installed packages\) and all processes are gone\.\]$/)
  const two = textOf(bashResult({ ...base, exitCode: 2, output: 'x\n', notices: [{ kind: 'pids-limit', action: 'restarted', limit: 512 }, disk('none')] }))
  t.match(two, /^x\n\n\[Exit code: 2\]\n\n\[Note: The sandbox reached its process limit \(512 processes\)/)
  t.match(two, /every running process, background jobs included, was stopped/)
  t.match(two, /\n\n\[Note: This chat is over its disk limit \(81 MiB used of its 50 MiB disk limit: \/home\/assistant 80 MiB, \/mnt\/user-data\/outputs 512 KiB, other files 512 KiB\)\. Free space now: .*du -sh .*rm; while it stays over the limit, the sandbox is stopped as soon as it writes more\.\]$/)
})

t.test('an unknown exit status names its cause instead of "the sandbox stopped"', async t => {
  const lost = (notices: SandboxNotice[], output = ''): CallToolResult => bashResult({ ...base, exitCode: null, output, notices })
  const pids = lost([{ kind: 'pids-limit', action: 'restarted', limit: 512 }])
  t.equal(pids.isError, true)
  t.match(textOf(pids), /^Error: the command was cut off\. The exit status of the command is unknown\. The sandbox reached its process limit \(512 processes\)/)
  t.notMatch(textOf(pids), /sandbox stopped while the command was running/)
  t.match(textOf(lost([{ kind: 'out-of-memory', action: 'none', limit: 512 * MiB }])), /^Error: the command was cut off\. .*ran out of memory \(limit 512 MiB\) and the kernel killed a process/)
  t.match(textOf(lost([disk('stopped')], 'wrote 40 MB\n')),
    /^Error: the command was cut off\. .*This chat had 81 MiB used of its 50 MiB disk limit: \/home\/assistant 80 MiB.*so the sandbox was stopped.*starts again with the next command.*\n\nOutput before that \(last 1000 characters at most\):\nwrote 40 MB\n$/s)
  t.match(textOf(lost([{ kind: 'sandbox-stopped', action: 'stopped', removed: false, by: 'outside' }])),
    /^Error: the sandbox was stopped while the command was running\. The exit status of the command is unknown\. The sandbox was stopped outside this server .*The next command starts it again\./)
  t.match(textOf(lost([{ kind: 'sandbox-stopped', action: 'stopped', removed: true, by: 'outside' }])), /the sandbox was removed while the command was running.*as a new sandbox on the same workspace/)
  t.match(textOf(lost([{ kind: 'stream-lost', action: 'none' }])), /^Error: the command's exit status is unknown\. The connection to the command was lost before it finished\. The sandbox is still running/)
  t.equal(textOf(lost([])), SANDBOX_STOPPED)
  const long = textOf(lost([{ kind: 'stream-lost', action: 'none' }], 'y'.repeat(5000) + 'END'))
  t.ok(long.endsWith('y'.repeat(997) + 'END'), 'the end of the output is kept')
  t.ok(long.length < 2000, `error text stays short: ${long.length}`)
})

t.test('a timed-out command with a restart note; notes fit the result limit', async t => {
  const r = bashResult({ ...base, exitCode: null, timedOut: true, output: 'partial', notices: [{ kind: 'unkillable', action: 'restarted' }] })
  t.notOk(r.isError)
  t.match(textOf(r), /^partial\n\[Command timed out after 120 seconds\]\n\n\[Note: Processes of a timed-out or cancelled command could not be killed from inside the sandbox, so it was restarted: /)
  const big = 'z'.repeat(31_000)
  const notices: SandboxNotice[] = [{ kind: 'pids-limit', action: 'restarted', limit: 512 }, disk('none'), { kind: 'out-of-memory', action: 'none', limit: MiB }]
  const fitted = textOf(bashResult({ ...base, output: big, notices, limit: 31_400 }))
  t.ok(fitted.length <= 31_400, `${fitted.length} chars`)
  t.match(fitted, /\[Note: The sandbox reached its process limit/, 'the first note is kept')
  t.notMatch(fitted, /ran out of memory/, 'later notes are dropped first')
})

t.test('every notice kind and action renders a sentence', async t => {
  const all: SandboxNotice[] = []
  for (const action of ['none', 'stopped', 'restarted', 'recreated'] as const) {
    all.push({ kind: 'pids-limit', action, limit: 64 }, { kind: 'out-of-memory', action, limit: MiB }, disk(action === 'stopped' ? 'stopped' : 'none'),
      { kind: 'sandbox-stopped', action, removed: action === 'recreated', by: 'outside' }, { kind: 'sandbox-stopped', action, removed: false, by: 'server' },
      { kind: 'stream-lost', action }, { kind: 'unkillable', action })
  }
  for (const n of all) t.match(noticeText(n), /^[A-Z].{40,}\.$/s, `${n.kind} ${n.action}`)
})
