/*
 * A saturated sandbox on real Docker: a fork bomb whose processes outlive its command, a
 * silent one, a memory hog. The chat keeps working, each result says what happened, /health and
 * another chat keep answering meanwhile, and the kill path of a timeout copes with thousands of
 * processes. Through the MCP SDK client over HTTP, except the kill-path test (the driver directly).
 */
import t, { type Test } from 'tap'
import { chatKey } from '../../core/chat-id.js'
import { pidsNearLimit } from '../../plugins/sandbox/saturation.js'
import { bash, client, textOf, toolsApp } from '../plugins/workspace-tools/integration-app.js'
import { buildSandboxApp, cleanupPrefix, containersOfChat, dockerOrSkip, testDockerClient } from '../integration/docker.js'

const gate = await dockerOrSkip()
const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))
const BOMB = "timeout 15 bash -c 'bomb() { bomb | bomb & }; bomb'"
// The bomb, printing its fork errors into the call's output. Once that call has returned, the
// in-sandbox agent closes the output pipe (as the end of an exec does), and a bash that then prints
// "fork: retry" would die of SIGPIPE: a bomb launched on a slow machine, that grew only after its call
// returned, churns just below the process limit instead of reaching it. It ignores SIGPIPE (the write
// fails, the bomb goes on), so it saturates the sandbox whatever the machine's speed.
const PRINTING_BOMB = 'timeout 15 bash -c \'trap "" PIPE; bomb() { bomb | bomb & }; bomb\''

// A bomb whose command returned before it grew is found by the next call. Through the agent that
// call can come within milliseconds, before a busy machine's bomb has grown (seen in CI and in
// full local runs): the test waits until the engine counts the bomb at the limit on two samples 500 ms
// apart (what the server's own check needs, saturation.ts; at most 15 s), so it checks the next
// call's detection, not that race. A CI run saw a bomb past 400 processes, still growing, pass the
// server's two-sample check below the limit and the next call run normally; another saw the next
// call's own forks fail while the check, moments later, counted the bomb below the limit.
async function bombGrown (t: Test, docker: ReturnType<typeof testDockerClient>, prefix: string, chat: string): Promise<void> {
  const [box] = await containersOfChat(prefix, chatKey(chat))
  let full = 0
  let last = 0
  for (let end = Date.now() + 15_000; Date.now() < end && full < 2;) {
    const s = await docker.stats(box?.id ?? '').catch(() => undefined)
    last = s?.pids.current ?? 0
    full = s !== undefined && pidsNearLimit(s.pids.current, s.pids.limit) ? full + 1 : 0
    if (full < 2) await sleep(500)
  }
  t.comment(`bomb at ${last} processes${full < 2 ? ' (never held at the limit for 15 s)' : ''}`)
}

