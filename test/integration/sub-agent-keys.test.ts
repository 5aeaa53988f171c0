// Provider keys go only into sub_agent runs: with every CLI key and VISION_API_KEY set on the server,
// the sandbox's own environment (PID 1), bash_tool commands, the in-sandbox agent and a web terminal's
// tmux server carry none of them, while a real claude run (against the mock LLM) sees its row and the
// vision settings in its own environment.
import t from 'tap'
import { readFile } from 'node:fs/promises'
import Docker from 'dockerode'
import type {} from '../../plugins/terminal/types.js'
import { parseDockerHost } from '../../plugins/sandbox-docker/docker-endpoint.js'
import { chatKey } from '../../core/chat-id.js'
import { DOCKER_HOST, dockerOrSkip } from './docker.js'
import { ALL_CREDENTIALS, bash, chatClient, mockRequests, startMock, subAgent, subAgentApp } from './sub-agent-app.js'
import { envNames } from './sub-agent-checks.js'

const gate = await dockerOrSkip()

const VISION = { VISION_API_KEY: 'server-vision-key-0006', VISION_API_URL: 'https://vision.example/v1', VISION_MODEL: 'vision-test' }
/** Every secret value the server holds for sandboxes; none may appear outside a sub_agent run. */
const SECRETS = [
  ALL_CREDENTIALS.ANTHROPIC_AUTH_TOKEN, ALL_CREDENTIALS.OPENAI_API_KEY, ALL_CREDENTIALS.AZURE_OPENAI_API_KEY,
  ALL_CREDENTIALS.OPENROUTER_API_KEY, ALL_CREDENTIALS.ANTHROPIC_API_KEY, VISION.VISION_API_KEY
] as string[]
const KEY_NAMES = ['ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_BASE_URL', 'ANTHROPIC_DEFAULT_HAIKU_MODEL', 'OPENAI_API_KEY', 'AZURE_OPENAI_API_KEY',
  'OPENROUTER_API_KEY', 'ANTHROPIC_API_KEY', 'VISION_API_KEY', 'VISION_API_URL', 'VISION_MODEL', 'OPENCODE_CONFIG']

const leaked = (text: string): string[] => SECRETS.filter(s => text.includes(s))

interface HostProcess { args: string, env: string }

/**
 * Every process of the chat's sandbox with its environment, read on the host (/proc/<pid>/environ by
 * the pids the engine reports): inside the sandbox nobody may read the non-dumpable agent's
 * environment, not even root without capabilities. Null when this test process cannot read them (not
 * root, or the engine runs on another machine).
 */
async function sandboxProcesses (prefix: string, chat: string): Promise<HostProcess[] | null> {
  const docker = new Docker(parseDockerHost(DOCKER_HOST).docker)
  const [info] = await docker.listContainers({ filters: { label: [`cu.prefix=${prefix}`], name: [`^/${prefix}-sbx-${chatKey(chat)}$`] } })
  if (info === undefined) throw new Error(`no running sandbox of ${chat}`)
  const top = await docker.getContainer(info.Id).top({ ps_args: '-eo pid,args' }) as { Processes: string[][] }
  const out: HostProcess[] = []
  for (const [pid = '', ...rest] of top.Processes) {
    try {
      out.push({ args: rest.join(' '), env: (await readFile(`/proc/${pid.trim()}/environ`, 'utf8')).replace(/\0/g, '\n') })
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue // ended meanwhile
      return null
    }
  }
  return out
}

t.test('provider keys reach sub_agent runs only, never the sandbox environment', gate, async t => {
  const { app, url, prefix } = await subAgentApp(t, 'claude', VISION, ['terminal'])
  const chat = 'sa-keys'
  const c = await chatClient(t, url, chat)
  await startMock(c)
  const hostView = await sandboxProcesses(prefix, chat)
  const hostSkip = hostView === null ? 'this test process cannot read the sandbox\'s /proc/<pid>/environ on the host (not root, or a remote engine)' : false

  t.test('bash_tool: no key in `env`, none in /proc/1/environ', async t => {
    const env = await bash(c, 'env')
    t.ok(env.includes('SUBAGENT_CLI=claude'), 'the per-chat variables are there')
    t.same(leaked(env), [], 'no key value in env')
    const names = envNames(env)
    for (const name of KEY_NAMES) t.notOk(names.has(name), `${name} absent`)
    const pid1 = await bash(c, "tr '\\0' '\\n' < /proc/1/environ")
    t.ok(pid1.includes(`CHAT_ID=${chat}`), 'PID 1 environ was read')
    t.same(leaked(pid1), [], 'no key value in PID 1\'s environment')
  })

  t.test('the in-sandbox agent that spawns bash_tool commands has no key either', { skip: hostSkip }, async t => {
    const agents = (await sandboxProcesses(prefix, chat) ?? []).filter(p => p.args.includes('cubicle-agent.py'))
    t.ok(agents.length >= 1, `${agents.length} agent process(es) found`)
    for (const p of agents) {
      t.ok(p.env.includes(`CHAT_ID=${chat}`), 'the agent\'s environment was read')
      t.same(leaked(p.env), [], 'no key value in the agent\'s environment')
    }
  })

  t.test('a web terminal session (tmux) has no key', async t => {
    await app.terminal.start(chat, { dangerousMode: false })
    if (hostSkip === false) {
      const tmux = (await sandboxProcesses(prefix, chat) ?? []).filter(p => p.args.includes('tmux'))
      t.ok(tmux.length >= 1, `${tmux.length} tmux process(es) found`)
      for (const p of tmux) t.same(leaked(p.env), [], `no key value in the environment of ${p.args}`)
    }
    const shown = await bash(c, 'tmux show-environment -g 2>&1; tmux show-environment -t main 2>&1')
    t.same(leaked(shown), [], 'nor in the environment tmux hands to new windows')
  })

  t.test('a sub_agent run has its CLI row and the vision settings in its own environment', async t => {
    const call = await subAgent(c, { task: 'Dump the environment.\nMOCK_RUN env > /tmp/sub-agent-env.txt\nMOCK_FINAL env dumped' })
    t.notOk(call.result.isError, call.text)
    t.match(call.text, /env dumped/)
    const runEnv = await bash(c, 'cat /tmp/sub-agent-env.txt')
    for (const [name, value] of Object.entries({ ANTHROPIC_AUTH_TOKEN: ALL_CREDENTIALS.ANTHROPIC_AUTH_TOKEN, ...VISION })) {
      t.ok(runEnv.includes(`${name}=${value as string}\n`), `the run saw ${name}`)
    }
    for (const other of ['OPENAI_API_KEY', 'OPENROUTER_API_KEY', 'AZURE_OPENAI_API_KEY', 'ANTHROPIC_API_KEY']) {
      t.notOk(envNames(runEnv).has(other), `another CLI's ${other} is not in the run`)
    }
    const calls = (await mockRequests(c)).filter(r => Array.isArray(r.tools) && (r.tools as unknown[]).length > 0)
    t.ok(calls.length >= 2)
    for (const r of calls) t.equal(r.authorization, `Bearer ${ALL_CREDENTIALS.ANTHROPIC_AUTH_TOKEN as string}`, 'the CLI authenticated with the server token')
  })

  t.test('after the run no process of the sandbox holds a key', { skip: hostSkip }, async t => {
    const all = await sandboxProcesses(prefix, chat) ?? []
    t.ok(all.length >= 4, `${all.length} processes read (init, agent, tmux, mock LLM, …)`)
    t.same(all.flatMap(p => leaked(p.env)), [], 'no environment holds a key value')
    t.same(leaked(await bash(c, 'env')), [])
  })
})
