/*
 * Checks every CLI's integration test shares (docs/contract.md#sub-agent-execution): progress notifications, the docs/contract.md#credential-allowlist credential
 * rows, and the ways a run stops early: the per-chat cap, a kill from the terminal service, the
 * client's cancellation and the timeout (on a second app with a short SUB_AGENT_TIMEOUT, started with the
 * file's first run so that its wait overlaps the others: startTimeoutRun).
 */
import type { Test } from 'tap'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { Progress } from '@modelcontextprotocol/sdk/types.js'
import type { FastifyInstance } from 'fastify'
import type {} from '../../plugins/sub-agent/types.js'
import { chatClient, scripted, startMock, subAgent, subAgentApp, type SubAgentCall } from './sub-agent-app.js'

/** The variables of each CLI's row that the test server sets; runs get them, the sandbox environment never does. */
export const CREDENTIAL_ROWS: Record<'claude' | 'codex' | 'opencode', string[]> = {
  claude: ['ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_BASE_URL', 'ANTHROPIC_DEFAULT_HAIKU_MODEL', 'SUBAGENT_CLI'],
  codex: ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'AZURE_OPENAI_API_KEY', 'CODEX_CONFIG_EXTRA', 'SUBAGENT_CLI'],
  opencode: ['OPENROUTER_API_KEY', 'OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'OPENCODE_MODEL', 'OPENCODE_CONFIG_EXTRA', 'OPENCODE_CONFIG', 'SUBAGENT_CLI']
}

/** Names set in `env` output. */
export const envNames = (env: string): Set<string> => new Set(env.split('\n').map(l => /^([A-Za-z_][A-Za-z0-9_]*)=/.exec(l)?.[1]).filter((n): n is string => n !== undefined))

/**
 * `env` of a bash_tool command: SUBAGENT_CLI, but no variable of any CLI's row nor a server secret.
 * The row reaches only the CLI's own runs (the runs' requests to the mock LLM carry its key).
 */
export function checkNoRowInSandbox (t: Test, env: string, cli: 'claude' | 'codex' | 'opencode'): void {
  const names = envNames(env)
  t.ok(env.includes(`SUBAGENT_CLI=${cli}\n`), 'SUBAGENT_CLI present')
  const rows = new Set(Object.values(CREDENTIAL_ROWS).flat().filter(n => n !== 'SUBAGENT_CLI'))
  for (const name of [...rows, 'MCP_API_KEY']) t.notOk(names.has(name), `${name} absent`)
}

const ELAPSED = /\((\d+s|\d+m \d\ds|\d+h \d\dm)\)$/

/** docs/contract.md#sub-agent-execution: elapsed seconds, increasing, total = the timeout, `<action|Agent running...> (<elapsed>)`. */
export function checkProgress (t: Test, progress: Progress[], totalS: number, minCount = 1): void {
  t.ok(progress.length >= minCount, `${progress.length} progress notifications`)
  for (const p of progress) {
    t.equal(p.total, totalS)
    t.match(p.message, ELAPSED)
  }
  const values = progress.map(p => p.progress)
  t.ok(values.every((v, i) => i === 0 || v > (values[i - 1] as number)), `progress strictly increases: ${values.join(',')}`)
  t.ok(progress.some(p => !/^Agent running\.\.\. /.test(p.message ?? '')), `an action from the event stream was reported: ${progress.map(p => p.message).join(' | ')}`)
}

export interface StopPathsInput {
  cli: 'claude' | 'codex' | 'opencode'
  app: FastifyInstance
  client: Client
  chatId: string
  /** What the CLI's process looks like in `processes()` (`command`). */
  processName: RegExp
  waitFor: <T>(check: () => Promise<T | undefined>, ms: number, stepMs?: number) => Promise<T | undefined>
  /** Generous bound for a CLI to start under load. */
  startMs?: number
  /** The run SUB_AGENT_TIMEOUT ends (startTimeoutRun, called when the file starts). */
  timeout: TimeoutRun
}

/** A run on a second app with a short SUB_AGENT_TIMEOUT, under way in the background. */
export interface TimeoutRun {
  timeoutS: number
  /** its chat (on the second app) */
  chatId: string
  run: Promise<{ app: FastifyInstance, call: SubAgentCall }>
}

/**
 * Starts the run checkStopPaths' timeout test asserts: a second app with a short SUB_AGENT_TIMEOUT, its
 * own chat and mock, and a run that would sleep far past it. Started when the file starts, its wait of
 * 25-45 s overlaps the file's other runs instead of following them. Its app closes when `t` ends.
 */