t.test('a fork bomb no longer bricks its chat', gate, async t => {
  const { url, prefix } = await toolsApp(t, { CONTAINER_MEM_LIMIT: '512m' })
  const docker = testDockerClient()
  t.teardown(() => docker.close())
  t.test('the issue\'s bomb: its processes outlive the command, the chat recovers and is told', async t => {
    const c = await client(t, url, 'sat-bomb')
    t.equal(textOf(await bash(c, 'echo data > ~/keep.txt; echo warm')), 'warm\n')
    const [before] = await containersOfChat(prefix, chatKey('sat-bomb'))
    const bomb = await bash(c, PRINTING_BOMB)
    if (!textOf(bomb).includes('[Note: ') && !textOf(bomb).startsWith('Error: ')) await bombGrown(t, docker, prefix, 'sat-bomb')
    const next = await bash(c, 'cat ~/keep.txt')
    const both = `${textOf(bomb)}\n----\n${textOf(next)}`
    t.comment((both.match(/\[Note: [^\]]*\]|^Error: .*$/gm) ?? []).join('\n'))
    t.notMatch(both, /the sandbox stopped while the command was running/, 'no wrong message')
    // The restart is noticed by the bomb's own call (a [Note: …] line, or its Error text when the
    // restart cut it off) or, when the bomb's processes outlived it unseen, by the next call, which
    // then may be cut off itself by the restart and say to run it again.
    t.match(both, /(\[Note: |Error: the command was cut off\. The exit status of the command is unknown\. )The sandbox reached its process limit \(512 processes\): something kept starting processes \(a fork bomb or a runaway loop\), so new ones could not start\. The sandbox was restarted: every running process, background jobs included, was stopped and \/tmp may be empty\. Files in \/home\/assistant and \/mnt\/user-data\/outputs are kept\./)
    const settled = textOf(next).startsWith('data\n') ? next : await bash(c, 'cat ~/keep.txt')
    t.notOk(settled.isError, 'the chat answers again')
    t.match(textOf(settled), /^data\n/, 'the workspace is kept')
    t.equal(textOf(await bash(c, 'echo fine')), 'fine\n', 'nothing left to report')
    const [after] = await containersOfChat(prefix, chatKey('sat-bomb'))
    t.equal(after?.id, before?.id, 'the same container, restarted')
    const stats = await docker.stats(after?.id ?? '')
    t.ok(stats.pids.current < 50, `pids back to normal: ${stats.pids.current}`)
  })

  t.test('a silent bomb (output discarded): caught at the end of its command or by the next call', async t => {
    const c = await client(t, url, 'sat-silent')
    await bash(c, 'echo data > ~/keep.txt')
    const bomb = await bash(c, `${BOMB} >/dev/null 2>&1; echo launched`)
    t.match(textOf(bomb), /^launched\n/)
    // The wrapper's process count catches the bomb if it has grown by the time bash exits;
    // otherwise the next call finds the sandbox saturated (once the bomb has grown: bombGrown).
    if (!textOf(bomb).includes('[Note: ')) await bombGrown(t, docker, prefix, 'sat-silent')
    const next = await bash(c, 'cat ~/keep.txt')
    const both = `${textOf(bomb)}\n----\n${textOf(next)}`
    t.comment((both.match(/\[Note: [^\]]*\]|^Error: .*$/gm) ?? []).join('\n'))
    t.match(both, /The sandbox reached its process limit \(512 processes\).*The sandbox was restarted/s, 'told what happened')
    t.notMatch(both, /the sandbox stopped while the command was running/)
    const settled = textOf(next).startsWith('data\n') ? next : await bash(c, 'cat ~/keep.txt')
    t.match(textOf(settled), /^data\n/)
    t.equal(textOf(await bash(c, 'echo fine')), 'fine\n', 'nothing left to report')
  })

  t.test('a bomb that starts after its command returned: the next call recovers the chat', async t => {
    const c = await client(t, url, 'sat-late')
    await bash(c, 'echo data > ~/keep.txt')
    const launch = await bash(c, "nohup bash -c 'sleep 2; bomb() { bomb | bomb & }; bomb' >/dev/null 2>&1 & echo launched")
    t.equal(textOf(launch), 'launched\n', 'nothing to see yet')
    await sleep(5000)
    const t0 = performance.now()
    const next = await bash(c, 'cat ~/keep.txt')
    const took = performance.now() - t0
    t.comment(`next call after ${took.toFixed(0)} ms: ${textOf(next).slice(0, 600)}`)
    t.match(textOf(next), /The sandbox reached its process limit \(512 processes\).*The sandbox was restarted/s, 'told what happened')
    t.notMatch(textOf(next), /the sandbox stopped while the command was running/)
    t.ok(took < 30_000, 'answered in bounded time')
    // Usually the command never started and ran again after the restart; if it started but its own
    // forks failed, the result says to run it again, and the next call runs normally.
    const settled = textOf(next).startsWith('data\n') ? next : await bash(c, 'cat ~/keep.txt')
    t.match(textOf(settled), /^data\n/)
    t.equal(textOf(await bash(c, 'echo fine')), 'fine\n', 'nothing left to report')
  })

  t.test('a memory hog: the result says the sandbox ran out of memory', async t => {
    const c = await client(t, url, 'sat-mem')
    const r = await bash(c, 'python3 -c "b = bytearray(1 << 30)"')
    t.notOk(r.isError)
    t.match(textOf(r), /\[Exit code: 137\]\n\n\[Note: The sandbox ran out of memory \(limit 512 MiB\) and the kernel killed a process \(exit status 137 means killed\)\./)
    t.equal(textOf(await bash(c, 'echo ok')), 'ok\n')
  })
})