export function startTimeoutRun (t: Test, cli: StopPathsInput['cli'], chatId: string): TimeoutRun {
  const timeoutS = cli === 'opencode' ? 45 : 25
  const timeoutChat = `${chatId}-timeout`
  const run = (async () => {
    const short = await subAgentApp(t, cli, { SUB_AGENT_TIMEOUT: String(timeoutS) })
    const c = await chatClient(t, short.url, timeoutChat)
    await startMock(c)
    return { app: short.app, call: await subAgent(c, { task: scripted('out/never.txt', 'x', 'never', 'MOCK_SLEEP 900') }) }
  })()
  // checkStopPaths awaits it and reports its failure; until then a rejection is not an unhandled one.
  run.catch(() => {})
  return { timeoutS, chatId: timeoutChat, run }
}

const TERMINATED = /^\*\*Sub-Agent Terminated\*\* \((terminated by SIGTERM|killed by SIGKILL)\)\n\*\*Model:\*\* \S+ \| \*\*Duration:\*\* \d+\.\ds\n\nThe agent process ended before producing results/

export async function checkStopPaths (t: Test, v: StopPathsInput): Promise<void> {
  const startMs = v.startMs ?? 240_000
  const cliProcess = async (): Promise<number | undefined> => (await v.app.subAgent.processes(v.chatId)).find(p => v.processName.test(p.command))?.pid

  await t.test('the per-chat cap refuses a second run; a kill from the terminal service terminates the first', async t => {
    const first = subAgent(v.client, { task: scripted('out/never.txt', 'x', 'never', 'MOCK_SLEEP 900') })
    const pid = await v.waitFor(cliProcess, startMs)
    t.ok(pid !== undefined, `the ${v.cli} process is listed by processes()`)
    t.equal(v.app.subAgent.runs(v.chatId).length, 1)
    const second = await subAgent(v.client, { task: 'another task' })
    t.equal(second.result.isError, true)
    t.match(second.text, /^Error: a sub-agent is already running for this chat \(at most 1 at a time\)/)
    await t.rejects(v.app.subAgent.kill(v.chatId, 1), { code: 'SUB_AGENT_BAD_PID' }, 'PID 1 is refused')
    const killed = await v.app.subAgent.kill(v.chatId, pid as number)
    t.match(killed, { killed: true, pid })
    const call: SubAgentCall = await first
    t.equal(call.result.isError, true)
    t.match(call.text, TERMINATED, call.text)
    t.same(await v.waitFor(async () => await cliProcess() === undefined ? true : undefined, 20_000), true, 'no CLI process is left')
  })

  await t.test('cancelling the call kills the run in the sandbox', async t => {
    const controller = new AbortController()
    const pending = subAgent(v.client, { task: scripted('out/never.txt', 'x', 'never', 'MOCK_SLEEP 900') }, { signal: controller.signal })
    const pid = await v.waitFor(cliProcess, startMs)
    t.ok(pid !== undefined, 'running before the cancel')
    controller.abort()
    await t.rejects(pending)
    const gone = await v.waitFor(async () => (await cliProcess()) === undefined && v.app.subAgent.runs(v.chatId).length === 0 ? true : undefined, 30_000)
    t.equal(gone, true, 'the CLI process and the run are gone after SIGTERM (SIGKILL 10 s later at most)')
  })

  await t.test('SUB_AGENT_TIMEOUT ends a run with SIGTERM then SIGKILL and the timed-out form', async t => {
    const { timeoutS, chatId } = v.timeout
    const { app, call } = await v.timeout.run
    t.equal(call.result.isError, true)
    t.match(call.text, new RegExp(`^\\*\\*Sub-Agent Terminated\\*\\* \\(timed out after ${timeoutS}s\\)\\n\\*\\*Model:\\*\\* \\S+ \\| \\*\\*Duration:\\*\\* \\d+\\.\\ds\\n\\nThe agent process ended before producing results`), call.text)
    t.ok(call.ms >= timeoutS * 1000 && call.ms < (timeoutS + 40) * 1000, `returned after ${call.ms} ms (timeout ${timeoutS} s, SIGKILL 10 s later, result by +15 s)`)
    t.ok(call.progress.every(p => p.total === timeoutS))
    const left = await (async () => {
      for (let i = 0; i < 20; i++) {
        const procs = await app.subAgent.processes(chatId)
        if (procs.length === 0) return 0
        await new Promise(resolve => setTimeout(resolve, 1000))
      }
      return (await app.subAgent.processes(chatId)).length
    })()
    t.equal(left, 0, 'no CLI process survives the timeout')
  })
}