t.test('a bomb and a memory hog in one chat leave /health and another chat answering', gate, async t => {
  const { url, prefix } = await toolsApp(t, { CONTAINER_MEM_LIMIT: '512m' })
  const docker = testDockerClient()
  t.teardown(() => docker.close())
  const a = await client(t, url, 'load-a')
  const b = await client(t, url, 'load-b')
  await Promise.all([bash(a, 'true'), bash(b, 'true')])
  let running = true
  const health: number[] = []
  const calls: number[] = []
  const failures: string[] = []
  const probeHealth = (async () => {
    while (running) {
      const t0 = performance.now()
      const res = await fetch(new URL('/health', url))
      health.push(performance.now() - t0)
      if (res.status !== 200) failures.push(`/health ${res.status}`)
      await sleep(100)
    }
  })()
  const probeChat = (async () => {
    while (running) {
      const t0 = performance.now()
      const r = await bash(b, 'echo ok')
      calls.push(performance.now() - t0)
      if (textOf(r) !== 'ok\n') failures.push(`chat b: ${textOf(r).slice(0, 200)}`)
      await sleep(300)
    }
  })()
  const bomb = await bash(a, `${BOMB} >/dev/null 2>&1; echo bombed`)
  // As in the silent bomb's case above: the next call is checked once the bomb holds the limit.
  if (!textOf(bomb).includes('[Note: ')) await bombGrown(t, docker, prefix, 'load-a')
  const during = await bash(a, 'sleep 5; echo still')
  const hog = await bash(a, 'for i in 1 2 3; do python3 -c "b = bytearray(1 << 30)"; done; echo hogged')
  const after = await bash(a, 'echo after')
  running = false
  await Promise.all([probeHealth, probeChat])
  const stat = (xs: number[]): string => {
    const s = [...xs].sort((x, y) => x - y)
    return `n=${s.length} p50=${(s[Math.floor(s.length / 2)] ?? 0).toFixed(0)} ms max=${(s.at(-1) ?? 0).toFixed(0)} ms`
  }
  t.comment(`/health ${stat(health)}; chat b echo ${stat(calls)}`)
  t.match(textOf(bomb) + textOf(during), /reached its process limit/, 'chat a was told about the bomb')
  t.match(textOf(hog), /Killed.*\nhogged\n\n\n\[Note: The sandbox ran out of memory \(limit 512 MiB\) and the kernel killed a process/s, 'and about the memory hog, though its loop went on')
  t.equal(textOf(after), 'after\n', 'chat a works afterwards')
  t.same(failures, [], 'every probe answered correctly')
  t.ok(health.length > 20, 'health was probed throughout')
  t.ok(Math.max(...health) < 1000, `/health stays under 1 s (max ${Math.max(...health).toFixed(0)} ms)`)
  t.ok(calls.length >= 5, 'the other chat ran commands throughout')
  t.ok(Math.max(...calls) < 10_000, `the other chat's calls stay under 10 s (max ${Math.max(...calls).toFixed(0)} ms)`)
})

t.test('the kill path of a timeout copes with 3,000 processes that ignore SIGTERM', gate, async t => {
  const PREFIX = 'tsatkill'
  await cleanupPrefix(t, PREFIX)
  // 3,000 processes can need more than the default 512 MiB (the kernel then OOM-kills instead): this tests the kill path.
  const { app } = await buildSandboxApp(t, PREFIX, { pidsLimit: 4096, killGraceMs: 2000, memLimit: 2048 * 1024 * 1024 })
  const docker = testDockerClient()
  t.teardown(() => docker.close())
  const chat = 'kill-many'
  const info = await app.sandbox.ensure(chat)
  const t0 = performance.now()
  const r = await app.sandbox.runCommand(chat, 'trap "" TERM; for i in $(seq 3000); do sleep 1000 & done; echo spawned; wait', {
    timeoutMs: 8000, onOutput: () => {}
  })
  t.equal(r.timedOut, true)
  t.ok(performance.now() - t0 < 8000 + 10_500, `result by T+10 s (${(performance.now() - t0).toFixed(0)} ms)`)
  let pids = Infinity
  for (let i = 0; i < 30 && pids > 10; i++) {
    await sleep(500)
    pids = (await docker.stats(info.sandboxId)).pids.current
  }
  t.ok(pids <= 10, `every process is gone (${pids} left)`)
  const [c] = await containersOfChat(PREFIX, chatKey(chat))
  t.equal(c?.id, info.sandboxId)
  t.same(r.notices ?? [], [], 'killed from inside: no restart was needed')
  t.equal((await app.sandbox.exec(chat, ['echo', 'alive'])).stdout.toString(), 'alive\n')
})
